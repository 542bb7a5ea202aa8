"""Rows of QMQ's store: message log records, consumer-log units, actions, checkpoints.

The names are the project's vocabulary (docs/vocabulary.md): a record's length is
``store_size`` (``size`` is a file's), a byte position in the whole message log is
``message_log_offset`` (QMQ's ``wroteOffset``), inside a file ``file_position``; a message's
per-subject number is ``sequence``. A payload that does not decode is shown as stored with
``payload_error`` saying why: a bad payload is damage to report, not a reason to stop.
"""
from __future__ import annotations

import construct as cs

from rmqtool.formats.qmq import payload as qpayload
from rmqtool.formats.qmq.messagelog import MESSAGE_LOG_MAGICS
from rmqtool.report.records import render_body
from rmqtool.store.qmq.actionlog import ActionDamage, ActionRecord
from rmqtool.store.qmq.consumerlog import ConsumerLogUnit
from rmqtool.store.qmq.messagelog import BlankRecord, Damage, EmptyRecord, MessageRecord

FAMILY = "qmq"


def _payload_fields(raw: bytes | None, body: str) -> dict:
    if raw is None:  # messagelog.parse_record: past the written bytes, no CRC says it is whole
        return {"payload_error": "payload not read: it runs past the segment's written bytes and no CRC says it is "
                                 "whole (a torn record, or a damaged size)", "body": None}
    read = qpayload.read_payload(raw)  # the clean case without construct's objects (200 us a record)
    if read is not None:
        (flag, created, expire, subject, message_id, tags, body_length), payload_body, attrs = read
    else:
        try:
            p = qpayload.Payload.parse(raw)
            attr_list = qpayload.Attributes.parse(p.body)
        except (cs.ConstructError, UnicodeDecodeError) as exc:
            return {"payload_error": f"payload unreadable: {type(exc).__name__}", "body": render_body(raw, body)}
        h = p.header
        flag, created, expire, subject, message_id, tags, body_length = (
            h.flag, h.created_time, h.expire_time, h.subject, h.message_id, h.tags, h.body_length)
        payload_body, attrs = p.body, {a.key: a.value for a in attr_list}
    return {
        "message_id": message_id,
        "payload_subject": subject,
        "flag": flag,
        "delay": bool(flag & qpayload.FLAG_DELAY),
        "low_reliability": bool(flag & qpayload.FLAG_LOW_RELIABILITY),
        "created_timestamp": created,
        "expire_timestamp": expire,
        "tags": list(tags) if tags is not None else [],
        "attrs": attrs,
        "body": render_body(payload_body, body),
        "body_length": body_length,
    }


def message_log_row(item: MessageRecord | EmptyRecord | BlankRecord | Damage, body: str = "base64") -> dict:
    common = {"family": FAMILY, "message_log_offset": item.offset, "file": item.path, "file_position": item.position}
    if isinstance(item, MessageRecord):
        row = {"record": "message", "subject": item.subject, "sequence": item.sequence, **common,
               "store_size": item.size, "header_size": item.header_size, "store_timestamp": item.timestamp,
               "magic_code": f"0x{item.magic:08X}", "message_version": MESSAGE_LOG_MAGICS.index(item.magic) + 1,
               "payload_crc": item.payload_crc, "payload_crc_ok": item.payload_crc_ok,
               "payload_length": item.payload_size, **_payload_fields(item.payload, body)}
        if not item.subject_utf8:
            row["subject_utf8_ok"] = False  # the subject is QMQ's reading of its bytes (U+FFFD for the bad ones)
        return row
    if isinstance(item, EmptyRecord):
        return {"record": "end_of_segment", **common, "store_timestamp": item.timestamp}
    if isinstance(item, BlankRecord):
        return {"record": "blank", **common, "store_size": item.until - item.position}
    return {"record": "corrupt", **common, "store_size": item.size, "reason": item.reason}


def consumer_log_row(u: ConsumerLogUnit) -> dict:
    row = {"record": "unit", "family": FAMILY, "subject": u.subject, "sequence": u.sequence, "kind": u.kind,
           "file": u.path, "file_position": u.position, "store_timestamp": u.timestamp}
    if u.kind in ("message", "fill"):
        row.update(message_log_offset=u.wrote_offset, store_size=u.wrote_bytes, header_size=u.header_size)
    elif u.kind == "smt":
        row.update(tablet_id=u.tablet_id, tablet_position=u.smt_position, store_size=u.smt_size)
    return row


def action_row(a: ActionRecord | ActionDamage) -> dict:
    if isinstance(a, ActionDamage):
        return {"record": "corrupt", "family": FAMILY, "action_log_offset": a.offset, "file": a.path,
                "file_position": a.position, "store_size": a.size, "reason": a.reason}
    f = a.fields
    row = {"record": "action", "family": FAMILY, "action": a.action_type, "action_log_offset": a.offset,
           "action_log_end_offset": a.end_offset, "file": a.path, "file_position": a.position,
           "store_size": a.size, "subject": f["subject"], "group": f["group"], "consumer_id": f["consumer_id"],
           "store_timestamp": f["timestamp"]}
    if a.action_type == "PULL":
        row.update(broadcast=f["broadcast"], first_pull_sequence=f["first_sequence"],
                   last_pull_sequence=f["last_sequence"], first_sequence=f["first_message_sequence"],
                   last_sequence=f["last_message_sequence"])
    elif a.action_type == "RANGE_ACK":
        row.update(first_pull_sequence=f["first_sequence"], last_pull_sequence=f["last_sequence"])
    return row
