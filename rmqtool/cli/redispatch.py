"""rmqtool redispatch STORE: rebuild consume queues and index files from the commit log, as
the broker's dispatch builds them; plan first, --apply swaps them in with a backup.

Exit codes: 0 the rebuilt files equal the store's, or they were applied; 3 they differ (the
plan lists how); 5 a running process holds the store (--apply).
"""
from __future__ import annotations

import contextlib
import pathlib
import shlex
import shutil
import sys
import tempfile
import textwrap
from typing import List, Optional

import typer

from rmqtool.cli.common import OutputFormat, boundary
from rmqtool.cli.params import OFFSET_METAVAR, Semantics, check_semantics, complete_queue, complete_topic, examples
from rmqtool.cli.sizes import AssumeDefaults, BatchCqSize, BrokerConfigFile, CqSize, IndexEntries, IndexSlots
from rmqtool.errors import ExitCode, RecoveryNeeded, UsageError


def register(app: typer.Typer) -> None:
    app.command("redispatch", epilog=examples(
        "rmqtool redispatch /data/store",
        "rmqtool redispatch /data/store --cq -t OrderTopic -q 3 --apply",
        "rmqtool redispatch /data/store --index --apply",
        "rmqtool redispatch /data/store --cq --apply --broker-config /opt/rocketmq/conf/broker.conf",
        "rmqtool redispatch /data/store -f json | jq '.changes[] | select(.kind != \"same\")'"))(redispatch)


@boundary
def redispatch(
    store: pathlib.Path = typer.Argument(..., help="The store root directory."),
    topic: List[str] = typer.Option([], "--topic", "-t", autocompletion=complete_topic,
                                    help="Only this topic (repeatable)."),
    queue: Optional[int] = typer.Option(None, "--queue", "-q", min=0, autocompletion=complete_queue,
                                        help="Only this queue id."),
    from_offset: Optional[int] = typer.Option(None, "--from-offset", min=0, metavar=OFFSET_METAVAR,
                                              help="Keep what lies before this commit log offset; rebuild the rest."),
    cq: bool = typer.Option(False, "--cq", help="Consume queues (default: consume queues and index)."),
    index: bool = typer.Option(False, "--index", help="Index files (default: consume queues and index)."),
    skip_unknown_topics: bool = typer.Option(False, "--skip-unknown-topics",
                                             help="Leave out topics that config/topics.json does not have."),
    cq_size: CqSize = None,
    batch_cq_size: BatchCqSize = None,
    index_slots: IndexSlots = None,
    index_entries: IndexEntries = None,
    broker_config: BrokerConfigFile = None,
    assume_defaults: AssumeDefaults = False,
    semantics: Semantics = None,
    apply: bool = typer.Option(False, "--apply", help="Swap the rebuilt files in (default: only show the plan)."),
    backup_dir: Optional[pathlib.Path] = typer.Option(None, "--backup-dir", metavar="DIR",
                                                      help="--apply: where replaced files go (default: beside the "
                                                           "store, named by the time)."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, jsonl or json."),
):
    """Rebuild consume queues and index files from the commit log (files identical to the broker's).

    Files are built in the sizes the store's files show; where nothing shows one, the plan
    says so and --apply refuses until it is given (or --assume-defaults)."""
    from rmqtool.cli.sizes import given_sizes
    from rmqtool.engine.redispatch import Selection, build, compare
    from rmqtool.recovery.apply import STAGING_DIR, apply_file_changes, default_backup_dir
    from rmqtool.recovery.undo import roll_back_unfinished
    from rmqtool.recovery.outcome import Settings
    from rmqtool.recovery.plan import plan_recovery
    from rmqtool.report.sink import render_document
    from rmqtool.store.config import known_topics
    from rmqtool.store.detect import require_store
    from rmqtool.store.paths import StorePaths

    if backup_dir is not None and not apply:
        raise UsageError("--backup-dir goes with --apply")
    root = require_store(store)
    given = given_sizes(cq_size=cq_size, batch_cq_size=batch_cq_size, index_slots=index_slots,
                        index_entries=index_entries, broker_config=broker_config, assume_defaults=assume_defaults)
    again_command = _command(root, topic, queue, from_offset, cq, index, skip_unknown_topics, given, semantics)
    if not cq and not index:
        cq = index = True
    again = roll_back_unfinished(root, "redispatch") if apply else None  # a run cut short: from the start
    recovery = plan_recovery(root, settings=Settings(semantics=check_semantics(semantics)))
    log_dir = StorePaths(root).commitlog
    cut = [f for f in recovery.findings if f.path and pathlib.Path(f.path).parent == log_dir]
    if recovery.semantics_undecided:
        raise UsageError(f"the store's end depends on the broker version: {recovery.semantics_undecided}", root)
    if recovery.refusal or cut:  # the log's end is not settled: dispatching would build on what recovery cuts
        why = recovery.refusal or f"{cut[0].id}: {cut[0].message}"
        # the code append gives the same store (RecoveryNeeded, 3): not a usage error
        raise RecoveryNeeded(f"the store needs recovery first ({why}); run rmqtool recover", root)
    known = None
    if skip_unknown_topics:
        known = known_topics(StorePaths(root).config)
        if known is None:
            raise UsageError("--skip-unknown-topics: config/topics.json (or its .bak) cannot be read", root)
    selection = Selection(tuple(topic), queue, frozenset(known) if known is not None else None)
    if apply:  # staged inside the backup, outside every directory the broker loads
        backup = backup_dir or again or default_backup_dir(root)
        made = not backup.exists()
        if backup.exists() and (not backup.is_dir() or any(backup.iterdir())):
            raise UsageError("the backup directory exists and is not empty", backup)
        staging = contextlib.nullcontext(str(backup / STAGING_DIR))
    else:
        staging = tempfile.TemporaryDirectory(prefix="rmqtool-redispatch-")
    with staging as tmp:
        try:
            built = build(root, pathlib.Path(tmp) / "built", cq=cq, index=index, selection=selection,
                          from_offset=from_offset, sizes=given)
        except BaseException:
            if apply:  # nothing was changed: the staging goes, and the backup directory if made here
                shutil.rmtree(backup if made else backup / STAGING_DIR, ignore_errors=True)
            raise
        changes = compare(root, built, cq=cq, index=index, selection=selection)
        doc = {"store_path": str(root), "from_offset": built.from_offset, "to_offset": built.to_offset,
               "records_dispatched": built.records, "consume_queue_file_size": built.cq_size,
               "index_geometry": list(built.index_geometry) if built.index_geometry else None,
               "consume_queues": cq, "index": index,
               "sizes": built.sizes.to_json(), "sizes_unknown": built.unknown_sizes,
               "changes": [{"kind": c.kind, "file": c.path, "units": c.units} for c in changes],
               "counts": {k: sum(1 for c in changes if c.kind == k) for k in ("create", "replace", "delete", "same")}}
        differs = any(c.kind != "same" for c in changes)
        refused = built.sizes.refusal(built.unknown_sizes) if apply and differs else None
        if apply and (refused or not differs):  # nothing is swapped in: no staging, no backup either
            shutil.rmtree(backup / STAGING_DIR, ignore_errors=True)
            if made:
                shutil.rmtree(backup, ignore_errors=True)
        if refused:
            _show(doc, fmt.value, render_document, built.sizes)
            raise UsageError(f"not applied: {refused}", root)
        if apply and differs:
            todo = [(c.kind, c.path, c.staged) for c in changes if c.kind != "same"]
            applied = apply_file_changes(root, todo, backup, doc,
                                         command=again_command)
            doc["applied"] = {"backup_dir": str(applied.backup_dir), "manifest": str(applied.manifest)}
    _show(doc, fmt.value, render_document, built.sizes)
    if differs and not apply:
        raise typer.Exit(int(ExitCode.CORRUPT))


def _command(root, topic, queue, from_offset, cq, index, skip_unknown_topics, given, semantics) -> str:
    """This command line again (what finishes it when it is cut short)."""
    from rmqtool.cli.sizes import size_words

    words = ["rmqtool", "redispatch", str(root)]
    for t in topic:
        words += ["-t", t]
    for flag, value in (("-q", queue), ("--from-offset", from_offset), ("--semantics", semantics)):
        if value is not None:
            words += [flag, str(value)]
    words += [flag for flag, on in (("--cq", cq), ("--index", index), ("--skip-unknown-topics", skip_unknown_topics))
              if on]
    return shlex.join(words + size_words(given) + ["--apply"])


def _show(doc: dict, fmt: str, render_document, sizes) -> None:
    from rmqtool.cli.sizes import size_lines

    if fmt != "table":
        render_document(doc, fmt, title="redispatch plan")
        return
    width = min(shutil.get_terminal_size((80, 24)).columns, 100)
    what = " and ".join(w for w, on in (("consume queues", doc["consume_queues"]), ("index", doc["index"])) if on)
    lines = [f"rebuild {what} from commit log offsets [{doc['from_offset']}, {doc['to_offset']}): "
             f"{doc['records_dispatched']} records dispatched"]
    for c in doc["changes"]:
        if c["kind"] != "same":
            units = f" ({c['units']} units)" if c["units"] is not None else ""
            lines.append(f"{c['kind']} {c['file']}{units}")
    n = doc["counts"]
    lines.append(f"{n['create']} files created, {n['replace']} replaced, {n['delete']} deleted, "
                 f"{n['same']} already as built")
    lines += size_lines(sizes, doc["sizes_unknown"])
    if "applied" in doc:
        lines.append(f"applied; backup in {doc['applied']['backup_dir']} (rmqtool undo puts it back)")
    for i, line in enumerate(lines, 1):
        sys.stdout.write(textwrap.fill(line, width=width, initial_indent=f"{i:>2}. ", subsequent_indent="    ") + "\n")
