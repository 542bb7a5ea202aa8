"""sysFlag bits, the properties string, message ids, hosts: each against broker-written values."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import V4, V5, load_truth
from helpers import examples, roundtrip
from rmqtool.errors import UsageError
from rmqtool.formats import crc as crc_rules
from rmqtool.formats import properties as props
from rmqtool.formats import sysflag
from rmqtool.store.hosts import format_host, parse_host
from rmqtool.store.msgid import create_message_id, decode_message_id, decode_uniq_key


@pytest.mark.parametrize("value,named", [
    (0, {}),
    (1 | 0x300, {"compressed": True, "compression_type": "zlib"}),
    (0x201, {"compressed": True, "compression_type": "zstd"}),
    (0x101, {"compressed": True, "compression_type": "lz4"}),
    (4, {"transaction_type": "prepared"}),
    (8, {"transaction_type": "commit"}),
    (12, {"transaction_type": "rollback"}),
    (0x30, {"born_host_v6": True, "store_host_v6": True}),
    (0xC0, {"need_unwrap": True, "inner_batch": True}),
    (2, {"multi_tags": True}),
])
def test_sysflag_named_bits_round_trip(value, named):
    raw = value.to_bytes(4, "big")
    bits = roundtrip(sysflag.SysFlag, raw, size=4)
    described = sysflag.describe(value)
    defaults = {"compressed": False, "multi_tags": False, "transaction_type": "not", "born_host_v6": False,
                "store_host_v6": False, "need_unwrap": False, "inner_batch": False, "compression_type": None,
                "reserved": 0}
    assert described == {**defaults, **named}
    assert bits.compressed == bool(value & sysflag.COMPRESSED_FLAG)


def test_sysflag_of_every_fixture_message_parses():
    for truth_path in (V4 / "txdelay" / "truth.json", V5 / "batchcq" / "truth.json", V4 / "basic" / "truth.json"):
        for m in load_truth(truth_path)["truth"]["messages"]:
            d = sysflag.describe(m["sysFlag"])
            assert sysflag.transaction_type(m["sysFlag"]) << 2 == m["transactionType"]
            assert d["compressed"] == (m.get("compressionType") is not None)


def test_properties_string_round_trip_and_broker_reading():
    truth = load_truth(V4 / "basic" / "truth.json")
    for m in truth["truth"]["messages"][:300]:
        parsed = props.string_to_properties(m["propertiesString"])
        assert parsed == m["properties"]
        # 4.x drops the last separator; rebuilt from the parsed (deduplicated) map in order
        if len(parsed) == m["propertiesString"].count(props.PROPERTY_SEPARATOR) + 1:
            assert props.properties_to_string(parsed) == m["propertiesString"]
    # the broker's reading skips empty names and values; the last duplicate wins
    assert props.string_to_properties("\u0001v\u0002k\u0001\u0002a\u00011\u0002a\u00012") == {"a": "2"}
    assert props.properties_to_string({"a": "1", "b": None}, trailing_separator=True) == "a\u00011\u0002"


def test_crc32_property_digits_as_written_by_5x():
    truth = load_truth(V5 / "v2-and-crc" / "truth.json")
    for m in truth["truth"]["messages"]:
        raw = m["propertyCrc32Raw"]
        digits = raw[len("__CRC32#\u0001"):-1]
        assert crc_rules.crc32_from_digits(digits) == m["propertyCrc32DigitsReversedValue"]
        assert crc_rules.crc32_property_digits(m["crc32OverRecordWithoutReservedTail_UtilAll"]) == digits
        assert crc_rules.crc32_property(m["crc32OverRecordWithoutReservedTail_UtilAll"]) == raw.encode()
        assert crc_rules.stored_record_crc(m["propertiesString"].encode()) == m["propertyCrc32DigitsReversedValue"]
    assert crc_rules.crc32_property_digits(142176121) == "1216712410"  # the README's example
    assert crc_rules.crc32_from_digits("12x") is None


def test_offset_msg_id_both_ways():
    truth = load_truth(V4 / "basic" / "truth.json")
    v6 = [m for m in truth["truth"]["messages"] if ":" in m["storeHost"]]
    assert v6, "basic has IPv6 store hosts"
    for m in truth["truth"]["messages"][:50] + v6[:10]:
        d = decode_message_id(m["msgId"])
        assert d.commit_log_offset == m["physicalOffset"] and d.store_port == m["storePort"]
        assert create_message_id(d.store_ip, d.store_port, d.commit_log_offset) == m["msgId"]
        assert len(m["msgId"]) == (56 if ":" in m["storeHost"] else 32)
    with pytest.raises(UsageError):
        decode_message_id("XYZ")


def test_uniq_key_decodes_to_a_time_near_the_born_time():
    truth = load_truth(V4 / "basic" / "truth.json")
    for m in truth["truth"]["messages"][:200]:
        if not m.get("uniqKey"):
            continue
        u = decode_uniq_key(m["uniqKey"], near_ms=m["storeTimestamp"])
        # the producer ran on the generating machine; its id time is within a day of the store time
        assert abs(u.timestamp - m["storeTimestamp"]) < 86_400_000
        assert u.pid > 0


@pytest.mark.parametrize("text", ["192.0.2.10:10911", "[2001:db8::10]:10911", "[::1]:1"])
def test_hosts_round_trip(text):
    ip, port = parse_host(text)
    assert format_host(ip, port) == text


_PROPERTY_PIECES = st.sampled_from(["a", "bc", "é", "\x01", "\x02", "文", "😀", "\x01\x01", "\x02\x02", "KEYS"])


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(_PROPERTY_PIECES, max_size=30).map("".join))
def test_the_bytes_reading_is_the_brokers_loop(text):
    """bytes_to_properties (its C-level splitting for the common string, the loop for the
    rest) gives what string_to_properties (the broker's loop) gives, in the same order."""
    careful = props.string_to_properties(text)
    parsed, ok = props.bytes_to_properties(text.encode())
    assert ok and list(parsed.items()) == list(careful.items())
