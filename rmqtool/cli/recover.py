"""rmqtool recover STORE: what the broker's next start does to the store, as a numbered plan;
with --apply, done offline with a backup of every byte it changes (rmqtool undo puts them back).

Exit codes: 0 nothing to recover (or applied); 3 the plan changes or drops data, or the
broker would not load the store (nothing is written then); 5 a running process holds the
store's lock (--apply).
"""
from __future__ import annotations

import collections
import os
import pathlib
import shlex
import shutil
import sys
import textwrap
from typing import Optional

import typer

from rmqtool.cli.common import OutputFormat, boundary
from rmqtool.cli.params import Semantics, check_semantics, examples
from rmqtool.cli.sizes import AssumeDefaults, BatchCqSize, BrokerConfigFile, CqSize, IndexEntries, IndexSlots
from rmqtool.errors import ExitCode, RepairUnfinished, UsageError


def register(app: typer.Typer) -> None:
    app.command("recover", epilog=examples(
        "rmqtool recover /data/store",
        "rmqtool recover /data/store -f json | jq '.lost_messages | length'",
        "rmqtool recover /data/store --apply",
        "rmqtool recover /data/store --to /data/store-repaired --apply",
        "rmqtool recover /data/store --from-checkpoint --semantics 5.3",
        "rmqtool recover /data/store --apply --broker-config /opt/rocketmq/conf/broker.conf"))(recover)


@boundary
def recover(
    store: pathlib.Path = typer.Argument(..., help="The store root directory."),
    apply: bool = typer.Option(False, "--apply", help="Carry the plan out (default: only show it)."),
    backup_dir: Optional[pathlib.Path] = typer.Option(None, "--backup-dir", metavar="DIR",
                                                      help="--apply: where the changed bytes go (default: beside "
                                                           "the store, named by the time)."),
    to: Optional[pathlib.Path] = typer.Option(None, "--to", metavar="NEWDIR", help="--apply: write a repaired copy "
                                                                                 "there; the store is left as it is."),
    from_checkpoint: bool = typer.Option(False, "--from-checkpoint", help="Abnormal (checkpoint-driven) recovery "
                                                                          "even without the abort file."),
    semantics: Semantics = None,
    verify_prop_crc: bool = typer.Option(False, "--verify-prop-crc", help="5.3 forceVerifyPropCRC: check the "
                                                                          "__CRC32# value instead of the body CRC."),
    no_check_crc: bool = typer.Option(False, "--no-check-crc", help="checkCRCOnRecover=false: no CRC check."),
    keep_index: bool = typer.Option(False, "--keep-index", help="Keep the index files an abnormal start destroys."),
    cq_size: CqSize = None,
    batch_cq_size: BatchCqSize = None,
    index_slots: IndexSlots = None,
    index_entries: IndexEntries = None,
    broker_config: BrokerConfigFile = None,
    assume_defaults: AssumeDefaults = False,
    force: bool = typer.Option(False, "--force", help="--apply in place to a store with a missing middle commit log "
                                                      "file (the broker loads it; without --force only into --to)."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, jsonl or json."),
):
    """Plan (and with --apply do) what the broker's restart recovery does to a store.

    The plan says where recovery starts and why, where the commit log is cut, which files
    go, each queue's offsets afterwards, every message lost, and the sizes files are
    written with when the store's files do not show them (--apply refuses a size that can
    only be the broker's default until it is given, or --assume-defaults).
    """
    from rmqtool.cli.sizes import given_sizes, size_words
    from rmqtool.engine.store import unknown_sizes
    from rmqtool.engine.store_sizes import store_sizes
    from rmqtool.recovery.commitlog_walk import V5
    from rmqtool.recovery.outcome import Settings
    from rmqtool.report.sink import render_document
    from rmqtool.families import tools_at

    check_semantics(semantics)
    if verify_prop_crc and semantics not in (None, V5):
        raise UsageError("--verify-prop-crc is a 5.3 setting (forceVerifyPropCRC)")
    if (to or backup_dir or force) and not apply:
        raise UsageError("--to, --backup-dir and --force go with --apply")
    tools = tools_at(store)  # the store's family brings its recovery model
    view = tools.open_view(store)  # the store opened once: the plan reads this view
    root = view.root
    given = given_sizes(cq_size=cq_size, batch_cq_size=batch_cq_size, index_slots=index_slots,
                        index_entries=index_entries, broker_config=broker_config, assume_defaults=assume_defaults)
    settings = Settings(semantics=semantics, from_checkpoint=from_checkpoint, check_crc=not no_check_crc,
                        verify_prop_crc=verify_prop_crc)
    missing_file_ok = to is not None or force  # a new directory is the broker's load of the store, the input kept
    plan = tools.plan_recovery(view, settings=settings, keep_index=keep_index, missing_file_ok=missing_file_ok)
    doc = plan.to_json()
    if apply and plan.semantics_undecided:
        raise UsageError(f"--apply needs --semantics: {plan.semantics_undecided}", root)
    sizes = None
    if plan.loadable:  # an unloadable store's files may disagree in size: the plan says why
        sizes = store_sizes(root, given)
        unknown = unknown_sizes(root, sizes, plan)
        doc["sizes"], doc["sizes_unknown"] = sizes.to_json(), unknown
    unfinished = view.unfinished
    if not apply:
        _show(doc, plan, fmt.value, render_document, sizes=sizes)
        # messages the broker no longer serves are damage found, even when the start changes nothing
        if not plan.loadable or not plan.is_empty or doc["lost_messages"] or unfinished is not None:
            raise typer.Exit(int(ExitCode.CORRUPT))
        return
    if to is not None and unfinished is not None:  # a copy of a half-changed store is no store to repair
        raise RepairUnfinished(f"not copied: an interrupted {unfinished.operation} left this store half changed: "
                               f"`{unfinished.finish}` finishes it, `{unfinished.undo}` undoes it", root)
    if plan.refusal:
        _show(doc, plan, fmt.value, render_document, sizes=sizes)
        sys.stderr.write(f"rmqtool: error: {root}: not recovered: {plan.refusal}\n")
        raise typer.Exit(int(ExitCode.CORRUPT))
    if sizes is not None and sizes.refusal(unknown):
        _show(doc, plan, fmt.value, render_document, sizes=sizes)
        raise UsageError(f"not recovered: {sizes.refusal(unknown)}", root)
    target = root
    if to is not None:
        target = _copy_store(root, to)
    if plan.changes_nothing and unfinished is None:  # not even the lock, the abort marker or the checkpoint
        doc["applied"] = {"store_path": str(target), "backup_dir": None, "manifest": None}
        _show(doc, plan, fmt.value, render_document, applied=True)
        return
    words = ["rmqtool", "recover", str(target)] + (["--semantics", semantics] if semantics else []) + [
        flag for flag, on in (("--from-checkpoint", from_checkpoint), ("--verify-prop-crc", verify_prop_crc),
                              ("--no-check-crc", no_check_crc), ("--keep-index", keep_index),
                              ("--force", missing_file_ok)) if on] + size_words(given)
    applied = _apply(target, settings, keep_index, backup_dir, given, missing_file_ok,
                     shlex.join(words + ["--apply"]))
    doc["applied"] = {"store_path": str(target), **(applied.to_json() if applied is not None else
                                               {"backup_dir": None, "manifest": None})}
    _show(doc, plan, fmt.value, render_document, applied=True, sizes=sizes)


def _apply(target: pathlib.Path, settings, keep_index: bool, backup_dir, given, missing_file_ok: bool,
           command: str):
    """The engine's writable open carries the plan out and dispatches again, in the sizes
    ``given`` where the files do not show them; its close writes the checkpoint and removes
    the abort file. An earlier run cut short is rolled back first (its backup's path is used
    again), so running the command again finishes it."""
    from rmqtool.engine.store import Store
    from rmqtool.recovery.undo import roll_back_unfinished
    again = roll_back_unfinished(target, "recover")
    if backup_dir is None:
        backup_dir = again
    return Store.recover(target, backup_dir=backup_dir, recovery=settings, keep_index=keep_index, sizes=given,
                         missing_file_ok=missing_file_ok, command=command)


def _copy_store(root: pathlib.Path, to: pathlib.Path) -> pathlib.Path:
    if to.exists() and (not to.is_dir() or any(to.iterdir())):
        raise UsageError("--to: the directory exists and is not empty", to)
    if to.exists():
        to.rmdir()
    shutil.copytree(root, to, ignore=shutil.ignore_patterns("lock"))
    for p in [to, *to.rglob("*")]:
        os.chmod(p, os.stat(p).st_mode | 0o200)  # the copy is ours to repair
    return to


def _show(doc: dict, plan, fmt: str, render_document, applied: bool = False, sizes=None) -> None:
    from rmqtool.cli.sizes import size_lines

    if fmt != "table":
        render_document(doc, fmt, title="recovery plan")
        return
    width = min(shutil.get_terminal_size((80, 24)).columns, 100)
    lines = _plan_lines(doc, plan)
    if sizes is not None:
        lines += size_lines(sizes, doc["sizes_unknown"])
    out = sys.stdout
    for n, line in enumerate(lines, 1):
        out.write(textwrap.fill(line, width=width, initial_indent=f"{n:>2}. ", subsequent_indent="    ") + "\n")
    if applied:
        a = doc["applied"]
        if not a.get("backup_dir") and plan.changes_nothing:
            out.write(f"nothing to change: nothing written to {a['store_path']}" +
                      (" (a copy of the store as it is)" if a["store_path"] != doc["store_path"] else "") + "\n")
            return
        out.write(f"applied to {a['store_path']}" + (f"; backup in {a['backup_dir']} (rmqtool undo "
                                                f"{a['backup_dir']} puts it back)" if a.get("backup_dir") else "")
                  + "\n")


def _index_line(ix: dict) -> str:
    """What dispatch puts into the index at the start, duplicates and losses said."""
    line = f"dispatch puts {ix['entries_put']} index entries" + (f" into {ix['appended_to']}" if ix["appended_to"]
                                                                else "")
    if ix["entries_repeated"]:
        line += (f"; {ix['entries_repeated']} of them repeat keys a kept index file holds for the last message it "
                 f"indexed (buildIndex skips only offsets below a file's endPhyOffset: the broker does the same)")
    if ix["entries_lost"]:
        line += f"; {ix['entries_lost']} entries of the destroyed files are not put back (their messages lie " \
                f"before where dispatch starts)"
    return line


def _plan_lines(doc: dict, plan) -> list[str]:
    cl = doc.get("commit_log", {})
    rules = doc["semantics"] if doc.get("semantics_known", True) else f"{doc['semantics']} (not known)"
    lines = [f"{doc['mode']} recovery ({doc['mode_reason']}); broker rules {rules}: {doc['semantics_reason']}"]
    if doc.get("semantics_undecided"):
        lines.append(f"--apply waits for --semantics: {doc['semantics_undecided']}")
    if not doc["loadable"]:
        lines.append(f"the broker would not load this store: {doc['reason']}")
        if doc.get("advice"):
            lines.append(f"what to do: {doc['advice']}")
        return lines
    lines.append(f"recovery starts in {doc['start_file']}: {doc['start_reason']}")
    if doc.get("apply_refused"):
        lines.append(f"--apply refuses this store: {doc['apply_refused']}")
    if cl["recovered_end"] < cl["written_end"]:
        lines.append(f"the commit log is cut at its recovered end {cl['recovered_end']} (its written end is "
                     f"{cl['written_end']}; the walk stopped: {cl['stopped_by']})")
    elif any(m["reason"] == "log cut" for m in doc["lost_messages"]):
        # a torn last record: the written end is before it, the loss is after
        lines.append(f"the commit log ends at {cl['recovered_end']} (recovered end = written end), where the walk "
                     f"stopped: {cl['stopped_by']}")
    else:
        lines.append(f"the commit log keeps every record written: its recovered end is its written end, "
                     f"{cl['recovered_end']}")
    for a in plan.actions:
        verb = "delete" if a.kind == "delete" else f"zero bytes [{a.start}, {a.end}) of"
        lines.append(f"{verb} {a.path} ({a.finding}: {a.message})")
    ix = doc.get("index_rebuild") or {}
    for path in doc["index_files_destroyed"]:
        if path not in doc["files_deleted"]:
            lines.append(f"keep {path} (" + ("dispatch builds it again as it is" if ix.get("rebuilt_as_is") else
                                             "--keep-index; the broker would destroy it") + ")")
    if ix.get("entries_put") and (doc["index_files_destroyed"] or ix.get("appended_to")):
        lines.append(_index_line(ix))
    if doc.get("batch_topics"):
        lines.append(f"batch consume queue topics: {', '.join(doc['batch_topics'])} ({doc['batch_topics_reason']})")
    for name, q in doc["queues"].items():
        kind = "batch queue" if name.rsplit("/", 1)[0] in doc.get("batch_topics", ()) else "queue"
        lines.append(f"{kind} {name}: offsets [{q['min_offset']}, {q['max_offset']}) after recovery")
    lost = doc["lost_messages"]
    if lost:
        counts = collections.Counter(m["reason"] for m in lost)
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
        lines.append(f"{len(lost)} messages lost: the broker will no longer serve them ({why}; rmqtool salvage "
                     f"keeps those still readable, rmqtool redispatch rebuilds lost units from the commit log):")
        for m in lost[:50]:
            lines.append(f"lost ({m['reason']}): offset {m['commit_log_offset']} {m['topic']}/{m['queue_id']} queue "
                         f"offset {m['queue_offset']} keys {' '.join(m['keys']) or '-'} stored "
                         f"{m['store_timestamp'] or 'unknown'}")
        if len(lost) > 50:
            lines.append(f"... and {len(lost) - 50} more (--format json lists them all)")
    else:
        lines.append("no message is lost that the files show (rmqtool verify checks every message against its "
                     "queue)")
    lines += [f"note: {n}" for n in doc.get("notes", ())]
    lines.append(f"dispatch to consume queues and index starts again at {doc['redispatch_from']}: "
                 f"{doc['redispatch_reason']}")
    if plan.is_empty and lost:  # what the queues lost is lost already: the start changes nothing about it
        lines.append(f"nothing to recover: the start changes no file, but the {len(lost)} messages above stay "
                     f"lost until their queues are rebuilt (rmqtool redispatch)")
    elif plan.is_empty:
        lines.append("nothing to recover: the store is as a clean shutdown leaves it")
    return lines
