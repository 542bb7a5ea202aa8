"""The batch body layout (formats/batch.py) against the raw batch bodies a 4.9.8 producer sent:
the construct schema and the derived hot-path structs read them alike, both build them back
byte for byte, and each inner message is what the broker stored as its own record."""
from __future__ import annotations

import base64

import pytest

from conftest import V4, load_truth
from rmqtool.errors import UsageError
from rmqtool.formats.batch import (BATCH_MESSAGE_HEAD_SIZE, BatchBody, BatchMessage, BatchMessageHead,
                                   BatchPropertiesLength, batch_message_size)
from rmqtool.formats.derive import field_names, struct_of
from rmqtool.engine.batch_body import _BATCH_HEAD, _BATCH_PROPS_LEN, decode_batch_body, encode_batch_body
from rmqtool.engine.message_inner import BatchItem
from rmqtool.engine.producer import batch_item

TRUTH = V4 / "batch" / "truth.json"


def _batches():
    truth = load_truth(TRUTH)
    records = {m["physicalOffset"]: m for m in truth["truth"]["messages"]}
    out = []
    for b in truth["batchPutResults"]:
        offsets = [int(i[-16:], 16) for i in b["msgId"].split(",")]
        out.append((b, base64.b64decode(b["batchBodyBase64"]), [records[o] for o in offsets]))
    return out


def test_fixed_parts_have_their_sizes_and_the_derived_structs_agree():
    head, props_len = struct_of(BatchMessageHead), struct_of(BatchPropertiesLength)
    assert BatchMessageHead.sizeof() == head.size == BATCH_MESSAGE_HEAD_SIZE == 20
    assert BatchPropertiesLength.sizeof() == props_len.size == 2
    assert field_names(BatchMessageHead) == ("total_size", "magic_code", "body_crc", "flag", "body_length")
    assert _BATCH_HEAD.format == head.format and _BATCH_PROPS_LEN.format == props_len.format


def test_every_fixture_batch_body_round_trips():
    batches = _batches()
    truth = load_truth(TRUTH)
    # the batches and the single puts together wrote every message of the store, once each
    batched = [r["physicalOffset"] for _, _, records in batches for r in records]
    singles = [s["wroteOffset"] for s in truth["singlePutResults"]]
    assert batched and sorted(batched + singles) == [m["physicalOffset"] for m in truth["truth"]["messages"]]
    assert len(batched) == sum(b["msgNum"] for b, _, _ in batches)
    head = struct_of(BatchMessageHead)
    for b, raw, records in batches:
        parsed = BatchBody.parse(raw)
        assert len(parsed) == b["msgNum"] == b["messagesInBatch"] == len(records)
        pos = 0
        for m in parsed:
            size = batch_message_size(len(m.body), len(m.properties))
            assert m.total_size == size == len(BatchMessage.build(m))
            assert (m.magic_code, m.body_crc) == (0, 0)
            # the derived struct reads the same fixed part at the same place
            assert head.unpack_from(raw, pos) == (m.total_size, 0, 0, m.flag, m.body_length)
            pos += size
        assert pos == len(raw)
        assert BatchBody.build(parsed) == raw
        # the hot path: decode, then encode what it decoded
        decoded = decode_batch_body(raw)
        assert decoded == [(m.flag, m.body, m.properties) for m in parsed]
        items = [BatchItem(body=body, flag=flag, properties_string=p.decode("utf-8"))
                 for flag, body, p in decoded]
        assert encode_batch_body(items) == raw


def test_inner_messages_are_what_the_broker_stored():
    """CommitLog's batch encoder: the inner body and flag as they are, the inner properties
    plus a separator plus the batch's own properties string."""
    for b, raw, records in _batches():
        batch_props = b["batchPropertiesString"]
        for (flag, body, inner), record in zip(decode_batch_body(raw), records):
            assert base64.b64decode(record["body"]) == body and record["flag"] == flag
            text = inner.decode("utf-8")
            assert record["propertiesString"] == (f"{text}\x02{batch_props}" if text else batch_props)


def test_items_encode_as_the_producer_does():
    items = [batch_item(b"x" * n, tags="T" if n % 2 else None, keys=f"k{n}", uniq_key=f"U{n}",
                            user_properties={"n": str(n)}) for n in range(5)]
    raw = encode_batch_body(items)
    parsed = BatchBody.parse(raw)
    assert [m.body for m in parsed] == [i.body for i in items]
    assert [m.properties.decode() for m in parsed] == [i.stored_properties_string() for i in items]
    assert BatchBody.build([dict(flag=m.flag, body=m.body, properties=m.properties) for m in parsed]) == raw


@pytest.mark.parametrize("cut", [3, BATCH_MESSAGE_HEAD_SIZE + 1, -1])
def test_a_truncated_batch_body_is_refused_with_its_position(cut):
    _, raw, _ = _batches()[0]
    first = int.from_bytes(raw[:4], "big")
    data = raw[:first + cut] if cut > 0 else raw[:cut]
    with pytest.raises(UsageError) as err:
        decode_batch_body(data)
    assert "byte" in str(err.value)
