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
    """Executor side: every consume queue of one store, a Parquet part per topic."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rmqtool.spark.tables import CONSUME_QUEUE, FINDINGS, partition_dir, store_dir
    from rmqtool.store.commitlog_end import CommitLog
    from rmqtool.store.consumequeue import open_consume_queues
    from rmqtool.store.paths import StorePaths

    paths = StorePaths(spec.path)
    summary = TaskSummary(spec.name, "consume-queues")
    log = CommitLog(paths.commitlog) if paths.commitlog.is_dir() else None
    end = log.max_offset() if log is not None else None
    queues = open_consume_queues(paths.root, commit_log_max_offset=end)
    low = log.segments[0].base_offset if log is not None and log.segments else 0
    by_topic: dict[str, dict[str, list]] = {}
    for q in queues.queues:
        columns = by_topic.setdefault(q.topic, {n: [] for n in CONSUME_QUEUE.names})
        for u in q.iter_units(q.min_offset(low)):
            if u.is_fill:
                continue
            for name, value in (("queue_id", u.queue_id), ("queue_offset", u.queue_offset),
                                ("commit_log_offset", u.commit_log_offset), ("size", u.size),
                                ("tags_code", u.tags_code), ("batch_size", u.batch_num),
                                ("store_path", str(paths.root)), ("file", u.path), ("file_position", u.position)):
                columns[name].append(value)
    for topic, columns in by_topic.items():
        directory = pathlib.Path(out, CONSUME_QUEUE_DIR, partition_dir(spec.name, topic))
        directory.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(columns, schema=CONSUME_QUEUE), directory / "part-queues.parquet")
        summary.messages += len(columns["queue_offset"])
        summary.files += 1
    found = queues.all_findings()
    if found:
        _write_findings(found, pathlib.Path(out, FINDINGS_DIR, store_dir(spec.name)), "part-queues.parquet", FINDINGS)
        summary.findings = len(found)
    return summary


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
    tasks = plan_tasks(specs, split_size)
    sc = spark.sparkContext
    target = str(out.resolve())
    segment_results = []
    if tasks:
        rdd = sc.parallelize(tasks, len(tasks))
        segment_results = run_job(sc, rdd.map(lambda t: export_segment_task(t, target)), len(tasks), progress,
                                  "export: commit log ranges")
    queue_results = run_job(sc, sc.parallelize(specs, len(specs)).map(lambda s: export_queues_task(s, target)),
                            len(specs), progress, "export: consume queues")
    return ExportResult(str(out), [s.name for s in specs], len(tasks) + len(specs),
                        sum(r.messages for r in segment_results), sum(r.messages for r in queue_results),
                        sum(r.findings for r in segment_results + queue_results))


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
