"""dump commitlog's table lines written by the native kernel (table.c through
report/table_rows.py) are byte for byte TextTable's (message_record's rows through _line): on the
fixtures at several widths, with --wide and --columns, with --limit cutting a run, on a damaged
store whose corrupt rows come between the runs, through the CLI with RMQTOOL_NATIVE=0, and on
hypothesis-made records whose topics, keys, properties and bodies hold UTF-8, wide characters,
control characters and odd times, which the kernel writes or declines to the Python line.
"""
from __future__ import annotations

import dataclasses
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CLEAN_SCENARIOS, V4, load_truth
from helpers import (both_ways, built_record, cli_both_ways, encoded, examples, expand_store, made_segments,
                     made_windows, table_sections)
from rmqtool.formats import crc as crc_rules
from rmqtool.formats import properties as props
from rmqtool.formats.commitlog import MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2, MessageRecord, message_length
from rmqtool.formats.sysflag import BORNHOST_V6_FLAG, COMPRESSED_FLAG, STOREHOSTADDRESS_V6_FLAG
from rmqtool.inspect.commitlog_dumps import chained, commitlog_dumps
from rmqtool.inspect.selection import MessageSelection
from rmqtool.report import table, table_rows
from rmqtool.report.columns import VIEWS
from rmqtool.report.sink import Sink

pytestmark = pytest.mark.usefixtures("native_built")
DAMAGED = V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file" / "input"
MESSAGE_COLUMNS = [c.name for c in VIEWS["message"]]


def _table(paths, *, width=120, wide=False, select=None, limit=None, **options) -> tuple[str, list, int]:
    """(the table's text, the findings, the lines the kernel wrote) of a dump as the CLI makes it."""
    dumps, _ = commitlog_dumps(paths, MessageSelection(), None, None, limit, **options)
    out = io.StringIO()
    sink = Sink("table", out, kind="message", width=width, wide=wide, select=select)
    written = [0]
    lines = table_rows.TableRows.lines

    def counted(self, *args):
        got = lines(self, *args)
        written[0] += got[1]
        return got
    table_rows.TableRows.lines = counted
    try:
        sink.rows(chained(dumps, limit, None, encoded="table"))
    finally:
        table_rows.TableRows.lines = lines
    sink.close()
    return out.getvalue(), [f for d in dumps for f in d.findings], written[0]


def _rows(text: str) -> list[str]:
    """A table's lines of rows: no header, rule or blank line (a column widened by a later row
    goes on under a new header)."""
    lines = text.splitlines()
    rules = {i for i, line in enumerate(lines) if line and set(line) <= {"-", " "}}
    return [line for i, line in enumerate(lines) if line and i not in rules and i + 1 not in rules]


def _both(monkeypatch, paths, **options) -> tuple[str, int]:
    """(the table, the lines the kernel wrote), the table and findings asserted equal to the pure path's."""
    return both_ways(monkeypatch, _table, paths, **options)


@pytest.fixture(scope="module")
def damaged_store(tmp_path_factory):
    return expand_store(DAMAGED, tmp_path_factory.mktemp("damaged") / "input") / "store"


def test_fixture_tables_are_the_python_tables(monkeypatch):
    """Each clean fixture at 120 columns: every line the pure path's, the kernel's after the sample
    (but a batch's records, whose properties name WAIT twice: the Python way), and the offsets and
    topics the truth's messages."""
    monkeypatch.setattr(table, "SAMPLE_ROWS", 10)
    for scenario in ("4.9.8/batch", "4.9.8/txdelay", "5.3.3/v2-and-crc", "5.3.3/batchcq"):
        store = CLEAN_SCENARIOS[scenario] / "store"
        messages = load_truth(CLEAN_SCENARIOS[scenario] / "truth.json")["truth"]["messages"]
        text, written = _both(monkeypatch, [store], body="none")
        assert len(_rows(text)) == len(messages)
        assert written > 0
        whole, _ = _both(monkeypatch, [store], body="none", wide=True, select="commit_log_offset,topic")
        cells = [line.split() for line in _rows(whole)]
        assert [(int(offset), topic) for offset, topic in cells] == [(m["physicalOffset"], m["topic"]) for m in messages]


@pytest.mark.parametrize("width", [40, 80, 200])
def test_widths_wide_columns_and_limit(monkeypatch, width):
    """A small sample (so the kernel writes most lines) at other widths: --body base64 (cut bodies),
    --columns with every field the kernel writes and the cuts it makes (a path cut at its front),
    --wide, and --limit cutting a run."""
    monkeypatch.setattr(table, "SAMPLE_ROWS", 7)
    store = CLEAN_SCENARIOS["5.3.3/v2-and-crc"] / "store"
    messages = load_truth(CLEAN_SCENARIOS["5.3.3/v2-and-crc"] / "truth.json")["truth"]["messages"]
    text, written = _both(monkeypatch, [store], width=width, body="base64")
    assert written > 0 and "…" in text
    text, written = _both(monkeypatch, [store], width=width, body="base64", select=",".join(MESSAGE_COLUMNS))
    assert written > 0 and text.count("…") > len(messages)
    text, written = _both(monkeypatch, [store], width=width, body="none", check_crc=False, limit=100,
                          select="file,body_crc_ok,property_crc_ok,store_timestamp,keys")
    assert written > 0 and len(_rows(text)) == 100
    if width == 80:
        text, written = _both(monkeypatch, [store], width=width, body="none", wide=True)
        assert written > 0 and len(_rows(text)) == len(messages)


def test_damaged_store_and_notes_between_runs(monkeypatch, damaged_store, tmp_path):
    """A record whose body CRC fails (the Python way, its finding reported) and blanks among the
    runs; a damaged region between two runs (a note line)."""
    monkeypatch.setattr(table, "SAMPLE_ROWS", 5)
    text, written = _both(monkeypatch, [damaged_store], body="none", show_blank=True)
    assert written > 0 and "end-of-file blank" in text
    assert _table([damaged_store], body="none")[1]  # the findings (the same both ways)
    records: list = []
    for i in range(40):
        records.append(_plain_record(i, sum(map(len, records))))
    data = bytearray(b"".join(records))
    at = sum(map(len, records[:20]))
    data[at + 4:at + 8] = b"\xde\xad\xbe\xef"  # record 20's magic code: a corrupt region up to record 21
    segment = tmp_path / f"{0:020d}"
    segment.write_bytes(bytes(data))
    text, written = _both(monkeypatch, [segment], body="base64", width=90)
    assert written == 39 - 5 and text.count("corrupt:") == 1


def _plain_record(i: int, position: int, topic: bytes = b"Topic") -> bytes:
    """The i-th of a run of clean records at ``position`` (ASCII topic and properties, each 100 bytes of body)."""
    body = bytes(range(i, i + 100))
    properties = f"{props.PROPERTY_KEYS}\x01k{i} shared\x02{props.PROPERTY_TAGS}\x01t{i % 3}".encode()
    size = message_length(0, len(body), len(topic), len(properties), MESSAGE_MAGIC_CODE_V1)
    return MessageRecord.build(dict(
        total_size=size, magic_code=MESSAGE_MAGIC_CODE_V1, body_crc=crc_rules.body_crc(body), queue_id=i % 4, flag=0,
        queue_offset=i // 4, physical_offset=position, sys_flag=0, born_timestamp=1700000000000 + i, born_host=b"\1\2\3\4",
        born_port=1, store_timestamp=1700000000000 + 7 * i, store_host=b"\1\2\3\4", store_port=2, reconsume_times=0,
        prepared_transaction_offset=0, body=body, topic=topic, properties=properties))


def test_an_offset_wider_than_the_first_rows_widens_its_column(monkeypatch, tmp_path):
    """Offsets that gain a digit after the row that set the widths: each shown whole (the kernel
    declines the first that does not fit, the column widens under a new header, the kernel writes
    on), the same both ways; and so a topic whose cut would print as another's cut."""
    monkeypatch.setattr(table, "SAMPLE_ROWS", 1)
    base = 10 ** 18 - 3 * len(_plain_record(0, 0))  # the first records' offsets 18 digits, the later ones 19
    records: list = []
    for i in range(12):
        records.append(_plain_record(i, base + sum(map(len, records)),
                                     topic=b"TopicWithALongName" + (b"A" if i < 6 else b"B")))
    segment = tmp_path / f"{base:020d}"
    segment.write_bytes(b"".join(records))
    offsets = [base + sum(map(len, records[:i])) for i in range(len(records))]
    assert len(str(offsets[0])) < len(str(offsets[-1]))
    text, written = _both(monkeypatch, [segment], body="none", width=80)
    sections = table_sections(text)
    assert written > 0 and len(sections) > 1
    rows = [cells for _, section in sections for cells in section]
    assert [cells["commit_log_offset"] for cells in rows] == [str(o) for o in offsets]
    meant: dict = {}  # each text shown: the topics it stood for
    for i, cells in enumerate(rows):
        meant.setdefault(cells["topic"], set()).add(i < 6)
    assert all(len(topics) == 1 for topics in meant.values()) and "TopicWithALongNameB" in meant, meant


def test_a_formatter_the_kernel_does_not_read_alike(monkeypatch):
    """store_size read as a size (KiB) would not be the kernel's number: that layout is the Python way's."""
    monkeypatch.setattr(table, "SAMPLE_ROWS", 5)
    monkeypatch.setitem(VIEWS, "message", tuple(dataclasses.replace(c, file_size=c.name == "store_size")
                                                for c in VIEWS["message"]))
    text, written = _both(monkeypatch, [CLEAN_SCENARIOS["4.9.8/txdelay"] / "store"], body="none")
    assert written == 0 and " B " in text


def test_text_bodies_cut_to_their_preview(monkeypatch):
    """The CLI's default table body: a text preview of 40 letters, the kernel's while ASCII (the
    records whose shown keys or tags hold Chinese: the Python way, an emoji in a property not
    shown: the kernel's)."""
    monkeypatch.setattr(table, "SAMPLE_ROWS", 10)
    store = CLEAN_SCENARIOS["4.9.8/basic"] / "store"
    text, written = _both(monkeypatch, [store], body="text", preview=40, limit=400, width=140)
    assert written > 0 and "…" in text
    text, written = _both(monkeypatch, [store], body="text", preview=40, limit=200, wide=True, select="body,tags")
    assert written > 0 and len(max(text.splitlines(), key=len)) > 40


def test_cli_with_and_without_the_kernel():
    """The CLI's table with the kernel (in this process) and with RMQTOOL_NATIVE=0 (a process)."""
    store = str(CLEAN_SCENARIOS["4.9.8/batch"] / "store")
    out = cli_both_ways(["dump", "commitlog", store, "--no-progress"], COLUMNS="100")
    assert out.count(b"\n") > 900


# --- hypothesis-made records ----------------------------------------------------------------

_AWKWARD = st.sampled_from(["", "a", " ", "  k ", "k1 k2", "\t", "\x00", "\x1b[2J", "\x7f", "é", "漢字", "\u0301",
                            "\u009b", "…", "x" * 30, "\u3000"])
_TEXT = st.lists(st.one_of(_AWKWARD, st.text(st.characters(max_codepoint=0x7F), max_size=8), st.text(max_size=5)),
                max_size=4).map("".join)
_TIMES = st.one_of(st.sampled_from([0, -1, 1, 999, 1000, 86399999, 253402300799999, 253402300800000,
                                    (1 << 63) - 1, -(1 << 63)]), st.integers(0, 1 << 45))


@st.composite
def _properties(draw, tidy: bool) -> bytes:
    names = [props.PROPERTY_TAGS, props.PROPERTY_KEYS, props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "CLUSTER"]
    value = _TEXT.filter(lambda v: v and "\x01" not in v and "\x02" not in v) if tidy else _TEXT
    entries = draw(st.lists(st.tuples(st.sampled_from(names) if tidy else st.one_of(st.sampled_from(names), _TEXT),
                                      value), max_size=4, unique_by=(lambda e: e[0]) if tidy else None))
    raw = b"".join(encoded(n) + props.NAME_VALUE_SEPARATOR.encode() + encoded(v) + props.PROPERTY_SEPARATOR.encode()
                   for n, v in entries)
    return raw[:-1] if draw(st.booleans()) else raw


def _host(v6: bool):
    """A host's address: IPv4, or IPv6 with runs of zeros (and IPv4-mapped) likely."""
    size = 16 if v6 else 4
    return st.one_of(st.binary(min_size=size, max_size=size),
                     st.lists(st.sampled_from([b"\0\0", b"\0\1", b"\xff\xff"]), min_size=size // 2,
                              max_size=size // 2).map(b"".join))


@st.composite
def _record(draw, position: int) -> bytes:
    tidy = draw(st.booleans())  # a record the kernel may take (no finding): else anything
    magic = draw(st.sampled_from([MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2]))
    born_v6, store_v6 = draw(st.booleans()), draw(st.booleans())
    sys_flag = draw(st.sampled_from([0, 4] if tidy else [0, 0, 0, 4, COMPRESSED_FLAG])) | (
        BORNHOST_V6_FLAG if born_v6 else 0) | (STOREHOSTADDRESS_V6_FLAG if store_v6 else 0)
    topic = draw(_TEXT.map(encoded) if tidy else st.one_of(_TEXT.map(encoded), st.binary(max_size=6)))[:100] or b"T"
    properties = draw(_properties(tidy))
    if draw(st.booleans()):  # 5.x: a __CRC32# entry, filled in below
        properties += crc_rules.crc32_property(0)
    body = draw(st.one_of(st.binary(max_size=30), _TEXT.map(encoded)))
    fields = dict(
        total_size=message_length(sys_flag, len(body), len(topic), len(properties), magic), magic_code=magic,
        body_crc=crc_rules.body_crc(body) if tidy or draw(st.integers(0, 9)) else 12345,
        queue_id=draw(st.integers(0, 9)), flag=draw(st.integers(-5, 5)), queue_offset=draw(st.integers(0, 1 << 40)),
        physical_offset=position if tidy or draw(st.integers(0, 9)) else position + 1, sys_flag=sys_flag,
        born_timestamp=draw(_TIMES), born_host=draw(_host(born_v6)), born_port=draw(st.integers(-1, 65535)),
        store_timestamp=draw(_TIMES), store_host=draw(_host(store_v6)), store_port=draw(st.integers(-1, 65535)),
        reconsume_times=draw(st.integers(0, 16)),
        prepared_transaction_offset=draw(st.integers(0, 1 << 40)), body=body, topic=topic, properties=properties)
    return built_record(fields, lambda: tidy or draw(st.integers(0, 5)))




@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=made_segments(_record, 2, 7), body=st.sampled_from([("none", None), ("base64", None), ("text", None), ("text", 40),
                                              ("text", 3)]), check_crc=st.booleans(),
       width=st.sampled_from([1, 12, 40, 80, 120, 300]), wide=st.booleans(),
       select=st.one_of(st.none(), st.lists(st.sampled_from(MESSAGE_COLUMNS), min_size=1, max_size=8, unique=True)))
def test_made_records_lines_are_the_python_lines(monkeypatch, tmp_path_factory, data, body, check_crc, width, wide,
                                                 select):
    """The first record sets the layout; every later line, the kernel's or declined, is _line's."""
    segment = tmp_path_factory.mktemp("made") / f"{0:020d}"
    segment.write_bytes(data)
    with monkeypatch.context() as m:
        m.setattr(table, "SAMPLE_ROWS", 1)
        _both(m, [segment], body=body[0], preview=body[1], check_crc=check_crc, width=width, wide=wide,
              select=None if select is None else ",".join(select))


@settings(max_examples=examples(20), deadline=None)
@given(window=made_windows(400))
def test_spans_anywhere_never_read_past_the_buffer(window):
    """Spans a damaged caller might pass: the kernel takes the record or declines, never crashes."""
    kernel = table_rows._kernel()
    buf, spans, verdicts = window
    taken = kernel.table_records(buf, spans, verdicts, 0, 0, 0)
    codes = {n: i for i, n in enumerate(kernel.table_sources())}
    cells = tuple((code, 0, 5, False, 3 if name == "file" else 1, b"", frozenset({b"/a/file"}))
                  for name, code in codes.items() if name not in ("int", "time"))
    text, lines, declined = kernel.table_lines(buf, spans, verdicts, 0, 0, 0, cells, b"/a/file", 2, False,
                                               table_rows._host_texts)
    assert taken == lines and lines + declined == 1 and (lines == 1) == bool(text)
