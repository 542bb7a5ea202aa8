"""Body compression as RocketMQ producers apply it (CompressorFactory).

The sysFlag COMPRESSED bit says a body is compressed; bits 8-10 say with what
(1 lz4 frame, 2 zstd, 3 zlib). 4.x clients before the type bits existed used zlib only,
so type 0 with the COMPRESSED bit means zlib.
"""
from __future__ import annotations

import zlib

from rmqtool.errors import CodecMissing, FormatError, UsageError
from rmqtool.formats import sysflag

ZLIB, LZ4, ZSTD = "zlib", "lz4", "zstd"
_BY_TYPE = {0: ZLIB, 1: LZ4, 2: ZSTD, 3: ZLIB}


def is_compressed(sys_flag: int) -> bool:
    return bool(sys_flag & sysflag.COMPRESSED_FLAG)


def codec_of(sys_flag: int) -> str | None:
    """The codec name for a compressed body, None for an uncompressed one."""
    if not is_compressed(sys_flag):
        return None
    return _BY_TYPE.get(sysflag.compression_type(sys_flag), ZLIB)


def _missing(package: str) -> CodecMissing:
    return CodecMissing(f"the {package} codec is not installed: pip install {package} "
                        "(or pip install 'rmqtool[codecs]')")


def _need(module: str):
    try:
        return __import__(module)
    except ImportError:
        raise _missing(module.split(".")[0]) from None  # lz4.frame is in lz4


def decompress(body: bytes, codec: str) -> bytes:
    try:
        if codec == ZLIB:
            return zlib.decompress(body)
        if codec == LZ4:
            return _need("lz4.frame").frame.decompress(body)
        if codec == ZSTD:
            zstd = _need("zstandard")
            return zstd.ZstdDecompressor().decompress(body, max_output_size=max(len(body) * 64, 1 << 20))
    except (FormatError, CodecMissing):
        raise
    except Exception as exc:  # each codec has its own error class
        raise FormatError(f"{codec} body does not decompress: {exc}") from None
    raise FormatError(f"unknown compression {codec!r}")


def compress(body: bytes, codec: str = ZLIB, level: int = 5) -> bytes:
    """The bytes the Java client's compressors produce (asserted on every fixture body):
    zlib (Deflater, level 5 by default as compressMsgBodyOverHowmuch uses), an lz4-java
    LZ4FrameOutputStream (4 MB independent blocks, no checksum, no content size) and a
    zstd-jni ZstdOutputStream (streamed: no content size in the frame header)."""
    if codec == ZLIB:
        return zlib.compress(body, level)
    try:
        if codec == LZ4:
            import lz4.frame
            c = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False,
                                             content_checksum=False)
            return c.begin() + c.compress(body) + c.flush()
        if codec == ZSTD:
            import zstandard
            c = zstandard.ZstdCompressor(level=level, write_content_size=False).compressobj()
            return (c.compress(body) + c.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
                    + c.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH))
    except ImportError:
        raise _missing("lz4" if codec == LZ4 else "zstandard") from None
    raise UsageError(f"unknown compression {codec!r} (zlib, lz4, zstd)")
