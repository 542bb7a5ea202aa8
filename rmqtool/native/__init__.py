"""rmqtool's optional native kernel: a few record loops in C, for speed only.

:data:`kernel` is the compiled module ``rmqtool.native._kernel`` (built from the ``*.c``
files here when the package is installed, if a C compiler is there), or None: without a
compiler, or with ``RMQTOOL_NATIVE=0`` in the environment (the tests run both ways).
Every caller keeps the pure-Python path and takes it when :data:`kernel` is None; the two
give the same answers (tests/test_native_*.py hold them against each other and the fixtures'
truth). The C code knows no layout: field positions, magic codes and sizes are derived from
``formats/`` in Python and passed in.
"""
from __future__ import annotations

import os

# ABI of the C source: a build older than the source it sits beside is not used
ABI = 1

kernel = None
if os.environ.get("RMQTOOL_NATIVE", "1") != "0":
    try:
        from rmqtool.native import _kernel as _built
    except ImportError:  # not built: no compiler where it was installed
        pass
    else:
        if getattr(_built, "ABI", None) == ABI:
            kernel = _built

if kernel is not None:
    from rmqtool.formats.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
    kernel.set_separators(ord(PROPERTY_SEPARATOR), ord(NAME_VALUE_SEPARATOR))
