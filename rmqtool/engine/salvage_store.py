"""salvage --to-store: the intact messages of a damaged store appended into a new one through
the engine, in the source store's file sizes; written beside the new directory and renamed
to it once closed."""
from __future__ import annotations

import os
import pathlib
import shutil

from rmqtool.errors import UsageError
from rmqtool.store.view import StoreView


def salvage_messages(view: StoreView):
    """(every intact message, the SalvageReport) of the store the command opened: also those
    past where the broker's recovery cuts the log, which the report counts."""
    from rmqtool.recovery.outcome import Settings, simulate
    from rmqtool.recovery.salvage import salvage

    end = simulate(view, Settings(), list_lost=False)
    return salvage(view, end.recovered_end if end.loadable else None)


def refuse_inner_batches(source: StoreView) -> None:
    """The engine hands out one queue offset a record and keeps INNER_BASE as stored: 5.x inner
    batches (a BatchCQ topic's records) would land misnumbered in plain consume queues."""
    from rmqtool.store.config import batch_topics

    topics = sorted(batch_topics(source.root))
    if topics:
        raise UsageError(f"--to-store cannot write 5.x inner batch (BatchCQ) topics yet ({', '.join(topics)}): "
                         "use --out FILE.jsonl", source.root)


def source_sizes(source: StoreView, given) -> dict:
    """The source store's file sizes, for the new one (index files of two sizes: the newest);
    a source whose broker runs with enableConsumeQueueExt gives the new store ext units too
    (its ext file size), as that broker's dispatch would write them; a source a 5.x broker
    wrote makes the new one a 5.x store (its long topics' V2 records are written again). A
    size the source does not show (no queue file; no index file, or none with an entry to
    tell its geometry) is taken from what is ``given`` (GivenSizes: the options, the broker
    config), else refused (UsageError) unless it assumes defaults: files of a size the broker
    was not configured for are read at the wrong places."""
    from rmqtool.engine.store_sizes import DEFAULT, consume_queue_file_sizes, index_geometry, said_sizes
    from rmqtool.formats.consumequeue import DEFAULT_CQ_FILE_SIZE
    from rmqtool.recovery.commitlog_walk import V5
    from rmqtool.recovery.outcome import Settings
    from rmqtool.recovery.semantics import detect_semantics
    from rmqtool.store.cqext import ext_writing

    paths = source.paths
    if given.batch_consume_queue is not None:  # an option it would ignore: said, not dropped
        raise UsageError("--batch-cq-size: --to-store writes no batch consume queue (it refuses BatchCQ topics)")
    cq_said, slots_said, entries_said = said_sizes(given)
    cq_sizes = consume_queue_file_sizes(paths.consumequeue)
    if cq_said is not None and cq_sizes and cq_said.value not in cq_sizes:
        raise UsageError(f"{cq_said.shown_by}: the source's queue files are {sorted(cq_sizes)} bytes", source.root)
    slots, entries = index_geometry(paths.index, slots_said, entries_said, newest=True)
    unknown = [(f"mapped_file_size_consume_queue ({DEFAULT_CQ_FILE_SIZE}, the broker's default)", "--cq-size")
               ] if not cq_sizes and cq_said is None else []
    unknown += [(f"{name} ({size.value}: {size.shown_by})", option) for name, size, option in (
        ("max_hash_slot_num", slots, "--index-slots"), ("max_index_num", entries, "--index-entries"))
        if size.taken_from == DEFAULT]
    if unknown and not given.assume_defaults:
        raise UsageError(f"--to-store: nothing in the source store shows {', '.join(w for w, _ in unknown)}: files "
                         f"written with a size the broker was not configured for are read at the wrong places. Give "
                         f"{' and '.join(o for _, o in unknown)}, or --broker-config FILE (the broker's broker.conf), "
                         f"or --assume-defaults if the broker runs with its defaults", source.root)
    ext = ext_writing(source.root)
    cq = cq_said.value if cq_said is not None else (max(cq_sizes) if cq_sizes else None)
    return dict(commitlog_size=source.mapped_file_size, cq_size=cq, index_slots=slots.value,
                index_entries=entries.value) | (
        dict(enable_consume_queue_ext=True, mapped_file_size_consume_queue_ext=ext.file_size) if ext.enabled else {}) | (
        dict(recovery=Settings(semantics=V5))
        if detect_semantics(paths, source.commit_log_listing().segments).semantics == V5 else {})


def write_store(messages, target: pathlib.Path, sizes: dict, row_of, reject) -> None:
    """Through the engine, as append --from-jsonl --keep-store-timestamp --keep-store-host does,
    with the source store's file sizes; ``row_of``: a message as the dump row append reads
    (report/records.message_record: the one row builder); ``reject(message, reason)``: one
    the new store cannot take (a damaged topic that names no directory), left out and said."""
    from rmqtool.recovery.intent import step

    # written beside NEWDIR and renamed to it once closed: a run cut short leaves no NEWDIR,
    # only the partial directory, which the next run removes and writes again; a run that
    # stops on an error (a full disk) removes it itself
    partial = target.with_name(target.name + PARTIAL_SUFFIX)
    if partial.exists():
        shutil.rmtree(partial)
    try:
        _append_all(messages, partial, target, sizes, row_of, reject)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    step()
    if target.exists():
        target.rmdir()  # checked empty before the salvage began
    os.rename(partial, target)


def _append_all(messages, partial: pathlib.Path, target: pathlib.Path, sizes: dict, row_of, reject) -> None:
    from rmqtool.engine.encoder import topic_bytes
    from rmqtool.engine.rows import message_from_row
    from rmqtool.engine.store import Store
    from rmqtool.recovery.intent import step
    from rmqtool.recovery.salvage import is_inner_batch

    with Store.open(partial, writable=True, **sizes) as s:
        batch, refused = [], {}  # topic -> why the new store cannot take it (None: it can)
        for m in messages:
            if m.topic not in refused:
                refused[m.topic] = None
                try:
                    topic_bytes(m.topic)
                except UsageError as exc:
                    refused[m.topic] = f"the topic cannot be written to a store: {exc.message}"
            if refused[m.topic] is not None:
                reject(m, refused[m.topic])
                continue
            if is_inner_batch(m):  # one the store's batch topics did not name
                raise UsageError(f"--to-store cannot write 5.x inner batch records yet ({m.topic}/{m.queue_id}); "
                                 f"{target} is not written: use --out FILE.jsonl", m.path, m.position)
            batch.append(message_from_row(row_of(m), keep_store_timestamp=True, keep_store_host=True))
            if len(batch) >= 1024:
                step()
                s.append_many(batch)
                batch = []
        if batch:
            step()
            s.append_many(batch)

PARTIAL_SUFFIX = ".salvage-partial"
