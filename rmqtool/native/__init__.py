"""rmqtool's optional native kernel: a few record loops in C, for speed only.

:data:`kernel` is the compiled module ``rmqtool.native._kernel`` (built from the ``*.c``
files here when the package is installed, if a C compiler is there), or None: without a
compiler, with ``RMQTOOL_NATIVE=0`` in the environment (the tests run both ways), or when
a C source beside it is newer than the build (an edited tree not rebuilt: ``make native``).
Every caller keeps the pure-Python path and takes it when :data:`kernel` is None; the two
give the same answers (tests/test_native_*.py hold them against each other and the fixtures'
truth). The C code knows no layout: field positions, magic codes and sizes are derived from
``formats/`` in Python and passed in.
"""
from __future__ import annotations

import os

# ABI of the C source: a build of another one is not used
ABI = 4


def _load():
    if os.environ.get("RMQTOOL_NATIVE", "1") == "0":
        return None
    try:
        from rmqtool.native import _kernel as built
    except ImportError:  # not built: no compiler where it was installed
        return None
    if getattr(built, "ABI", None) != ABI:
        return None
    here = os.path.dirname(__file__)
    try:  # an editable tree whose C was edited after the build: its functions may not match the callers
        built_at = os.stat(built.__file__).st_mtime
        if any(os.stat(os.path.join(here, name)).st_mtime > built_at
               for name in os.listdir(here) if name.endswith((".c", ".h"))):
            return None
    except OSError:
        pass
    from rmqtool.formats.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
    built.set_separators(ord(PROPERTY_SEPARATOR), ord(NAME_VALUE_SEPARATOR))
    return built


kernel = _load()
