"""The column scan (store/record_columns.py) says of every record what the Message path says.

A column block's rows must equal the Messages the plain scan gives at the same positions
(fields, topic, tags code, index key hashes, __CRC32# state), the records it leaves to
decode_message must come out as those Messages exactly, and blanks and damage must come
out as in the plain scan, in the same order. Then verify through columns must give the
findings and the columns that verify through Messages alone gives.
"""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CLEAN_SCENARIOS, V4, V5
from helpers import canonical, damaged_commitlog, examples, fixture_commitlogs
from rmqtool.dispatch.rules import RMQ_SYS_SCHEDULE_TOPIC, tags_code
from rmqtool.formats import properties as props
from rmqtool.formats.indexfile import build_key, index_key_hash
from rmqtool.formats.sysflag import TRANSACTION_MASK, TRANSACTION_ROLLBACK_TYPE
from rmqtool.store import commitlog as store_commitlog
from rmqtool.store.commitlog import ColumnMode, column_scan, scan_segment
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.message import Message
from rmqtool.store.record_columns import RecordColumns
from rmqtool.verify import commitlog as verify_commitlog
from rmqtool.verify.run import Verify, VerifyOptions

CRASH_INPUTS = sorted(p / "input" / "store" for root in (V4 / "crash", V4 / "crash-fast", V5 / "crash5")
                      for p in root.iterdir() if (p / "input" / "store").is_dir())


def _keys_of(m: Message) -> list[int]:
    if m.sys_flag & TRANSACTION_MASK == TRANSACTION_ROLLBACK_TYPE:
        return []
    out = []
    uniq = m.properties.get(props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if uniq is not None:
        out.append(index_key_hash(build_key(m.topic, uniq)))
    return out + [index_key_hash(build_key(m.topic, k)) for k in props.split_keys(m.properties.get(props.PROPERTY_KEYS))]


def assert_columns_agree(commit_log_dir: pathlib.Path) -> int:
    """Compare the two scans of every segment; the number of records that came as columns."""
    log = CommitLog(commit_log_dir)
    in_columns = 0
    for i, seg in enumerate(log.segments):
        is_last = i == len(log.segments) - 1
        plain = list(scan_segment(seg, is_last=is_last))
        by_position = {r.position: r for r in plain if isinstance(r, Message)}
        expanded = []
        for r in column_scan(seg, ColumnMode(special_topics=frozenset({RMQ_SYS_SCHEDULE_TOPIC})), is_last=is_last):
            if not isinstance(r, RecordColumns):
                expanded.append(canonical(r))
                continue
            keys: dict = {}
            for row, h in zip(r.key_record.tolist(), r.key_hash.tolist()):
                keys.setdefault(row, []).append(h)
            for row in range(len(r)):
                m = by_position[int(r.position[row])]
                assert m.body_crc_ok and m.property_crc_ok is not False and m.physical_offset == m.commit_log_offset
                assert (m.store_size, m.queue_id, m.queue_offset, m.sys_flag, m.store_timestamp) == (
                    r.size[row], r.queue_id[row], r.queue_offset[row], r.sys_flag[row], r.store_timestamp[row])
                assert r.topics[r.topic[row]] == m.topic
                assert r.tags_code[row] == tags_code(m.tags)
                assert bool(r.crc_entry[row]) == (m.property_crc_ok is True)
                assert keys.get(row, []) == _keys_of(m)
                expanded.append(canonical(m))
            in_columns += len(r)
        # a block's Messages follow it; order them as the plain scan does before comparing
        assert sorted(expanded, key=lambda c: c[1]) == sorted((canonical(r) for r in plain), key=lambda c: c[1])
        assert len(expanded) == len(plain)
    return in_columns


@pytest.mark.parametrize("commit_log", fixture_commitlogs(), ids=lambda p: "/".join(p.parts[-6:-2]))
def test_columns_agree_with_messages_on_fixtures(commit_log):
    assert_columns_agree(commit_log)


def test_most_records_of_a_plain_store_come_as_columns():
    # basic holds non-ASCII properties and spaced keys on purpose; the others are plain
    total = sum(assert_columns_agree(d / "store" / "commitlog") for d in (V4 / "timekey", V5 / "v2-and-crc"))
    assert total > 300


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(data=st.data(), window=st.sampled_from([4096, 9000, 1 << 20]))
def test_columns_agree_on_damaged_logs(tmp_path_factory, data, window, monkeypatch):
    # small windows: runs end inside records, and the careful path takes over mid-window
    monkeypatch.setattr(store_commitlog, "COLUMN_WINDOW", window)
    commitlog = damaged_commitlog(tmp_path_factory, data, body_sizes=(0, 100, 2000), max_damages=3)
    assert_columns_agree(pathlib.Path(commitlog))


def _verify(store: pathlib.Path, columns: bool, jobs: int = 1):
    saved, verify_commitlog.COLUMN_SCAN = verify_commitlog.COLUMN_SCAN, columns
    try:
        v = Verify(store, VerifyOptions(jobs=jobs))
        found = [(f.id, f.path, f.offset, f.message, f.details) for f in v.findings()]
    finally:
        verify_commitlog.COLUMN_SCAN = saved
    return found


@pytest.mark.parametrize("store", [d / "store" for d in CLEAN_SCENARIOS.values()] + CRASH_INPUTS,
                         ids=lambda p: "/".join(p.parts[-5:-1]))
def test_verify_through_columns_equals_verify_through_messages(store):
    assert _verify(store, True) == _verify(store, False)


class _Keep(verify_commitlog.BandConsumer):
    """Every band's columns and keys, as the consume queue and index checks see them."""

    def __init__(self):
        self.bands = []

    def band(self, band):
        self.bands.append(({name: band[name].copy() for name, _ in verify_commitlog.COLUMNS},
                           band.key_rows.copy(), band.key_hashes.copy()))


def test_band_columns_equal(monkeypatch):
    store = V4 / "txdelay" / "store"
    kept = []
    for flag in (True, False):
        monkeypatch.setattr(verify_commitlog, "COLUMN_SCAN", flag)
        check = verify_commitlog.CommitLogCheck(CommitLog(store / "commitlog"))
        keep = _Keep()
        list(check.findings(lambda: [keep]))
        kept.append((check.topic_queues, keep.bands))
    (tqs_a, a), (tqs_b, b) = kept
    assert tqs_a == tqs_b and len(a) == len(b)
    assert sum(len(cols["offset"]) for cols, _, _ in a) > 0
    assert sum(len(rows) for _, rows, _ in a) > 0
    for (cols_a, rows_a, hashes_a), (cols_b, rows_b, hashes_b) in zip(a, b):
        for name, _ in verify_commitlog.COLUMNS:
            assert np.array_equal(cols_a[name], cols_b[name]), name
        assert np.array_equal(rows_a, rows_b) and np.array_equal(hashes_a, hashes_b)


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(data=st.data())
def test_verify_through_columns_on_damaged_logs(tmp_path_factory, data):
    commitlog = damaged_commitlog(tmp_path_factory, data, body_sizes=(0, 2000), max_damages=3)
    store = pathlib.Path(commitlog).parent
    assert _verify(store, True) == _verify(store, False)


@pytest.mark.parametrize("prop_crc", [False, True])
def test_generated_log_with_ipv6_hosts_long_topics_and_crc_entries_comes_as_columns(tmp_path, prop_crc):
    from benchmarks.gen import GenSpec, build_commitlog

    from helpers import LONG_TOPIC

    spec = GenSpec(segment_size=64 << 10, segments=2, body_size=300, topics=("T", LONG_TOPIC), queues=2,
                   ipv6_queues=(1,), append_prop_crc=prop_crc)
    build_commitlog(tmp_path / "commitlog", spec)
    log = CommitLog(tmp_path / "commitlog")
    messages = sum(1 for seg in log.segments for r in scan_segment(seg) if isinstance(r, Message))
    assert assert_columns_agree(tmp_path / "commitlog") == messages  # every record plain
