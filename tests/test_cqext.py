"""ConsumeQueueExt read side against the 5.3.3 engine's truth (fixtures/rocketmq-5.3.3/cqext,
cqext-damaged): every ext unit, every walk entry, every lookup a consume queue unit makes."""
from __future__ import annotations

import json
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import V5, load_truth
from helpers import cli_runner, examples, expand_store, writable_copy
from rmqtool.formats.cqext import bit_is_set, ext_addr_to_offset, ext_offset_to_addr, is_ext_addr, set_bits
from rmqtool.store.consumequeue import open_consume_queues
from rmqtool.store.cqext import ConsumeQueueExt, ext_beside, open_exts, queue_max_ext_address

CQEXT = V5 / "cqext"
DAMAGED = V5 / "cqext-damaged"


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, pathlib.Path]:
    base = tmp_path_factory.mktemp("cqext")
    return {"clean": expand_store(CQEXT / "store", base / "clean"),
            "input": expand_store(DAMAGED / "input" / "store", base / "input"),
            "expected": expand_store(DAMAGED / "expected" / "store", base / "expected")}


def _unit_json(unit) -> dict:
    return {"size": unit.size, "tagsCode": unit.tags_code, "msgStoreTime": unit.msg_store_time,
            "bitMapSize": unit.bit_map_size, "filterBitMapHex": unit.bit_map_hex}


def _walk_json(entry) -> dict:
    if entry.stop:
        return {"realOffset": entry.real_offset, "file": entry.file, "posInFile": entry.pos_in_file,
                "sizeField": entry.size_field, "stop": entry.stop}
    return {"address": entry.address, "realOffset": entry.real_offset, "file": entry.file,
            "posInFile": entry.pos_in_file, "unit": _unit_json(entry.unit)}


def _ext(store: pathlib.Path, truth_queue: dict) -> ConsumeQueueExt:
    return ConsumeQueueExt(store / truth_queue["ext"]["dir"], truth_queue["topic"], truth_queue["queueId"])


def _check_queue(store: pathlib.Path, tq: dict):
    ext = _ext(store, tq)
    want = tq["ext"]
    queue = open_consume_queues(store).find(tq["topic"], tq["queueId"])
    assert queue.max_offset == tq["maxOffsetInQueue"]
    end = ext.truncated_end(queue_max_ext_address(queue))  # the engine's write position after its start
    assert ext.mapped_file_size == want["mappedFileSize"]
    assert (ext.min_address, ext.max_address(end)) == (want["minAddress"], want["maxAddress"])
    assert [(s.name, ext.read_position(s, end)) for s in ext.segments] == \
        [(f["name"], f["readPosition"]) for f in want["files"]]
    assert [_walk_json(e) for e in ext.walk(end)] == \
        [{k: v for k, v in w.items() if k != "referencedByQueueOffsets"} for w in want["walk"]]
    for u in tq["units"]:
        assert is_ext_addr(u["tagsCodeField"]) == u["isExtAddr"]
        assert ext_addr_to_offset(u["tagsCodeField"]) == u["extRealOffset"]
        found = ext.get(u["tagsCodeField"], end)
        assert found.ok == u["extLookupOk"], u["queueOffset"]
        assert (_unit_json(found.unit) if found.ok else None) == u.get("ext"), u["queueOffset"]


def test_every_ext_unit_walk_entry_and_lookup_equals_truth(stores):
    truth = load_truth(CQEXT / "truth.json")
    for tq in truth["consumeQueues"]:
        _check_queue(stores["clean"], tq)
    # the units the consume queue reader gives point at the same addresses
    cqs = open_consume_queues(stores["clean"])
    for tq in truth["consumeQueues"]:
        q = cqs.find(tq["topic"], tq["queueId"])
        assert [u.tags_code for u in q.iter_units()] == [u["tagsCodeField"] for u in tq["units"]]
        assert ext_beside(q.directory, q.topic, q.queue_id).directory == stores["clean"] / tq["ext"]["dir"]
    assert [(e.topic, e.queue_id) for e in open_exts(stores["clean"])] == \
        sorted((tq["topic"], tq["queueId"]) for tq in truth["consumeQueues"])


def test_recovered_store_reads_as_the_engine_left_it(stores):
    """expected/store: the engine's view after recovery (ext write positions, lookups that fail)."""
    for tq in load_truth(DAMAGED / "truth.json")["recovery"]["consumeQueues"]:
        _check_queue(stores["expected"], tq)


def test_damaged_input_lookups_fail_where_the_engine_failed(stores):
    """On the damaged input the ext's own recover walk already gives the lookups the engine
    made after its recovery (the CQ units that remain)."""
    truth = load_truth(DAMAGED / "truth.json")
    for tq in truth["recovery"]["consumeQueues"]:
        ext = _ext(stores["input"], tq)
        got = [ext.get(u["tagsCodeField"]).ok for u in tq["units"]]
        assert got == [u["extLookupOk"] for u in tq["units"]], (tq["topic"], tq["queueId"])


def test_bit_map_order_and_address_decoration():
    truth = load_truth(CQEXT / "truth.json")
    filters = {f["consumerGroup"]: f["bloomFilterData"]["bitPos"] for f in truth["consumerFilters"]}
    units = [u for tq in truth["consumeQueues"] for u in tq["units"] if u["ext"]["filterBitMapHex"]]
    assert units
    for u in units:
        bit_map = bytes.fromhex(u["ext"]["filterBitMapHex"])
        for group, verdict in u["filters"].items():
            if verdict["bloomHit"] is not None and group in filters:
                assert all(bit_is_set(bit_map, b) for b in filters[group]) == verdict["bloomHit"]
        assert all(bit_is_set(bit_map, b) for b in set_bits(bit_map))
        assert ext_offset_to_addr(u["extRealOffset"]) == u["tagsCodeField"]


def _cli(*args):
    from rmqtool.cli.app import app
    return cli_runner().invoke(app, [str(a) for a in args])


def _jsonl(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def _truth_units(truth_queues) -> dict:
    return {(tq["topic"], tq["queueId"], u["queueOffset"]): u for tq in truth_queues for u in tq["units"]}


@pytest.mark.parametrize("store, truth_of", [
    ("clean", lambda: load_truth(CQEXT / "truth.json")["consumeQueues"]),
    ("input", lambda: load_truth(DAMAGED / "truth.json")["recovery"]["consumeQueues"])])
def test_dump_consumequeue_follows_ext_addresses(stores, store, truth_of):
    """tags_code is what the broker's iterator hands getMessage (the ext unit's real tags hash,
    the raw address when the lookup fails), ext_address the raw field."""
    result = _cli("dump", "consumequeue", stores[store], "-f", "jsonl")
    rows = {(r["topic"], r["queue_id"], r["queue_offset"]): r for r in _jsonl(result)}
    want = _truth_units(truth_of())
    assert rows.keys() == want.keys()
    for key, u in want.items():
        row = rows[key]
        assert (row["tags_code"], row["ext_address"], row["ext_lookup"] == "OK") == \
            (u["iteratorTagsCode"], u["tagsCodeField"], u["extLookupOk"]), key
        assert row["filter_bit_map"] == (u["ext"]["filterBitMapHex"] if u["extLookupOk"] else None), key
    failing = sorted(k for k, u in want.items() if not u["extLookupOk"])
    assert result.exit_code == (3 if failing else 0), result.stderr
    if failing:  # one finding a run of failing units, at the first unit's file and position
        assert "cqExtAddressDangling" in result.stderr
        for key in failing:
            first = rows[key]
            if (key[0], key[1], key[2] - 1) not in failing:
                assert f"{first['file']} at offset {first['file_position']}" in result.stderr


def test_dump_cqext_rows_are_the_walk(stores):
    truth = load_truth(CQEXT / "truth.json")
    result = _cli("dump", "cqext", stores["clean"], "-f", "jsonl")
    assert result.exit_code == 0, result.stderr
    rows = _jsonl(result)
    want = [w for tq in truth["consumeQueues"] for w in tq["ext"]["walk"]]
    assert len(rows) == len(want)
    for row, w in zip(rows, want):
        assert row["real_offset"] == w["realOffset"] and row["file_position"] == w["posInFile"]
        if "stop" in w:
            assert (row["record"], row["stop"], row["size_field"]) == ("stop", w["stop"], w["sizeField"])
        else:
            assert (row["address"], row["tags_code"], row["store_timestamp"], row["filter_bit_map"]) == \
                (w["address"], w["unit"]["tagsCode"], w["unit"]["msgStoreTime"], w["unit"]["filterBitMapHex"])
    one = stores["clean"] / "consumequeue_ext" / "OrderFilterTopic" / "1" / "00000000000000002048"
    single = _jsonl(_cli("dump", "cqext", one, "-f", "jsonl"))
    assert [r["real_offset"] for r in single] == [r["real_offset"] for r in rows if r["file"] == str(one)]


def _verify(store) -> list[dict]:
    result = _cli("verify", store, "-f", "jsonl", "--no-progress", "--jobs", "1")
    assert result.exit_code in (0, 3), result.output
    return _jsonl(result)


def test_verify_clean_ext_store_finds_nothing(stores):
    found = _verify(stores["clean"])
    assert [f for f in found if f["severity"] != "info"] == []


def test_verify_finds_each_mutation_where_it_lies(stores):
    """cqext-damaged: each of the three mutations (truth.mutation) reported at its file and offset."""
    truth = load_truth(DAMAGED / "truth.json")
    found = {(f["finding"], f["path"], f["offset"]) for f in _verify(stores["input"])}
    units = _truth_units(load_truth(CQEXT / "truth.json")["consumeQueues"])
    config = truth["messageStoreConfig"]["effectiveGetterValues"]
    cq_file_size = config["mappedFileSizeConsumeQueue"]

    def cq_unit(topic, queue_id, n):
        at = n * 20
        return str(stores["input"] / "consumequeue" / topic / str(queue_id) / f"{at - at % cq_file_size:020d}"), \
            at % cq_file_size

    deleted, zeroed, garbled = truth["mutation"]
    # the deleted ext file: the first CQ unit whose ext unit it held finds nothing
    name = pathlib.Path(deleted["path"]).name
    first = min(u["queueOffset"] for k, u in units.items()
                if k[:2] == (deleted["topic"], deleted["queueId"]) and u["extFile"] == name)
    assert ("cqExtAddressDangling", *cq_unit(deleted["topic"], deleted["queueId"], first)) in found
    # the zeroed CQ tail: its ext units are left past the write position the broker's start leaves
    lost = [u for k, u in units.items() if k[:2] == (zeroed["topic"], zeroed["queueId"])
            and k[2] >= zeroed["start"] // 20 + int(pathlib.Path(zeroed["path"]).name) // 20]
    assert ("cqExtGarbageAfterEnd", str(stores["input"] / "consumequeue_ext" / zeroed["topic"] / str(zeroed["queueId"])
                                        / lost[0]["extFile"]), lost[0]["extPosInFile"]) in found
    assert any(f[0] == "messageUnreachable" for f in found)  # the three messages no queue unit reaches
    # the garbled ext tail: garbage at its start, and the CQ units whose ext units it held dangle
    assert ("cqExtGarbageAfterEnd", str(stores["input"] / garbled["path"]), garbled["start"]) in found
    hit = sorted(k[2] for k, u in units.items() if k[:2] == (garbled["topic"], garbled["queueId"])
                 and str(pathlib.Path(garbled["path"]).name) == u["extFile"] and u["extPosInFile"] >= garbled["start"])
    assert ("cqExtAddressDangling", *cq_unit(garbled["topic"], garbled["queueId"], hit[0])) in found


def test_recover_plan_leaves_the_ext_where_the_engine_left_it(stores):
    """The plan's simulation of ConsumeQueueExt.recover + truncateByMaxAddress: every ext file's
    write position and every queue's max offset as the real engine's start (truth.recovery)."""
    truth = load_truth(DAMAGED / "truth.json")
    for store, queues in (("input", truth["recovery"]["consumeQueues"]),
                          ("clean", load_truth(CQEXT / "truth.json")["consumeQueues"])):
        result = _cli("recover", stores[store], "-f", "json")
        plan = json.loads(result.stdout)
        assert result.exit_code == (3 if plan["lost_messages"] else 0), result.stderr
        assert plan["actions"] == []  # the broker cuts ext files by their write position only
        for tq in queues:
            key = f"{tq['topic']}/{tq['queueId']}"
            assert plan["queues"][key]["max_offset"] == tq["maxOffsetInQueue"], (store, key)
            assert [(f["file"], f["wrote_position"]) for f in plan["consume_queue_ext"]["files"][key]] == \
                [(f["name"], f["wrotePosition"]) for f in tq["ext"]["files"]], (store, key)
        assert plan["consume_queue_ext"]["files_deleted"] == []


def test_ext_puts_after_recovery_land_where_the_engine_put_them(stores):
    """afterRecoveryPuts: 4 messages put into each OrderFilterTopic queue of the recovered store;
    the ext model's puts give the files the engine wrote (a deleted last file made again at the
    same offsets, units written over the garbage)."""
    from rmqtool.recovery.ext_model import StoreExts, max_ext_address
    from rmqtool.recovery.queue_model import QueueModel
    from rmqtool.store.segments import discover
    summary = load_truth(DAMAGED / "truth.json")["summary"]["queues"]
    exts = StoreExts(stores["input"])
    for key, want in summary.items():
        topic, queue_id = key.rsplit("/", 1)
        directory = stores["input"] / "consumequeue" / topic / queue_id
        listing = discover(directory)
        queue = QueueModel(topic, int(queue_id), listing.segments, listing.mapped_file_size)
        queue.recover()
        ext = exts.load(topic, int(queue_id))
        ext.recover(max_ext_address(queue))
        assert ext.positions() == [tuple(f) for f in want["extFilesAfterRecovery"]], key
        if "afterRecoveryPuts" in want:
            ext = exts.of(topic, int(queue_id))
            puts = want["afterRecoveryPuts"]["cqMaxOffset"] - want["cqMaxOffsetAfterRecovery"]
            for _ in range(puts):
                assert is_ext_addr(ext.put())
            assert ext.positions() == [tuple(f) for f in want["afterRecoveryPuts"]["extFiles"]], key


def test_redispatch_rebuilds_the_ext_with_its_queues(stores, tmp_path):
    """On the clean store every queue and ext file comes out as the broker wrote it; on the
    damaged one --apply leaves nothing for verify to find, and a second run changes nothing."""
    result = _cli("redispatch", stores["clean"], "--cq", "-f", "json")
    assert result.exit_code == 0, result.output
    changes = json.loads(result.stdout)["changes"]
    on_disk = sorted(str(p) for d in ("consumequeue", "consumequeue_ext")
                     for p in (stores["clean"] / d).rglob("*") if p.is_file())
    assert sorted(c["file"] for c in changes) == on_disk and {c["kind"] for c in changes} == {"same"}
    damaged = writable_copy(stores["input"], tmp_path / "store")
    applied = _cli("redispatch", damaged, "--cq", "--apply", "--backup-dir", tmp_path / "backup")
    assert applied.exit_code == 0, applied.output
    assert [f for f in _verify(damaged) if f["severity"] != "info"] == []
    again = _cli("redispatch", damaged, "--cq")
    assert again.exit_code == 0, again.output
    refused = _cli("redispatch", damaged, "--cq", "--from-offset", "0")
    assert refused.exit_code == 2 and "consumequeue_ext" in refused.stderr


@settings(max_examples=examples(20), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_to_ext_files_never_breaks_the_readers(tmp_path_factory, data):
    """Random bytes over an ext file: the walk, every lookup, the write positions and the dump
    rows still come out (no exception), each walk entry inside its file."""
    from rmqtool.inspect.cqext_rows import cqext_rows
    store = tmp_path_factory.mktemp("fuzz")
    queue = store / "consumequeue_ext" / "OrderFilterTopic" / "2"
    queue.mkdir(parents=True)
    source = CQEXT / "store" / "consumequeue_ext" / "OrderFilterTopic" / "2" / "00000000000000002048"
    raw = bytearray(source.read_bytes().ljust(1024, b"\0"))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        chunk = data.draw(st.binary(min_size=1, max_size=40))
        raw[at:at + len(chunk)] = chunk
    (queue / "00000000000000000000").write_bytes(bytes(raw[:1024]))
    ext = ConsumeQueueExt(queue, "OrderFilterTopic", 2)
    for entry in ext.walk():
        assert 0 <= entry.pos_in_file < ext.mapped_file_size
        if entry.unit is not None:
            assert ext.get(entry.address).ok
    assert 0 <= ext.recovered_end <= ext.mapped_file_size
    ext.truncated_end(ext_offset_to_addr(data.draw(st.integers(0, 2047))))
    findings: list = []
    rows = list(cqext_rows(store / "consumequeue_ext", findings=findings))
    assert all(r["file_position"] < 1024 for r in rows)


def test_one_ext_file_cut_short_is_the_odd_one(stores, tmp_path):
    """The ext file size is what every queue's ext files show together: one file cut short (the
    first queue's) is the one MappedFileQueue.load refuses, in verify, recover's plan and check;
    a healthy file of another queue was named (its size taken from the cut one)."""
    from rmqtool.cli.app import app
    store = writable_copy(stores["clean"], tmp_path / "store")
    files = sorted((store / "consumequeue_ext").rglob("0000*"))
    sizes = {f.stat().st_size for f in files}
    assert len(files) > 2 and len(sizes) == 1
    cut = files[0]
    with open(cut, "r+b") as f:
        f.truncate(93)
    found = [json.loads(x) for x in cli_runner().invoke(
        app, ["verify", str(store), "-f", "jsonl"]).stdout.splitlines()]
    assert [f["path"] for f in found if f["finding"] == "segmentSizeOdd"] == [str(cut)]
    plan = json.loads(cli_runner().invoke(app, ["recover", str(store), "-f", "json"]).stdout)
    assert str(cut) in json.dumps(plan) and not any(str(f) in json.dumps(plan) for f in files[1:])
