"""The native kernel's reading of a record's properties (rmqtool/native/properties.c) against the
one definition, formats/properties.bytes_to_properties: the same dict for every string it takes,
and it declines (None) only strings that are not the common one.

The kernel is built by the install (make test's venv) wherever a C compiler is: a missing build
fails here rather than silently testing only the pure path."""
from __future__ import annotations

import shutil
import sysconfig

from hypothesis import given
from hypothesis import strategies as st

from conftest import CLEAN_SCENARIOS
from helpers import examples
from rmqtool import native
from rmqtool.formats.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, bytes_to_properties
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.message import Message


def test_the_kernel_is_built_where_a_compiler_is():
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler):
        assert native.kernel is not None, "rmqtool.native._kernel was not built (make native)"


def _same(raw: bytes) -> dict | None:
    got = native.kernel.properties_dict(raw)
    want, utf8_ok = bytes_to_properties(raw)
    if got is not None:  # taken: the broker's reading, of a well-formed string
        assert got == want and list(got) == list(want) and utf8_ok
    return got


def test_every_fixture_record_reads_the_same():
    taken = seen = 0
    for scenario in ("4.9.8/txdelay", "5.3.3/v2-and-crc"):  # 4.x, and 5.x's __CRC32# entries
        directory = CLEAN_SCENARIOS[scenario] / "store" / "commitlog"
        for r in CommitLog(directory).scan(check_crc=False):
            if type(r) is Message:
                seen += 1
                taken += _same(r.properties_raw) is not None
    assert seen and taken == seen  # the engines write the common string only


_NV, _SEP = NAME_VALUE_SEPARATOR.encode(), PROPERTY_SEPARATOR.encode()
_pieces = st.sampled_from([b"KEYS", b"UNIQ_KEY", b"a", b"b c", b"", _NV, _SEP, "é".encode(), b"\xff", b"\x00"])


@given(st.lists(_pieces, max_size=12).map(b"".join))
def test_any_string_reads_the_same_or_is_declined(raw):
    _same(raw)


@given(st.dictionaries(st.text("abcKEYS_ #", min_size=1, max_size=5), st.text("xyz 01", min_size=1, max_size=5),
                       max_size=5), st.booleans())
def test_the_common_string_is_taken(props, trailing):
    raw = PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items()).encode()
    raw += _SEP if trailing and raw else b""
    assert _same(raw) == props


test_any_string_reads_the_same_or_is_declined = __import__("hypothesis").settings(max_examples=examples(100))(
    test_any_string_reads_the_same_or_is_declined)
