"""``rmqtool spark query``: messages across a fleet, from the exported ``messages`` table.

The conditions are ``query``'s: a key (one of KEYS, or the UNIQ_KEY), a UNIQ_KEY only, an
offset msgId, or a topic, each within an optional store-time window. Rows come back as
``dump``/``query`` rows (body and properties string rendered as asked), each carrying its
``store_name`` and ``store_path``, in store and commit log order.
"""
from __future__ import annotations

from rmqtool.errors import UsageError
from rmqtool.inspect.lookup import crc_mismatch_note, damaged_message_note
from rmqtool.report.records import render_body
from rmqtool.spark.parts import MESSAGES_DIR
from rmqtool.spark.tables import read_table

# dump rows carry these only when they are false
_ONLY_WHEN_FALSE = ("properties_utf8_ok", "topic_utf8_ok")


def condition(key=None, uniq_key=None, msg_id=None, topic=None, begin=None, end=None, *, check_only=False):
    """The filter as a Spark column (a session must be running); UsageError unless one of
    key, uniq_key, msg_id is given, or a topic alone. ``check_only``: only that check."""
    given = [n for n, v in (("--key", key), ("--uniq-key", uniq_key), ("--msg-id", msg_id)) if v is not None]
    if len(given) > 1 or not (given or topic):
        raise UsageError("give one of --key, --uniq-key, --msg-id, or --topic alone")
    if check_only:
        return None
    from pyspark.sql import functions as F

    cond = F.lit(True)
    if key is not None:
        cond = F.array_contains(F.col("keys"), key) | (F.col("uniq_key") == key)
    elif uniq_key is not None:
        cond = F.col("uniq_key") == uniq_key
    elif msg_id is not None:  # RocketMQ's offset msgId, or a QMQ message id
        cond = (F.upper(F.col("msg_id")) == msg_id.upper()) | (F.col("message_id") == msg_id)
    if topic is not None:
        cond = cond & (F.col("topic") == topic)
    if begin is not None:
        cond = cond & (F.col("store_timestamp") >= begin)
    if end is not None:
        cond = cond & (F.col("store_timestamp") <= end)
    return cond


def find_messages(spark, table_dir: str, cond, *, body: str = "base64",
                  limit: int | None = None) -> tuple[list[dict], dict[str, int]]:
    """(the rows matching ``cond``, in store and commit log order; {store_name: messages
    matching} of each store that held more than ``limit``). ``limit``: at most that many a
    store, its newest (the highest offsets), as query's --max keeps them from each store."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = read_table(spark, table_dir, MESSAGES_DIR).where(cond)
    if limit is not None:
        store = Window.partitionBy("store_name")
        newest_first = store.orderBy(F.col("commit_log_offset").desc(), F.col("message_log_offset").desc())
        df = (df.withColumn(_RANK, F.row_number().over(newest_first))
              .withColumn(_MATCHED, F.count(F.lit(1)).over(store)).where(F.col(_RANK) <= limit))
    rows, more = [], {}
    for r in df.orderBy("store_name", "commit_log_offset", "message_log_offset").toLocalIterator():
        raw = r.asDict(recursive=True)
        raw.pop(_RANK, None)
        matched = raw.pop(_MATCHED, None)
        if matched is not None and matched > limit:
            more[raw["store_name"]] = matched
        rows.append(as_row(raw, body))
    return rows, more


_RANK, _MATCHED = "_newest_rank", "_matched"  # columns of the limit's window, not of a row


def damage_notes(rows: list[dict]) -> tuple[list[str], bool]:
    """(query's line for each row found whose body or ``__CRC32#`` CRC fails, a QMQ row's
    payload CRC, as query says it; whether a row found is damaged)."""
    notes = [line for r in rows if (line := _damage_note(r))]
    return notes, bool(notes)


def _damage_note(r: dict) -> str | None:
    if r.get("family") == "qmq":
        return damaged_message_note(r["file"], r["file_position"], "payload CRC",
                                    f"message log offset {r['message_log_offset']}") \
            if r.get("payload_crc_ok") is False else None
    return crc_mismatch_note(r["file"], r["file_position"], r["commit_log_offset"], r.get("body_crc_ok"),
                             r.get("property_crc_ok"))


def message_sections(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    """The rows found as tables for people, each family's with query's view of it (a QMQ
    row's subject, sequence, message id and message log offset): (kind, rows) pairs."""
    qmq = [r for r in rows if r.get("family") == "qmq"]
    rocketmq = [r for r in rows if r.get("family") != "qmq"]
    return [("message", rocketmq)] * bool(rocketmq or not qmq) + [("qmq_message", qmq)] * bool(qmq)


# the messages table's QMQ columns (spark/qmq/export.py), and how a QMQ row names what it shares
_QMQ_COLUMNS = ("family", "subject", "sequence", "message_log_offset", "message_id", "payload_crc_ok", "tag_list")
_QMQ_ROW = ("family", "subject", "sequence", "message_log_offset", "file", "file_position", "store_size",
            "store_timestamp", "magic_code", "message_version", "payload_crc_ok", "message_id", "flag", "tag_list",
            "properties", "body", "body_length", "store_name", "store_path")
_QMQ_NAMES = {"tag_list": "tags", "properties": "attrs"}


def as_row(raw: dict, body: str) -> dict:
    """A messages-table row as the row ``query`` prints for its family (plus store_name and
    store_path): a RocketMQ row as RocketMQ's, a QMQ row as ``query`` on a QMQ store names it."""
    if raw.get("family") == "qmq":
        row = {"record": "message"}
        for name in _QMQ_ROW:
            value = raw.get(name)
            if name == "body":
                value = render_body(value, body) if value is not None else None
            elif name == "properties":
                value = dict(value) if value is not None else {}
            row[_QMQ_NAMES.get(name, name)] = value
        return row
    row = {"record": "message"}
    for name, value in raw.items():
        if name in _QMQ_COLUMNS:
            continue
        if name == "body":
            row[name] = render_body(value, body)
        elif name == "properties_raw":
            row[name] = render_body(value, "base64")
        elif name == "properties":
            row[name] = dict(value) if value is not None else {}
        elif name in _ONLY_WHEN_FALSE and value is not False:
            continue
        elif name == "property_crc_ok" and value is None:
            continue
        else:
            row[name] = value
    return row
