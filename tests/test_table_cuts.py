"""What a table may cut (report/shorten.py, through report/table.py's TextTable): whole columns are
left out to fit the width, free text is cut, but never a number, an ID or a status's identifier,
a list inside an item, a path inside its file name, nor a name so far that two names print alike;
a later row's value wider than the first rows' widens its column under a new header. Rows of
every cut rule are made by hypothesis and the table read back cell by cell."""
from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import examples, table_sections
from rmqtool.report import table
from rmqtool.report.columns import HEAD, ITEMS, NAME, NEVER, PATH, SUB_KINDS, TEXT, VALUE, VIEWS, cell_text
from rmqtool.report.shorten import distinct_width, least_width, shorten
from rmqtool.report.table import TextTable

DIFF = {c.name: c for c in VIEWS["diff"]}  # a kind with a column of every rule


def test_each_rule_keeps_what_it_must():
    assert shorten(NEVER, "9223372036854513664", 17) is None
    assert shorten(TEXT, "1795315665136", 8, 1795315665136) is None  # a number in a text column
    assert shorten(TEXT, "the queue is empty", 8) == "the que…"
    assert shorten(HEAD, "OFFSET_OVERFLOW_BADLY: PULL_OFFSET_MOVED", 22) == "OFFSET_OVERFLOW_BADLY…"
    assert shorten(HEAD, "OFFSET_OVERFLOW_BADLY: PULL_OFFSET_MOVED", 21) is None
    assert shorten(ITEMS, "order-10 order-11", 12) == "order-10 …" and shorten(ITEMS, "order-10 x", 9) is None
    assert shorten(PATH, "/s/checkpoint/action-checkpoint.3289", 24) == "…/action-checkpoint.3289"
    assert shorten(PATH, "/s/checkpoint/action-checkpoint.3289", 23) is None
    assert shorten(VALUE, "physic", 3, "physic") is None and shorten(VALUE, "a=1 b=2", 4, {"a": 1, "b": 2}) == "a=1…"
    assert least_width(PATH, "checkpoint") == len("checkpoint")  # no directory: the name whole
    names = ["%RETRY%order_group", "%RETRY%audit_group", "OtherTopic"]
    width = distinct_width(NAME, names, 5)
    assert len({shorten(NAME, n, width) for n in names}) == 3 and len({shorten(NAME, n, width - 1) for n in names}) < 3


_WORDS = st.sampled_from(["a", "ab", "abc", "abcdefgh", "abcdefgi", "order-1", "order-10", "x" * 30])
_TEXT = st.lists(_WORDS, min_size=1, max_size=4).map(" ".join)
_NAME = st.sampled_from(["T", "Topic", "TopicA", "TopicB", "%RETRY%group_one", "%RETRY%group_two",
                         "averyveryverylongtopicname_1", "averyveryverylongtopicname_2"])
_PATH = st.builds(lambda d, n: f"/store/{d}/{n}", st.sampled_from(["commitlog", "config", "a/b/c" * 5]),
                  st.sampled_from(["checkpoint", "0" * 20, "topics.json", "topics.json.bak"]))
_VALUE = st.one_of(st.none(), st.integers(0, 1 << 63), _NAME, st.dictionaries(_NAME, st.integers(0, 99), max_size=3))
_ROW = st.fixed_dictionaries({
    "record": st.sampled_from(["commit_log_divergence", "checkpoint_field", "queue_range"]),
    "side": st.sampled_from([None, "a", "b"]), "commit_log_offset": st.one_of(st.none(), st.integers(0, 1 << 63)),
    "reason": st.one_of(st.none(), _WORDS, st.builds(lambda w, t: f"{w}: {t}", _WORDS, _TEXT)),
    "topic": st.one_of(st.none(), _NAME), "queue_id": st.one_of(st.none(), st.integers(0, 1 << 31)),
    "field": st.one_of(st.none(), _WORDS, st.lists(_WORDS, min_size=2, max_size=4).map(", ".join)),
    "a": _VALUE, "b": _VALUE, "group": st.one_of(st.none(), _NAME), "file": st.one_of(st.none(), _PATH),
    "counts": st.one_of(st.none(), _TEXT)})


def _check_cell(name: str, shown: str, value) -> None:
    """A cell as its column's rule allows it to be: whole, or cut only where it may be."""
    whole = cell_text(name, value)
    if shown == whole:
        return
    how = DIFF[name].cut
    assert how not in (NEVER,) and not isinstance(value, int), (name, shown, whole)
    assert not (how == VALUE and not isinstance(value, (dict, list))), (name, shown, whole)
    if how == PATH:
        assert shown.startswith("…") and whole.endswith(shown[1:]) and whole[-len(shown):].find("/") >= 0, shown
        return
    assert shown.endswith("…") and whole.startswith(shown[:-1]), (name, shown, whole)
    if how == ITEMS:
        assert shown[:-1].endswith(" "), shown  # whole items only
    if how == HEAD:
        assert len(shown) > len(whole.split(":")[0].split()[0]), shown


@settings(max_examples=examples(150), deadline=None)
@given(rows=st.lists(_ROW, min_size=1, max_size=30), width=st.sampled_from([40, 80, 100, 120, 200]),
       sample=st.integers(1, 5), select=st.booleans())
def test_no_value_is_cut_but_as_its_column_allows(rows, width, sample, select):
    """Every cell whole or cut as its rule allows; a name (topic, group) or a file never shown as
    another's text anywhere in its table (a run of rows of one kind: the field rows are a table
    of their own, SUB_KINDS); with more than one column, no line wider than the width."""
    table.SAMPLE_ROWS, before = sample, table.SAMPLE_ROWS
    try:
        out = io.StringIO()
        chosen = tuple(DIFF[n] for n in ("record", "topic", "field", "a", "file")) if select else None
        t = TextTable(out, "diff", width=width, select=chosen)
        for row in rows:
            t.row(row)
        t.close()
    finally:
        table.SAMPLE_ROWS = before
    sections = table_sections(out.getvalue())
    shown_rows = [(names, cells) for names, section in sections for cells in section]
    assert len(shown_rows) == len(rows)
    meant: dict = {}
    kinds = [SUB_KINDS["diff"].get(row["record"], "diff") for row in rows]
    tables = [sum(1 for j in range(1, i + 1) if kinds[j] != kinds[j - 1]) for i in range(len(rows))]
    for (names, cells), row, k in zip(shown_rows, rows, tables):
        for name in names:
            _check_cell(name, cells[name], row[name])
            if DIFF[name].cut in (NAME, PATH) and row[name] is not None:
                meant.setdefault((k, name, cells[name]), set()).add(row[name])
        if len(names) > 1 and not select:
            line = "  ".join(cells[n] for n in names)
            assert len(line) <= width
    assert all(len(values) == 1 for values in meant.values()), meant
