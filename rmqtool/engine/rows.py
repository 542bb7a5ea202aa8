"""Rows of ``dump`` (JSON Lines) back into messages to append: the inverse of the row format
(README "Message rows"). A row that carries ``properties_raw`` is a stored record and is
written as it was stored; rows that are not messages (dump's blank and corrupt rows) are
skipped and counted.
"""
from __future__ import annotations

import base64
import collections
import json
import pathlib
import sys
import time
from typing import Iterator

from rmqtool.errors import UsageError
from rmqtool.formats import properties as props
from rmqtool.formats import sysflag
from rmqtool.formats.crc import ends_with_crc32_entry
from rmqtool.formats.properties import bytes_to_properties
from rmqtool.dispatch.rules import RMQ_SYS_SCHEDULE_TOPIC
from rmqtool.engine.message_inner import MessageInner, as_host
from rmqtool.engine.producer import producer_message
from rmqtool.store.compression import compress as compress_body


class JsonlSource:
    """The messages of a JSON Lines file (opened now, before the store is), counting the rows
    that are not messages (dump's blank and corrupt rows), which are skipped."""

    def __init__(self, source: str, keep_store_timestamp: bool, keep_store_host: bool):
        self.keep_store_timestamp = keep_store_timestamp
        self.keep_store_host = keep_store_host
        self.skipped: collections.Counter = collections.Counter()  # record kind -> rows skipped
        if source == "-":
            self._file, self.name = sys.stdin, "<stdin>"
        else:
            path = pathlib.Path(source)
            try:
                self._file = open(path, encoding="utf-8")
            except OSError as exc:
                raise UsageError(f"cannot open ({exc.strerror})", path) from None
            self.name = str(path)

    def __iter__(self) -> Iterator[MessageInner]:
        try:
            for number, line in enumerate(self._file, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    if not isinstance(row, dict):
                        raise ValueError("not a JSON object")
                    record = row.get("record", "message")
                    if record != "message":
                        self.skipped[str(record)] += 1
                        continue
                    yield message_from_row(row, self.keep_store_timestamp, self.keep_store_host)
                except UsageError as exc:
                    raise UsageError(f"line {number}: {exc.message}", self.name) from None
                except (ValueError, TypeError, KeyError) as exc:
                    raise UsageError(f"line {number}: {exc}", self.name) from None
        finally:
            if self._file is not sys.stdin:
                self._file.close()

    def skipped_text(self) -> str | None:
        """What was skipped, for people (None: nothing)."""
        if not self.skipped:
            return None
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(self.skipped.items()))
        return f"skipped {sum(self.skipped.values())} row(s) that are not messages ({kinds})"


def message_from_row(row: dict, keep_store_timestamp: bool = False, keep_store_host: bool = False) -> MessageInner:
    """A dump row (or a hand-written one) as a message to write.

    With ``properties_raw`` (base64), the line is a stored record and its properties bytes
    are written as they are; with only ``properties``, they are written in the order given.
    Either way nothing is added and nothing is re-delayed: a SCHEDULE_TOPIC_XXXX record stays
    there, a delivered one stays in its topic; a ``__CRC32#`` entry is written anew over the
    record where it now lies (a copied one would not match its new place). Without either,
    it is a new message with a producer's defaults (TAGS/KEYS from ``tags``/``keys``, a new
    UNIQ_KEY, CLUSTER). A body dumped with --decompress is compressed again.
    """
    topic = row.get("topic")
    if not isinstance(topic, str) or not topic:
        raise UsageError("topic is missing")
    raw = row.get("body")
    body = base64.b64decode(raw, validate=True) if raw else b""
    sys_flag = int(row.get("sys_flag", 0) or 0)
    if row.get("body_decompressed") and row.get("body_compression"):
        body = compress_body(body, row["body_compression"])
    elif row.get("body_length") is not None and len(body) != row["body_length"]:
        raise UsageError(f"body is {len(body)} bytes, body_length says {row['body_length']} "
                         "(dump with --body base64 to copy bodies)")
    born_host = row.get("born_host") or "127.0.0.1:0"
    common = dict(queue_id=int(row.get("queue_id", 0) or 0), flag=int(row.get("flag", 0) or 0),
                  born_timestamp=int(row["born_timestamp"]) if row.get("born_timestamp") is not None else None,
                  born_host=born_host, reconsume_times=int(row.get("reconsume_times", 0) or 0))
    properties = row.get("properties")
    stored = row.get("properties_raw")
    if properties is None and stored is None:
        keys = row.get("keys")
        msg = producer_message(topic, body, tags=row.get("tags"),
                                   keys=" ".join(keys) if isinstance(keys, list) else keys, compress=None, **common)
        msg.sys_flag |= sys_flag & ~(sysflag.BORNHOST_V6_FLAG | sysflag.STOREHOSTADDRESS_V6_FLAG)
    else:
        if stored is not None:
            text = base64.b64decode(stored, validate=True)  # bytes: stored verbatim
            pm, _utf8_ok = bytes_to_properties(text)  # what the broker's dispatch reads from them
            prop_crc = ends_with_crc32_entry(text)
        elif not isinstance(properties, dict) or not all(isinstance(v, str) for v in properties.values()):
            raise UsageError("properties must be an object of strings")
        else:
            pm = dict(properties)
            prop_crc = pm.pop(props.PROPERTY_CRC32, None) is not None
            text = props.properties_to_string(pm)
        if sys_flag & sysflag.INNER_BATCH_FLAG or props.PROPERTY_INNER_NUM in pm and props.PROPERTY_INNER_BASE in pm:
            # the broker's put numbers a batch's INNER_BASE from its queue and dispatch takes INNER_NUM
            # offsets: written as one message, it overlapped the queue's next offsets
            raise UsageError("a 5.x inner batch record (a BatchCQ topic's: INNER_BASE, INNER_NUM): the engine does "
                             "not write inner batches")
        if topic != RMQ_SYS_SCHEDULE_TOPIC:
            pm.pop(props.PROPERTY_DELAY_TIME_LEVEL, None)  # delivered already: no second redirect
        if common["born_timestamp"] is None:
            common["born_timestamp"] = int(time.time() * 1000)
        msg = MessageInner(topic, body, properties=pm, properties_string=text, sys_flag=sys_flag,
                               prepared_transaction_offset=int(row.get("prepared_transaction_offset", 0) or 0),
                               prop_crc=prop_crc, **{**common, "born_host": as_host(born_host)})
    if keep_store_timestamp and row.get("store_timestamp") is not None:
        msg.store_timestamp = int(row["store_timestamp"])
    if keep_store_host and row.get("store_host"):
        msg.store_host = as_host(row["store_host"])
    return msg
