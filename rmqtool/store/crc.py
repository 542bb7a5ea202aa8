"""The one place that picks the CRC-32 implementation RocketMQ's CRC rules run on.

crcmod defines the CRC; the hot paths use a C implementation of the same CRC-32: ISA-L's
(``isal``, the optional extra ``fast``) when it can be imported, about 6x faster than
zlib's on a 1 KB body, else zlib's (about 10x faster than crcmod). Tests assert all of
them agree. Hot loops bind :data:`fast_crc32` (unmasked, any buffer) and mask it
themselves; they look it up here, so this module alone decides.

The native kernel (``rmqtool.native``) computes many ranges in one call (:func:`crcs_of`)
through the same library's C function, handed to it once here (ISA-L's ``crc32_gzip_refl``,
else the ``crc32`` of the libz Python's zlib uses): the same values as :data:`fast_crc32`.

The rules themselves (UtilAll.crc32's 31-bit mask, the body CRC, what 5.x's ``__CRC32#``
covers and how its digits are written) are stated in ``rmqtool.formats.crc``.
"""
from __future__ import annotations

import zlib

import crcmod.predefined

from rmqtool import native
from rmqtool.formats.crc import JAVA_CRC_MASK

_crcmod_crc32 = crcmod.predefined.mkCrcFun("crc-32")

try:  # the optional extra "fast"
    from isal import __version__ as _isal_version
    from isal.isal_zlib import crc32 as fast_crc32
    IMPLEMENTATION = f"ISA-L {_isal_version}"
except ImportError:
    fast_crc32 = zlib.crc32
    IMPLEMENTATION = f"zlib {zlib.ZLIB_RUNTIME_VERSION}"

# the kernel's set_crc32 kinds: ISA-L's crc32_gzip_refl (uint64 length), zlib's crc32 (uInt length)
_ISAL_KIND, _ZLIB_KIND = 1, 2
_CHOSEN = fast_crc32  # the function whose library's C function the kernel is handed
_handed: dict = {}  # kernel module -> whether it holds a CRC-32 function (handed once)


def _hand_crc32(kernel) -> bool:
    """Give the kernel the C function of :data:`fast_crc32`'s library (ctypes: only when a
    kernel wants it); False when it cannot be found (crcs_of then keeps its Python loop)."""
    import ctypes
    import ctypes.util
    if IMPLEMENTATION.startswith("ISA-L"):
        from isal import isal_zlib
        library, name, kind = isal_zlib.__file__, "crc32_gzip_refl", _ISAL_KIND
    else:
        library, name, kind = ctypes.util.find_library("z"), "crc32", _ZLIB_KIND
    try:
        function = getattr(ctypes.CDLL(library), name)
    except (OSError, AttributeError, TypeError):
        return False
    # the library stays loaded: Python's own module (isal_zlib, zlib) holds it
    kernel.set_crc32(ctypes.cast(function, ctypes.c_void_p).value, kind)
    return True


def kernel_crcs():
    """The kernel, when it is there and holds the CRC-32 function of :data:`fast_crc32`; else
    None (also when fast_crc32 was replaced: the kernel's function is no longer the one chosen)."""
    kernel = native.kernel
    if kernel is None or fast_crc32 is not _CHOSEN:
        return None
    handed = _handed.get(kernel)
    if handed is None:
        handed = _handed[kernel] = _hand_crc32(kernel)
    return kernel if handed else None


def crc32_reference(data: bytes) -> int:
    """The defining implementation (crcmod), masked like UtilAll.crc32."""
    return _crcmod_crc32(bytes(data)) & JAVA_CRC_MASK


def crc32(data) -> int:
    """Fast implementation of the same value; takes any buffer (bytes, memoryview)."""
    return fast_crc32(data) & JAVA_CRC_MASK


def crcs_of(buf, start, end):
    """The CRC-32 (unmasked) of each byte range [start, end) of ``buf`` (numpy int64 arrays), as
    an int64 array: one C call a range over views of the buffer, the loop itself in C (map over
    builtins, no Python frame a record). Every record kernel's CRCs go through here.

    With the native kernel, one call for all ranges (the GIL released); it declines ranges not
    inside ``buf``, which then take the Python loop."""
    import numpy as np  # the hot paths have it loaded; the command line's start does not need it
    kernel = kernel_crcs()
    if kernel is not None:
        start = np.ascontiguousarray(start, np.int64)
        end = np.ascontiguousarray(end, np.int64)
        out = np.empty(len(start), np.int64)
        if kernel.crc_ranges(buf, start, end, out) is not None:
            return out
    view = memoryview(buf)
    try:
        return np.fromiter(map(fast_crc32, map(view.__getitem__, map(slice, start.tolist(), end.tolist()))),
                           np.int64, count=len(start))
    finally:
        view.release()
