"""rmqtool recover STORE: what the broker's next start does to the store, as a numbered plan;
with --apply, done offline with a backup of every byte it changes (rmqtool undo puts them back).

Exit codes: 0 nothing to recover (or applied); 3 the plan changes or drops data, messages
or index entries are lost already, or the broker would not load the store (nothing is
written then); 5 a running process holds the store's lock (--apply).
"""
from __future__ import annotations

import contextlib
import pathlib
from typing import Optional

import typer

from rmqtool.cli.commitlog_paths import commit_log_paths_option
from rmqtool.cli.common import OutputFormat, Written, boundary, change_made, writer_output
from rmqtool.cli.params import TIME_METAVAR, Semantics, check_semantics, examples, parse_time
from rmqtool.cli.sizes import SizeOptions, size_options
from rmqtool.errors import UsageError
from rmqtool.report.sink import warn


def register(app: typer.Typer) -> None:
    app.command("recover", epilog=examples(
        "rmqtool recover /data/store",
        "rmqtool recover /data/store -f json | jq '.lost_messages | length'",
        "rmqtool recover /data/store --apply",
        "rmqtool recover /data/store --keep-past-damage --apply",
        "rmqtool recover /data/store --to /data/store-repaired --apply",
        "rmqtool recover /data/store --from-checkpoint --semantics 5.3",
        "rmqtool recover /data/store --now 2026-11-27T08:00:00Z   # a 5.x timer store's start at that clock",
        "rmqtool recover /data/store --apply --broker-config /opt/rocketmq/conf/broker.conf"))(recover)


@boundary
@commit_log_paths_option("store")
@size_options
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
    keep_past_damage: bool = typer.Option(False, "--keep-past-damage",
                                          help="Replace each damaged record where recovery cuts the log by a record "
                                               "of its size (its extent proven) so the records after it stay."),
    now: Optional[str] = typer.Option(None, "--now", metavar=TIME_METAVAR,
                                      help="When the broker starts next (the plan's timer section depends on "
                                           "it, as verify's timer checks do); default: now."),
    sizes: SizeOptions = SizeOptions(),  # --cq-size ... --assume-defaults (cli/sizes.py)
    force: bool = typer.Option(False, "--force", help="--apply in place to a store with a missing middle commit log "
                                                      "file (the broker loads it; without --force only into --to)."),
    progress: Optional[bool] = typer.Option(None, "--progress/--no-progress", help="--apply: a bar of the bytes "
                                            "written (backup, zeros, re-dispatch) on stderr (default: stderr a "
                                            "terminal)."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, jsonl or json."),
    wide: bool = typer.Option(False, "--wide", help="Table: a line for every queue, those the start leaves "
                                                    "unchanged too."),
):
    """Plan (and with --apply do) what the broker's restart recovery does to a store.

    The plan says where recovery starts and why, where the commit log is cut, which files
    go, each queue's offsets afterwards, every message lost, and the sizes files are
    written with when the store's files do not show them (--apply refuses a size that can
    only be the broker's default until it is given, or --assume-defaults).
    """
    from rmqtool.engine.recover_store import RecoverRequest
    from rmqtool.families import tools_at
    from rmqtool.recovery.commitlog_walk import V5
    from rmqtool.recovery.outcome import Settings
    from rmqtool.report.progress import progress_bar

    check_semantics(semantics)
    if verify_prop_crc and semantics not in (None, V5):
        raise UsageError("--verify-prop-crc is a 5.3 setting (forceVerifyPropCRC)")
    if (to or backup_dir or force) and not apply:
        raise UsageError("--to, --backup-dir and --force go with --apply")
    tools = tools_at(store)  # the store's family brings its recovery model
    view = tools.open_view(store)  # the store opened once: the plan reads this view
    if view.live is not None and fmt != OutputFormat.table:  # a table's header says it; JSON on stderr, first
        warn(f"rmqtool: {view.live.root} is live: PID {view.live.pid} holds it (a running broker or writer); the "
             f"plan is of its files as they are now, and --apply refuses a live store: stop the broker first")
    given = sizes.given()
    settings = Settings(semantics=semantics, from_checkpoint=from_checkpoint, check_crc=not no_check_crc,
                        verify_prop_crc=verify_prop_crc)
    flags = _flags(store, semantics, given, from_checkpoint=from_checkpoint, verify_prop_crc=verify_prop_crc,
                   no_check_crc=no_check_crc, keep_index=keep_index, keep_past_damage=keep_past_damage)
    again = flags + (["--force"] if to is not None or force else [])
    bar = progress_bar("recovering", None, progress) if apply else None
    request = RecoverRequest(apply=apply, to=to, force=force, backup_dir=backup_dir, settings=settings, given=given,
                             keep_index=keep_index, again=tuple(again), keep_past_damage=keep_past_damage,
                             rocketmq_flags=tuple(f for f in flags + (["--force"] if force else [])
                                                  if f.startswith("--")),
                             now_ms=parse_time(now, "--now"),  # not in ``again``: no change --apply makes needs it
                             on_written=bar.advance if bar is not None else None)
    with bar or contextlib.nullcontext():  # erased (or its last line written) before the table
        run = tools.recover(view, request)
    with writer_output(_written(run, to) if apply else None):
        tools.show_recover(run, fmt.value, wide=wide, live=view.live)
    if run.refusal is not None:
        raise run.refusal
    if run.exit_code:
        raise typer.Exit(run.exit_code)


def _written(run, to) -> Written:
    """What --apply changed, for the line said when the plan's output fails."""
    applied = run.doc.get("applied") if run.applied else None
    if applied is not None and applied.get("backup_dir") is None and to is None:
        applied = None  # nothing needed changing: not even a backup was made
    return Written(change_made("the repair was made", applied))


def _flags(store, semantics, given, **on) -> list[str]:
    """The options the command was given, as the words of the command that finishes it when it
    is cut short (``on``: each flag's parameter name and whether it was given)."""
    from rmqtool.cli.commitlog_paths import commit_log_path_words
    from rmqtool.cli.sizes import size_words

    flags = (["--semantics", semantics] if semantics else []) + [
        "--" + name.replace("_", "-") for name, given_flag in on.items() if given_flag]
    return flags + size_words(given) + commit_log_path_words(store)
