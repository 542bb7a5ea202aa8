"""ConsumeQueueExt written by the engine (append, recover --apply's dispatch) as the 5.3.3 broker's
putMessagePositionInfoWrapper writes it, against the real engine's truth (fixtures/rocketmq-5.3.3/
cqext, cqext-damaged): every unit an append or a recovery writes holds an ext address whose unit
has the message's tags hash and store time, laid out where the engine put its own."""
from __future__ import annotations

import dataclasses
import json
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import V5, load_truth
from helpers import cli_runner, copy_tree, examples, expand_store, tree_fingerprint
from rmqtool.cli.app import app
from rmqtool.engine.producer import producer_message
from rmqtool.engine.store import Store
from rmqtool.formats.cqext import DEFAULT_CQ_EXT_FILE_SIZE, END_BLANK_DATA_LENGTH, ext_addr_to_offset, is_ext_addr
from rmqtool.store.consumequeue import ConsumeQueue
from rmqtool.store.cqext import queue_ext

CQEXT = V5 / "cqext"
DAMAGED = V5 / "cqext-damaged"


def _cli(*args):
    from rmqtool.cli.app import app
    return cli_runner().invoke(app, [str(a) for a in args])


def _units(store: pathlib.Path, topic: str, queue_id: int) -> list:
    """(unit, ext lookup) of every unit of a queue, as the broker's iterator reads them."""
    queue = ConsumeQueue(store / "consumequeue" / topic / str(queue_id), topic, queue_id)
    ext = queue_ext(queue)
    return [(u, ext.lookup(u.tags_code)) for u in queue.iter_units()]


def _ext_layout(units) -> list[tuple]:
    """What the engine decides about each ext unit: where it is, its size, tags hash, store time."""
    return [(found.real_offset, found.unit.size, found.unit.tags_code, found.unit.msg_store_time)
            for _u, found in units]


def _truth_layout(truth_units) -> list[tuple]:
    return [(u["extRealOffset"], u["ext"]["size"], u["ext"]["tagsCode"], u["ext"]["msgStoreTime"])
            for u in truth_units]


def _verify(store) -> list[dict]:
    result = _cli("verify", store, "-f", "jsonl", "--no-progress", "--jobs", "1")
    assert result.exit_code in (0, 3), result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def _message(put: dict):
    msg = producer_message(put["topic"], put["bodyUtf8"].encode(), tags=put["tags"], keys=put["keys"],
                           user_properties=put["userProperties"], queue_id=put["queueId"])
    return dataclasses.replace(msg, store_timestamp=put["storeTimestamp"])


# --- append on the clean ext store ----------------------------------------------------------------

@pytest.fixture(scope="module")
def appended(tmp_path_factory):
    """The clean cqext store with five tagged messages appended to OrderFilterTopic/1 and one
    untagged one to TagOnlyTopic/0, store times given."""
    truth = load_truth(CQEXT / "truth.json")
    store = expand_store(CQEXT / "store", tmp_path_factory.mktemp("append") / "store")
    tags = ["TagA", "TagB", "TagC", "TagA", "TagB"]
    stamp = max(m["storeTimestamp"] for m in truth["messages"]) + 1000
    sent = [dataclasses.replace(producer_message("OrderFilterTopic", f"appended {i}".encode(), tags=t, queue_id=1),
                                store_timestamp=stamp + i) for i, t in enumerate(tags)]
    sent.append(dataclasses.replace(producer_message("TagOnlyTopic", b"no tags", queue_id=0),
                                    store_timestamp=stamp + len(tags)))
    with Store.open(store, writable=True) as s:
        results = s.append_many(sent)
    return store, truth, sent, results


def test_append_writes_an_ext_unit_for_every_unit(appended):
    """Every new unit's tagsCode field is an ext address; its ext unit holds the message's tags
    hash (the engine's dispatchTagsCode for those tags, from the truth) and store time, with the
    bit map size the topic's units have, right after the engine's last unit (a unit that does
    not fit ends the file, fullFillToEnd); the units the engine wrote are as they were."""
    store, truth, sent, results = appended
    code_of = {m["tags"]: m["dispatchTagsCode"] for m in truth["messages"]}
    file_size = int(truth["messageStoreConfig"]["changedFromDefault"]["mappedFileSizeConsumeQueueExt"])
    for topic, queue_id in {(r.topic, r.queue_id) for r in results}:
        tq = next(q for q in truth["consumeQueues"] if (q["topic"], q["queueId"]) == (topic, queue_id))
        units = _units(store, topic, queue_id)
        old, new = units[:tq["maxOffsetInQueue"]], units[tq["maxOffsetInQueue"]:]
        assert _ext_layout(old) == _truth_layout(tq["units"])
        assert [u.tags_code for u, _f in old] == [u["tagsCodeField"] for u in tq["units"]]
        mine = [(m, r) for m, r in zip(sent, results) if (r.topic, r.queue_id) == (topic, queue_id)]
        assert len(new) == len(mine) > 0
        last = tq["units"][-1]
        bit_map_size = last["ext"]["bitMapSize"]  # the topic's, as the engine's units show it
        assert [ext_addr_to_offset(u.tags_code) for u, _f in new] == _put_offsets(
            [20 + bit_map_size] * len(new), file_size, last["extRealOffset"] + last["ext"]["size"])
        for (u, found), (m, r) in zip(new, mine):
            assert is_ext_addr(u.tags_code) and found.ok, (topic, queue_id, u.queue_offset)
            assert (u.commit_log_offset, u.queue_offset) == (r.wrote_offset, r.queue_offset)
            assert (found.unit.tags_code, found.unit.msg_store_time) == (code_of[m.tags], r.store_timestamp)
            assert (found.unit.bit_map_size, found.unit.size) == (bit_map_size, 20 + bit_map_size)


def test_dump_and_verify_read_the_appended_ext(appended):
    """dump consumequeue follows the new addresses (tags_code the real one, ext_lookup OK) and
    verify finds nothing about consume queues or their ext."""
    store, truth, sent, results = appended
    code_of = {m["tags"]: m["dispatchTagsCode"] for m in truth["messages"]}
    result = _cli("dump", "consumequeue", store, "-t", "OrderFilterTopic", "-q", "1", "-f", "jsonl")
    assert result.exit_code == 0, result.output
    rows = {r["queue_offset"]: r for r in map(json.loads, result.stdout.splitlines())}
    for m, r in zip(sent, results):
        if r.topic == "OrderFilterTopic":
            row = rows[r.queue_offset]
            assert (row["tags_code"], row["ext_lookup"]) == (code_of[m.tags], "OK")
            assert is_ext_addr(row["ext_address"])
    assert [f for f in _verify(store) if f["severity"] != "info"] == []


# --- after the engine's recovery of the damaged store: its puts ---------------------------------------

@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    base = tmp_path_factory.mktemp("damaged")
    return base, expand_store(DAMAGED / "input" / "store", base / "input")


def test_appends_after_recovery_land_where_the_engine_put_them(damaged, tmp_path):
    """afterRecoveryPuts: the engine's four puts into each OrderFilterTopic queue of the damaged
    store (one ext file deleted, a consume queue's tail lost, an ext tail garbled), made by
    append: every ext file's write position, and every new unit's ext unit (where, size, tags
    hash, store time), as the engine's."""
    truth = load_truth(DAMAGED / "truth.json")
    after = truth["afterRecoveryPuts"]
    store = expand_store(DAMAGED / "input" / "store", tmp_path / "store")
    with Store.open(store, writable=True) as s:
        s.append_many([_message(p) for p in after["putResults"]])
    for tq in after["consumeQueues"]:
        key = f"{tq['topic']}/{tq['queueId']}"
        want = truth["summary"]["queues"][key]
        if "afterRecoveryPuts" not in want:
            continue
        units = _units(store, tq["topic"], tq["queueId"])
        start = want["cqMaxOffsetAfterRecovery"]
        assert len(units) == want["afterRecoveryPuts"]["cqMaxOffset"] == tq["maxOffsetInQueue"]
        assert _ext_layout(units[start:]) == _truth_layout(tq["units"][start:]), key
        ext = queue_ext(ConsumeQueue(store / "consumequeue" / tq["topic"] / str(tq["queueId"]), tq["topic"],
                                     tq["queueId"])).ext
        positions = [(s.path.name, ext.read_position(s)) for s in ext.segments]
        assert positions == [tuple(f) for f in want["afterRecoveryPuts"]["extFiles"]], key


def test_recover_apply_cuts_the_ext_and_dispatch_writes_ext_units(damaged, tmp_path):
    """The damaged store after a crash (an abort marker): the plan cuts the ext units nothing
    points at (the lost units' and the garbled bytes, as the mutations placed them), --apply
    zeroes them and dispatches the lost units again with ext units (where, tags hash and store
    time as the engine's own for those messages); what verify still finds is what the broker
    keeps too (the addresses of the deleted ext file and the garbled units); undo gives the
    store back byte for byte."""
    truth = load_truth(DAMAGED / "truth.json")
    clean = {(q["topic"], q["queueId"]): q["units"] for q in load_truth(CQEXT / "truth.json")["consumeQueues"]}
    _base, source = damaged
    store = tmp_path / "store"
    copy_tree(source, store)
    (store / "abort").touch()
    before = tree_fingerprint(store)
    plan = json.loads(_cli("recover", store, "-f", "json").stdout)
    lost = next(m for m in truth["mutation"] if m["op"] == "fill" and m["path"].startswith("consumequeue/"))
    garbled = next(m for m in truth["mutation"] if m["op"] == "fill" and m["path"].startswith("consumequeue_ext/"))
    lost_units = clean[(lost["topic"], lost["queueId"])][truth["summary"]["queues"][
        f"{lost['topic']}/{lost['queueId']}"]["cqMaxOffsetAfterRecovery"]:]
    cuts = {c["queue"]: c for c in plan["consume_queue_ext"]["cut"]}
    key = f"{lost['topic']}/{lost['queueId']}"
    assert cuts[key]["write_position"] == lost_units[0]["extRealOffset"]
    assert cuts[key]["units_zeroed"] == len(lost_units)
    assert plan["consume_queue_ext"]["units_put"] == {key: len(lost_units)}
    zeroed = {(a["file"], a["start"], a["end"]) for a in plan["actions"] if a["finding"] == "cqExtGarbageAfterEnd"}
    assert (str(store / garbled["path"]), garbled["start"], garbled["end"]) in zeroed

    applied = _cli("recover", store, "--apply", "--backup-dir", tmp_path / "backup")
    assert applied.exit_code == 0, applied.output
    units = _units(store, lost["topic"], lost["queueId"])
    assert _ext_layout(units[-len(lost_units):]) == _truth_layout(lost_units)
    found = [f for f in _verify(store) if f["finding"].startswith(("cqExt", "consumeQueue"))]
    dangling = {pathlib.Path(f["path"]).parent.parent.name + "/" + pathlib.Path(f["path"]).parent.name
                for f in found if f["finding"] == "cqExtAddressDangling"}
    assert {f["finding"] for f in found} <= {"cqExtAddressDangling"}
    assert dangling == {k for k, q in truth["summary"]["queues"].items() if q["unitsWhoseExtLookupFails"]}

    undone = _cli("undo", tmp_path / "backup")
    assert undone.exit_code == 0, undone.output
    assert tree_fingerprint(store) == before


def test_salvage_to_store_writes_the_ext_too(tmp_path):
    """salvage --to-store of an ext store: the new store's queues hold ext addresses whose units
    carry each message's tags hash and store time, in the engine's order (no bit maps: the new
    store has no units of its own to show their size)."""
    truth = load_truth(CQEXT / "truth.json")
    source = expand_store(CQEXT / "store", tmp_path / "source")
    result = _cli("salvage", source, "--to-store", tmp_path / "new")
    assert result.exit_code == 0, result.output
    file_size = int(truth["messageStoreConfig"]["changedFromDefault"]["mappedFileSizeConsumeQueueExt"])
    for tq in truth["consumeQueues"]:
        units = _units(tmp_path / "new", tq["topic"], tq["queueId"])
        assert all(found is not None and found.ok for _u, found in units)
        assert [u.commit_log_offset for u, _f in units] == [u["commitLogOffset"] for u in tq["units"]]
        assert [(f.unit.tags_code, f.unit.msg_store_time, f.unit.size) for _u, f in units] == \
            [(u["ext"]["tagsCode"], u["ext"]["msgStoreTime"], 20) for u in tq["units"]]
        assert [f.real_offset for _u, f in units] == _put_offsets([20] * len(units), file_size)


def _put_offsets(sizes: list[int], file_size: int, at: int = 0) -> list[int]:
    """Where ConsumeQueueExt.put places units of ``sizes`` from ``at``: a unit that does not fit
    before a file's last END_BLANK_DATA_LENGTH bytes goes to the next file."""
    out = []
    for size in sizes:
        if size > file_size - at % file_size - END_BLANK_DATA_LENGTH:
            at += file_size - at % file_size
        out.append(at)
        at += size
    return out


def test_broker_config_says_whether_dispatch_writes_ext_units(tmp_path):
    """--broker-config's enableConsumeQueueExt is the answer before the directory: false on an
    ext store, the units keep the tags hash (the broker neither reads nor writes the ext); true
    on a store without consumequeue_ext/, the first unit makes it."""
    from rmqtool.engine.store_sizes import GivenSizes
    from rmqtool.store.broker_conf import read_broker_config
    truth = load_truth(CQEXT / "truth.json")
    code_of = {m["tags"]: m["dispatchTagsCode"] for m in truth["messages"]}
    for enabled in (False, True):
        store = expand_store(CQEXT / "store", tmp_path / f"store-{enabled}")
        if enabled:
            import shutil
            shutil.rmtree(store / "consumequeue_ext")
            shutil.rmtree(store / "consumequeue" / "TagOnlyTopic")
        conf = tmp_path / f"broker-{enabled}.conf"
        conf.write_text(f"enableConsumeQueueExt={str(enabled).lower()}\nmappedFileSizeConsumeQueueExt=2048\n")
        msg = dataclasses.replace(producer_message("TagOnlyTopic", b"x", tags="TagA", queue_id=0), store_timestamp=1)
        with Store.open(store, writable=True, sizes=GivenSizes(broker_config=read_broker_config(conf))) as s:
            r = s.append(msg)
        u, found = _units(store, "TagOnlyTopic", 0)[r.queue_offset]
        if enabled:
            assert found.ok and (found.unit.tags_code, found.real_offset) == (code_of["TagA"], 0)
            assert (store / "consumequeue_ext" / "TagOnlyTopic" / "0" / "00000000000000000000").stat().st_size == 2048
        else:
            assert (u.tags_code, found) == (code_of["TagA"], None)


def test_ext_files_nothing_shows_the_size_of_are_not_written_at_the_default(tmp_path):
    """Every ext file gone (their directories kept: the store still writes ext units): redispatch
    --cq wrote them at the default 48 MiB, the plan silent, where the broker runs with another
    size and refuses a file of another length at load. The plan says the size is the default,
    --apply refuses (exit 2, nothing written); --broker-config gives it."""
    truth = load_truth(CQEXT / "truth.json")
    size = int(truth["messageStoreConfig"]["effectiveGetterValues"]["mappedFileSizeConsumeQueueExt"])
    store = expand_store(CQEXT / "store", tmp_path / "store")
    for f in [p for p in (store / "consumequeue_ext").rglob("*") if p.is_file()]:
        f.unlink()
    emptied = tree_fingerprint(store)
    run = cli_runner()
    doc = json.loads(run.invoke(app, ["redispatch", str(store), "--cq", "-f", "json"]).stdout)
    assert doc["consume_queue_ext_file_size"] == {"value": DEFAULT_CQ_EXT_FILE_SIZE, "taken_from": "default"}
    refused = run.invoke(app, ["redispatch", str(store), "--cq", "--apply", "--backup-dir", str(tmp_path / "b0")])
    assert refused.exit_code == 2 and "mappedFileSizeConsumeQueueExt" in refused.stderr, refused.output
    assert tree_fingerprint(store) == emptied
    conf = tmp_path / "broker.conf"
    conf.write_text(f"mappedFileSizeConsumeQueueExt={size}\n")
    done = run.invoke(app, ["redispatch", str(store), "--cq", "--apply", "--backup-dir", str(tmp_path / "b1"),
                            "--broker-config", str(conf)])
    assert done.exit_code == 0, done.output
    written = [p for p in (store / "consumequeue_ext").rglob("*") if p.is_file()]
    assert written and {p.stat().st_size for p in written} == {size}


@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_ext_damage_never_breaks_the_plan_or_append(tmp_path_factory, data):
    """Random bytes over an ext file: the recovery plan still comes out, and append either
    writes (its new unit's ext unit found at its address) or refuses with a clear error. A
    damaged size that the next start's walk follows into the new unit ends the ext file's
    read position inside it, so that start no longer finds it (the broker's own append does
    the same): then verify says so."""
    from rmqtool.errors import RmqError
    from rmqtool.recovery.plan import plan_recovery
    store = expand_store(CQEXT / "store", tmp_path_factory.mktemp("fuzz") / "store")
    files = sorted((store / "consumequeue_ext").rglob("0000*"))
    target = files[data.draw(st.integers(0, len(files) - 1))]
    raw = bytearray(target.read_bytes())
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        chunk = data.draw(st.binary(min_size=1, max_size=40))
        raw[at:at + len(chunk)] = chunk[:len(raw) - at]
    target.write_bytes(bytes(raw))
    plan_recovery(store)
    topic, queue_id = target.parent.parent.name, int(target.parent.name)
    try:
        with Store.open(store, writable=True, recover=True, backup_dir=store.parent / "backup") as s:
            r = s.append(dataclasses.replace(producer_message(topic, b"x", tags="TagA", queue_id=queue_id),
                                             store_timestamp=1))
    except RmqError:
        return
    u, found = _units(store, topic, queue_id)[r.queue_offset]
    assert found is not None
    if not found.ok:  # the next start's read position cuts it: written all the same, and said
        queue = ConsumeQueue(store / "consumequeue" / topic / str(queue_id), topic, queue_id)
        written = queue_ext(queue).ext.get(u.tags_code, 1 << 62)  # read against the whole file
        assert written.ok and written.unit.msg_store_time == 1
        _said_dangling(store, topic, queue_id, r.queue_offset)
        return
    assert found.unit.msg_store_time == 1


def _said_dangling(store: pathlib.Path, topic: str, queue_id: int, queue_offset: int) -> None:
    """verify names the queue offset among those whose ext address finds no unit."""
    v = _cli("verify", store, "-f", "json")
    runs = [f["message"].split()[2] for f in json.loads(v.stdout) if f["finding"] == "cqExtAddressDangling"
            and f" of {topic}/{queue_id} " in f["message"]]
    assert any(int(a) <= queue_offset <= int(b) for a, b in (run.split("..") for run in runs)), runs


def test_a_damaged_ext_size_that_skips_into_the_next_unit_is_said(tmp_path):
    """The first unit of a queue's last ext file claims a size that skips past the units into
    where the next one goes: the broker starts (the walk stops at the zeros there) and append
    writes the next ext unit where truncateByMaxAddress leaves the file, but the next start's
    walk follows the bad size into it, stops on its bit map and ends the read position inside
    it: that start no longer finds the unit, and verify says so (a random-damage example of
    the test above)."""
    store = expand_store(CQEXT / "store", tmp_path / "store")
    topic, queue_id = "OrderFilterTopic", 1
    ext = max((store / "consumequeue_ext" / topic / str(queue_id)).iterdir(), key=lambda p: int(p.name))
    raw = bytearray(ext.read_bytes())
    end = 0
    while int.from_bytes(raw[end:end + 2], "big", signed=True) > 0:
        end += int.from_bytes(raw[end:end + 2], "big", signed=True)
    raw[0:2] = (end + 18).to_bytes(2, "big")  # into the middle of the unit append puts at ``end``
    ext.write_bytes(bytes(raw))
    with Store.open(store, writable=True, recover=True, backup_dir=tmp_path / "backup") as s:
        r = s.append(dataclasses.replace(producer_message(topic, b"x", tags="TagA", queue_id=queue_id),
                                         store_timestamp=1))
    u, found = _units(store, topic, queue_id)[r.queue_offset]
    assert ext_addr_to_offset(u.tags_code) == int(ext.name) + end and not found.ok
    queue = ConsumeQueue(store / "consumequeue" / topic / str(queue_id), topic, queue_id)
    assert queue_ext(queue).ext.get(u.tags_code, 1 << 62).unit.msg_store_time == 1  # written whole
    _said_dangling(store, topic, queue_id, r.queue_offset)


def test_an_ext_size_skipping_past_the_file_end_is_a_start_refused(tmp_path):
    """A unit size in the ext's last file that skips past the file's end: recover's walk
    (readBySkip) moves its buffer past the limit, which throws, so the broker does not
    start; the plan says so and an append that recovers first refuses, where it once wrote
    an ext unit the next walk could not reach (a random-damage example of the test above)."""
    from rmqtool.errors import RmqError
    from rmqtool.recovery.plan import plan_recovery
    store = expand_store(CQEXT / "store", tmp_path / "store")
    ext = max((store / "consumequeue_ext" / "TagOnlyTopic" / "0").iterdir(), key=lambda p: int(p.name))
    raw = bytearray(ext.read_bytes().ljust(1024, b"\0"))
    pos = last = 0
    while pos + 2 <= len(raw) and int.from_bytes(raw[pos:pos + 2], "big", signed=True) > 0:
        last, pos = pos, pos + int.from_bytes(raw[pos:pos + 2], "big", signed=True)
    with open(ext, "r+b") as f:  # the last unit's size now reaches past the file's end
        f.seek(last)
        f.write((len(raw) - last + 20).to_bytes(2, "big"))
    plan = plan_recovery(store)
    assert not plan.loadable and f"offset {int(ext.name) + last} that skips past the file's end" in plan.refusal
    with pytest.raises(RmqError):
        with Store.open(store, writable=True, recover=True, backup_dir=tmp_path / "backup") as s:
            s.append(dataclasses.replace(producer_message("TagOnlyTopic", b"x", tags="TagA", queue_id=0),
                                         store_timestamp=1))
