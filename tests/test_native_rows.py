"""dump commitlog's JSON Lines rows written by the native kernel (rows.c through
report/jsonl_rows.py) are byte for byte the Python rows (message_record encoded by orjson):
on the fixtures, clean and damaged, through the one-process sink and the worker spool files,
with --limit cutting a run of encoded rows, and on hypothesis-made records with awkward
topics, properties, bodies and hosts (escapes, non-ASCII, invalid UTF-8, empty, IPv6, compressed
flags, failed CRCs), which the kernel writes or declines to the Python row in its place.
"""
from __future__ import annotations

import io
import ipaddress
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CLEAN_SCENARIOS, V4
from helpers import (both_ways, built_record, cli_both_ways, encoded, examples, expand_store, made_segments,
                     made_windows)
from rmqtool import native
from rmqtool.formats import crc as crc_rules
from rmqtool.formats import properties as props
from rmqtool.formats.commitlog import (MAX_TOPIC_LENGTH_V1, MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2,
                                       MessageRecord, message_length)
from rmqtool.formats.sysflag import BORNHOST_V6_FLAG, COMPRESSED_FLAG, STOREHOSTADDRESS_V6_FLAG
from rmqtool.inspect.commitlog_dump import CommitLogDump
from rmqtool.inspect.commitlog_dumps import chained, commitlog_dumps
from rmqtool.inspect.selection import MessageSelection
from rmqtool.report import jsonl_rows
from rmqtool.report.sink import EncodedRows, Sink
from rmqtool.store.hosts import format_host

pytestmark = pytest.mark.usefixtures("native_built")
DAMAGED = V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file" / "input"


def _jsonl(paths, monkeypatch=None, *, limit=None, **options) -> tuple[bytes, list, int]:
    """(the JSON Lines bytes, the findings, the encoded runs) of a dump as the CLI makes it in one process."""
    dumps, _ = commitlog_dumps(paths, MessageSelection(), None, None, limit, **options)
    out = io.StringIO()
    sink = Sink("jsonl", out)
    runs = [0]

    def counted(rows):
        for row in rows:
            runs[0] += type(row) is EncodedRows
            yield row
    sink.rows(counted(chained(dumps, limit, None, encoded=True)))
    sink.close()
    return out.getvalue().encode(), [f for d in dumps for f in d.findings], runs[0]


def _both(monkeypatch, paths, **options) -> tuple[bytes, int]:
    """(the dump's bytes, its encoded runs) with the kernel, the bytes asserted equal to the pure path's (findings too)."""
    return both_ways(monkeypatch, _jsonl, paths, **options)


@pytest.fixture(scope="module")
def damaged_store(tmp_path_factory) -> pathlib.Path:
    return expand_store(DAMAGED, tmp_path_factory.mktemp("damaged") / "input") / "store"


@pytest.mark.parametrize("scenario", ["4.9.8/batch", "5.3.3/v2-and-crc"])
def test_fixture_rows_are_the_python_rows(monkeypatch, scenario):
    store = CLEAN_SCENARIOS[scenario] / "store"
    data, runs = _both(monkeypatch, [store], body="base64")
    assert runs > 0  # the kernel wrote them, not the Python path
    none, _ = _both(monkeypatch, [store], body="none", check_crc=False)
    assert none.count(b"\n") == data.count(b"\n")
    # a run of encoded rows cut by --limit in its middle
    cut, _ = _both(monkeypatch, [store], body="none", check_crc=False, limit=77)
    assert cut.count(b"\n") == 77 and none.startswith(cut)


def test_damaged_store_rows_and_findings(monkeypatch, damaged_store):
    data, runs = _both(monkeypatch, [damaged_store], body="base64")
    assert runs > 0 and b'"body_crc_ok":false' in data  # the damaged record: declined, the Python row


def test_worker_spool_files_hold_the_same_rows(monkeypatch, tmp_path):
    """jsonl_files (the parallel dump's encoding, here in this process) with and without the kernel."""
    store = CLEAN_SCENARIOS["5.3.3/v2-and-crc"] / "store"

    def spooled():
        d = CommitLogDump(store, body="base64")
        out = b""
        for path, size, count in d.jsonl_files(1, split_size=64 << 10):
            with open(path, "rb") as f:
                chunk = f.read(size)
            assert chunk.count(b"\n") == count
            out += chunk
        return out
    data = spooled()
    with monkeypatch.context() as m:
        m.setattr(native, "kernel", None)
        assert spooled() == data


def test_cli_with_and_without_the_kernel():
    """The CLI's output with the kernel (in this process) and with RMQTOOL_NATIVE=0 (a process)."""
    store = str(CLEAN_SCENARIOS["4.9.8/txdelay"] / "store")
    out = cli_both_ways(["dump", "commitlog", store, "-f", "jsonl", "--body", "base64", "--no-progress"])
    assert out.count(b"\n") > 50


# --- hypothesis-made records ----------------------------------------------------------------

_AWKWARD = st.sampled_from(["", "a", '"', "\\", "\t", "\n", "\x00", "\x1f", "\x7f", " ", "é", "→", "k1 k2",
                            "  k ", "x\x01y", "\x02"])
_TEXT = st.lists(st.one_of(_AWKWARD, st.text(max_size=6)), max_size=4).map("".join)


@st.composite
def _properties(draw) -> bytes:
    names = [props.PROPERTY_TAGS, props.PROPERTY_KEYS, props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "CLUSTER"]
    entries = draw(st.lists(st.tuples(st.one_of(st.sampled_from(names), _TEXT), _TEXT), max_size=5))
    raw = b"".join(encoded(n) + props.NAME_VALUE_SEPARATOR.encode() + encoded(v) + props.PROPERTY_SEPARATOR.encode()
                   for n, v in entries)
    shape = draw(st.sampled_from(["trailing", "cut", "bytes"]))
    if shape == "cut":  # 4.x: no trailing separator
        raw = raw[:-1]
    elif shape == "bytes":
        raw = draw(st.binary(max_size=40))
    return raw


_HOST6 = st.one_of(st.binary(min_size=16, max_size=16),
                   st.sampled_from(["::", "::1", "1::", "fe80::1:0:0:2", "1:0:0:2::", "::ffff:1.2.3.4",
                                    "2001:db8:0:0:1:0:0:1", "0:1:0:1:0:1:0:1"]).map(
                                        lambda a: ipaddress.IPv6Address(a).packed))


@st.composite
def _record(draw, position: int) -> bytes:
    magic = draw(st.sampled_from([MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2]))
    born_v6, store_v6 = draw(st.booleans()), draw(st.booleans())
    sys_flag = draw(st.sampled_from([0, 0, 4, 8, COMPRESSED_FLAG])) | (BORNHOST_V6_FLAG if born_v6 else 0) | (
        STOREHOSTADDRESS_V6_FLAG if store_v6 else 0)
    topic = draw(st.one_of(_TEXT.map(encoded), st.binary(max_size=8)))[:MAX_TOPIC_LENGTH_V1]
    properties = draw(_properties())
    if draw(st.booleans()):  # 5.x: a __CRC32# entry, filled in below
        properties += crc_rules.crc32_property(0)
    body = draw(st.binary(max_size=40))
    fields = dict(
        total_size=message_length(sys_flag, len(body), len(topic), len(properties), magic), magic_code=magic,
        body_crc=crc_rules.body_crc(body) if draw(st.integers(0, 9)) else 12345, queue_id=draw(st.integers(0, 9)),
        flag=draw(st.integers(-5, 5)), queue_offset=draw(st.integers(0, 1 << 40)),
        physical_offset=position if draw(st.integers(0, 9)) else position + 1, sys_flag=sys_flag,
        born_timestamp=draw(st.integers(-1, 1 << 42)), born_host=draw(_HOST6 if born_v6 else st.binary(min_size=4, max_size=4)),
        born_port=draw(st.integers(-1, 65535)), store_timestamp=draw(st.integers(0, 1 << 42)),
        store_host=draw(_HOST6 if store_v6 else st.binary(min_size=4, max_size=4)),
        store_port=draw(st.integers(0, 65535)), reconsume_times=draw(st.integers(0, 16)),
        prepared_transaction_offset=draw(st.integers(0, 1 << 40)), body=body, topic=topic, properties=properties)
    return built_record(fields, lambda: draw(st.integers(0, 5)))




@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=made_segments(_record, 1, 6), body=st.sampled_from(["none", "base64"]), check_crc=st.booleans())
def test_made_records_rows_are_the_python_rows(monkeypatch, tmp_path, data, body, check_crc):
    segment = tmp_path / "00000000000000000000"
    segment.write_bytes(data)
    _both(monkeypatch, [segment], body=body, check_crc=check_crc)


def test_hosts_as_format_host_writes_them(monkeypatch, tmp_path):
    """Every IPv6 compression case (the longest zero run, the first of equals, at either end)."""
    cases = ["::", "::1", "1::", "1:0:0:2::", "1::2:0:0:3", "0:1:0:1:0:1:0:1", "fe80::", "1:2:3:4:5:6:7:8",
             "1:0:2:0:0:3:0:0"]
    for i, host in enumerate(cases):
        ip = ipaddress.IPv6Address(host).packed
        raw = MessageRecord.build(dict(
            total_size=message_length(STOREHOSTADDRESS_V6_FLAG | BORNHOST_V6_FLAG, 0, 1, 0, MESSAGE_MAGIC_CODE_V2),
            magic_code=MESSAGE_MAGIC_CODE_V2, body_crc=0, queue_id=0, flag=0, queue_offset=0, physical_offset=0,
            sys_flag=STOREHOSTADDRESS_V6_FLAG | BORNHOST_V6_FLAG, born_timestamp=0, born_host=ip, born_port=1,
            store_timestamp=0, store_host=ip, store_port=2, reconsume_times=0, prepared_transaction_offset=0,
            body=b"", topic=b"T", properties=b""))
        segment = tmp_path / str(i) / f"{0:020d}"
        segment.parent.mkdir()
        segment.write_bytes(raw)
        data, runs = _both(monkeypatch, [segment], body="none")
        assert runs == 1 and f'"store_host":"{format_host(ip, 2)}"'.encode() in data


def test_escapes_at_every_place_of_long_text(monkeypatch, tmp_path):
    """Topics and property values of 40 ASCII bytes with a byte JSON escapes (or 0x7F, or a
    16-byte run of plain bytes) at each place: the 16-bytes-at-a-time escaping's every cut."""
    records, position = [], 0
    for special in ('"', "\\", "\n", "\x01", "\x1f", "\x7f", "a"):
        for at in range(40):
            text = ("0123456789abcdefghijklmnopqrstuvwxyzABCD"[:at] + special + "x" * (39 - at)).encode()
            properties = (props.PROPERTY_TAGS + props.NAME_VALUE_SEPARATOR).encode() + text + \
                props.PROPERTY_SEPARATOR.encode()
            raw = MessageRecord.build(dict(
                total_size=message_length(0, 0, len(text), len(properties), MESSAGE_MAGIC_CODE_V2),
                magic_code=MESSAGE_MAGIC_CODE_V2, body_crc=0, queue_id=0, flag=0, queue_offset=len(records),
                physical_offset=position, sys_flag=0, born_timestamp=0, born_host=bytes(4), born_port=1,
                store_timestamp=0, store_host=bytes(4), store_port=2, reconsume_times=0,
                prepared_transaction_offset=0, body=b"", topic=text, properties=properties))
            records.append(raw)
            position += len(raw)
    segment = tmp_path / f"{0:020d}"
    segment.write_bytes(b"".join(records))
    data, runs = _both(monkeypatch, [segment], body="none")
    assert runs > 0 and data.count(b"\n") == len(records)


def test_declines_without_the_layout_or_kernel(monkeypatch):
    """Without the kernel every record is a Message (the pure path); the body modes it writes are two."""
    assert jsonl_rows.wanted("none") and jsonl_rows.wanted("base64")
    assert not jsonl_rows.wanted("hex") and not jsonl_rows.wanted("text")
    monkeypatch.setattr(native, "kernel", None)
    assert not jsonl_rows.wanted("none")


def test_base64_of_every_tail_length(monkeypatch, tmp_path):
    """Bodies and properties of 0 to 17 bytes: every tail the base64 loops leave."""
    out = b""
    for n in range(18):
        body = bytes(range(200, 200 + n))
        properties = (props.PROPERTY_TAGS + props.NAME_VALUE_SEPARATOR + "t" * (n + 1)).encode()
        out += MessageRecord.build(dict(
            total_size=message_length(0, n, 1, len(properties), MESSAGE_MAGIC_CODE_V1), magic_code=MESSAGE_MAGIC_CODE_V1,
            body_crc=crc_rules.body_crc(body), queue_id=0, flag=0, queue_offset=n, physical_offset=len(out), sys_flag=0,
            born_timestamp=0, born_host=b"\1\2\3\4", born_port=1, store_timestamp=0, store_host=b"\1\2\3\4",
            store_port=2, reconsume_times=0, prepared_transaction_offset=0, body=body, topic=b"T",
            properties=properties))
    segment = tmp_path / f"{0:020d}"
    segment.write_bytes(out)
    data, runs = _both(monkeypatch, [segment], body="base64")
    assert runs == 1 and data.count(b"\n") == 18


@settings(max_examples=examples(30), deadline=None)
@given(window=made_windows(600))
def test_spans_anywhere_never_read_past_the_buffer(window):
    """Spans a damaged caller might pass: the kernel writes rows that parse or declines, never crashes."""
    import orjson

    kernel = jsonl_rows._kernel()
    buf, spans, verdicts = window
    data, taken = kernel.jsonl_rows(buf, spans, verdicts, 0, 0, 0, b'"f"', True)
    assert taken in (0, 1) and (taken == 1) == bool(data)
    if taken:
        assert orjson.loads(data)["record"] == "message"
