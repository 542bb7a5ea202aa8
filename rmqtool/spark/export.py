"""``rmqtool spark export``: every commit log and consume queue of many stores into Parquet.

The driver plans tasks from names and sizes (splits.py) and hands them to Spark; each
task runs in an executor, reads its own byte range of one segment with the one scanner,
builds ``dump``'s rows (report/records.py), and writes its Parquet parts itself with
pyarrow (``messages/store_name=NAME/topic=TOPIC/part-TASK.parquet``): rows never pass through
Spark one by one. A task returns a small summary (messages, findings, files written).
Consume queues are one task per store. Spark SQL then reads the tables (query, stats).
"""
from __future__ import annotations

import dataclasses
import os
import pathlib

from rmqtool.errors import UsageError
from rmqtool.spark.splits import DEFAULT_SPLIT_SIZE, SegmentTask, plan_tasks, scan_task
from rmqtool.spark.stores import StoreSpec
from rmqtool.store.commitlog import findings_of
from rmqtool.store.message import Message

MESSAGES_DIR, CONSUME_QUEUE_DIR, FINDINGS_DIR = "messages", "consume_queue", "findings"
QUEUES_TASK = "consume-queues"


@dataclasses.dataclass
class TaskSummary:
    store: str
    task: str
    messages: int = 0
    findings: int = 0
    bytes_read: int = 0
    files: int = 0


def export_segment_task(task: SegmentTask, out: str) -> TaskSummary:
    """Executor side: one byte range of one segment into Parquet parts, one per topic."""
    import pyarrow.parquet as pq

    from rmqtool.report.records import message_record
    from rmqtool.spark.tables import FINDINGS, message_columns, partition_dir, store_dir

    summary = TaskSummary(task.store, task.name, bytes_read=task.bytes)
    by_topic: dict[str, list[dict]] = {}
    found = []
    for r in scan_task(task, findings=found):
        found += findings_of(r)
        if type(r) is not Message:
            continue
        row = message_record(r, "none")
        row["body"] = bytes(r.body)
        row["properties_raw"] = bytes(r.properties_raw)
        by_topic.setdefault(r.topic, []).append(row)
    for topic, rows in by_topic.items():
        directory = pathlib.Path(out, MESSAGES_DIR, partition_dir(task.store, topic))
        directory.mkdir(parents=True, exist_ok=True)
        pq.write_table(message_columns(rows, task.store_path), directory / f"part-{task.name}.parquet")
        summary.messages += len(rows)
        summary.files += 1
    if found:
        _write_findings(found, pathlib.Path(out, FINDINGS_DIR, store_dir(task.store)), f"part-{task.name}.parquet",
                        FINDINGS)
        summary.findings = len(found)
    return summary


def _write_findings(found: list, directory: pathlib.Path, name: str, schema) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    rows = [f.to_json() for f in found]
    table = pa.table({n: [r.get(n) for r in rows] for n in schema.names}, schema=schema)
    pq.write_table(table, directory / name)


def export_queues_task(spec: StoreSpec, out: str) -> TaskSummary:
    """Executor side: every consume queue of one store (from its min to its max offset, as
    the broker's load leaves them), a Parquet part per topic; plain queues read as arrays."""
    import pyarrow.parquet as pq

    from rmqtool.spark.tables import FINDINGS, partition_dir, store_dir
    from rmqtool.store.commitlog_end import CommitLog
    from rmqtool.store.consumequeue import open_consume_queues
    from rmqtool.store.paths import StorePaths

    paths = StorePaths(spec.path)
    summary = TaskSummary(spec.name, QUEUES_TASK)
    log = CommitLog(paths.commitlog) if paths.commitlog.is_dir() else None
    end = log.max_offset() if log is not None else None
    queues = open_consume_queues(paths.root, commit_log_max_offset=end)
    low = log.segments[0].base_offset if log is not None and log.segments else 0
    by_topic: dict[str, list] = {}
    for q in queues.queues:
        by_topic.setdefault(q.topic, []).append(_queue_table(q, q.min_offset(low), str(paths.root)))
    for topic, tables in by_topic.items():
        import pyarrow as pa
        directory = pathlib.Path(out, CONSUME_QUEUE_DIR, partition_dir(spec.name, topic))
        directory.mkdir(parents=True, exist_ok=True)
        table = pa.concat_tables(tables)
        pq.write_table(table, directory / "part-queues.parquet")
        summary.messages += table.num_rows
        summary.files += 1
    found = queues.all_findings()
    if found:
        _write_findings(found, pathlib.Path(out, FINDINGS_DIR, store_dir(spec.name)), "part-queues.parquet", FINDINGS)
        summary.findings = len(found)
    return summary


def _queue_table(q, low: int, store_path: str):
    """The units of queue offsets [low, max_offset) that point at messages, as a table."""
    import numpy as np
    import pyarrow as pa

    from rmqtool.spark.tables import CONSUME_QUEUE
    from rmqtool.store.arrays import read_records

    high = q.max_offset
    if q.is_batch:  # few and rich: unit by unit
        units = [u for u in q.iter_units(low, high)]
        return pa.table({"queue_id": [q.queue_id] * len(units), "queue_offset": [u.queue_offset for u in units],
                         "commit_log_offset": [u.commit_log_offset for u in units], "size": [u.size for u in units],
                         "tags_code": [u.tags_code for u in units], "batch_size": [u.batch_num for u in units],
                         "store_path": [store_path] * len(units), "file": [u.path for u in units],
                         "file_position": [u.position for u in units]}, schema=CONSUME_QUEUE)
    parts = []
    layout = q.layout
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
        parts.append(pa.table({
            "queue_id": np.full(n, q.queue_id, dtype=np.int32), "queue_offset": index + first,
            "commit_log_offset": units["commit_log_offset"][keep].astype(np.int64),
            "size": units["size"][keep].astype(np.int32), "tags_code": units["tags_code"][keep].astype(np.int64),
            "batch_size": np.ones(n, dtype=np.int32), "store_path": pa.array([store_path] * n, pa.string()),
            "file": pa.array([str(seg.path)] * n, pa.string()), "file_position": index * q.unit_size},
            schema=CONSUME_QUEUE))
    return pa.concat_tables(parts) if parts else CONSUME_QUEUE.empty_table()


def check_out_dir(out: str | os.PathLike) -> pathlib.Path:
    """The export's directory: new, or empty (an export never overwrites)."""
    path = pathlib.Path(out)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise UsageError("--out must be a new or empty directory (an export never overwrites)", path)
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclasses.dataclass
class ExportResult:
    out_dir: str
    store_names: list[str]
    task_count: int
    messages: int
    consume_queue_units: int
    finding_count: int

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def export(spark, specs: list[StoreSpec], out: str | os.PathLike, *, split_size: int = DEFAULT_SPLIT_SIZE,
           progress=None) -> ExportResult:
    """Driver side: plan, run every task on the cluster, sum the summaries."""
    out = check_out_dir(out)
    tasks = list(specs) + plan_tasks(specs, split_size)  # a store's queues first: they run beside its ranges
    sc = spark.sparkContext
    target = str(out.resolve())
    results = run_job(sc, sc.parallelize(tasks, len(tasks)).map(lambda t: run_task(t, target)), len(tasks),
                      progress, "export")
    queues = [r for r in results if r.task == QUEUES_TASK]
    ranges = [r for r in results if r.task != QUEUES_TASK]
    return ExportResult(str(out), [s.name for s in specs], len(tasks), sum(r.messages for r in ranges),
                        sum(r.messages for r in queues), sum(r.findings for r in results))


def run_task(task, out: str) -> TaskSummary:
    """Executor side: a store's queues, or one byte range of one segment."""
    return export_queues_task(task, out) if isinstance(task, StoreSpec) else export_segment_task(task, out)


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
