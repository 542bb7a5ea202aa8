"""rmqtool recover STORE: what the broker's next start does to the store, as a numbered plan;
with --apply, done offline with a backup of every byte it changes (rmqtool undo puts them back).

Exit codes: 0 nothing to recover (or applied); 3 the plan changes or drops data, or the
broker would not load the store (nothing is written then); 5 a running process holds the
store's lock (--apply).
"""
from __future__ import annotations

import os
import pathlib
import shlex
import shutil
import sys
import textwrap
from typing import Optional

import typer

from rmqtool.cli.common import OutputFormat, boundary
from rmqtool.cli.params import examples
from rmqtool.errors import ExitCode, RepairUnfinished, UsageError


def register(app: typer.Typer) -> None:
    app.command("recover", epilog=examples(
        "rmqtool recover /data/store",
        "rmqtool recover /data/store -f json | jq '.lost_messages | length'",
        "rmqtool recover /data/store --apply",
        "rmqtool recover /data/store --to /data/store-repaired --apply",
        "rmqtool recover /data/store --from-checkpoint --semantics 5.3"))(recover)


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
    semantics: Optional[str] = typer.Option(None, "--semantics", metavar="4.9|5.3",
                                            help="The broker version's rules (default: detected from the store)."),
    verify_prop_crc: bool = typer.Option(False, "--verify-prop-crc", help="5.3 forceVerifyPropCRC: check the "
                                                                          "__CRC32# value instead of the body CRC."),
    no_check_crc: bool = typer.Option(False, "--no-check-crc", help="checkCRCOnRecover=false: no CRC check."),
    keep_index: bool = typer.Option(False, "--keep-index", help="Keep the index files an abnormal start destroys."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, jsonl or json."),
):
    """Plan (and with --apply do) what the broker's restart recovery does to a store.

    The plan says where recovery starts and why, where the commit log is cut, which files
    go, each queue's offsets afterwards, and every message lost.
    """
    from rmqtool.recovery.commitlog_walk import SEMANTICS, V5
    from rmqtool.recovery.outcome import Settings
    from rmqtool.recovery.plan import plan_recovery
    from rmqtool.report.sink import render_document
    from rmqtool.store.detect import require_store
    from rmqtool.store.unfinished import read_unfinished

    if semantics is not None and semantics not in SEMANTICS:
        raise UsageError(f"--semantics takes 4.9 or 5.3, not {semantics!r}")
    if verify_prop_crc and semantics not in (None, V5):
        raise UsageError("--verify-prop-crc is a 5.3 setting (forceVerifyPropCRC)")
    if (to or backup_dir) and not apply:
        raise UsageError("--to and --backup-dir go with --apply")
    root = require_store(store)
    settings = Settings(semantics=V5 if verify_prop_crc and semantics is None else semantics,
                        from_checkpoint=from_checkpoint, check_crc=not no_check_crc,
                        verify_prop_crc=verify_prop_crc)
    plan = plan_recovery(root, settings=settings, keep_index=keep_index)
    doc = plan.to_json()
    unfinished = read_unfinished(root)
    if not apply:
        _show(doc, plan, fmt.value, render_document)
        if not plan.loadable or not plan.is_empty or unfinished is not None:  # half changed is not clean
            raise typer.Exit(int(ExitCode.CORRUPT))
        return
    if to is not None and unfinished is not None:  # a copy of a half-changed store is no store to repair
        raise RepairUnfinished(f"not copied: an interrupted {unfinished.operation} left this store half changed: "
                               f"`{unfinished.finish}` finishes it, `{unfinished.undo}` undoes it", root)
    if plan.refusal:
        _show(doc, plan, fmt.value, render_document)
        sys.stderr.write(f"rmqtool: error: {root}: not recovered: {plan.refusal}\n")
        raise typer.Exit(int(ExitCode.CORRUPT))
    target = root
    if to is not None:
        target = _copy_store(root, to)
    elif plan.is_empty:  # nothing planned: nothing written, no backup (not even the checkpoint)
        doc["applied"] = {"store_path": str(target), "backup_dir": None, "manifest": None}
        _show(doc, plan, fmt.value, render_document, applied=True)
        return
    words = ["rmqtool", "recover", str(target)] + (["--semantics", semantics] if semantics else []) + [
        flag for flag, on in (("--from-checkpoint", from_checkpoint), ("--verify-prop-crc", verify_prop_crc),
                              ("--no-check-crc", no_check_crc), ("--keep-index", keep_index)) if on]
    applied = _apply(target, settings, keep_index, backup_dir, shlex.join(words + ["--apply"]))
    doc["applied"] = {"store_path": str(target), **(applied.to_json() if applied is not None else
                                               {"backup_dir": None, "manifest": None})}
    _show(doc, plan, fmt.value, render_document, applied=True)


def _apply(target: pathlib.Path, settings, keep_index: bool, backup_dir, command: str):
    """The engine's writable open carries the plan out and dispatches again; its close
    writes the checkpoint and removes the abort file. An earlier run cut short is rolled
    back first (its backup's path is used again), so running the command again finishes it."""
    from rmqtool.engine.store import Store
    from rmqtool.recovery.undo import roll_back_unfinished
    again = roll_back_unfinished(target, "recover")
    if backup_dir is None:
        backup_dir = again
    return Store.recover(target, backup_dir=backup_dir, recovery=settings, keep_index=keep_index, command=command)


def _copy_store(root: pathlib.Path, to: pathlib.Path) -> pathlib.Path:
    if to.exists() and (not to.is_dir() or any(to.iterdir())):
        raise UsageError("--to: the directory exists and is not empty", to)
    if to.exists():
        to.rmdir()
    shutil.copytree(root, to, ignore=shutil.ignore_patterns("lock"))
    for p in [to, *to.rglob("*")]:
        os.chmod(p, os.stat(p).st_mode | 0o200)  # the copy is ours to repair
    return to


def _show(doc: dict, plan, fmt: str, render_document, applied: bool = False) -> None:
    if fmt != "table":
        render_document(doc, fmt, title="recovery plan")
        return
    width = min(shutil.get_terminal_size((80, 24)).columns, 100)
    lines = _plan_lines(doc, plan)
    out = sys.stdout
    for n, line in enumerate(lines, 1):
        out.write(textwrap.fill(line, width=width, initial_indent=f"{n:>2}. ", subsequent_indent="    ") + "\n")
    if applied:
        a = doc["applied"]
        out.write(f"applied to {a['store_path']}" + (f"; backup in {a['backup_dir']} (rmqtool undo "
                                                f"{a['backup_dir']} puts it back)" if a.get("backup_dir") else "")
                  + "\n")


def _plan_lines(doc: dict, plan) -> list[str]:
    cl = doc.get("commit_log", {})
    lines = [f"{doc['mode']} recovery ({doc['mode_reason']}); broker rules {doc['semantics']}: "
             f"{doc['semantics_reason']}"]
    if not doc["loadable"]:
        lines.append(f"the broker would not load this store: {doc['reason']}")
        if doc.get("advice"):
            lines.append(f"what to do: {doc['advice']}")
        return lines
    lines.append(f"recovery starts in {doc['start_file']}: {doc['start_reason']}")
    if doc.get("apply_refused"):
        lines.append(f"--apply refuses this store: {doc['apply_refused']}")
    if cl["max_offset_after"] < cl["max_offset_before"]:
        lines.append(f"the commit log is cut at {cl['max_offset_after']} (its data ends at {cl['max_offset_before']};"
                     f" the walk stopped: {cl['stopped_by']})")
    elif doc["lost_messages"]:  # a torn last record: the data's end is before it, the loss is after
        lines.append(f"the commit log ends at {cl['max_offset_after']}, where the walk stopped: {cl['stopped_by']}")
    else:
        lines.append(f"the commit log keeps everything: it ends at {cl['max_offset_after']}")
    for a in plan.actions:
        verb = "delete" if a.kind == "delete" else f"zero bytes [{a.start}, {a.end}) of"
        lines.append(f"{verb} {a.path} ({a.finding}: {a.message})")
    for path in doc["index_files_destroyed"]:
        if path not in doc["files_deleted"]:
            lines.append(f"keep {path} (--keep-index; the broker would destroy it)")
    if doc.get("batch_topics"):
        lines.append(f"batch consume queue topics: {', '.join(doc['batch_topics'])} ({doc['batch_topics_reason']})")
    for name, q in doc["queues"].items():
        kind = "batch queue" if name.rsplit("/", 1)[0] in doc.get("batch_topics", ()) else "queue"
        lines.append(f"{kind} {name}: offsets [{q['min_offset']}, {q['max_offset']}) after recovery")
    lost = doc["lost_messages"]
    if lost:
        lines.append(f"{len(lost)} messages lost (rmqtool salvage keeps those still readable):")
        for m in lost[:50]:
            lines.append(f"lost: offset {m['commit_log_offset']} {m['topic']}/{m['queue_id']} queue offset "
                         f"{m['queue_offset']} keys {' '.join(m['keys']) or '-'} stored {m['store_timestamp'] or 'unknown'}")
        if len(lost) > 50:
            lines.append(f"... and {len(lost) - 50} more (--format json lists them all)")
    else:
        lines.append("no message is lost")
    lines += [f"note: {n}" for n in doc.get("notes", ())]
    lines.append(f"dispatch to consume queues and index starts again at {doc['redispatch_from']}: "
                 f"{doc['redispatch_reason']}")
    if plan.is_empty:
        lines.append("nothing to recover: the store is as a clean shutdown leaves it")
    return lines
