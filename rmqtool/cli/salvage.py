"""rmqtool salvage STORE --out FILE.jsonl | --to-store NEWDIR: every intact message, also
those recovery would drop, and what is lost for good.

Exit codes: 0 nothing is lost; 3 something is lost for good (the report says what).
"""
from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import sys
from typing import Optional

import typer

from rmqtool.cli.common import OutputFormat, boundary
from rmqtool.cli.params import examples
from rmqtool.errors import ExitCode, UsageError


def register(app: typer.Typer) -> None:
    app.command("salvage", epilog=examples(
        "rmqtool salvage /data/store --out /backup/salvaged.jsonl",
        "rmqtool salvage /data/store --to-store /data/store-salvaged",
        "rmqtool append /data/other --from-jsonl /backup/salvaged.jsonl --keep-store-timestamp"))(salvage)


@boundary
def salvage(
    store: pathlib.Path = typer.Argument(..., help="The store root directory (only read)."),
    out: Optional[pathlib.Path] = typer.Option(None, "--out", metavar="FILE.jsonl",
                                               help="Write the messages as dump rows (append --from-jsonl takes them); "
                                                    "- writes them to stdout and the report to stderr."),
    to_store: Optional[pathlib.Path] = typer.Option(None, "--to-store", metavar="NEWDIR",
                                                    help="Append the messages into a new store (original topics, "
                                                         "queues, keys, properties, store times and hosts)."),
    index_slots: Optional[int] = typer.Option(None, "--index-slots", min=1,
                                              help="--to-store: hash slots per index file, when the source's "
                                                   "index files cannot tell."),
    index_entries: Optional[int] = typer.Option(None, "--index-entries", min=2,
                                                help="--to-store: entries per index file, when the source's "
                                                     "index files cannot tell."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="The report: table, jsonl or json."),
):
    """Find every intact message (also past where recovery cuts) and report what is lost for good."""
    from rmqtool.recovery.outcome import Settings, simulate
    from rmqtool.recovery.salvage import salvage as run
    from rmqtool.report.records import message_record
    from rmqtool.report.sink import render_document
    from rmqtool.store.detect import require_store

    if (out is None) == (to_store is None):
        raise UsageError("give --out FILE.jsonl or --to-store NEWDIR")
    if to_store is None and (index_slots or index_entries):
        raise UsageError("--index-slots and --index-entries size the store --to-store makes")
    root = require_store(store)
    to_stdout = out is not None and str(out) == "-"
    if out is not None and not to_stdout and out.exists():
        raise UsageError("--out: the file exists (salvage never overwrites)", out)
    if to_store is not None and to_store.exists() and any(to_store.iterdir()):
        raise UsageError("--to-store: the directory exists and is not empty", to_store)
    if to_store is not None:
        _refuse_inner_batches(root)
        sizes = _sizes(root, index_slots, index_entries)  # before anything is written
    end = simulate(root, Settings(), list_lost=False)
    messages, report = run(root, end.recovered_end if end.loadable else None)
    if out is not None:
        import orjson
        with (contextlib.nullcontext(sys.stdout.buffer) if to_stdout else open(out, "xb")) as f:
            for m in messages:
                f.write(orjson.dumps(message_record(m)) + b"\n")
            f.flush()
    else:
        _to_store(messages, to_store, sizes)
    doc = report.to_json()
    doc["out_path"] = "<stdout>" if to_stdout else str(out or to_store)
    stream = sys.stderr if to_stdout else sys.stdout  # stdout holds the messages
    if fmt.value == "table":
        _table(doc, stream)
    else:
        render_document(doc, fmt.value, stream, title="salvage")
    if report.lost_anything:
        raise typer.Exit(int(ExitCode.CORRUPT))


def _refuse_inner_batches(source: pathlib.Path) -> None:
    """The engine hands out one queue offset a record and keeps INNER_BASE as stored: 5.x inner
    batches (a BatchCQ topic's records) would land misnumbered in plain consume queues."""
    from rmqtool.store.config import batch_topics

    topics = sorted(batch_topics(source))
    if topics:
        raise UsageError(f"--to-store cannot write 5.x inner batch (BatchCQ) topics yet ({', '.join(topics)}): "
                         "use --out FILE.jsonl", source)


def _sizes(source: pathlib.Path, index_slots: int | None, index_entries: int | None) -> dict:
    """The source store's file sizes, for the new one (index files of two sizes: the newest)."""
    from rmqtool.engine.store_sizes import consume_queue_file_sizes, index_sizes
    from rmqtool.store.paths import StorePaths
    from rmqtool.store.segments import discover

    paths = StorePaths(source)
    cq_sizes = consume_queue_file_sizes(paths.consumequeue)
    slots, entries = index_sizes(paths.index, index_slots, index_entries, newest=True)
    return dict(commitlog_size=discover(paths.commitlog).mapped_file_size,
                cq_size=max(cq_sizes) if cq_sizes else None, index_slots=slots, index_entries=entries)


def _to_store(messages, target: pathlib.Path, sizes: dict) -> None:
    """Through the engine, as append --from-jsonl --keep-store-timestamp --keep-store-host does,
    with the source store's file sizes."""
    from rmqtool.engine.rows import message_from_row
    from rmqtool.engine.store import Store
    from rmqtool.recovery.intent import step
    from rmqtool.recovery.salvage import is_inner_batch
    from rmqtool.report.records import message_record

    # written beside NEWDIR and renamed to it once closed: a run cut short leaves no NEWDIR,
    # only the partial directory, which the next run removes and writes again
    partial = target.with_name(target.name + PARTIAL_SUFFIX)
    if partial.exists():
        shutil.rmtree(partial)
    with Store.open(partial, writable=True, **sizes) as s:
        batch = []
        for m in messages:
            if is_inner_batch(m):  # one the store's batch topics did not name
                raise UsageError(f"--to-store cannot write 5.x inner batch records yet ({m.topic}/{m.queue_id}); "
                                 f"{target} holds the messages before it: use --out FILE.jsonl", m.path, m.position)
            batch.append(message_from_row(message_record(m), keep_store_timestamp=True, keep_store_host=True))
            if len(batch) >= 1024:
                step()
                s.append_many(batch)
                batch = []
        if batch:
            step()
            s.append_many(batch)
    step()
    if target.exists():
        target.rmdir()  # checked empty before the salvage began
    os.rename(partial, target)


PARTIAL_SUFFIX = ".salvage-partial"


def _table(doc: dict, stream) -> None:
    w = stream.write
    w(f"kept {doc['messages_kept']} messages ({doc['bytes_kept']} bytes) into {doc['out_path']}\n")
    if doc["recovered_end"] is not None:
        w(f"{doc['kept_past_recovered_end']} of them lie past {doc['recovered_end']}, where the broker's "
          f"recovery cuts the log\n")
    for r in doc["damaged_regions"]:
        w(f"unreadable: {r['bytes']} bytes at {r['file']} position {r['file_position']} ({r['reason']})\n")
    for r in doc["messages_rejected"]:
        w(f"rejected: {r['topic']}/{r['queue_id']} queue offset {r['queue_offset']} at {r['file']} position "
          f"{r['file_position']} ({r['reason']})\n")
    for key, gaps in doc["missing_queue_offsets"].items():
        text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in gaps[:20])
        more = f" and {len(gaps) - 20} more ranges" if len(gaps) > 20 else ""
        w(f"missing from {key}: queue offsets {text}{more}\n")
    if not doc["lost_anything"]:
        w("nothing is lost\n")
