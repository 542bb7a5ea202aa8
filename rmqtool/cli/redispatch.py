"""rmqtool redispatch STORE: rebuild consume queues and index files from the commit log, as
the broker's dispatch builds them (--timer: the 5.x timer store, as its enqueue writes it for
the pending timer messages); plan first, --apply swaps them in with a backup.

Exit codes: 0 the rebuilt files equal the store's, or they were applied; 3 they differ (the
plan lists how); 5 a running process holds the store (--apply).
"""
from __future__ import annotations

import contextlib
import os
import pathlib
import shlex
from typing import List, Optional

import typer

from rmqtool.cli.commitlog_paths import commit_log_paths_option
from rmqtool.cli.common import OutputFormat, Written, boundary, change_made, writer_output
from rmqtool.cli.params import OFFSET_METAVAR, Semantics, check_semantics, complete_queue, complete_topic, examples
from rmqtool.cli.sizes import SizeOptions, size_options
from rmqtool.errors import ExitCode, UsageError
from rmqtool.report.progress import progress_bar


def register(app: typer.Typer) -> None:
    app.command("redispatch", epilog=examples(
        "rmqtool redispatch /data/store",
        "rmqtool redispatch /data/store --cq -t OrderTopic -q 3 --apply",
        "rmqtool redispatch /data/store --index --apply",
        "rmqtool redispatch /data/store --timer --apply",
        "rmqtool redispatch /data/store --cq --apply --broker-config /opt/rocketmq/conf/broker.conf",
        "rmqtool redispatch /data/store -f json | jq '.changes[] | select(.kind != \"same\")'"))(redispatch)


@boundary
@commit_log_paths_option("store")
@size_options
def redispatch(
    store: pathlib.Path = typer.Argument(..., help="The store root directory."),
    topic: List[str] = typer.Option([], "--topic", "-t", autocompletion=complete_topic,
                                    help="Only this topic (repeatable)."),
    queue: Optional[int] = typer.Option(None, "--queue", "-q", min=0, autocompletion=complete_queue,
                                        help="Only this queue id."),
    from_offset: Optional[int] = typer.Option(None, "--from-offset", min=0, metavar=OFFSET_METAVAR,
                                              help="Keep what lies before this commit log offset; rebuild the rest."),
    cq: bool = typer.Option(False, "--cq", help="Consume queues (default: consume queues and index; with "
                                                "-t or -q, the queues)."),
    index: bool = typer.Option(False, "--index", help="Index files (default: consume queues and index)."),
    timer: bool = typer.Option(False, "--timer", help="The timer log, wheel and timercheck, for the pending "
                                                      "timer messages (alone)."),
    skip_unknown_topics: bool = typer.Option(False, "--skip-unknown-topics",
                                             help="Leave out topics that config/topics.json does not have."),
    sizes: SizeOptions = SizeOptions(),  # --cq-size ... --assume-defaults (cli/sizes.py)
    semantics: Semantics = None,
    apply: bool = typer.Option(False, "--apply", help="Swap the rebuilt files in (default: only show the plan)."),
    backup_dir: Optional[pathlib.Path] = typer.Option(None, "--backup-dir", metavar="DIR",
                                                      help="--apply: where replaced files go (default: beside the "
                                                           "store, named by the time)."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, jsonl or json."),
    wide: bool = typer.Option(False, "--wide", help="Table: a line for every file, those already as built too."),
    progress: Optional[bool] = typer.Option(None, "--progress/--no-progress", help="A bar of the commit log bytes "
                                            "dispatched, on stderr (default: when stderr is a terminal)."),
):
    """Rebuild consume queues and index files from the commit log (files identical to the broker's),
    or with --timer the timer log, wheel and timercheck for the pending timer messages.

    Files are built in the sizes the store's files show; where nothing shows one, the plan
    says so and --apply refuses until it is given (or --assume-defaults)."""
    from rmqtool.engine.redispatch_apply import redispatch_store
    from rmqtool.report.plans import show_redispatch_plan
    from rmqtool.store.view import open_store

    if backup_dir is not None and not apply:
        raise UsageError("--backup-dir goes with --apply")
    view = open_store(store)  # the store opened once: the plan, the build and the compare read this view
    given = sizes.given()
    again_command = _command(view.root, topic, queue, from_offset, cq, index, skip_unknown_topics, given, semantics,
                             timer)
    if not cq and not index and not timer:  # both; a selection (-t, -q) only chooses queues: the index is whole
        cq, index = True, not (topic or queue is not None or skip_unknown_topics)
    with (progress_bar("dispatching", 0, progress) if not timer else None) or contextlib.nullcontext() as bar:
        run = redispatch_store(view, cq=cq, index=index, topics=tuple(topic), queue=queue,
                               skip_unknown_topics=skip_unknown_topics, from_offset=from_offset, given=given,
                               semantics=check_semantics(semantics), apply=apply, backup_dir=backup_dir,
                               command=again_command, timer=timer, progress=bar)
    written = Written(change_made("the rebuilt files were swapped in", run.doc.get("applied"))) if apply else None
    with writer_output(written):
        show_redispatch_plan(run.doc, fmt.value, run.sizes, wide=wide)
    if run.refusal is not None:
        raise run.refusal
    if run.differs and not apply:
        raise typer.Exit(int(ExitCode.CORRUPT))


def _command(root, topic, queue, from_offset, cq, index, skip_unknown_topics, given, semantics, timer=False) -> str:
    """This command line again (what finishes it when it is cut short)."""
    from rmqtool.cli.commitlog_paths import commit_log_path_words
    from rmqtool.cli.sizes import size_words

    words = ["rmqtool", "redispatch", os.path.abspath(root), *commit_log_path_words(root)]  # run from anywhere
    for t in topic:
        words += ["-t", t]
    for flag, value in (("-q", queue), ("--from-offset", from_offset), ("--semantics", semantics)):
        if value is not None:
            words += [flag, str(value)]
    words += [flag for flag, on in (("--cq", cq), ("--index", index), ("--skip-unknown-topics", skip_unknown_topics),
                                    ("--timer", timer)) if on]
    return shlex.join(words + size_words(given) + ["--apply"])
