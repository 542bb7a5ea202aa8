"""The tables a fleet export writes, as Arrow schemas, and rows turned into their columns.

``messages``: every field ``dump commitlog`` gives a message (report/records.py builds
the row: one row builder), with the body and the properties string as binary, the
properties as a map, and where it came from (``store_path``, ``file``, ``file_position``).
``consume_queue``: a queue's units from its min to its max offset (fill units left out), as the
broker's next start leaves them (spark/export.py export_queues_task), each tagsCode as the
queue's iterator hands it out (an ext address looked up).
``findings``: what the scans found, as ``verify`` rows. Every table has a ``family`` column
(``rocketmq`` or ``qmq``); a QMQ store's rows fill QMQ's own columns (spark/qmq/export.py). Each table is partitioned by
``store_name`` and ``topic`` (hive style: ``store_name=NAME/topic=TOPIC/``); those two columns are
the directory names, not in the files.
"""
from __future__ import annotations


import pyarrow as pa

PARTITIONS = ("store_name", "topic")

MESSAGES = pa.schema([
    ("commit_log_offset", pa.int64()), ("store_size", pa.int32()), ("magic_code", pa.string()),
    ("message_version", pa.int8()), ("body_crc", pa.int32()), ("body_crc_ok", pa.bool_()),
    ("queue_id", pa.int32()), ("flag", pa.int32()), ("queue_offset", pa.int64()), ("physical_offset", pa.int64()),
    ("sys_flag", pa.int32()), ("born_timestamp", pa.int64()), ("born_host", pa.string()),
    ("store_timestamp", pa.int64()), ("store_host", pa.string()), ("reconsume_times", pa.int32()),
    ("prepared_transaction_offset", pa.int64()), ("body_length", pa.int32()), ("body_compression", pa.string()),
    ("body", pa.binary()), ("properties", pa.map_(pa.string(), pa.string())), ("properties_raw", pa.binary()),
    ("tags", pa.string()), ("keys", pa.list_(pa.string())), ("uniq_key", pa.string()), ("msg_id", pa.string()),
    ("property_crc_ok", pa.bool_()), ("properties_utf8_ok", pa.bool_()), ("topic_utf8_ok", pa.bool_()),
    ("store_path", pa.string()), ("file", pa.string()), ("file_position", pa.int64()),
    # the store's family, and QMQ's fields (null in a RocketMQ row; spark/qmq/export.py)
    ("family", pa.string()), ("subject", pa.string()), ("sequence", pa.int64()), ("message_log_offset", pa.int64()),
    ("message_id", pa.string()), ("payload_crc_ok", pa.bool_()), ("tag_list", pa.list_(pa.string())),
])

CONSUME_QUEUE = pa.schema([
    ("queue_id", pa.int32()), ("queue_offset", pa.int64()), ("commit_log_offset", pa.int64()), ("size", pa.int32()),
    ("tags_code", pa.int64()), ("batch_size", pa.int32()), ("store_path", pa.string()), ("file", pa.string()),
    ("file_position", pa.int64()),
    ("family", pa.string()), ("sequence", pa.int64()), ("message_log_offset", pa.int64()),
])

FINDINGS = pa.schema([
    ("finding", pa.string()), ("severity", pa.string()), ("path", pa.string()), ("offset", pa.int64()),
    ("message", pa.string()), ("commit_log_offset", pa.int64()), ("family", pa.string()),
])

TABLES = {"messages": MESSAGES, "consume_queue": CONSUME_QUEUE, "findings": FINDINGS}

# fields of a dump row a message row defaults when the row leaves them out (they appear only when false)
_DEFAULT_TRUE = ("property_crc_ok", "properties_utf8_ok", "topic_utf8_ok")


def message_columns(rows: list[dict], store_path: str) -> pa.Table:
    """``dump`` rows (built with body and properties_raw as bytes) as a messages table."""
    columns = {name: [] for name in MESSAGES.names}
    for row in rows:
        for name in MESSAGES.names:
            if name in _DEFAULT_TRUE:
                columns[name].append(row.get(name, None if name == "property_crc_ok" else True))
            elif name == "store_path":
                columns[name].append(store_path)
            elif name == "family":
                columns[name].append(row.get("family", "rocketmq"))
            elif name == "properties":
                columns[name].append(list(row["properties"].items()))
            else:
                columns[name].append(row.get(name))
    return pa.table(columns, schema=MESSAGES)


def read_table(spark, table_dir: str, name: str):
    """An exported table as a DataFrame, read with its schema and the partition columns as
    strings: a table no store gave a row (a directory with no part) reads as empty, where
    Spark would find no schema to infer."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StringType, StructField

    schema = from_arrow_schema(TABLES[name])
    for column in PARTITIONS:
        schema = schema.add(StructField(column, StringType()))
    return spark.read.schema(schema).parquet(f"{table_dir}/{name}")


def partition_dir(store: str, topic: str) -> str:
    """``store_name=NAME/topic=TOPIC`` with the value escaping Spark and pyarrow read back
    (a retry topic's ``%RETRY%`` must not read as an escape)."""
    return f"{store_dir(store)}/topic={_escape(topic)}"


def store_dir(store: str) -> str:
    return f"store_name={_escape(store)}"


def _escape(value: str) -> str:
    """Every ASCII character but letters, digits, "-", "_" and "." as %XX, which Spark's
    unescapePathName and pyarrow's hive partitioning both read back; any other character as
    it is. Spark reads a %XX back as one character, so a UTF-8 byte escaped so came back
    alone: "订单" read as six Latin-1 characters, and a query for it found nothing."""
    return "".join(c if not c.isascii() or c.isalnum() or c in "-_." else f"%{ord(c):02X}" for c in value)
