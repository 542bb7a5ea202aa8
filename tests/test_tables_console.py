"""The operator's console, the rest of issue 24's default tables: plans summarise the queues
they leave unchanged (``--wide`` and JSON list each) and never break a path inside a name;
progress bars measure bytes (read or written), are gone before a table, a plan or JSON on the
terminal, and never show off a terminal unless asked; recover's plan of a live store says so
in its header; ``verify --columns`` keeps the findings table's grouping and order."""
from __future__ import annotations

import collections
import io
import json
import os
import re

import pytest

from conftest import FIXTURES, V4, load_truth
from helpers import cli_runner, writable_copy
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode
from rmqtool.report import progress
from rmqtool.report.columns import VIEWS, human_size
from rmqtool.report.finding_table import shape
from rmqtool.report.sink import Sink, render_document
from rmqtool.report.wrap import wrap

C1 = V4 / "crash-fast" / "c1-delete-cq-queue-dir"  # a queue's directory deleted: the start rebuilds it
E2 = V4 / "crash-fast" / "e2-corrupt-body-in-first-commitlog-file"
MISSING = FIXTURES / "crash-made" / "missing-middle-abnormal" / "input" / "store"
CONSUMERS = FIXTURES / "config" / "consumers"
SEVERITY = {"error": 0, "warning": 1, "info": 2}
COUNTED = re.compile(r"\[(\d+) findings like it; -f jsonl lists each\]")
runner = cli_runner()


def _run(*args, width: int = 80):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": str(width)})


def _widest(text: str) -> int:
    return max(map(len, text.splitlines()))


@pytest.fixture(scope="module")
def c1(tmp_path_factory):
    """The crash store whose CrashTopic/1 directory is gone, copied under a deep path."""
    deep = tmp_path_factory.mktemp("console") / "a-rather-long-directory-name-for-the-incident" / "broker-a"
    return writable_copy(C1 / "input" / "store", deep / "store")


# ---- plans: unchanged queues summarised, paths never broken inside a name ----

def _queue_ranges_on_disk(store) -> dict:
    """Each queue's [min, max) as its files hold it now (the read side, not the plan)."""
    from rmqtool.store.view import open_store

    return {f"{q.topic}/{q.queue_id}": (q.min_offset(), q.max_offset)
            for q in open_store(store).consume_queues(None).queues}


def test_recover_plan_says_changed_queues_and_counts_the_rest(c1):
    doc = json.loads(_run("recover", c1, "-f", "json").stdout)
    table, wide = _run("recover", c1), _run("recover", c1, "--wide")
    assert table.exit_code == wide.exit_code == 3  # the format changes no exit code
    on_disk = _queue_ranges_on_disk(c1)
    same = [k for k, q in doc["queues"].items() if on_disk.get(k) == (q["min_offset"], q["max_offset"])]
    changed = [k for k in doc["queues"] if k not in same]
    removed = load_truth(C1 / "truth.json")["mutation"]["removed"]  # consumequeue/TOPIC/Q
    assert changed == [removed.split("/", 1)[1]] and same  # its directory is gone; the start rebuilds it
    text = " ".join(table.stdout.split())
    assert f"{len(same)} queues unchanged (--wide or -f json lists each)" in text
    assert all(f"queue {k}: offsets" in text for k in changed)
    assert not any(f"queue {k}:" in text for k in same)
    wide_text = " ".join(wide.stdout.split())
    assert all(f"queue {k}: offsets [{q['min_offset']}, {q['max_offset']})" in wide_text
               for k, q in doc["queues"].items())
    assert "unchanged (--wide" not in wide_text
    for out in (table.stdout, wide.stdout):
        assert _widest(out) <= 80
        _paths_whole(out, doc)


def _joined(text: str) -> str:
    """Wrapped lines read back: a line that ends in ``/`` goes on with the next (a path broken
    after a separator), any other break is a space."""
    out = ""
    for line in (ln.strip() for ln in text.splitlines()):
        out += ("" if not out or out.endswith("/") else " ") + line
    return out


def _paths_whole(text: str, doc) -> None:
    """Every file path the JSON document names is in the wrapped text whole once read back:
    broken, if at all, only after a ``/``."""
    paths = set()

    def walk(v):
        if isinstance(v, str) and v.startswith("/"):
            paths.add(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(doc)
    joined = _joined(text)
    shown = [p for p in paths if "/".join(p.rsplit("/", 2)[-2:]) in joined]  # the files the text names
    assert shown and all(p in joined for p in shown), [p for p in shown if p not in joined]


def test_redispatch_plan_lists_files_already_built_only_with_wide(c1):
    doc = json.loads(_run("redispatch", c1, "-f", "json").stdout)
    table, wide = _run("redispatch", c1), _run("redispatch", c1, "--wide")
    same = [c["file"] for c in doc["changes"] if c["kind"] == "same"]
    assert same and doc["counts"]["same"] == len(same)
    assert f"{len(same)} already as built" in table.stdout
    assert len(re.findall(r"^ *\d+\. same\b", wide.stdout, re.M)) == len(same)
    _paths_whole(wide.stdout, doc)
    assert "same " not in table.stdout
    assert _widest(table.stdout) <= 80 and _widest(wide.stdout) <= 80


def test_offsets_reset_plan_counts_the_queues_it_leaves(tmp_path):
    store = writable_copy(CONSUMERS / "store", tmp_path / "store")
    args = ("offsets", "reset", store, "-g", "order_group", "-t", "CrashTopic", "--to-latest")
    rows = [json.loads(x) for x in _run(*args, "-f", "jsonl").stdout.splitlines()]
    table, wide = _run(*args), _run(*args, "--wide")
    kept = [r for r in rows if not r["changed"]]
    assert kept and len(kept) < len(rows)  # one queue is at its max already
    assert table.stdout.rstrip().endswith(f"{len(kept)} queue{'s' if len(kept) > 1 else ''} unchanged "
                                          f"(--wide or -f json lists each)")
    assert len(table.stdout.splitlines()) == 2 + len(rows) - len(kept) + 1  # header, rule, changed rows, the line
    assert len(wide.stdout.splitlines()) == 2 + len(rows) and "unchanged" not in wide.stdout


def test_salvage_report_wraps_a_deep_path_only_after_slashes_and_its_bar_counts_bytes_written(c1, tmp_path):
    """One salvage run a way: the report at 60 columns; JSON, quiet off a terminal; JSON with
    --progress forced, the plain line of bytes written on stderr."""
    store = writable_copy(E2 / "input" / "store", c1.parent / "e2" / "store")
    r = _run("salvage", store, "--out", tmp_path / "a.jsonl", width=60)
    quiet = _run("salvage", store, "--out", tmp_path / "b.jsonl", "-f", "json")
    asked = _run("salvage", store, "--out", tmp_path / "c.jsonl", "-f", "json", "--progress")
    doc = json.loads(quiet.stdout)
    assert r.exit_code == 3 and doc["messages_rejected"]
    assert _widest(r.stdout) <= 60
    _paths_whole(r.stdout, doc)
    assert "salvaging" not in quiet.stderr + r.stderr and "\x1b" not in quiet.stderr + asked.stderr
    assert f"salvaging: {human_size(doc['bytes_kept'])} written" in asked.stderr
    assert json.loads(asked.stdout) == doc | {"out_path": str(tmp_path / "c.jsonl")}  # the bar: stderr only


def test_a_path_with_spaces_is_shown_as_it_is(tmp_path):
    """A store under "x  y/my store": plans, findings and salvage's report show its paths with
    every space (the wrapper collapsed a run of them into one, naming a path that is not
    there) and never break a line at a space of theirs."""
    store = writable_copy(E2 / "input" / "store", tmp_path / "x  y" / "my store")
    for args in (("recover", store), ("verify", store), ("salvage", store, "--out")):
        out = ((tmp_path / "kept.jsonl",), (tmp_path / "again.jsonl",)) if args[0] == "salvage" else ((), ())
        doc = json.loads(_run(*args, *out[0], "-f", "json").stdout)
        text = _run(*args, *out[1], width=60).stdout
        assert f"{store}/" in _joined(text), args
        _paths_whole(text, doc)


def test_wrap_measures_each_piece_for_its_own_line():
    path = "/srv/rocketmq/store-of-the-broker-a/commitlog/00000000000000000000"
    for width, first, rest in ((40, "    ", "      "), (30, " 1. ", "    "), (26, "", "  ")):
        lines = wrap(f"at {path} position 5", width, first, rest)
        assert all(len(ln) <= width for ln in lines) and "…" not in "".join(lines)
        # read back, a break that is not after a "/" is a space: none falls inside the path
        assert _joined("\n".join(lines)) == f"{first.strip()} at {path} position 5".lstrip()
    name = "x" * 30  # a name longer than the line: the one hard cut, nothing lost
    assert "".join(ln.strip() for ln in wrap(f"/a/{name}", 20, "", "  ")) == f"/a/{name}"


# ---- progress: bytes, transient, stderr only ----

class _Bar:
    stopped = False

    def stop(self):
        self.stopped = True


def _drawn() -> tuple[progress.Progress, _Bar]:
    """A Progress as it is on a terminal (a rich bar drawn), without a terminal."""
    p = progress.Progress.__new__(progress.Progress)
    p._bar, p.done, p.total = _Bar(), 0, None
    bar = p._bar
    progress._LIVE.append(p)
    return p, bar


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_bar_is_gone_before_json_on_the_terminal_and_stays_beside_a_pipe():
    p, bar = _drawn()
    piped = Sink("jsonl", io.StringIO())
    piped.row({"a": 1})
    piped.close()
    assert not bar.stopped  # JSON into a pipe: the bar goes on showing the scan
    Sink("json", _Terminal()).row({"a": 1})  # held: nothing written yet
    assert not bar.stopped
    terminal = Sink("jsonl", _Terminal())
    terminal.row({"a": 1})
    terminal.close()
    assert bar.stopped and p not in progress._LIVE
    p, bar = _drawn()
    render_document({"a": 1}, "json", io.StringIO())  # a document comes after the work: its bar goes
    assert bar.stopped and not progress._LIVE


def test_append_and_redispatch_bars_count_bytes(tmp_path, capsys):
    from rmqtool.engine.append_flow import append_in_chunks
    from rmqtool.engine.producer import producer_message
    from rmqtool.engine.redispatch import build
    from rmqtool.engine.store import Store
    from rmqtool.store.commitlog_end import written_end
    from rmqtool.store.view import open_store

    s = Store.open(tmp_path / "new", writable=True, commitlog_size=64 * 1024, cq_size=400, index_slots=32,
                   index_entries=120)
    wrote = progress.Progress("appending")
    try:
        results = [r for chunk in append_in_chunks(s, iter([producer_message("T", b"x" * n, keys=f"k{n}")
                                                            for n in range(1, 300, 7)]), wrote.advance)
                   for r in chunk]
    finally:
        s.close()
    wrote.close()
    view = open_store(tmp_path / "new")
    end = written_end(view.segments, view.mapped_file_size)
    assert wrote.total is None and wrote.done == sum(r.wrote_bytes for r in results) == end
    assert f"appending: {human_size(end)} written" in capsys.readouterr().err  # off a terminal: plain, at the end
    read = progress.Progress("dispatching")
    built = build(view, tmp_path / "staged", progress=read)
    assert read.total == built.to_offset - built.from_offset == end and read.done == read.total


# ---- recover on a live store ----

def test_recover_plan_of_a_live_store_says_so_first(tmp_path):
    from rmqtool.engine.producer import producer_message
    from rmqtool.engine.store import Store

    s = Store.open(tmp_path / "store", writable=True, commitlog_size=32 * 1024, cq_size=400, index_slots=32,
                   index_entries=120)
    try:
        s.append(producer_message("LiveTopic", b"live", keys="k"))
        table = _run("recover", tmp_path / "store")
        as_json = _run("recover", tmp_path / "store", "-f", "json")
        applied = _run("recover", tmp_path / "store", "--apply")
    finally:
        s.close()
    # a path wrapped after a "/" continues on the next line: join it back without a space
    header = " ".join(re.sub(r"/\n\s*", "/", table.stdout.split(" 1. ")[0]).split())
    assert header.startswith(f"LIVE STORE: PID {os.getpid()} holds {tmp_path / 'store'}")
    assert "the abort file is the running broker's" in header and "--apply refuses a live store" in header
    assert _widest(table.stdout) <= 80 and "is live" not in table.stderr  # said once, in the plan
    assert "did not shut down cleanly" not in " ".join(table.stdout.split())  # the broker still runs
    doc = json.loads(as_json.stdout)
    assert "is live" in as_json.stderr and "live" not in json.dumps(list(doc))  # JSON as it was
    assert applied.exit_code == ExitCode.LOCKED and "lock" in applied.stderr  # the refusal unchanged


# ---- verify --columns ----

@pytest.fixture(scope="module")
def missing_middle():
    rows = [json.loads(x) for x in _run("verify", MISSING, "-f", "jsonl", "-j", 1).stdout.splitlines()]
    return rows, _run("verify", MISSING, "-j", 1, "--columns", "finding,severity,offset,message", width=120)


def test_verify_columns_keeps_grouping_and_order(missing_middle):
    rows, table = missing_middle
    assert table.exit_code == 3
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["finding", "severity", "offset"]
    heads = [ln.split() for ln in lines[2:] if not ln.startswith(" ")]
    groups = collections.Counter((r["finding"], r["severity"], r["path"], shape(r)) for r in rows
                                 if r["severity"] != "info")
    infos = {(r["finding"], shape(r)) for r in rows if r["severity"] == "info"}
    assert len(heads) == len(groups) + len(infos) < len(rows)  # floods grouped, an info ID one row
    ranks = [SEVERITY[h[1]] for h in heads]
    assert ranks == sorted(ranks)  # errors first, info last
    counts = [int(m.group(1)) for m in COUNTED.finditer(" ".join(table.stdout.split()))]
    assert sum(counts) + len(heads) - len(counts) == len(rows)
    assert _widest(table.stdout) <= 120


def test_verify_columns_names_the_valid_columns_on_a_typo():
    r = _run("verify", MISSING, "--columns", "finding,sevrity")
    assert r.exit_code == ExitCode.USAGE and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert "sevrity" in line and all(c.name in line for c in VIEWS["finding"])
