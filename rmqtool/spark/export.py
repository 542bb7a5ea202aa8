"""``rmqtool spark export``: every commit log and consume queue of many stores into Parquet.

The driver plans tasks from names and sizes (splits.py) and hands them to Spark; each
task runs in an executor, reads its own byte range of one segment with the one scanner,
builds ``dump``'s rows (report/records.py), and writes its Parquet parts itself with
pyarrow (``messages/store_name=NAME/topic=TOPIC/part-TASK.parquet``): rows never pass through
Spark one by one. A task returns a small summary (messages, findings, files written).
Consume queues are one task per store. Spark SQL then reads the tables (query, stats).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import tempfile
import urllib.parse

from rmqtool.errors import FormatError, RmqError, TasksFailed, UsageError, error_line
from rmqtool.spark.parts import (CONSUME_QUEUE_DIR, TaskSummary, errors_of, make_tables, mark_complete,
                                 write_findings, write_message_parts, write_part)
from rmqtool.spark.splits import DEFAULT_SPLIT_SIZE, SegmentTask, plan_tasks, scan_task
from rmqtool.spark.stores import StoreSpec
from rmqtool.store.commitlog import findings_of
from rmqtool.store.live import LiveStore
from rmqtool.store.message import Message
from rmqtool.store.output_path import lies_in, store_places

QUEUES_TASK = "consume-queues"


@dataclasses.dataclass(frozen=True)
class QueuesTask:
    """A RocketMQ store's queues task; ``live``: a running broker's store as the driver found
    it when the export began (store/live.py), read up to its written end then."""
    spec: StoreSpec
    live: LiveStore | None = None


def export_segment_task(task: SegmentTask, out: str) -> TaskSummary:
    """Executor side: one byte range of one segment into Parquet parts, one per topic."""
    from rmqtool.spark import remote

    summary = TaskSummary(task.store, task.name, bytes_read=task.bytes)
    margin = remote.STAGE_MARGIN
    while True:
        with staged(task, margin) as (local, rename, staged_to):
            by_topic, found, reach = _rows_by_topic(local, rename)
        if staged_to is None or staged_to >= task.job.segment.size or reach < staged_to - remote.STAGE_GUARD:
            break
        margin *= 8  # a record or damaged region ran into what was not staged: again, with more
    return write_message_parts(summary, by_topic, found, out, task.store_path)


def _rows_by_topic(task: SegmentTask, rename) -> tuple[dict[str, list[dict]], list, int]:
    """dump's rows of a task's messages by topic, its findings, and where its last result ends."""
    from rmqtool.report.records import message_record

    by_topic: dict[str, list[dict]] = {}
    found: list = []
    reach = task.job.start
    for r in scan_task(task, findings=found):
        found += findings_of(r)
        if type(r) is not Message:
            reach = max(reach, r.position + r.size)
            continue
        reach = max(reach, r.position + r.store_size)
        row = message_record(r, "none")
        row["body"] = bytes(r.body)
        row["properties_raw"] = bytes(r.properties_raw)
        if rename is not None:
            row["file"] = rename(row["file"])
        by_topic.setdefault(r.topic, []).append(row)
    if task.live is not None:  # the record being written at the end is not damage, as dump says
        found = task.live.settled(found)
    if rename is not None:
        found = [dataclasses.replace(f, path=rename(f.path)) if f.path else f for f in found]
    return by_topic, found, reach


@contextlib.contextmanager
def staged(task: SegmentTask, margin: int):
    """(the task to scan, a renamer of its paths, where the staged bytes end): a local
    segment as it is (None, None); one behind a URI staged into a temporary sparse file of
    its size, its range and ``margin`` bytes past it."""
    if task.remote is None:
        yield task, None, None
        return
    from rmqtool.spark import remote
    from rmqtool.store.segments import Segment

    f = task.remote
    job = task.job
    end = f.size if job.end is None else job.end
    with tempfile.TemporaryDirectory(prefix="rmqtool-stage-") as tmp:
        local = pathlib.Path(tmp, f.name)
        staged_to = remote.stage(f, local, job.start, end + margin)
        segment = Segment(local, job.segment.base_offset, f.size)
        here = dataclasses.replace(task, job=dataclasses.replace(job, segment=segment), remote=None)
        yield here, (lambda path: f.uri if path == str(local) else path), staged_to


def export_queues_task(spec: StoreSpec, out: str, live: LiveStore | None = None) -> TaskSummary:
    """Executor side: every consume queue of one store, a Parquet part per topic; plain queues
    read as arrays; and the findings of its commit log's listing with the queues' own. A
    queue's units run from its min offset (units below the first segment left out, as the
    broker's correctMinOffset) to its max offset as the broker's load leaves it: units at or
    past the end its next start gives the log dropped (truncateDirtyLogicFiles; info's
    max_commit_log_offset, the recovery's cut after a crash). A store behind a URI is staged
    first (:func:`_staged_store`), and cut the same way. A live store's (``live``) are cut at
    its written end too, and the moving tail is no finding, as dump reads such a store."""
    from rmqtool.inspect.inventory import queue_cut, simulate_for_info
    from rmqtool.spark import remote
    from rmqtool.store.view import StoreView

    if not remote.is_uri(spec.path):
        # the store opened once in this task: its listing, its end, its queues
        view = StoreView(spec.path, simulate=simulate_for_info)
        segments = view.segments if view.has_commit_log else []
        low = segments[0].base_offset if segments else 0
        cut = queue_cut(view)
        if live is not None:  # units dispatched past the end the export reads to are the moving tail
            cut = live.commit_log_end if cut is None else min(cut, live.commit_log_end)
        return _export_queues(view, spec, out, low, cut, None, live)
    with tempfile.TemporaryDirectory(prefix="rmqtool-stage-") as tmp:
        root = pathlib.Path(tmp)
        view, low = _staged_store(spec.path, root)
        return _export_queues(view, spec, out, low, queue_cut(view),
                              lambda path: remote.local_name(root, path, spec.path))


def _staged_store(uri: str, root: pathlib.Path):
    """(a view of what was staged of the store behind ``uri`` into ``root``, its commit log's
    first offset): its queues and their ConsumeQueueExt, checkpoint, abort markers and
    config/*.json whole, every commit log file at its size with its last written one whole.
    When the next start is simulated (inspect/inventory.first_file_read), also each file's
    first records and the files it reads from its first on, in as many rounds as a round's
    start shows a file before them."""
    from rmqtool.inspect.inventory import first_file_read, simulate_for_info
    from rmqtool.spark import remote
    from rmqtool.store.paths import (ABORT_BAK_FILE, ABORT_FILE, BATCH_CONSUMEQUEUE_DIR, CHECKPOINT_FILE,
                                     COMMITLOG_DIR, CONFIG_DIR, CONSUMEQUEUE_DIR, CONSUMEQUEUE_EXT_DIR, LOCK_FILE,
                                     is_segment_name)
    from rmqtool.store.view import StoreView

    base = uri.rstrip("/")
    _family, dirs = remote.require_store(base)
    for name in dirs:  # each there as the store has it (an empty commitlog/ is not a missing one)
        (root / name).mkdir(exist_ok=True)
    for name in (CONSUMEQUEUE_DIR, BATCH_CONSUMEQUEUE_DIR, CONSUMEQUEUE_EXT_DIR):  # ext: the tags codes units point at
        remote.stage_tree(remote.child(base, name), root / name)
    for f in remote.list_dir(base):  # the start's own files whole; others there, empty (the 5.x ones say 5.x)
        if f.name in (CHECKPOINT_FILE, ABORT_FILE, ABORT_BAK_FILE):
            remote.stage(f, root / f.name)
        elif f.name != LOCK_FILE:
            (root / f.name).touch()
    for f in remote.list_dir(remote.child(base, CONFIG_DIR)):  # topics' queue types, committed queues
        if f.name.endswith((".json", ".json.bak")):  # not broker.properties: its paths are the broker's disks
            remote.stage(f, root / CONFIG_DIR / f.name)
    files = [f for f in remote.list_dir(remote.child(base, COMMITLOG_DIR)) if is_segment_name(f.name)]
    local = [root / COMMITLOG_DIR / f.name for f in files]
    whole = len(files)  # files staged whole from this index on
    last = remote.last_written(files)
    for f, path in zip(files, local):  # each at its size, holding nothing yet
        remote.stage(f, path, 0, 0)
    if last >= 0:  # where the log ends: its last written file
        remote.stage(files[last], local[last])
        whole = last
    view = StoreView(root, simulate=simulate_for_info)
    if first_file_read(view) is not None:  # simulated: what it reads, the files' first records first
        for f, path in zip(files[:whole], local[:whole]):
            remote.stage_head(f, path)
        while True:
            view = StoreView(root, simulate=simulate_for_info)
            first = first_file_read(view)
            needed = whole if first is None else next((i for i, f in enumerate(files) if int(f.name) >= first), whole)
            if needed >= whole:
                break
            for f, path in zip(files[needed:whole], local[needed:whole]):
                remote.stage(f, path)
            whole = needed
    return view, (int(files[0].name) if files else 0)


def _export_queues(view, spec: StoreSpec, out: str, low: int, end: int | None, rename,
                   live: LiveStore | None = None) -> TaskSummary:
    """A store's queues (``view``: the store, or what was staged of it), cut at ``end``, and
    the findings of its commit log's listing."""
    import pyarrow as pa

    from rmqtool.spark.tables import FINDINGS, partition_dir, store_dir

    root = view.root
    summary = TaskSummary(spec.name, QUEUES_TASK)
    queues = view.consume_queues(end)
    by_topic: dict[str, list] = {}
    for q in queues.queues:
        by_topic.setdefault(q.topic, []).append(_queue_table(q, q.min_offset(low), spec.path if rename else str(root),
                                                             rename))
    for topic, tables in by_topic.items():
        table = pa.concat_tables(tables)
        write_part(table, out, CONSUME_QUEUE_DIR, partition_dir(spec.name, topic), "part-queues.parquet")
        summary.messages += table.num_rows
        summary.files += 1
    # what dump commitlog says of the log's files before its first record (a file cut short, a
    # gap, a stray name): the files, listed here once a store; the range tasks say the records'
    found = (list(view.commit_log.findings) if view.has_commit_log else []) + queues.all_findings()
    if live is not None:
        found = live.settled(found)
    if rename is not None:
        found = [dataclasses.replace(f, path=rename(f.path)) if f.path else f for f in found]
    if found:
        write_findings(found, out, store_dir(spec.name), "part-queues.parquet", FINDINGS)
        summary.findings, summary.errors = len(found), errors_of(found)
    return summary


def _queue_table(q, low: int, store_path: str, rename=None):
    """The units of queue offsets [low, max_offset) that point at messages, as a table."""
    import numpy as np
    import pyarrow as pa

    from rmqtool.spark.tables import CONSUME_QUEUE
    from rmqtool.store.arrays import read_records
    from rmqtool.store.cqext import queue_ext

    high = q.max_offset
    if q.is_batch:  # few and rich: unit by unit
        units = [u for u in q.iter_units(low, high)]
        return pa.table({"queue_id": [q.queue_id] * len(units), "queue_offset": [u.queue_offset for u in units],
                         "commit_log_offset": [u.commit_log_offset for u in units], "size": [u.size for u in units],
                         "tags_code": [u.tags_code for u in units], "batch_size": [u.batch_num for u in units],
                         "store_path": [store_path] * len(units),
                         "file": [rename(u.path) if rename else u.path for u in units],
                         "file_position": [u.position for u in units], **_rocketmq_columns(len(units))},
                        schema=CONSUME_QUEUE)
    parts = []
    layout = q.layout
    ext = queue_ext(q)  # enableConsumeQueueExt: tags codes the ext holds, looked up as dump does
    for seg in q.segments:
        first = seg.base_offset // q.unit_size
        if first >= high:
            break
        units = read_records(seg.path, layout.dtype, 0, min(high - first, seg.size // q.unit_size))
        index = np.arange(len(units), dtype=np.int64)
        cols = [units[n] for n in units.dtype.names]
        keep = (index + first >= low) & layout.is_written(cols) & ~layout.is_fill(cols)
        index = index[keep]
        n = len(index)
        tags = units["tags_code"][keep].astype(np.int64)
        if ext.ext is not None:
            _resolve_ext_tags(tags, ext)
        parts.append(pa.table({
            "queue_id": np.full(n, q.queue_id, dtype=np.int32), "queue_offset": index + first,
            "commit_log_offset": units["commit_log_offset"][keep].astype(np.int64),
            "size": units["size"][keep].astype(np.int32), "tags_code": tags,
            "batch_size": np.ones(n, dtype=np.int32), "store_path": pa.array([store_path] * n, pa.string()),
            "file": pa.array([rename(str(seg.path)) if rename else str(seg.path)] * n, pa.string()),
            "file_position": index * q.unit_size, **_rocketmq_columns(n)},
            schema=CONSUME_QUEUE))
    return pa.concat_tables(parts) if parts else CONSUME_QUEUE.empty_table()


def _resolve_ext_tags(tags, ext) -> None:
    """A unit whose tagsCode field is an ext address gets the tagsCode its ext unit holds, as
    ConsumeQueue's iterator hands getMessage (and dump consumequeue shows); a lookup that
    fails leaves the field."""
    for i, field in enumerate(tags.tolist()):
        found = ext.lookup(field)
        if found is not None and found.ok:
            tags[i] = found.unit.tags_code


def _rocketmq_columns(n: int) -> dict:
    """The ``family`` column of a RocketMQ queue's units, QMQ's columns null."""
    import pyarrow as pa
    return {"family": pa.array(["rocketmq"] * n, pa.string()), "sequence": pa.nulls(n, pa.int64()),
            "message_log_offset": pa.nulls(n, pa.int64())}


def check_out_dir(out: str | os.PathLike, stores: dict[str, list[str]] | None = None) -> str:
    """The export's directory, made: new, or empty (an export never overwrites); a local
    path (absolute), or a URI pyarrow opens. Never inside a store it reads (``stores``: {name:
    its directories}, :func:`store_directories`): a broker takes every entry of its commit log
    directory for a file of its log, and does not start on a directory of parts there."""
    from rmqtool.spark import remote
    for name, directories in (stores or {}).items():
        inside = next((d for d in directories if _inside(str(out), d)), None)
        if inside is not None:
            raise UsageError(f"--out lies inside the store {name} ({inside}): give a directory outside every "
                             f"store (a broker does not start with an export's parts among its files)", out)
    if remote.is_uri(str(out)):
        import pyarrow.fs as pafs
        fs, root = remote.filesystem(str(out))
        info = fs.get_file_info(root)
        if info.type == pafs.FileType.File or (info.type == pafs.FileType.Directory and remote.list_tree(str(out))):
            raise UsageError("--out must be a new or empty directory (an export never overwrites)", out)
        fs.create_dir(root, recursive=True)
        return str(out)
    path = pathlib.Path(out)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise UsageError("--out must be a new or empty directory (an export never overwrites)", path)
    path.mkdir(parents=True, exist_ok=True)
    return str(path.resolve())


def store_directories(specs: list[StoreSpec], views: dict | None = None) -> dict[str, list[str]]:
    """{name: the places of each store}: its root, the root's entries and the commit log
    directories its broker loads elsewhere (store/output_path.store_places); a store behind a
    URI, its URI."""
    views = views or {}
    found = {}
    for spec in specs:
        view = views.get(spec.name)
        directories = [spec.path] if view is None else [str(p) for p in store_places(view)]
        found[spec.name] = list(dict.fromkeys(directories))
    return found


def _inside(out: str, directory: str) -> bool:
    """``out`` is ``directory`` or lies under it: local paths (a file:// URI's too) resolved,
    other URIs by their names."""
    from rmqtool.spark import remote

    def local(path: str) -> str | None:
        if not remote.is_uri(path):
            return path
        return urllib.parse.unquote(urllib.parse.urlsplit(path).path) if path.lower().startswith("file://") else None
    here, there = local(out), local(directory)
    if here is not None and there is not None:
        return lies_in(here, there)
    if here is not None or there is not None:  # a local path and a URI of another filesystem
        return False
    base, child = (urllib.parse.urlsplit(u) for u in (directory, out))
    return (base.scheme, base.netloc) == (child.scheme, child.netloc) and \
        pathlib.PurePosixPath(child.path).is_relative_to(pathlib.PurePosixPath(base.path))


@dataclasses.dataclass
class ExportResult:
    out_dir: str
    store_names: list[str]
    task_count: int
    messages: int
    consume_queue_units: int
    finding_count: int
    error_count: int  # of them errors: the export exits 3 for these, as dump does

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def export(spark, specs: list[StoreSpec], out: str | os.PathLike, *, split_size: int = DEFAULT_SPLIT_SIZE,
           progress=None, views: dict | None = None) -> ExportResult:
    """Driver side: plan (from ``views``, {name: StoreView}, the stores opened on the driver),
    run every task on the cluster, sum the summaries."""
    target = check_out_dir(out, store_directories(specs, views))
    tasks = store_tasks(specs, split_size, views)
    sc = spark.sparkContext
    results = run_job(sc, sc.parallelize(tasks, len(tasks)).map(lambda t: run_task(t, target)), len(tasks),
                      progress, "export")
    failed = [r for r in results if r.error is not None]
    if failed:
        raise tasks_failed(failed, len(tasks))
    make_tables(target)
    from rmqtool.spark.qmq.export import CONSUMER_LOGS_TASK
    queues = [r for r in results if r.task in (QUEUES_TASK, CONSUMER_LOGS_TASK)]
    ranges = [r for r in results if r.task not in (QUEUES_TASK, CONSUMER_LOGS_TASK)]
    result = ExportResult(target, [s.name for s in specs], len(tasks), sum(r.messages for r in ranges),
                          sum(r.messages for r in queues), sum(r.findings for r in results),
                          sum(r.errors for r in results))
    mark_complete(target, result.to_json())  # last: an export stopped before here is not read as whole
    return result


def store_tasks(specs: list[StoreSpec], split_size: int, views: dict | None = None) -> list:
    """Every task of the stores, each store's by its family: a RocketMQ store's queues first
    (they run beside its ranges), then its byte ranges; a QMQ store's (spark/qmq/export.py)."""
    from rmqtool.spark import remote
    from rmqtool.spark.qmq.export import qmq_tasks
    from rmqtool.store.family import QMQ, detect_family
    from rmqtool.store.view import StoreView

    qmq = {s.name for s in specs if not remote.is_uri(s.path) and detect_family(s.path) is QMQ}
    rocketmq = [s for s in specs if s.name not in qmq]
    views = dict(views or {})
    for s in rocketmq:  # each local store opened once: its ranges and queues are read to one live end
        if s.name not in views and not remote.is_uri(s.path) and pathlib.Path(s.path).is_dir():
            views[s.name] = StoreView(s.path)
    queues = [QueuesTask(s, views[s.name].live if s.name in views else None) for s in rocketmq]
    return queues + [t for s in specs if s.name in qmq for t in qmq_tasks(s)] + plan_tasks(rocketmq, split_size, views)


def run_task(task, out: str) -> TaskSummary:
    """Executor side: a RocketMQ store's queues, or one byte range of one segment; a QMQ task.
    A task that stops on an error (a file gone or unreadable, the disk of the tables full)
    returns its one line: the driver says it, where a raise would print an executor's
    traceback (and a cluster would run the task again, to the same end)."""
    from rmqtool.spark.qmq.export import ConsumerLogsTask, run_qmq_task
    try:
        try:
            if isinstance(task, QueuesTask):
                return export_queues_task(task.spec, out, task.live)
            if isinstance(task, SegmentTask):
                return export_segment_task(task, out)
            return run_qmq_task(task, out)
        except UnicodeEncodeError as exc:  # a file or directory name of the store that is not UTF-8
            name = exc.object.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace") \
                if isinstance(exc.object, str) else repr(exc.object)
            raise FormatError("its name is not UTF-8, which a Parquet text column cannot hold (give it a UTF-8 "
                              "name, or read the store with verify and dump)", name) from None
    except (RmqError, OSError) as exc:
        line, code = error_line(exc)
        store, name = ((task.spec.name, QUEUES_TASK) if isinstance(task, QueuesTask) else
                       (task.spec.name, task.name) if isinstance(task, ConsumerLogsTask) else (task.store, task.name))
        return TaskSummary(store, name, error=line, exit_code=int(code))


def tasks_failed(failed: list[TaskSummary], total: int) -> TasksFailed:
    """The first failed task's line, how many failed, and that the tables are not whole (what
    the other tasks wrote stays); the worst task's exit code."""
    first = failed[0]
    more = f"; {len(failed) - 1} more of the {total} tasks failed too" if len(failed) > 1 else ""
    return TasksFailed(f"store {first.store}, task {first.task}: {first.error}{more}; the export is incomplete",
                       max(f.exit_code for f in failed))


def run_job(sc, rdd, total: int, progress, label: str) -> list:
    """collect() with progress: tasks done of ``total``, polled from Spark's status tracker."""
    if progress is None:
        return rdd.collect()
    import threading

    done = threading.Event()
    result: list = []
    error: list = []

    def collect():
        try:
            result.extend(rdd.collect())
        except BaseException as exc:  # re-raised on the caller's thread
            error.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=collect, daemon=True)
    thread.start()
    tracker = sc.statusTracker()
    while not done.wait(1.0):
        finished = 0
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                finished += info.numCompletedTasks
        progress(label, finished, total)
    progress(label, total, total)
    if error:
        raise error[0]
    return result
