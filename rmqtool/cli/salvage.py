"""rmqtool salvage STORE --out FILE.jsonl | --to-store NEWDIR: every intact message, also
those recovery would drop, and what is lost for good.

Exit codes: 0 nothing is lost; 3 something is lost for good (the report says what).
"""
from __future__ import annotations

import contextlib
import dataclasses
import pathlib
from typing import Optional

import typer

from rmqtool.cli.commitlog_paths import commit_log_paths_option
from rmqtool.cli.common import OutputFormat, Written, boundary, closed_on_error, writer_output
from rmqtool.cli.params import examples
from rmqtool.cli.sizes import SizeOptions, size_options
from rmqtool.errors import ExitCode, UsageError


def register(app: typer.Typer) -> None:
    app.command("salvage", epilog=examples(
        "rmqtool salvage /data/store --out /backup/salvaged.jsonl",
        "rmqtool salvage /data/store --to-store /data/store-salvaged",
        "rmqtool append /data/other --from-jsonl /backup/salvaged.jsonl --keep-store-timestamp"))(salvage)


@boundary
@commit_log_paths_option("store")
@size_options
def salvage(
    store: pathlib.Path = typer.Argument(..., help="The store root directory (only read)."),
    out: Optional[pathlib.Path] = typer.Option(None, "--out", metavar="FILE.jsonl",
                                               help="Write the messages as dump rows (append --from-jsonl takes them); "
                                                    "- writes them to stdout and the report to stderr."),
    to_store: Optional[pathlib.Path] = typer.Option(None, "--to-store", metavar="NEWDIR",
                                                    help="Append the messages into a new store (original topics, "
                                                         "queues, keys, properties, store times and hosts)."),
    sizes: SizeOptions = SizeOptions(),  # --to-store: where the source shows no size (cli/sizes.py)
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="The report: table, jsonl or json."),
    progress: Optional[bool] = typer.Option(None, "--progress/--no-progress", help="A bar of the bytes of messages "
                                            "written, on stderr (default: when stderr is a terminal)."),
):
    """Find every intact message (also past where recovery cuts) and report what is lost for good.
    On a QMQ store: every record whose payload matches its CRC, with --out."""
    if _is_qmq(store):
        return _qmq_salvage(store, out, to_store, fmt)
    from rmqtool.engine.salvage_store import refuse_inner_batches, salvage_messages, source_sizes
    from rmqtool.report.progress import counted, progress_bar
    from rmqtool.report.salvage import show_salvage
    from rmqtool.store.output_path import refuse_output_in_store
    from rmqtool.store.view import open_store

    if (out is None) == (to_store is None):
        raise UsageError("give --out FILE.jsonl or --to-store NEWDIR")
    if to_store is None and dataclasses.replace(sizes, broker_config=None) != SizeOptions():  # (its paths: any time)
        raise UsageError("the size options size the store --to-store makes")
    view = open_store(store)  # the store opened once: the sizes, the simulation and the scan read this view
    to_stdout = out is not None and str(out) == "-"
    if not to_stdout:  # never among the files salvage reads (a broker may hold them)
        refuse_output_in_store(out or to_store, "--out" if out is not None else "--to-store", [view])
    if out is not None and not to_stdout and out.exists():
        raise UsageError("--out: the file exists (salvage never overwrites)", out)
    if to_store is not None and to_store.exists() and any(to_store.iterdir()):
        raise UsageError("--to-store: the directory exists and is not empty", to_store)
    if to_store is not None:
        refuse_inner_batches(view)
        written = source_sizes(view, sizes.given())  # before anything is written
    messages, report = salvage_messages(view)
    bar = progress_bar("salvaging", None, progress)
    messages = counted(messages, bar, lambda m: m.store_size)  # the kept records' bytes, as written
    with bar or contextlib.nullcontext():
        _write(messages, out, to_stdout, to_store, written if to_store is not None else None, report.reject)
    doc = report.to_json()
    doc["out_path"] = "<stdout>" if to_stdout else str(out or to_store)
    # the messages on stdout (--out -) are a reader's output; the report after a file or a store is made a writer's
    written = None if to_stdout else Written(f"the salvaged messages were written to {doc['out_path']}")
    with writer_output(written):
        show_salvage(doc, fmt.value, on_stderr=to_stdout)  # stdout holds the messages
    if report.lost_anything:
        raise typer.Exit(int(ExitCode.CORRUPT))


def _write(messages, out: Optional[pathlib.Path], to_stdout: bool, to_store: Optional[pathlib.Path], sizes,
           reject) -> None:
    """The salvaged messages as dump rows into --out (stdout for -), or appended into --to-store."""
    from rmqtool.engine.salvage_store import write_store
    from rmqtool.report.records import message_record
    from rmqtool.report.sink import Sink

    if out is not None:
        with (contextlib.nullcontext(None) if to_stdout else open(out, "x", encoding="utf-8")) as f:
            sink = Sink("jsonl", f)
            with closed_on_error(sink):  # the rows written before an error stay in the file
                sink.rows(message_record(m) for m in messages)
    else:
        write_store(messages, to_store, sizes, row_of=message_record, reject=reject)


def _is_qmq(store: pathlib.Path) -> bool:
    from rmqtool.store.family import QMQ, detect_family
    return detect_family(store) is QMQ


def _qmq_salvage(store: pathlib.Path, out: Optional[pathlib.Path], to_store, fmt: OutputFormat) -> None:
    """salvage on a QMQ store (recovery/qmq/salvage.py): the kept records as dump messagelog
    rows into --out; exit 3 when something is lost for good."""
    from rmqtool.recovery.qmq.salvage import salvage_qmq
    from rmqtool.report.qmq.records import message_log_row
    from rmqtool.report.qmq.salvage import qmq_salvage_table
    from rmqtool.report.salvage import show_salvage
    from rmqtool.report.sink import Sink
    from rmqtool.store.output_path import refuse_output_in_store
    from rmqtool.store.qmq.view import open_qmq_store

    if to_store is not None or out is None:
        raise UsageError("on a QMQ store salvage writes --out FILE.jsonl (--to-store makes RocketMQ stores)")
    root = open_qmq_store(store).root
    to_stdout = str(out) == "-"
    if not to_stdout:
        refuse_output_in_store(out, "--out", [root])
    if not to_stdout and out.exists():
        raise UsageError("--out: the file exists (salvage never overwrites)", out)
    result = salvage_qmq(root)
    with (contextlib.nullcontext(None) if to_stdout else open(out, "x", encoding="utf-8")) as f:
        sink = Sink("jsonl", f)
        with closed_on_error(sink):
            sink.rows(message_log_row(r) for r in result.kept)
    doc = result.to_json()
    doc["out_path"] = "<stdout>" if to_stdout else str(out)
    with writer_output(None if to_stdout else Written(f"the salvaged messages were written to {out}")):
        show_salvage(doc, fmt.value, on_stderr=to_stdout, table=qmq_salvage_table)
    if result.lost_anything:
        raise typer.Exit(int(ExitCode.CORRUPT))
