"""The one clean-record kernel (store/record_kernel.py over store/record_rule.py) against the
fixtures' truth.json: the records it takes are the messages the broker wrote, with the
broker's fields; the Messages, CRC verdicts and numpy columns built from its one result
say what truth says; the careful path (the same rule on one record) agrees with the
window on damaged logs, refusals included.
"""
from __future__ import annotations

import base64
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CLEAN_SCENARIOS, V4, load_truth
from helpers import damaged_commitlog, examples
from rmqtool.dispatch.rules import RMQ_SYS_SCHEDULE_TOPIC
from rmqtool.formats import properties as props
from rmqtool.formats.commitlog import MESSAGE_MAGIC_CODES, MIN_MESSAGE_LENGTH
from rmqtool.formats.indexfile import build_key, index_key_hash
from rmqtool.formats.sysflag import TRANSACTION_MASK, TRANSACTION_ROLLBACK_TYPE
from rmqtool.store.commitlog import ColumnMode, column_scan
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.message import RECORD_START, Message, RecordError, build_messages, decode_message
from rmqtool.store.record_columns import RecordColumns
from rmqtool.store.record_kernel import clean_records, crc_verdicts
from rmqtool.store.record_rule import STAGES

SCENARIOS = sorted(CLEAN_SCENARIOS)
E_VARIANTS = ("e1-corrupt-body-in-last-commitlog-file", "e2-corrupt-body-in-first-commitlog-file",
              "e3-corrupt-body-in-second-to-last-commitlog-file")


def _truth_messages(scenario: str) -> dict:
    """truth.json's messages by commit log offset."""
    truth = load_truth(CLEAN_SCENARIOS[scenario] / "truth.json")["truth"]["messages"]
    return {m["physicalOffset"]: m for m in truth}


def _segments(store: pathlib.Path):
    """(segment, its bytes) of a store's commit log."""
    for seg in CommitLog(store / "commitlog").segments:
        yield seg, seg.path.read_bytes()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_kernel_takes_exactly_the_messages_truth_lists(scenario):
    truth = _truth_messages(scenario)
    seen = []
    for seg, buf in _segments(CLEAN_SCENARIOS[scenario] / "store"):
        records = clean_records(buf, 0, len(buf))
        assert records.refusal is None  # a clean store: the run ends at the blank record or the zeros
        verdicts = crc_verdicts(buf, records)
        assert verdicts.ok.all()
        messages = build_messages(buf, records, seg.base_offset, 0, str(seg.path), True)
        for m, has_entry in zip(messages, verdicts.has_entry.tolist()):
            t = truth[m.commit_log_offset]
            assert (m.store_size, m.topic, m.queue_id, m.queue_offset, m.sys_flag, m.store_timestamp,
                    m.born_timestamp, m.body_crc, m.physical_offset) == (
                t["storeSize"], t["topic"], t["queueId"], t["queueOffset"], t["sysFlag"], t["storeTimestamp"],
                t["bornTimestamp"], t["bodyCRC"], t["commitLogOffsetField"])
            assert m.body == base64.b64decode(t["body"]) and m.properties_raw.decode() == t["propertiesString"]
            assert m.msg_id == t["msgId"] and m.body_crc_ok is True
            # a __CRC32# entry exactly where truth has one, and it holds
            assert has_entry == ("propertyCrc32Raw" in t) and m.property_crc_ok is (True if has_entry else None)
        seen += [m.commit_log_offset for m in messages]
    assert seen == sorted(truth)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_columns_from_the_kernel_say_what_truth_says(scenario):
    truth = _truth_messages(scenario)
    mode = ColumnMode(special_topics=frozenset({RMQ_SYS_SCHEDULE_TOPIC}))
    seen, in_columns = [], 0
    for seg in CommitLog(CLEAN_SCENARIOS[scenario] / "store" / "commitlog").segments:
        for r in column_scan(seg, mode):
            if isinstance(r, Message):  # left to the Message path: still a message truth lists
                assert truth[r.commit_log_offset]["storeSize"] == r.store_size
                seen.append(r.commit_log_offset)
                continue
            if not isinstance(r, RecordColumns):
                continue
            keys: dict = {}
            for row, h in zip(r.key_record.tolist(), r.key_hash.tolist()):
                keys.setdefault(row, []).append(h)
            for row, position in enumerate(r.position.tolist()):
                t = truth[seg.base_offset + position]
                assert (r.size[row], r.topics[r.topic[row]], r.queue_id[row], r.queue_offset[row], r.sys_flag[row],
                        r.store_timestamp[row], r.tags_code[row]) == (
                    t["storeSize"], t["topic"], t["queueId"], t["queueOffset"], t["sysFlag"], t["storeTimestamp"],
                    t["dispatchTagsCode"])
                assert bool(r.crc_entry[row]) == ("propertyCrc32Raw" in t)
                assert keys.get(row, []) == _index_keys(t)
                seen.append(seg.base_offset + position)
            in_columns += len(r)
    assert sorted(seen) == sorted(truth)
    assert in_columns > 0


def _index_keys(t: dict) -> list[int]:
    """IndexService.buildIndex's keys of a truth message: UNIQ_KEY, then each key of KEYS; none for a rollback."""
    if t["sysFlag"] & TRANSACTION_MASK == TRANSACTION_ROLLBACK_TYPE:
        return []
    keys = [t["dispatchUniqKey"]] if t.get("dispatchUniqKey") is not None else []
    keys += props.split_keys(t.get("dispatchKeys"))
    return [index_key_hash(build_key(t["topic"], k)) for k in keys]


@pytest.mark.parametrize("variant", E_VARIANTS)
def test_crc_verdicts_fail_only_the_record_truth_damaged(variant):
    mutation = load_truth(V4 / "crash" / variant / "truth.json")["mutation"]
    failing = []
    for seg, buf in _segments(V4 / "crash" / variant / "input" / "store"):
        records = clean_records(buf, 0, len(buf))
        verdicts = crc_verdicts(buf, records)
        failing += [(seg.path.name, seg.base_offset + p) for p in records.position[~verdicts.ok].tolist()]
        assert not verdicts.has_entry.any()  # 4.9.8 writes no __CRC32# entry
    assert failing == [(mutation["file"].split("/")[-1], mutation["messagePhysicalOffset"])]


def _one_record(buf: bytes, pos: int):
    """The careful path's verdict on the record at ``pos``: None (clean) or (finding, reason)."""
    total, _ = RECORD_START.unpack_from(buf, pos)
    try:
        decode_message(buf, pos, pos, pos + total)
    except RecordError as exc:
        return exc.finding_id, exc.message
    return None


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(data=st.data())
def test_the_window_and_one_record_apply_the_same_rule_on_damage(tmp_path_factory, data):
    """Every place of a damaged log where a message's magic code and a whole totalSize lie: the
    window takes it exactly when the careful path does, and refuses it with the same reason."""
    log = damaged_commitlog(tmp_path_factory, data, body_sizes=(0, 100, 2000), max_damages=4)
    candidates = 0
    for seg in CommitLog(pathlib.Path(log)).segments:
        buf = seg.path.read_bytes()
        whole = clean_records(buf, 0, len(buf))  # the run from the start: a prefix of the chain
        taken = set(whole.position.tolist())
        for magic in MESSAGE_MAGIC_CODES:
            at = buf.find(magic.to_bytes(4, "big"), 4)
            while at >= 0:
                pos = at - 4
                total, _ = RECORD_START.unpack_from(buf, pos)
                if MIN_MESSAGE_LENGTH <= total <= len(buf) - pos:
                    candidates += 1
                    window = clean_records(buf, pos, pos + 1)
                    careful = _one_record(buf, pos)
                    if len(window):
                        assert careful is None and window.stop == pos + total
                    else:
                        assert window.stop == pos and window.refusal is not None
                        assert careful == (window.refusal.finding_id, window.refusal.reason)
                    if pos in taken:
                        assert careful is None
                at = buf.find(magic.to_bytes(4, "big"), at + 1)
    assert candidates > 0


def test_every_stage_refuses_with_its_own_reason():
    """A record broken at each stage in turn is refused at that stage, by the window and by the careful path."""
    seg, buf = next(_segments(CLEAN_SCENARIOS["4.9.8/basic"] / "store"))
    records = clean_records(buf, 0, len(buf))
    pos, end = int(records.position[0]), int(records.end[0])
    body_at, body_end = int(records.body_at[0]), int(records.body_end[0])
    topic_end = int(records.topic_end[0])
    record = bytearray(buf[pos:end])

    def put(at: int, value: int, size: int) -> bytes:
        broken = bytearray(record)
        broken[at - pos:at - pos + size] = value.to_bytes(size, "big", signed=True)
        return bytes(broken) + bytes(64)

    total = end - pos
    broken = {
        "body_fits": put(body_at - 4, total, 4),  # bodyLength past totalSize
        "topic_length_signed": put(body_end, -1, 1),
        "topic_fits": put(body_end, 127, 1),
        "properties_length_signed": put(topic_end, -5, 2),
        "lengths_add_up": put(topic_end, 3, 2),
    }
    for stage, raw in broken.items():
        window = clean_records(raw, 0, 1)
        assert len(window) == 0 and window.refusal is not None and window.refusal.stage == stage
        assert _one_record(raw, 0) == (window.refusal.finding_id, window.refusal.reason)
    assert set(broken) <= set(STAGES)


@pytest.mark.parametrize("prop_crc", [False, True])
def test_generated_ipv6_hosts_and_long_topics_are_all_clean_and_plain(tmp_path, prop_crc):
    """IPv6 hosts move every field after the prefix, a long topic makes a V2 record: the kernel
    takes every record the generator wrote, and none is left to the Message path."""
    from benchmarks.gen import GenSpec, build_commitlog

    from helpers import LONG_TOPIC

    spec = GenSpec(segment_size=64 << 10, segments=2, body_size=300, topics=("T", LONG_TOPIC), queues=2,
                   ipv6_queues=(1,), append_prop_crc=prop_crc)
    built = build_commitlog(tmp_path / "commitlog", spec)
    for seg, written in zip(CommitLog(tmp_path / "commitlog").segments, built.segments):
        buf = seg.path.read_bytes()
        records = clean_records(buf, 0, len(buf))
        assert (len(records), records.stop, records.refusal) == (written.messages, written.record_bytes, None)
        assert records.hosts.any() and crc_verdicts(buf, records).ok.all()
        assert crc_verdicts(buf, records).has_entry.all() == prop_crc
        blocks = list(column_scan(seg, ColumnMode()))
        assert not [r for r in blocks if isinstance(r, Message)]
        assert sum(len(r) for r in blocks if isinstance(r, RecordColumns)) == written.messages
        assert {t for r in blocks if isinstance(r, RecordColumns) for t in r.topics} == {"T", LONG_TOPIC}
