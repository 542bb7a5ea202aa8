"""What an export task leaves: the Parquet parts it writes itself (under the export
directory, a local path or a URI) and the small summary it hands back to the driver. Every
family's tasks (spark/export.py, spark/qmq/export.py) write through here."""
from __future__ import annotations

import dataclasses
import pathlib

from rmqtool.errors import StoreAccessError

MESSAGES_DIR, CONSUME_QUEUE_DIR, FINDINGS_DIR = "messages", "consume_queue", "findings"
# written last, once every task finished: an export without it stopped part way (a task failed,
# Ctrl-C, a killed driver), and its tables lack what the tasks that did not finish read
COMPLETE_FILE = "_SUCCESS"


@dataclasses.dataclass
class TaskSummary:
    store: str
    task: str
    messages: int = 0
    findings: int = 0
    errors: int = 0  # of the findings, those of severity error (what makes dump exit 3)
    bytes_read: int = 0
    files: int = 0
    error: str | None = None  # why the task stopped (spark/export.py run_task): its one line
    exit_code: int = 0


def write_part(table, out: str, *parts: str) -> None:
    """A Parquet part under the export directory: a local path, or a URI pyarrow opens."""
    import pyarrow.parquet as pq

    from rmqtool.spark import remote
    # a URI's query string (?region=...) stays at its end; a local path may hold a "?"
    base, sep, query = out.partition("?") if remote.is_uri(out) else (out, "", "")
    name = "/".join([base.rstrip("/"), *parts]) + sep + query
    try:
        if remote.is_uri(out):
            fs, root = remote.filesystem(out)
            directory = "/".join([root.rstrip("/"), *parts[:-1]])
            fs.create_dir(directory, recursive=True)
            pq.write_table(table, f"{directory}/{parts[-1]}", filesystem=fs)
            return
        directory = pathlib.Path(out, *parts[:-1])
        directory.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, directory / parts[-1])
    except OSError as exc:  # pyarrow's own (disk full, file too large) do not name the file
        if getattr(exc, "filename", None):
            raise
        raise StoreAccessError(f"cannot write the Parquet part ({exc})", name) from None


def make_tables(out: str) -> None:
    """Every table's directory, made when no task wrote into it: an export of stores with no
    message is still an export (``--table`` reads it back, as empty tables)."""
    from rmqtool.spark import remote
    fs, root = remote.filesystem(out) if remote.is_uri(out) else (None, out)
    for table in (MESSAGES_DIR, CONSUME_QUEUE_DIR, FINDINGS_DIR):
        if fs is not None:
            fs.create_dir(f"{root.rstrip('/')}/{table}", recursive=True)
        else:
            pathlib.Path(out, table).mkdir(parents=True, exist_ok=True)


def mark_complete(out: str, summary: dict) -> None:
    """The export's completion record (:data:`COMPLETE_FILE`, what the export printed as JSON),
    written after every table is whole: ``--table`` reads only an export that has it."""
    import json

    from rmqtool.spark import remote
    data = json.dumps(summary, sort_keys=True).encode() + b"\n"
    if remote.is_uri(out):
        fs, root = remote.filesystem(out)
        with fs.open_output_stream(f"{root.rstrip('/')}/{COMPLETE_FILE}") as f:
            f.write(data)
    else:
        pathlib.Path(out, COMPLETE_FILE).write_bytes(data)


def is_complete(out: str) -> bool:
    """The export at ``out`` has its completion record (:func:`mark_complete`)."""
    from rmqtool.spark import remote
    if remote.is_uri(out):
        import pyarrow.fs as pafs
        fs, root = remote.filesystem(out)
        return fs.get_file_info(f"{root.rstrip('/')}/{COMPLETE_FILE}").type == pafs.FileType.File
    return pathlib.Path(out, COMPLETE_FILE).is_file()


def errors_of(found: list) -> int:
    """How many findings are errors: a task's damage, where warnings alone leave dump's exit 0."""
    return sum(f.severity.value == "error" for f in found)


def write_findings(found: list, out: str, store: str, name: str, schema, family: str = "rocketmq") -> None:
    import pyarrow as pa

    rows = [{"family": family, **f.to_json()} for f in found]
    table = pa.table({n: [r.get(n) for r in rows] for n in schema.names}, schema=schema)
    write_part(table, out, FINDINGS_DIR, store, name)


def write_message_parts(summary: TaskSummary, by_topic: dict[str, list[dict]], found: list, out: str,
                        store_path: str, family: str = "rocketmq") -> TaskSummary:
    """A segment task's output: its ``dump`` rows a Parquet part per topic (a QMQ subject), its
    findings a part, both named by the task; counted into ``summary``."""
    from rmqtool.spark.tables import FINDINGS, message_columns, partition_dir, store_dir

    name = f"part-{summary.task}.parquet"
    for topic, rows in by_topic.items():
        write_part(message_columns(rows, store_path), out, MESSAGES_DIR, partition_dir(summary.store, topic), name)
        summary.messages += len(rows)
        summary.files += 1
    if found:
        write_findings(found, out, store_dir(summary.store), name, FINDINGS, family)
        summary.findings, summary.errors = len(found), errors_of(found)
    return summary
