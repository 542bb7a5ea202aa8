"""Key lookups through index files the broker reads normally but that look odd: a header
whose end timestamp is earlier than its begin timestamp (the broker's clock stepped back
while the file was written, as NTP does).

The expected answers apply the broker's own rules (IndexService.queryOffset,
IndexFile.isTimeMatched and selectPhyOffset at 4.9.8) to data rmqtool did not read:
truth.json's headers and answers, or the store times the engine was given.
"""
from __future__ import annotations

import struct

from conftest import V4, load_truth
from rmqtool.engine.producer import producer_message
from rmqtool.engine.store import Store
from rmqtool.formats.indexfile import build_key, index_key_hash
from rmqtool.query.by_key import LONG_MAX, query_by_key

TIMEKEY = V4 / "timekey"
INT_MAX = 2**31 - 1


def _time_matched(b: int, e: int, begin: int, end: int) -> bool:
    """IndexFile.isTimeMatched, on a header's beginTimestamp b and endTimestamp e."""
    return (begin < b and end > e) or b <= begin <= e or b <= end <= e


def _files_read(headers: list[dict], begin: int, end: int) -> list[str]:
    """The files queryOffset reads for a window, newest first (before maxNum stops it)."""
    read = []
    for h in reversed(headers):
        if _time_matched(h["beginTimestamp"], h["endTimestamp"], begin, end):
            read.append(h["fileName"])
        if h["beginTimestamp"] < begin:
            break
    return read


def _kept(q: dict) -> list[int]:
    return [r["physicalOffset"] for r in q["queryMessageResults"] if r["keyOrUniqKeyActuallyEquals"]]


def test_fixture_file_whose_end_is_before_its_begin_is_read_as_the_broker_reads_it(store_copy):
    """timekey's middle index file with its end timestamp moved before its begin: every
    query whose files the broker would read are unchanged keeps its truth answer; one whose
    only file is no longer time-matched gets nothing, as from the broker."""
    truth = load_truth(TIMEKEY / "truth.json")
    headers = truth["onDiskAfterShutdown"]["indexFiles"]
    victim = headers[1]
    stepped_back = victim["beginTimestamp"] - 5_000
    patched = [dict(h, endTimestamp=stepped_back) if h is victim else h for h in headers]
    store = store_copy(TIMEKEY / "store")
    with open(store / "index" / victim["fileName"], "r+b") as f:
        f.seek(8)  # endTimestamp
        f.write(struct.pack(">q", stepped_back))
    end = truth["truth"]["commitlog"]["maxPhyOffset"]
    unchanged = emptied = 0
    for q in truth["queryMessage"]:
        before = _files_read(headers, q["begin"], q["end"])
        after = _files_read(patched, q["begin"], q["end"])
        if before == after:
            expected = _kept(q)
            unchanged += 1
        else:
            assert after == [], q  # the only other outcome this patch gives
            expected = []
            emptied += 1
        for index_only in (True, False):
            result = query_by_key(store, q["key"], topic=q["topic"], begin=q["begin"], end=q["end"],
                                  max_num=q["maxNum"], index_only=index_only, commit_log_end=end)
            assert [m.commit_log_offset for m in result.messages] == expected, (q["key"], q["begin"], index_only)
            assert not any("damaged" in n for n in result.notes), result.notes
    assert unchanged > 20 and emptied >= 1


# --- a store whose clock steps back while an index file is written -----------------------

T0 = 1_700_000_000_000
STEP = 1_500  # ms between messages
STEP_BACK_AT, STEP_BACK = 30, 120_000  # message 30 is stored two minutes before message 29
MESSAGES, SLOTS, ENTRIES = 100, 16, 60


def _store_time(i: int) -> int:
    return T0 + STEP * i - (STEP_BACK if i >= STEP_BACK_AT else 0)


def _keys_in_distinct_slots(topic: str, n: int) -> list[str]:
    """n keys whose index slots differ: each slot's chain then holds one key, so the broker's
    walk can be worked out from the messages alone."""
    keys, slots = [], set()
    for i in range(1000):
        slot = index_key_hash(build_key(topic, f"k{i}")) % SLOTS
        if slot not in slots:
            keys.append(f"k{i}")
            slots.add(slot)
        if len(keys) == n:
            return keys
    raise AssertionError("not enough keys")


def _broker_index(messages: list[tuple[int, int, str]]) -> list[dict]:
    """IndexFile.putKey for one key per message, file by file: the header and each entry's
    (phyOffset, key, time read back = beginTimestamp + timeDiff * 1000)."""
    files, per_file = [], ENTRIES - 1  # indexCount starts at 1
    previous_end = 0
    for start in range(0, len(messages), per_file):
        chunk = messages[start:start + per_file]
        begin = previous_end  # a new file's header starts with the previous file's end timestamp
        diffs = []
        for n, (_, ts, _) in enumerate(chunk):
            diff = 0 if begin <= 0 else min(max((ts - begin) // 1000, 0), INT_MAX)
            diffs.append(diff)
            if n == 0:
                begin = ts  # the first entry sets beginTimestamp (after its timeDiff is taken)
        entries = [(offset, key, begin + d * 1000) for (offset, _, key), d in zip(chunk, diffs)]
        files.append({"begin": begin, "end": chunk[-1][1], "entries": entries})
        previous_end = chunk[-1][1]
    return files


def _broker_query(files: list[dict], key: str, max_num: int, begin: int, end: int) -> list[int]:
    """IndexService.queryOffset + selectPhyOffset, for a key alone on its slot's chain, sorted
    as queryMessage returns them."""
    found: list[int] = []
    for f in reversed(files):
        if _time_matched(f["begin"], f["end"], begin, end):
            for offset, k, time_read in reversed(f["entries"]):
                if k != key:
                    continue
                if len(found) >= max_num:
                    break
                if begin <= time_read <= end:
                    found.append(offset)
                if time_read < begin:
                    break
        if f["begin"] < begin or len(found) >= max_num:
            break
    return sorted(found)


def test_clock_stepping_back_mid_file_gives_the_broker_answer(tmp_path):
    topic = "T"
    keys = _keys_in_distinct_slots(topic, 5)
    now = [T0]
    root = tmp_path / "store"
    written = []
    with Store.open(root, writable=True, commitlog_size=64 * 1024, cq_size=20 * 100, index_slots=SLOTS,
                    index_entries=ENTRIES, clock=lambda: now[0]) as store:
        for i in range(MESSAGES):
            now[0] = _store_time(i)
            key = keys[i % len(keys)]
            r = store.append(producer_message(topic, b"x", keys=key, generate_uniq_key=False))
            assert r.store_timestamp == now[0]
            written.append((r.wrote_offset, r.store_timestamp, key))
    files = _broker_index(written)
    assert files[0]["end"] < files[0]["begin"]  # the case at hand: the clock stepped back in file 1
    windows = [(0, LONG_MAX), (T0 - 100_000, T0 - 60_000), (T0 - 60_000, T0 + 10_000), (T0, T0),
               (T0 + 20_000, T0 + 60_000), (T0 + 40_000, LONG_MAX), (0, T0 - 1)]
    answered_from_the_stepped_file = 0
    for key in keys:
        for begin, end in windows:
            for max_num in (64, 3):
                expected = _broker_query(files, key, max_num, begin, end)
                answered_from_the_stepped_file += any(o <= files[0]["entries"][-1][0] for o in expected)
                for index_only in (True, False):
                    result = query_by_key(root, key, topic=topic, begin=begin, end=end, max_num=max_num,
                                          index_only=index_only)
                    assert [m.commit_log_offset for m in result.messages] == expected, (key, begin, end, index_only)
                    assert not any("damaged" in n for n in result.notes), result.notes
    assert answered_from_the_stepped_file > len(keys)  # not only through the whole-time window


def test_an_indexed_lookup_reads_little_of_a_zero_filled_segment(tmp_path, monkeypatch):
    """Failed before (after the scanner became one): the lookup's scan past the index's end
    checked the whole rest of the segment for garbage, reading every zero of a segment
    copied without holes. It stops at the first zero header now, as the broker does."""
    import os

    root = tmp_path / "store"
    segment_size = 8 << 20
    with Store.open(root, writable=True, commitlog_size=segment_size, store_host="192.0.2.1:10911") as s:
        s.append_many([producer_message("T", b"x" * 100, keys=f"k{i}") for i in range(50)])
        end = s.max_offset
    (segment,) = sorted((root / "commitlog").iterdir())
    with open(segment, "r+b") as f:  # the unwritten rest as written zeros, as a plain copy leaves it
        f.seek(end)
        f.write(bytes(segment_size - end))
    read = []
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, pos: (read.append(n), real(fd, n, pos))[1])
    result = query_by_key(root, "k7", topic="T")
    assert [m.keys for m in result.messages] == [["k7"]] and not result.notes
    assert sum(read) < segment_size // 8, sum(read)
