"""Consume queue, index, checkpoint, marker and config readers against what the broker read back.

Clean scenarios and crash variants' expected stores are compared with their truth.json;
crash inputs with the a-as-is truth (nothing was lost there) and with the variant's own
truth once cut where the broker's load cuts them (afterLoadBeforeStart.maxPhyOffset).
"""
from __future__ import annotations

import json
import os
import pathlib
import random
import shutil

import pytest

from conftest import CLEAN_SCENARIOS, V4, V5, load_truth
from rmqtool.errors import FormatError, NotAStore, RmqError, StoreNotFound
from rmqtool.formats.consumequeue import CQ_FILL_UNIT_BYTES
from rmqtool.formats.indexfile import build_key, index_key_hash
from rmqtool.store.checkpoint import parse_checkpoint, read_checkpoint, read_markers
from rmqtool.store.config import BAK, MAIN, read_config_dir, read_config_file
from rmqtool.store.consumequeue import ConsumeQueue, open_consume_queues
from rmqtool.store.indexfile import IndexFile, list_index_files

CRASH_BASES = (V4 / "crash", V4 / "crash-fast", V5 / "crash5")
VARIANTS = {f"{base.parent.name}/{base.name}/{d.name}": d
            for base in CRASH_BASES for d in sorted(p for p in base.iterdir() if p.is_dir())}

# Stores whose truth.json describes them as they are on disk: (store dir, truth).
AFTER = {name: (d / "store", d / "truth.json") for name, d in CLEAN_SCENARIOS.items()}
AFTER.update({name + "/expected": (d / "expected" / "store", d / "truth.json")
              for name, d in VARIANTS.items() if (d / "expected" / "store").is_dir()})


def _assert_one_line_naming(exc: RmqError, path: pathlib.Path):
    line = exc.one_line()
    assert "\n" not in line and str(path) in line


def _entry(unit, with_batch_num: bool) -> list:
    entry = [unit.queue_offset, unit.commit_log_offset, unit.size, unit.tags_code]
    return entry + [unit.batch_num] if with_batch_num else entry


# --- consume queues ------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(AFTER))
def test_consume_queues_equal_truth(name):
    store, truth_path = AFTER[name]
    truth = load_truth(truth_path)["truth"]
    cqs = open_consume_queues(store, truth["commitlog"]["maxPhyOffset"])
    messages = {m["physicalOffset"]: m for m in truth.get("messages", [])}
    compared = 0
    for topic, queues in truth["consumeQueues"].items():
        for queue_id, tq in queues.items():
            queue = cqs.find(topic, int(queue_id))
            if queue is None:  # SCHEDULE_TOPIC_XXXX queues exist in memory only
                assert tq["maxOffset"] == 0 and tq["entries"] == [] and topic == "SCHEDULE_TOPIC_XXXX"
                continue
            assert queue.is_batch == (tq.get("cqType") == "BatchCQ")
            with_batch_num = "batchNum" in tq["entriesFormat"]
            units = list(queue.iter_units())
            assert [_entry(u, with_batch_num) for u in units] == tq["entries"]
            assert queue.min_offset() == tq["minOffset"]
            assert queue.max_offset == tq["maxOffset"]
            for unit in units:
                assert unit.topic == topic and unit.queue_id == int(queue_id)
                assert pathlib.Path(unit.path).read_bytes()[unit.position:unit.position + queue.unit_size][:8] \
                    == unit.commit_log_offset.to_bytes(8, "big")
                if unit.is_fill:
                    assert unit.commit_log_offset == 0 and unit.size == 2**31 - 1
                    continue
                # the unit points at the record the broker dispatched it from
                message = messages[unit.commit_log_offset]
                assert (message["storeSize"], message["topic"]) == (unit.size, topic)
                assert message["queueId"] == int(queue_id)
                assert message["queueOffset"] == unit.queue_offset
                assert message["dispatchTagsCode"] == unit.tags_code
                if queue.is_batch:
                    assert unit.store_timestamp == message["storeTimestamp"]
                    assert unit.batch_size == message["dispatchBatchSize"]
                compared += 1
    assert compared > 0
    # a clean store reads without findings; a recovered one may keep units past its commit log
    allowed = {"consumeQueueBeyondCommitLog"} if name.endswith("/expected") else set()
    assert {f.id for f in cqs.all_findings()} <= allowed


@pytest.mark.parametrize("name", sorted(AFTER))
def test_consume_queue_random_access(name):
    store, truth_path = AFTER[name]
    truth = load_truth(truth_path)["truth"]
    cqs = open_consume_queues(store, truth["commitlog"]["maxPhyOffset"])
    for queue in cqs.queues:
        units = list(queue.iter_units())
        if queue.is_batch:
            for unit in units:
                for offset in range(unit.msg_base_offset, unit.msg_base_offset + unit.batch_size):
                    assert queue.get(offset) == unit
        else:
            assert [queue.get(u.queue_offset) for u in units] == units
        assert queue.get(queue.max_offset) is None and queue.get(-1) is None


def test_batch_lookups_equal_truth():
    truth = load_truth(V5 / "batchcq" / "truth.json")
    cqs = open_consume_queues(V5 / "batchcq" / "store")
    for lookup in truth["batchLookups"]:
        unit = cqs.find("BatchCQTopic", lookup["queueId"], batch=True).get(lookup["queueOffset"])
        assert _entry(unit, True) == lookup["cqUnit"]
        # getMessage starts at the unit holding the offset and returns whole batches
        assert lookup["returnedCommitLogOffsets"][0] == unit.commit_log_offset
        assert lookup["nextBeginOffset"] >= unit.msg_base_offset + unit.batch_size
    assert len(truth["batchLookups"]) == 78
    queue = cqs.find("BatchCQTopic", 0, batch=True)
    # correctMinOffset moves min past each batch stored before the commit log's min offset
    assert (queue.min_offset(), queue.min_offset(1), queue.min_offset(2756)) == (0, 1, 7)


def test_rebuilt_queue_fill_units_and_min_offset():
    """crash/c1: the deleted queue was rebuilt from offset 136, padded with fill units from 100."""
    store = V4 / "crash" / "c1-delete-cq-queue-dir" / "expected" / "store"
    queue = open_consume_queues(store).find("CrashTopic", 1)
    units = list(queue.iter_units())
    assert queue.min_offset() == 100 and queue.max_offset == 310
    assert [u.queue_offset for u in units if u.is_fill] == list(range(100, 136))
    assert not any(u.is_fill for u in units if u.queue_offset >= 136)
    # with the commit log's min offset above 0, the fill no longer counts (correctMinOffset)
    assert queue.min_offset(commit_log_min_offset=1) == 136


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_crash_inputs_consume_queues(name):
    variant = VARIANTS[name]
    truth = load_truth(variant / "truth.json")
    as_is = load_truth(variant.parent / "a-as-is" / "truth.json")["truth"]["consumeQueues"]
    mutation = truth["mutation"] or {}
    store = variant / "input" / "store"
    raw = open_consume_queues(store)
    cut = (open_consume_queues(store, truth["afterLoadBeforeStart"]["maxPhyOffset"])
           if truth["loadOk"] else None)
    for topic, queues in as_is.items():
        for queue_id, tq in queues.items():
            rel = f"consumequeue/{topic}/{queue_id}"
            queue = raw.find(topic, int(queue_id))
            if tq["maxOffset"] == 0 or mutation.get("removed") == rel:
                assert queue is None
                continue
            # nothing was lost before the crash: the raw queue is the a-as-is queue, less what was damaged
            lo, hi = queue.min_offset(), queue.max_offset
            assert [_entry(u, "batchNum" in tq["entriesFormat"]) for u in queue.iter_units()] == \
                [e for e in tq["entries"] if lo <= e[0] < hi]
            removed = mutation.get("removed", "")
            if removed == rel + "/00000000000000000000":
                assert lo == 50 and hi == tq["maxOffset"]  # c4: the first file (offsets 0..49) is gone
            elif removed.startswith(rel + "/"):
                assert lo == 0 and hi == 300  # c2: the last file (offsets 300..) is gone
            else:
                assert (lo, hi) == (tq["minOffset"], tq["maxOffset"])
            if cut is not None:
                # the broker's load cuts the queue at the recovered commit log end; start() only adds
                after = truth["truth"]["consumeQueues"][topic][queue_id]
                queue = cut.find(topic, int(queue_id))
                lo, hi = queue.min_offset(), queue.max_offset
                assert [_entry(u, "batchNum" in after["entriesFormat"]) for u in queue.iter_units()] == \
                    [e for e in after["entries"] if lo <= e[0] < hi]
                assert lo == after["minOffset"] and hi <= after["maxOffset"]


def test_truncated_cq_file_is_a_finding_not_an_error():
    """crash/c3: the last CrashTopic/0 file cut to 200 bytes; the broker's load() refuses it."""
    store = V4 / "crash" / "c3-truncate-cq-file" / "input" / "store"
    queue = open_consume_queues(store).find("CrashTopic", 0)
    odd = [f for f in queue.findings if f.id == "segmentSizeOdd"]
    assert len(odd) == 1 and odd[0].path.endswith("CrashTopic/0/00000000000000006000")
    assert queue.mapped_file_size == 1000 and queue.max_offset == 6200 // 20
    assert len(list(queue.iter_units())) == 310


def test_cq_damage_findings(store_copy):
    store = store_copy(V4 / "crash" / "a-as-is" / "input" / "store")
    qdir = store / "consumequeue" / "CrashTopic" / "0"
    os.chmod(qdir / "00000000000000006000", 0o644)
    os.chmod(qdir, 0o755)
    with open(qdir / "00000000000000006000", "r+b") as f:  # a unit cut in half at the end of the data
        f.truncate(10 * 20 + 7)
    (qdir / "stray.txt").write_bytes(b"x")
    os.chmod(store / "consumequeue" / "OtherTopic", 0o755)
    (store / "consumequeue" / "OtherTopic" / "notaqueue").mkdir()
    mid = qdir / "00000000000000003000"  # a hole in a middle file, and garbage after the end
    os.chmod(mid, 0o644)
    data = bytearray(mid.read_bytes())
    data[20:40] = bytes(20)
    mid.write_bytes(bytes(data))
    cqs = open_consume_queues(store)
    queue = cqs.find("CrashTopic", 0)
    ids = {f.id for f in queue.findings}
    assert {"recordTruncated", "segmentSizeOdd", "segmentNameInvalid"} <= ids
    assert queue.max_offset == 310  # the cut unit does not count
    units = list(queue.iter_units())
    assert 151 not in [u.queue_offset for u in units] and len(units) == 309
    assert "consumeQueueHole" in {f.id for f in queue.findings}
    assert [f.id for f in cqs.findings] == ["queueDirInvalid"]


def test_missing_middle_file_is_a_gap(store_copy):
    store = store_copy(V4 / "crash" / "a-as-is" / "input" / "store")
    qdir = store / "consumequeue" / "OtherTopic" / "0"
    os.chmod(qdir, 0o755)
    (qdir / "00000000000000001000").unlink()  # queue offsets 50..99
    queue = open_consume_queues(store).find("OtherTopic", 0)
    assert [f.id for f in queue.findings] == ["segmentGap"]
    offsets = [u.queue_offset for u in queue.iter_units()]
    assert offsets == list(range(0, 50)) + list(range(100, 152))
    assert queue.get(75) is None and queue.get(100).queue_offset == 100


def test_units_after_the_end_are_reported(store_copy):
    store = store_copy(V5 / "v2-and-crc" / "store")
    for qdir in sorted((store / "consumequeue").glob("*/*")):
        before = ConsumeQueue(qdir, qdir.parent.name, int(qdir.name))
        last = before.segments[-1]
        end = before.end - last.base_offset
        if end + 60 <= last.size:  # room for two blank units and one more
            break
    os.chmod(last.path, 0o644)
    data = bytearray(last.path.read_bytes())
    data[end + 40:end + 60] = CQ_FILL_UNIT_BYTES  # written after unwritten space
    last.path.write_bytes(bytes(data))
    after = ConsumeQueue(qdir, qdir.parent.name, int(qdir.name))
    assert after.max_offset == before.max_offset
    assert [(f.id, f.offset) for f in after.findings] == [("trailingGarbage", end + 40)]
    data[end:end + 20] = b"\xff" * 20  # and now the unit where recovery stops is not blank
    last.path.write_bytes(bytes(data))
    again = ConsumeQueue(qdir, qdir.parent.name, int(qdir.name))
    assert again.max_offset == before.max_offset
    assert [(f.id, f.offset) for f in again.findings] == [("consumeQueueUnitInvalid", end)]


def test_reading_changes_nothing(store_copy):
    store = store_copy(V5 / "batchcq" / "store")
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in store.rglob("*") if p.is_file()}
    cqs = open_consume_queues(store)
    for queue in cqs.queues:
        list(queue.iter_units())
        queue.get(queue.min_offset())
    for f in list_index_files(store).open_all():
        list(f.iter_entries())
        f.close()
    read_checkpoint(store / "checkpoint")
    read_markers(store)
    read_config_dir(store)
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in store.rglob("*") if p.is_file()} == before


def test_missing_or_wrong_paths_raise_one_line_errors(tmp_path):
    with pytest.raises(StoreNotFound) as info:
        open_consume_queues(tmp_path / "nope")
    _assert_one_line_naming(info.value, tmp_path / "nope")
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(NotAStore):
        open_consume_queues(tmp_path / "file")
    assert open_consume_queues(tmp_path).queues == []  # an empty root has no queues


# --- index files ---------------------------------------------------------------------------

def _headers(files) -> list[dict]:
    return [dict(fileName=f.name, fileSize=f.file_size, beginTimestamp=f.header.begin_timestamp,
                 endTimestamp=f.header.end_timestamp, beginPhyOffset=f.header.begin_phy_offset,
                 endPhyOffset=f.header.end_phy_offset, hashSlotCount=f.header.hash_slot_count,
                 indexCount=f.header.loaded_index_count, isWriteFull=f.is_write_full) for f in files]


@pytest.mark.parametrize("name", sorted(AFTER))
def test_index_headers_equal_truth(name):
    store, truth_path = AFTER[name]
    truth = load_truth(truth_path)
    cfg = truth["messageStoreConfig"]["effectiveGetterValues"]
    files = list_index_files(store).open_all()  # geometry inferred, not given
    assert _headers(files) == truth["onDiskAfterShutdown"]["indexFiles"]
    for f in files:
        assert (f.hash_slot_num, f.index_num) == (cfg["maxHashSlotNum"], cfg["maxIndexNum"])
        entries = list(f.iter_entries())
        assert [e.number for e in entries] == list(range(1, f.header.index_count))
        if entries:
            assert entries[0].phy_offset == f.header.begin_phy_offset
            assert entries[-1].phy_offset == f.header.end_phy_offset
        assert sum(1 for _ in f.iter_slots()) == f.header.hash_slot_count
        f.close()


@pytest.mark.parametrize("name", [n for n in sorted(VARIANTS) if "crash5" in n])
def test_index_and_checkpoint_before_load_equal_truth(name):
    """5.3.3 variants also record the input store's index headers and checkpoint."""
    variant = VARIANTS[name]
    before = load_truth(variant / "truth.json")["onDiskBeforeLoad"]
    store = variant / "input" / "store"
    assert _headers(list_index_files(store).open_all()) == before["indexFiles"]
    _check_checkpoint(read_checkpoint(store / "checkpoint"), before["checkpoint"])
    markers = read_markers(store)
    assert markers.abort.exists == before["abortFileExists"] and markers.lock.exists == before["lockFileExists"]


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_crash_input_index_files_and_checkpoint(name):
    """Inputs: index files as listed before load; every checkpoint timestamp is the store
    time of a message put before the halt (4.9.8 truth records no values for inputs)."""
    variant = VARIANTS[name]
    before = load_truth(variant / "truth.json")["onDiskBeforeLoad"]
    listed = before["files"] if isinstance(before, dict) else before
    store = variant / "input" / "store"
    files = list_index_files(store).open_all()
    assert [(f"index/{f.name}", f.file_size) for f in files] == \
        [(e["path"], e["size"]) for e in listed if e["path"].startswith("index/")]
    for f in files:
        assert f.header.end_phy_offset == max(e.phy_offset for e in f.iter_entries())
        f.close()
    pre = load_truth(variant.parent / "pre-crash-truth.json")
    stored = {m["storeTimestamp"] for m in pre["truth"]["messages"]}
    stored |= {r["storeTimestamp"] for r in pre["tailPutResultsBeforeHalt"]}
    cp = read_checkpoint(store / "checkpoint")
    if load_truth(variant / "truth.json")["mutation"].get("zeroed") == "checkpoint":
        assert cp.first_40_bytes == bytes(40) and cp.findings == ()
    else:
        assert {cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp} <= stored
        assert cp.findings == ()


def _query_offsets(files, topic: str, key: str, max_num: int, begin: int, end: int) -> list[int]:
    """IndexService.queryOffset over lookup_chain: newest file first, keyHash and time filtered."""
    key_hash = index_key_hash(build_key(topic, key))
    found: list[int] = []
    for f in reversed(files):
        h = f.header
        time_matched = ((begin < h.begin_timestamp and end > h.end_timestamp)  # IndexFile.isTimeMatched
                        or h.begin_timestamp <= begin <= h.end_timestamp
                        or h.begin_timestamp <= end <= h.end_timestamp)
        if time_matched:
            for _, entry in f.lookup_chain(key_hash):
                if len(found) >= max_num:
                    break
                when = f.timestamp_of(entry)
                if entry.key_hash == key_hash and begin <= when <= end:
                    found.append(entry.phy_offset)
                if when < begin:
                    break
        if h.begin_timestamp < begin or len(found) >= max_num:
            break
    return found


@pytest.mark.parametrize("name", sorted(n for n in AFTER if "queryMessage" in load_truth(AFTER[n][1])))
def test_chain_walk_reproduces_index_service_query(name):
    store, truth_path = AFTER[name]
    truth = load_truth(truth_path)
    max_batch = truth["messageStoreConfig"]["effectiveGetterValues"]["maxMsgsNumBatch"]
    files = list_index_files(store).open_all()
    for query in truth["queryMessage"]:
        expected = query.get("indexServiceQueryOffsetPhyOffsets_unsorted",
                             query.get("indexServiceQueryOffsetPhyOffsets"))
        got = _query_offsets(files, query["topic"], query["key"], min(query["maxNum"], max_batch),
                             query["begin"], query["end"])
        assert got == expected, query["indexKey"]
    for f in files:
        f.close()


def test_chain_walk_stops_on_a_loop(tmp_path):
    src = sorted((V5 / "v2-and-crc" / "store" / "index").iterdir())[-1]
    path = tmp_path / src.name
    shutil.copyfile(src, path)
    with IndexFile(path) as f:
        chains = [[n for n, _ in f.lookup_chain(f.entry(newest).key_hash)] for _, newest in f.iter_slots()]
        chain = max(chains, key=len)
        key_hash = f.entry(chain[0]).key_hash
        third = f.entry(chain[2]).position
        assert len(chain) >= 3 and f.findings == []
    data = bytearray(path.read_bytes())
    data[third + 16:third + 20] = chain[0].to_bytes(4, "big")  # prevIndex of the 3rd -> the 1st
    path.write_bytes(bytes(data))
    with IndexFile(path) as f:
        assert [n for n, _ in f.lookup_chain(key_hash)] == chain[:3]
        assert [(x.id, x.offset) for x in f.findings] == [("indexChainBroken", third)]


def test_bad_index_files_raise_one_line_errors(tmp_path):
    short = tmp_path / "20260101000000000"
    short.write_bytes(b"\x01" * 39)
    with pytest.raises(FormatError) as info:
        IndexFile(short)
    _assert_one_line_naming(info.value, short)
    noise = tmp_path / "20260101000000001"
    noise.write_bytes(random.Random(7).randbytes(22040))
    with pytest.raises(FormatError) as info:
        IndexFile(noise)
    _assert_one_line_naming(info.value, noise)
    (tmp_path / "index").mkdir()
    shutil.move(noise, tmp_path / "index" / noise.name)
    (tmp_path / "index" / "README").write_text("x")
    listing = list_index_files(tmp_path)
    assert listing.open_all() == []
    assert [f.id for f in listing.findings] == ["indexFileNameInvalid", "indexFileUnreadable"]


def test_index_geometry_given_or_unknown(tmp_path):
    src = sorted((V4 / "crash" / "a-as-is" / "input" / "store" / "index").iterdir())[0]
    with IndexFile(src, 500, 1000) as f:  # the broker's settings, given: no inference, no findings
        assert f.findings == [] and f.is_write_full
    with IndexFile(src, 400, 1000) as f:  # wrong settings: the size says so
        assert [x.id for x in f.findings] == ["segmentSizeOdd"]
    empty = tmp_path / "20260101000000000"  # a fresh file of a non-default size: nothing to infer from
    empty.write_bytes(bytes(22040))
    with IndexFile(empty) as f:
        assert (f.hash_slot_num, f.is_write_full, list(f.iter_entries())) == (None, None, [])
        assert [x.id for x in f.findings] == ["indexGeometryUnknown"] and f.header.loaded_index_count == 1


# --- checkpoint and markers ----------------------------------------------------------------

def _check_checkpoint(cp, truth_cp: dict):
    assert cp.physic_msg_timestamp == truth_cp["physicMsgTimestamp"]
    assert cp.logics_msg_timestamp == truth_cp["logicsMsgTimestamp"]
    assert cp.index_msg_timestamp == truth_cp["indexMsgTimestamp"]
    assert cp.min_timestamp == truth_cp["minTimestamp"]
    assert cp.min_timestamp_index == truth_cp["minTimestampIndex"]
    assert truth_cp["fileSize"] == 4096
    if "masterFlushedOffset" in truth_cp:
        assert cp.master_flushed_offset == truth_cp["masterFlushedOffset"]
        assert cp.confirm_phy_offset == truth_cp["confirmPhyOffset"]
        assert cp.first_40_bytes.hex() == truth_cp["first40BytesHex"]
        assert (cp.findings == ()) == truth_cp["bytesAfter40AllZero"]
    else:
        assert not cp.has_5x_fields and cp.findings == ()


@pytest.mark.parametrize("name", sorted(AFTER))
def test_checkpoint_and_markers_equal_truth(name):
    store, truth_path = AFTER[name]
    on_disk = load_truth(truth_path)["onDiskAfterShutdown"]
    _check_checkpoint(read_checkpoint(store / "checkpoint"), on_disk["checkpoint"])
    markers = read_markers(store)
    assert markers.abort.exists == on_disk["abortFileExists"] and markers.clean_shutdown
    assert markers.lock.exists == on_disk["lockFileExists"] and markers.lock.content == b"lock"
    assert markers.findings == ()


def test_confirm_phy_offset_after_recovery():
    """5.3.3 crash5 a: recovery stores the start of the last valid message (159162 = 0x26dba)."""
    cp = read_checkpoint(V5 / "crash5" / "a-as-is" / "expected" / "store" / "checkpoint")
    assert cp.confirm_phy_offset == 159162 and cp.has_5x_fields and cp.master_flushed_offset == 0
    zeroed = read_checkpoint(V5 / "crash5" / "c-checkpoint-zeroed" / "input" / "store" / "checkpoint")
    assert (zeroed.physic_msg_timestamp, zeroed.min_timestamp, zeroed.findings) == (0, 0, ())


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_crash_input_markers(name):
    variant = VARIANTS[name]
    markers = read_markers(variant / "input" / "store")
    truth = load_truth(variant / "truth.json")
    assert markers.abort.exists == truth["abortFileExistedBeforeLoad"]
    assert [f.id for f in markers.findings] == (["abortFilePresent"] if markers.abort.exists else [])
    if "crash5" in name:
        if markers.abort.exists:
            assert markers.abort.pid == 9951  # the halted broker's PID, as ASCII text
        assert markers.abort_bak.exists and markers.abort_bak.content == b""  # a fresh store's empty .bak
        expected = read_markers(variant / "expected" / "store")
        # the recovering broker's string2File copied the crashed PID to abort.bak, then shutdown removed abort
        assert not expected.abort.exists
        assert expected.abort_bak.pid == (9951 if markers.abort.exists else None)
    else:
        assert markers.abort.content == b"" and not markers.abort_bak.exists  # 4.9.8: an empty abort file


def test_wrong_size_or_random_checkpoint(tmp_path):
    path = tmp_path / "checkpoint"
    path.write_bytes(bytes(4095))
    with pytest.raises(FormatError) as info:
        read_checkpoint(path)
    _assert_one_line_naming(info.value, path)
    assert "4095" in info.value.one_line()
    path.write_bytes(b"")
    with pytest.raises(FormatError):
        read_checkpoint(path)
    noise = random.Random(3).randbytes(4096)
    cp = parse_checkpoint(noise, path)
    assert [f.id for f in cp.findings] == ["trailingGarbage"] and cp.first_40_bytes == noise[:40]
    with pytest.raises(StoreNotFound) as info:
        read_checkpoint(tmp_path / "missing")
    _assert_one_line_naming(info.value, tmp_path / "missing")


def test_unexpected_marker_contents(tmp_path):
    (tmp_path / "abort").write_bytes(b"\xff\xfe")
    (tmp_path / "lock").write_bytes(b"nope")
    markers = read_markers(tmp_path)
    assert not markers.clean_shutdown and markers.abort.pid is None and not markers.abort_bak.exists
    assert [f.id for f in markers.findings] == ["abortFilePresent", "abortFileUnexpected", "lockFileUnexpected"]


def test_an_abort_directory_is_an_abort_the_broker_sees(tmp_path):
    """File.exists() holds for a directory: the broker recovers abnormally, as recover plans;
    info, verify and report stopped on it ("a directory where a file should be", exit 4)."""
    from helpers import cli_runner, writable_copy
    from rmqtool.cli.app import app
    store = writable_copy(V4 / "basic" / "store", tmp_path / "store")
    (store / "abort").mkdir()
    markers = read_markers(store)
    assert markers.abort.exists and not markers.clean_shutdown and markers.abort.pid is None
    assert [f.id for f in markers.findings] == ["abortFilePresent", "abortFileUnexpected"]
    info = json.loads(cli_runner().invoke(app, ["info", str(store), "-f", "json"]).stdout)
    plan = json.loads(cli_runner().invoke(app, ["recover", str(store), "-f", "json"]).stdout)
    assert info["store"]["abort_file"] is True and plan["mode"] == "abnormal"


# --- config -----------------------------------------------------------------------------

OFFSETS = '{\n\t"offsetTable":{\n\t\t"T@g":{0:12,1:3\n\t\t}\n\t}\n}'
OFFSETS_OLD = '{\n\t"offsetTable":{\n\t\t"T@g":{0:10,1:3\n\t\t}\n\t}\n}'


def test_config_main_file(tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "consumerOffset.json").write_text(OFFSETS)
    (tmp_path / "config" / "consumerOffset.json.bak").write_text(OFFSETS_OLD)
    (tmp_path / "config" / "delayOffset.json").write_text('{"offsetTable":{1:5,2:0}}')
    config = read_config_dir(tmp_path)
    offsets = config.files["consumerOffset.json"]
    assert offsets.source == MAIN and offsets.document["offsetTable"]["T@g"] == {0: 12, 1: 3}
    assert offsets.spec.manager == "ConsumerOffsetManager" and offsets.findings == ()
    assert config.files["delayOffset.json"].document == {"offsetTable": {1: 5, 2: 0}}
    assert config.all_findings() == []


@pytest.mark.parametrize("main", [None, b"", b"{\x00 not json"])
def test_config_falls_back_to_bak_like_the_broker(tmp_path, main):
    if main is not None:
        (tmp_path / "topics.json").write_bytes(main)
    (tmp_path / "topics.json.bak").write_text(OFFSETS_OLD)
    (tmp_path / "topics.json.tmp").write_text("{")  # 4.9.8 persist interrupted before its rename
    loaded = read_config_file(tmp_path, "topics.json")
    assert loaded.source == BAK and loaded.path.endswith("topics.json.bak")
    assert loaded.document["offsetTable"]["T@g"][0] == 10
    ids = [f.id for f in loaded.findings]
    assert ids[0] == "configTmpLeftover" and ids[-1] == "configBakUsed"
    assert ("configUnparseable" in ids) == (main == b"{\x00 not json")


def test_config_nothing_to_load(tmp_path):
    loaded = read_config_file(tmp_path, "subscriptionGroup.json")
    assert (loaded.source, loaded.document, loaded.findings) == (None, None, ())
    assert read_config_dir(tmp_path).files == {}  # no config/ at all, as in every fixture


def test_config_garbage_raises_one_line_error(tmp_path):
    path = tmp_path / "consumerOffset.json"
    path.write_bytes(random.Random(5).randbytes(300))
    # no .bak: loadBak finds nothing and returns true; the broker starts with no offsets
    loaded = read_config_file(tmp_path, "consumerOffset.json")
    [found] = loaded.findings
    assert (loaded.source, loaded.document, found.id, found.consequence) == (None, None, "configUnparseable",
                                                                             "progressLost")
    assert "\n" not in found.one_line() and str(path) in found.one_line()
    path.write_text('{"offsetTable":{"城@g":{0:1,}}}x', encoding="utf-8")
    [found] = read_config_file(tmp_path, "consumerOffset.json").findings
    # the finding's offset is in bytes (城 is 3 in UTF-8); the message counts characters
    assert found.offset == 32 and "text after the end of the document at character 30" in found.message
    (tmp_path / "consumerOffset.json.bak").write_text("[")
    with pytest.raises(FormatError) as info:
        read_config_file(tmp_path, "consumerOffset.json")
    assert ".bak" in info.value.one_line()
    # inside a directory read, a load that fails becomes a finding and the others still load
    (tmp_path / "config").mkdir()
    for name in (path.name, path.name + ".bak"):
        shutil.copy(tmp_path / name, tmp_path / "config" / name)
    (tmp_path / "config" / "delayOffset.json").write_text('{"offsetTable":{3:1}}')
    config = read_config_dir(tmp_path)
    assert list(config.files) == ["delayOffset.json"]
    assert [(f.id, f.consequence) for f in config.findings] == [("configUnparseable", "wontStart")]


def test_fixture_stores_have_no_config():
    for store, _ in AFTER.values():
        assert read_config_dir(store).files == {}
