"""formats/qmq/payload.read_payload, the schema's clean case in plain reads, gives what the
schema (Payload, Attributes) gives, or None where the schema must read it: on the payloads
QMQ's client wrote (truth), on payloads built from the schema, and on damaged ones."""
from __future__ import annotations

import construct as cs
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import examples
from rmqtool.formats.qmq import messagelog, payload
from test_qmq_formats import BASIC, _message_log_bytes


def _by_schema(raw: bytes):
    """What read_payload must give, read by the schema; None where the schema refuses it."""
    try:
        p = payload.Payload.parse(raw)
    except (cs.ConstructError, UnicodeDecodeError):
        return None
    h = p.header
    attrs = {a.key: a.value for a in payload.Attributes.parse(p.body)}
    return ((h.flag, h.created_time, h.expire_time, h.subject, h.message_id,
             None if h.tags is None else list(h.tags), h.body_length), p.body, attrs)


def _agrees(raw: bytes) -> bool:
    fast = payload.read_payload(raw)
    return fast is None or fast == _by_schema(raw)


def test_the_client_payloads_are_read_as_the_schema_reads_them():
    data, records = _message_log_bytes(BASIC)
    long_values = 0
    for r in records:
        raw = messagelog.MessageLogRecord.parse(data[r["offset"]:r["offset"] + r["size"]]).body.payload
        fast = payload.read_payload(raw)
        assert fast is not None and fast == _by_schema(raw)
        long_values += any(a["valueLengthShort"] < 0 for a in r["payload"]["attrs"])
    assert long_values  # values of 32 KiB and more: the negative int16 length read as the schema reads it


_TEXT = st.text(max_size=12)
_PAYLOADS = st.builds(
    lambda flag, created, expire, subject, message_id, tags, attrs: payload.Payload.build(dict(
        header=dict(flag=flag | (payload.FLAG_HAS_TAGS if tags is not None else 0), created_time=created,
                    expire_time=expire, subject=subject, message_id=message_id, tags=tags,
                    body_length=len(body := payload.Attributes.build([dict(key=k, value=v) for k, v in attrs]))),
        body=body)),
    st.integers(0, 3), st.integers(-2**63, 2**63 - 1), st.integers(-2**63, 2**63 - 1), _TEXT, _TEXT,
    st.none() | st.lists(_TEXT, max_size=4), st.lists(st.tuples(_TEXT, _TEXT | st.text(min_size=0, max_size=40)),
                                                      max_size=5))


@settings(max_examples=examples(150), deadline=None)
@given(raw=_PAYLOADS)
def test_built_payloads_are_read_whole(raw):
    fast = payload.read_payload(raw)
    assert fast is not None and fast == _by_schema(raw)


@settings(max_examples=examples(300), deadline=None)
@given(raw=_PAYLOADS, data=st.data())
def test_damaged_payloads_are_read_as_the_schema_reads_them_or_left_to_it(raw, data):
    """Bytes changed, cut short or added to: read_payload gives the schema's answer or None."""
    damaged = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 3))):
        if damaged:
            damaged[data.draw(st.integers(0, len(damaged) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(damaged)))
    tail = data.draw(st.binary(max_size=6))
    for candidate in (bytes(damaged), bytes(damaged[:cut]), bytes(damaged) + tail):
        assert _agrees(candidate)


@settings(max_examples=examples(200), deadline=None)
@given(raw=st.binary(max_size=80))
def test_random_bytes_never_read_otherwise(raw):
    assert _agrees(raw)
