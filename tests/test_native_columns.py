"""The native kernel's properties stages (rmqtool/native/columns.c, property_columns) against the
Python stages of store/record_columns.column_run, which define them: the same columns and the
same special records, with the kernel and with ``rmqtool.native.kernel`` None, on the fixtures'
commit logs (and the columns' TAGS codes and index keys against truth.json), on records whose
properties hypothesis makes (empty entries, missing or doubled separators, non-ASCII, invalid
UTF-8, duplicated names, INNER_NUM and the like, __CRC32# entries good, bad and misshapen), and
through verify (in this process, and a CLI run with RMQTOOL_NATIVE=0)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CLEAN_SCENARIOS, REPO, V4, V5, load_truth
from helpers import cli_runner, examples, fixture_commitlogs
from test_record_kernel import _index_keys
from rmqtool import native
from rmqtool.cli.app import app
from rmqtool.dispatch.rules import RMQ_SYS_SCHEDULE_TOPIC
from rmqtool.formats import properties as props
from rmqtool.formats.crc import CRC32_ENTRY_END, CRC32_ENTRY_HEAD, crc32_property_digits, record_crc
from rmqtool.formats.sysflag import TRANSACTION_ROLLBACK_TYPE
from rmqtool.store.commitlog import ColumnMode, column_scan
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.message import Message
from rmqtool.store.record_columns import RecordColumns, column_run
from rmqtool.store.record_kernel import HEADER_DTYPE, clean_records
from rmqtool.store.record_rule import FIELD_STRUCTS

pytestmark = pytest.mark.usefixtures("native_built")

FIELDS = ("position", "size", "queue_id", "queue_offset", "sys_flag", "store_timestamp", "topic", "tags_code",
          "crc_entry", "key_record", "key_hash")
SPECIAL_TOPICS = frozenset({RMQ_SYS_SCHEDULE_TOPIC})


def _same_columns(a: RecordColumns | None, b: RecordColumns | None) -> None:
    assert (a is None) == (b is None)
    if a is None:
        return
    assert a.topics == b.topics
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y), f


def _runs(buf, check_crc: bool, special_topics: frozenset = SPECIAL_TOPICS) -> list:
    """column_run over the whole buffer: (stop, columns, special) of each run, the careful path's
    records stepped over as the scan does (a record at a time, by its totalSize)."""
    out, i, hashes = [], 0, {}
    while i < len(buf):
        j, cols, special = column_run(buf, i, len(buf), 1 << 40, 0, hashes, special_topics, check_crc=check_crc)
        out.append((j, cols, special))
        if j > i:
            i = j
            continue
        records = clean_records(buf, i, len(buf))
        if records.refusal is None:
            break
        i = records.stop + 1  # a refused record: look on past it (both ways alike)
    return out


def _both_ways(monkeypatch, call):
    """call() with the kernel, then with native.kernel None."""
    with_kernel = call()
    monkeypatch.setattr(native, "kernel", None)
    without = call()
    monkeypatch.undo()
    return with_kernel, without


def _same_runs(a: list, b: list) -> None:
    assert len(a) == len(b)
    for (ja, ca, sa), (jb, cb, sb) in zip(a, b):
        assert (ja, sa) == (jb, sb)
        _same_columns(ca, cb)


def test_fixture_logs_give_the_same_columns_both_ways(monkeypatch):
    """Every fixture segment, CRCs checked (verify) and not (dispatch); a clean store's with CRCs
    checked are column_scan's below."""
    clean = {str(s / "store" / "commitlog") for s in CLEAN_SCENARIOS.values()}
    plain = 0
    for d in fixture_commitlogs():
        for check_crc in (False,) if str(d) in clean else (True, False):
            for seg in CommitLog(d).segments:
                buf = seg.path.read_bytes()
                a, b = _both_ways(monkeypatch, lambda: _runs(buf, check_crc))
                _same_runs(a, b)
                plain += sum(len(c) for _, c, _ in a if c is not None)
    assert plain > 0


@pytest.mark.parametrize("scenario", sorted(CLEAN_SCENARIOS))
def test_column_scan_with_the_kernel_says_what_truth_says(scenario, monkeypatch):
    """column_scan's blocks with the kernel: TAGS codes, __CRC32# entries and index keys as truth.json
    has them; the Messages it leaves to the careful path the same both ways."""
    truth = {m["physicalOffset"]: m for m in load_truth(CLEAN_SCENARIOS[scenario] / "truth.json")["truth"]["messages"]}
    segments = CommitLog(CLEAN_SCENARIOS[scenario] / "store" / "commitlog").segments

    def scan():
        return [list(column_scan(seg, ColumnMode(special_topics=SPECIAL_TOPICS))) for seg in segments]
    with_kernel, without = _both_ways(monkeypatch, scan)
    seen = []
    for seg, got, expected in zip(segments, with_kernel, without):
        assert [type(r) for r in got] == [type(r) for r in expected]
        for r, e in zip(got, expected):
            if isinstance(r, RecordColumns):
                _same_columns(r, e)
                keys: dict = {}
                for row, h in zip(r.key_record.tolist(), r.key_hash.tolist()):
                    keys.setdefault(row, []).append(h)
                for row, position in enumerate(r.position.tolist()):
                    t = truth[seg.base_offset + position]
                    assert r.tags_code[row] == t["dispatchTagsCode"]
                    assert bool(r.crc_entry[row]) == ("propertyCrc32Raw" in t)
                    assert keys.get(row, []) == _index_keys(t)
                    seen.append(seg.base_offset + position)
            elif isinstance(r, Message):
                assert (r.commit_log_offset, r.properties_raw) == (e.commit_log_offset, e.properties_raw)
                seen.append(r.commit_log_offset)
    assert sorted(seen) == sorted(truth)


# --- records with made-up properties -------------------------------------------------------------

_TEMPLATE_STORE = V4 / "basic" / "store" / "commitlog"


@pytest.fixture(scope="module")
def template() -> tuple:
    """A real record cut before its properties length, and its topic's end in it."""
    seg = CommitLog(_TEMPLATE_STORE).segments[0]
    buf = seg.path.read_bytes()[:1 << 16]
    records = clean_records(buf, 0, len(buf))
    topic_end = int(records.topic_end[0])
    return buf[:topic_end]


def _field(name: str, value: int) -> tuple[int, bytes]:
    dtype, at = HEADER_DTYPE.fields[name][:2]
    return at, np.array(value, dtype).tobytes()


def _record(head: bytes, properties: bytes, position: int, rollback: bool, crc_entry: str) -> bytes:
    """The template record holding ``properties`` (and, when asked, a __CRC32# entry after them:
    "good", "bad" or "short" (9 digits)), placed at ``position`` (its physicalOffset field)."""
    if crc_entry != "none":  # the last entry, after a separator (5.x ends every entry with one)
        properties += CRC32_ENTRY_END if properties and not properties.endswith(CRC32_ENTRY_END) else b""
        properties += CRC32_ENTRY_HEAD + b"0" * (9 if crc_entry == "short" else 10) + CRC32_ENTRY_END
    record = bytearray(head + FIELD_STRUCTS["properties_length"].pack(len(properties)) + properties)
    for name, value in (("total_size", len(record)), ("physical_offset", position)):
        at, raw = _field(name, value)
        record[at:at + len(raw)] = raw
    if rollback:
        at, raw = _field("sys_flag", int(np.frombuffer(record, HEADER_DTYPE, 1)["sys_flag"][0]) |
                         TRANSACTION_ROLLBACK_TYPE)
        record[at:at + len(raw)] = raw
    if crc_entry in ("good", "bad"):
        digits = crc32_property_digits(record_crc(record) ^ (crc_entry == "bad")).encode("ascii")
        record[len(record) - len(digits) - len(CRC32_ENTRY_END):len(record) - len(CRC32_ENTRY_END)] = digits
    return bytes(record)


_NAMES = st.sampled_from([props.PROPERTY_KEYS, props.PROPERTY_TAGS, props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
                          props.PROPERTY_CRC32, props.PROPERTY_INNER_NUM, props.PROPERTY_INNER_BASE,
                          props.PROPERTY_QUARANTINED, "INNER_NUX", "INNER_NUMS", "KEY", "TAGS2", "DELAY",
                          "CLUSTER", "é", ""])
_TEXT = st.text(st.sampled_from("ab Z09 _#é\u4e2d"), max_size=12)
_NV, _SEP = props.NAME_VALUE_SEPARATOR, props.PROPERTY_SEPARATOR


@st.composite
def _properties(draw) -> bytes:
    """A properties string near the common one: entries of names dispatch reads and others, values
    with spaces and non-ASCII, sometimes an entry with no or two separators, an empty entry,
    a trailing separator, or bytes that are no UTF-8."""
    entries = []
    for _ in range(draw(st.integers(0, 5))):
        shape = draw(st.sampled_from(["entry"] * 6 + ["no separator", "two separators", "empty", "empty value"]))
        name, value = draw(_NAMES), draw(_TEXT)
        entries.append({"entry": name + _NV + value, "no separator": name + value, "empty": "",
                        "two separators": name + _NV + value + _NV + value, "empty value": name + _NV}[shape])
    text = _SEP.join(entries) + (_SEP if draw(st.booleans()) else "")
    raw = text.encode("utf-8")
    if draw(st.integers(0, 9)) == 0:  # a byte that breaks UTF-8 somewhere
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\x80"])) + raw[at:]
    return raw


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(_properties(), st.booleans(), st.sampled_from(["none", "none", "good", "bad", "short"])),
                min_size=1, max_size=6), st.booleans(), st.booleans())
def test_made_up_properties_give_the_same_columns_both_ways(template, monkeypatch, records, check_crc, delayed):
    """...and the run's one topic a special topic (the delay topic's records go to the Message path)."""
    buf = bytearray()
    for raw, rollback, crc_entry in records:
        buf += _record(template, raw, (1 << 40) + len(buf), rollback, crc_entry)
    buf = bytes(buf)
    topic = clean_records(buf, 0, len(buf))
    special_topics = SPECIAL_TOPICS | {buf[topic.topic_at[0]:topic.topic_end[0]].decode()} if delayed else SPECIAL_TOPICS
    a, b = _both_ways(monkeypatch, lambda: _runs(buf, check_crc, special_topics))
    _same_runs(a, b)


def test_the_kernel_declines_records_outside_the_buffer():
    """property_columns reads nothing past its buffer: a record said to end past it is declined."""
    from rmqtool.store.record_columns import _NATIVE_SPEC
    n = 1
    args = (b"abc", np.array([0], np.int64), np.array([4], np.int64), np.zeros(n, bool), np.ones(n, bool),
            np.zeros(n, np.uint32), np.empty(n, np.int64), np.empty(n, np.int64), np.empty(4, np.int64),
            np.empty(4, np.uint32), _NATIVE_SPEC, 0)
    assert native.kernel.property_columns(*args) is None


def test_many_keys_a_record_fill_the_key_arrays_in_turns(template, monkeypatch):
    """A KEYS value of more keys than the first key arrays hold: the kernel stops and goes on."""
    keys = " ".join(f"k{i}" for i in range(40))
    raw = (props.PROPERTY_KEYS + _NV + keys).encode("ascii")
    buf = b"".join(_record(template, raw, 0, False, "none") for _ in range(3))
    a, b = _both_ways(monkeypatch, lambda: _runs(buf, False))
    _same_runs(a, b)
    assert len(a[0][1].key_hash) == 3 * 40


# --- verify both ways ----------------------------------------------------------------------------

VERIFY_STORES = [V5 / "v2-and-crc" / "store", V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file" / "input" / "store"]


def _verify(store) -> tuple:
    result = cli_runner().invoke(app, ["verify", str(store), "--format", "jsonl", "--no-progress", "--jobs", "1"])
    return result.exit_code, result.stdout


def test_verify_says_the_same_both_ways(monkeypatch):
    for store in VERIFY_STORES:
        with_kernel, without = _both_ways(monkeypatch, lambda: _verify(store))
        assert with_kernel == without and with_kernel[1]


def test_verify_cli_with_the_kernel_off_says_the_same():
    store = VERIFY_STORES[1]
    env = {**os.environ, "RMQTOOL_NATIVE": "0", "PYTHONPATH": str(REPO)}
    off = subprocess.run([sys.executable, "-m", "rmqtool", "verify", str(store), "--format", "jsonl", "--no-progress",
                          "--jobs", "1"], capture_output=True, env=env, cwd=REPO)
    code, stdout = _verify(store)
    assert (off.returncode, off.stdout.decode()) == (code, stdout)
    assert [json.loads(line)["finding"] for line in stdout.splitlines()]
