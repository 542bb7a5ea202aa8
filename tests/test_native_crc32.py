"""The native kernel's own CRC-32 (rmqtool/native/crc32.c): every path this CPU has gives zlib's
and crcmod's value, at every length around the fold's steps, any alignment and start value; its
fold constants are the powers of x the polynomial gives; store/crc.py picks it."""
from __future__ import annotations

import os
import re
import zlib

import crcmod.predefined
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO
from helpers import examples
from rmqtool import native
from rmqtool.store import crc

from rmqtool.native import _kernel as KERNEL  # built by the install (make native): its absence fails here

pytestmark = pytest.mark.usefixtures("native_built")
CRCMOD = crcmod.predefined.mkCrcFun("crc-32")
PATHS = KERNEL.crc32_paths()[1:]
POLYNOMIAL = 0x104C11DB7  # CRC-32's, x^32 + x^26 + ... + 1


def test_the_fastest_path_is_in_use():
    in_use, *usable = KERNEL.crc32_paths()
    assert usable[-1] == "table" and in_use == usable[0]
    assert set(usable) <= {"vpclmulqdq", "pclmulqdq", "table"}
    with pytest.raises(ValueError):
        KERNEL.crc32_by("no such path", b"")


def test_store_crc_picks_the_kernels():
    assert crc.fast_crc32 is KERNEL.crc32 and crc.IMPLEMENTATION.endswith(f"({KERNEL.crc32_paths()[0]})")
    assert crc.kernel_crcs() is native.kernel


@pytest.mark.parametrize("path", PATHS)
def test_every_length_and_alignment(path):
    """Lengths 0 to 700 cross every step of both folds (16, 32, 64 and 128 bytes) and the tail;
    each at 3 alignments and with a start value, as zlib.crc32(data, value) continues a CRC."""
    data = os.urandom(800)
    for length in range(701):
        for at in (0, 1, 7):
            piece = data[at:at + length]
            assert KERNEL.crc32_by(path, piece) == zlib.crc32(piece), (length, at)
        assert KERNEL.crc32_by(path, piece, 0xDEADBEEF) == zlib.crc32(piece, 0xDEADBEEF), length


@settings(max_examples=examples(200), deadline=None)
@given(data=st.binary(max_size=5000), value=st.integers(0, 2**32 - 1), cut=st.integers(0, 40))
def test_paths_agree_with_zlib_and_crcmod(data, value, cut):
    view = memoryview(data)[cut:]
    want = zlib.crc32(view, value)
    assert CRCMOD(bytes(view)) == zlib.crc32(view)
    assert KERNEL.crc32(view, value) == want
    for path in PATHS:
        assert KERNEL.crc32_by(path, view, value) == want


def test_long_buffers_and_buffer_kinds():
    data = os.urandom(3 << 20)
    want = zlib.crc32(data)
    for path in PATHS:
        assert KERNEL.crc32_by(path, bytearray(data)) == want
        assert KERNEL.crc32_by(path, memoryview(data)[5:], 1) == zlib.crc32(data[5:], 1)
    with pytest.raises(TypeError):
        KERNEL.crc32("not bytes")
    with pytest.raises(TypeError):
        KERNEL.crc32()


def _mod(a: int) -> int:
    """a mod POLYNOMIAL, carry-less."""
    top = POLYNOMIAL.bit_length() - 1
    while a.bit_length() - 1 >= top:
        a ^= POLYNOMIAL << (a.bit_length() - 1 - top)
    return a


def _reflected(value: int, width: int) -> int:
    return int(f"{value:0{width}b}"[::-1], 2)


def test_fold_constants_are_the_polynomials():
    """FOLD_D is (x^(D+63) mod P, x^(D-1) mod P) and REDUCE_n x^n mod P, bit-reflected: what
    folding a 16-byte lane D bits forward multiplies its halves by."""
    source = (REPO / "rmqtool" / "native" / "crc32.c").read_text()
    folds = re.findall(r"#define FOLD_(\d+) FOLD\((0x[0-9a-f]+), (0x[0-9a-f]+)\)", source)
    assert {int(d) for d, _, _ in folds} == {1024, 768, 512, 384, 256, 128}
    for distance, low, high in folds:
        d = int(distance)
        assert int(low, 16) == _reflected(_mod(1 << (d + 63)), 64), distance
        assert int(high, 16) == _reflected(_mod(1 << (d - 1)), 64), distance
    reduce = dict(re.findall(r"#define REDUCE_(\d+) (0x[0-9a-f]+)LL", source))
    assert set(reduce) == {"95", "63"}
    for power, value in reduce.items():
        assert int(value, 16) == _reflected(_mod(1 << int(power)), 32), power
