"""``rmqtool spark stats``: what a fleet holds, per store, topic and queue, and the
UNIQ_KEYs stored more than once.

A UNIQ_KEY is a producer's id for a message: it is stored twice when a send is retried and
lands on two brokers, or when a message is copied by hand. Records the broker itself stores
again with the same UNIQ_KEY are not copies and are left out: system topics (a scheduled
message's first stop, half messages, retry and dead-letter topics) and prepared or
rolled-back transaction records.
"""
from __future__ import annotations

from rmqtool.formats.properties import PROPERTY_INNER_BASE, PROPERTY_INNER_NUM
from rmqtool.formats.sysflag import TRANSACTION_MASK, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from rmqtool.spark.parts import MESSAGES_DIR
from rmqtool.spark.tables import read_table

SYSTEM_TOPIC_PREFIXES = ("RMQ_SYS_", "rmq_sys_", "SCHEDULE_TOPIC_XXXX", "%RETRY%", "%DLQ%")
HOUR_MS = 3_600_000


def queue_stats(spark, table_dir: str) -> list[dict]:
    from pyspark.sql import functions as F

    df = read_table(spark, table_dir, MESSAGES_DIR)
    # a 5.x inner batch record (INNER_NUM and INNER_BASE) holds INNER_NUM messages from its queue
    # offset on, as dump --stats counts them (recovery/salvage.queue_offsets_of)
    inner = F.col("properties").getItem(PROPERTY_INNER_NUM).cast("long")
    df = df.withColumn("_num", F.when(F.col("properties").getItem(PROPERTY_INNER_BASE).isNotNull() & (inner > 0),
                                      inner).otherwise(F.lit(1)))
    grouped = (df.groupBy("store_name", "topic", "queue_id")
               .agg(F.sum("_num").alias("messages"), F.sum("store_size").alias("bytes"),
                    F.min("store_timestamp").alias("first_store_timestamp"),
                    F.max("store_timestamp").alias("last_store_timestamp"),
                    F.min("queue_offset").alias("min_queue_offset"),
                    F.max(F.col("queue_offset") + F.col("_num")).alias("max_queue_offset"))  # one past: as dump --stats, info
               .orderBy("store_name", "topic", "queue_id"))
    rows = []
    for r in grouped.toLocalIterator():
        row = {"record": "queue_stats", **r.asDict()}
        span = row["last_store_timestamp"] - row["first_store_timestamp"]
        row["messages_per_hour"] = round(row["messages"] * HOUR_MS / max(span, HOUR_MS), 3)
        rows.append(row)
    return rows


def duplicate_uniq_keys(spark, table_dir: str) -> list[dict]:
    from pyspark.sql import functions as F

    df = read_table(spark, table_dir, MESSAGES_DIR).where(F.col("uniq_key").isNotNull())
    for prefix in SYSTEM_TOPIC_PREFIXES:
        df = df.where(~F.col("topic").startswith(prefix))
    tran = F.col("sys_flag").bitwiseAND(TRANSACTION_MASK)
    df = df.where((tran != TRANSACTION_PREPARED_TYPE) & (tran != TRANSACTION_ROLLBACK_TYPE))
    copy = F.struct("store_name", "topic", "queue_id", "queue_offset", "commit_log_offset", "store_timestamp",
                    "store_path", "file", "file_position")
    dups = (df.groupBy("uniq_key").agg(F.count(F.lit(1)).alias("copy_count"), F.collect_list(copy).alias("copies"),
                                       F.countDistinct("store_name").alias("store_count"))
            .where(F.col("copy_count") > 1).orderBy("uniq_key"))
    rows = []
    for r in dups.toLocalIterator():
        d = r.asDict(recursive=True)
        copies = sorted(d["copies"], key=lambda c: (c["store_name"], c["commit_log_offset"]))
        rows.append({"record": "duplicate_uniq_key", "uniq_key": d["uniq_key"], "copy_count": d["copy_count"],
                     "store_count": d["store_count"], "copies": copies})
    return rows


def export_findings(spark, table_dir: str) -> list:
    """The findings table's rows as findings: what stats says of the stores' damage, as
    ``dump commitlog --stats`` says it (their lines on stderr, exit 3 for an error)."""
    from rmqtool.findings import Finding
    from rmqtool.spark.parts import FINDINGS_DIR
    return [Finding(r["finding"], r["path"], r["offset"], r["message"])
            for r in read_table(spark, table_dir, FINDINGS_DIR).select("finding", "path", "offset", "message")
            .collect()]
