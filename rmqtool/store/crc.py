"""The one place that picks the CRC-32 implementation RocketMQ's CRC rules run on.

crcmod defines the CRC; the hot paths use a C implementation of the same CRC-32: the native
kernel's own (``rmqtool/native/crc32.c``: carry-less multiplication folding where the CPU
has it, about 2x ISA-L's on a 1 KB body and 4x on long ranges) when the kernel is built;
else ISA-L's (``isal``, the optional extra ``fast``) when it can be imported, about 5x
zlib's on a 1 KB body; else zlib's (about 10x faster than crcmod). Tests assert all of
them agree. Hot loops bind :data:`fast_crc32` (unmasked, any buffer) and mask it
themselves; they look it up here, so this module alone decides.

The kernel's loops over many ranges (:func:`crcs_of`, the CRC runs) call the same C
function as :data:`fast_crc32` is with the kernel.

The rules themselves (UtilAll.crc32's 31-bit mask, the body CRC, what 5.x's ``__CRC32#``
covers and how its digits are written) are stated in ``rmqtool.formats.crc``.
"""
from __future__ import annotations

import zlib

import crcmod.predefined

from rmqtool import native
from rmqtool.formats.crc import JAVA_CRC_MASK

_crcmod_crc32 = crcmod.predefined.mkCrcFun("crc-32")

if native.kernel is not None:
    fast_crc32 = native.kernel.crc32
    IMPLEMENTATION = f"rmqtool kernel ({native.kernel.crc32_paths()[0]})"
else:
    try:  # the optional extra "fast"
        from isal import __version__ as _isal_version
        from isal.isal_zlib import crc32 as fast_crc32
        IMPLEMENTATION = f"ISA-L {_isal_version}"
    except ImportError:
        fast_crc32 = zlib.crc32
        IMPLEMENTATION = f"zlib {zlib.ZLIB_RUNTIME_VERSION}"
_CHOSEN = fast_crc32


def kernel_crcs():
    """The kernel, when it is there and :data:`fast_crc32` is still its CRC-32 (a test may
    replace either); else None: the caller computes its CRCs through fast_crc32."""
    kernel = native.kernel
    if kernel is None or fast_crc32 is not _CHOSEN or _CHOSEN is not getattr(kernel, "crc32", None):
        return None
    return kernel


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
