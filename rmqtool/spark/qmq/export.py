"""``rmqtool spark export`` of a QMQ store: its message log and consumer logs into the same
tables as a RocketMQ store's, each row saying ``family = "qmq"``.

A message log segment is one task, read from its start: QMQ's segments are found record by
record from position 0 (``MessageLogRecordVisitor``), and a blank record can jump anywhere,
so a range cut inside a segment has no record boundary it could prove. The rows are
``dump messagelog``'s (report/qmq/records.py: one row builder), put into the ``messages``
columns: the subject is the ``topic`` partition and the ``subject`` column, the per-subject
number is ``sequence``, the record's place in the log is ``message_log_offset``, the message
attributes are ``properties`` and the client's tags ``tag_list``. RocketMQ's own fields
(``commit_log_offset``, ``queue_id``, ``queue_offset``, ...) stay null: QMQ has none.
Consumer logs go into ``consume_queue``, one task a store: the units that point at a
message (fill, SMT and unreadable units left out, as a RocketMQ queue's fill units are;
``verify`` reports the unreadable ones), with ``sequence`` and ``message_log_offset``.
"""
from __future__ import annotations

import dataclasses
import pathlib

from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
from rmqtool.report.qmq.records import FAMILY, consumer_log_row, message_log_row
from rmqtool.spark.parts import CONSUME_QUEUE_DIR, TaskSummary, write_message_parts, write_part
from rmqtool.spark.stores import StoreSpec
from rmqtool.store.qmq import consumerlog, messagelog
from rmqtool.store.qmq.segments import LogSegment, list_log

CONSUMER_LOGS_TASK = "consumer-logs"


@dataclasses.dataclass(frozen=True)
class MessageLogTask:
    store: str  # the store's name
    store_path: str
    segment: LogSegment

    @property
    def name(self) -> str:
        return f"{self.segment.base_offset:020d}"


@dataclasses.dataclass(frozen=True)
class ConsumerLogsTask:
    spec: StoreSpec
    name: str = CONSUMER_LOGS_TASK


def qmq_tasks(spec: StoreSpec) -> list:
    """A store's consumer logs (first: they run beside the segments), then a task a segment."""
    log = list_log(pathlib.Path(spec.path) / "messagelog", PER_SEGMENT_FILE_SIZE)
    return [ConsumerLogsTask(spec), *(MessageLogTask(spec.name, spec.path, seg) for seg in log.segments)]


def message_row(item: messagelog.MessageRecord) -> dict:
    """A message record's ``dump`` row with the names of the ``messages`` table."""
    row = message_log_row(item, "raw")
    row["topic"] = row["subject"]
    row["tag_list"] = row.pop("tags", None)
    row["properties"] = row.pop("attrs", None) or {}
    row["body_length"] = row.get("body_length", item.payload_size)
    return row


def export_message_log_task(task: MessageLogTask, out: str) -> TaskSummary:
    """Executor side: one message log segment into Parquet parts, one per subject."""
    summary = TaskSummary(task.store, task.name, bytes_read=task.segment.file_size)
    by_subject: dict[str, list[dict]] = {}
    found = []
    for item in messagelog.scan_segment(task.segment):
        found += messagelog.findings_of(item)
        if isinstance(item, messagelog.MessageRecord):
            by_subject.setdefault(item.subject, []).append(message_row(item))
    return write_message_parts(summary, by_subject, found, out, task.store_path, FAMILY)


def export_consumer_logs_task(task: ConsumerLogsTask, out: str) -> TaskSummary:
    """Executor side: every subject's consumer log, its units in sequence order, a part a subject."""
    import pyarrow as pa

    from rmqtool.spark.tables import CONSUME_QUEUE, partition_dir

    spec = task.spec
    summary = TaskSummary(spec.name, task.name)
    for subject in consumerlog.subjects(spec.path):
        directory, unit = consumerlog.open_consumer_log(spec.path, subject)
        if unit is None:
            continue
        rows = [consumer_log_row(u) for u in consumerlog.read_units(directory, unit, subject) if u.kind == "message"]
        columns = {name: [r.get(name) for r in rows] for name in CONSUME_QUEUE.names}
        columns["family"] = [FAMILY] * len(rows)
        columns["size"] = [r.get("store_size") for r in rows]
        columns["store_path"] = [spec.path] * len(rows)
        write_part(pa.table(columns, schema=CONSUME_QUEUE), out, CONSUME_QUEUE_DIR, partition_dir(spec.name, subject),
                   "part-consumer-logs.parquet")
        summary.messages += len(rows)
        summary.files += 1
    return summary


def run_qmq_task(task, out: str) -> TaskSummary:
    if isinstance(task, ConsumerLogsTask):
        return export_consumer_logs_task(task, out)
    return export_message_log_task(task, out)
