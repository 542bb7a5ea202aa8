"""Key lookups (queryMessage) against what the broker answered, in every fixture store.

truth.json's queryMessage[] holds, per query, the raw IndexService.queryOffset list and
the messages queryMessage returned, each marked keyOrUniqKeyActuallyEquals. rmqtool must
collect the same offsets, keep exactly the true ones, and drop the hash collisions; where
the index does not reach (removed, damaged, or a commit log the broker truncated), it
finds more, and only messages the broker could not see.
"""
from __future__ import annotations

import json
import shutil
import struct

import pytest

from conftest import CLEAN_SCENARIOS, V4, V5, load_truth
from helpers import copy_tree
from rmqtool.errors import UsageError
from rmqtool.formats.indexfile import build_key, entry_position, index_key_hash, slot_of, slot_position
from rmqtool.query.by_key import LONG_MAX, query_by_key, store_topics
from rmqtool.query.explain import Trace
from rmqtool.store.indexfile import list_index_files

CRASH_BASES = (V4 / "crash", V4 / "crash-fast", V5 / "crash5")

# (name, store dir, truth) for every store a queryMessage truth describes as it is on disk.
QUERY_STORES = [(name, d / "store", d / "truth.json") for name, d in sorted(CLEAN_SCENARIOS.items())
                if "queryMessage" in load_truth(d / "truth.json")]
QUERY_STORES += [(f"{base.parent.name}/{base.name}/{d.name}", d / "expected" / "store", d / "truth.json")
                 for base in CRASH_BASES for d in sorted(p for p in base.iterdir() if p.is_dir())
                 if (d / "expected" / "store").is_dir() and "queryMessage" in load_truth(d / "truth.json")]
CLEAN_QUERY_STORES = [s for s in QUERY_STORES if "crash" not in s[0]]
TIMEKEY = V4 / "timekey"


def _kept(q: dict) -> list[int]:
    return [r["physicalOffset"] for r in q["queryMessageResults"] if r["keyOrUniqKeyActuallyEquals"]]


def _query(store, q, **kw):
    return query_by_key(store, q["key"], topic=q["topic"], begin=q["begin"], end=q["end"], max_num=q["maxNum"], **kw)


def _holds_key(m: dict, key: str) -> bool:
    return key in (m.get("keys") or "").split(" ") or m.get("uniqKey") == key


def test_query_stores_are_all_there():
    names = {n for n, _, _ in QUERY_STORES}
    assert {"4.9.8/basic", "4.9.8/batch", "4.9.8/timekey", "5.3.3/v2-and-crc"} <= names
    assert sum("crash" in n for n in names) >= 15  # every variant whose load succeeded


@pytest.mark.parametrize("name,store,truth_path", QUERY_STORES, ids=[s[0] for s in QUERY_STORES])
def test_index_walk_and_kept_hits_reproduce_the_broker(name, store, truth_path):
    """Index only, and the commit log cut where the broker's recovery cut it: the same
    offsets collected in the same order, the true hits kept, every collision dropped."""
    truth = load_truth(truth_path)
    end = truth["truth"]["commitlog"]["maxPhyOffset"]
    for q in truth["queryMessage"]:
        result = _query(store, q, index_only=True, commit_log_end=end)
        assert [c.phy_offset for c in result.candidates[q["topic"]]] == q["indexServiceQueryOffsetPhyOffsets_unsorted"]
        assert [m.commit_log_offset for m in result.messages] == _kept(q), q["key"]
        by_offset = {m.commit_log_offset: m for m in result.messages}
        dropped = dict(result.dropped)
        for r in q["queryMessageResults"]:
            if r["keyOrUniqKeyActuallyEquals"]:
                m = by_offset[r["physicalOffset"]]
                assert (m.topic, m.uniq_key, m.store_timestamp) == (r["topic"], r.get("uniqKey"), r["storeTimestamp"])
                assert " ".join(m.keys) == (r.get("keys") or "")
            else:
                assert "hash collision" in dropped[r["physicalOffset"]]
        assert all(result.sources[m.commit_log_offset] == "index" for m in result.messages)


def _aa(truth):
    return next(q for q in truth["queryMessage"] if q["key"] == "Aa" and q["topic"] == "KeyTopic")


def test_hash_collisions_are_really_exercised():
    truth = load_truth(TIMEKEY / "truth.json")
    collisions = [r for q in truth["queryMessage"] for r in q["queryMessageResults"]
                  if not r["keyOrUniqKeyActuallyEquals"]]
    assert len(collisions) >= 40
    aa = _aa(truth)
    result = _query(TIMEKEY / "store", aa)
    false_hits = len(aa["queryMessageResults"]) - len(_kept(aa))
    assert false_hits > 0 and len(result.messages) == len(_kept(aa)) > 0
    assert all("Aa" in m.keys for m in result.messages)
    assert sum("hash collision" in why for _, why in result.dropped) == false_hits


@pytest.mark.parametrize("name,store,truth_path", CLEAN_QUERY_STORES, ids=[s[0] for s in CLEAN_QUERY_STORES])
def test_default_mode_equals_the_broker_on_clean_stores(name, store, truth_path):
    truth = load_truth(truth_path)
    for q in truth["queryMessage"]:
        result = _query(store, q)
        assert [m.commit_log_offset for m in result.messages] == _kept(q), q["key"]
        assert not result.notes


@pytest.mark.parametrize("name,store,truth_path", QUERY_STORES, ids=[s[0] for s in QUERY_STORES])
def test_default_mode_finds_only_what_the_broker_cannot_see(name, store, truth_path):
    """Where rmqtool answers more than the broker, each extra message is a real match
    that lies outside every index file's range or past the broker's recovered end."""
    truth = load_truth(truth_path)
    end = truth["truth"]["commitlog"]["maxPhyOffset"]
    ranges = [(f["beginPhyOffset"], f["endPhyOffset"]) for f in truth["onDiskAfterShutdown"]["indexFiles"]
              if f["indexCount"] > 1]
    for q in truth["queryMessage"]:
        result = _query(store, q)
        ours = {m.commit_log_offset: m for m in result.messages}
        broker = _kept(q)
        for m in result.messages:
            assert m.topic == q["topic"] and (q["key"] in m.keys or m.uniq_key == q["key"])
        extras = sorted(set(ours) - set(broker))
        for offset in extras:
            outside = not any(lo <= offset <= hi for lo, hi in ranges)
            assert outside or offset >= end, (q["key"], offset)
        missing = set(broker) - set(ours)
        if missing:  # only pushed out by newer messages the index did not have
            assert len(ours) == q["maxNum"] and max(missing) < min(ours)
        if extras and any(not any(lo <= o <= hi for lo, hi in ranges) for o in extras):
            assert any("not in the index" in n for n in result.notes)


def test_removed_index_dir_rebuilt_partially_rmqtool_finds_all():
    """crash/d: the broker rebuilt the index only for the files it rescanned, so it
    misses older messages; rmqtool scans what the index does not cover and finds them."""
    variant = V4 / "crash" / "d-remove-index-dir"
    truth = load_truth(variant / "truth.json")
    messages = truth["truth"]["messages"]
    broker_total = ours_total = 0
    for q in truth["queryMessage"]:
        expected = [m["physicalOffset"] for m in messages if m["topic"] == q["topic"] and _holds_key(m, q["key"])]
        expected = expected[-q["maxNum"]:]
        for store in (variant / "expected" / "store", variant / "input" / "store"):
            result = _query(store, q)
            assert [m.commit_log_offset for m in result.messages] == expected, (store, q["key"])
        broker_total += len(_kept(q))
        ours_total += len(expected)
    assert broker_total < ours_total
    result = _query(variant / "input" / "store", truth["queryMessage"][0])
    assert any("no readable index files" in n for n in result.notes)
    result = _query(variant / "expected" / "store", truth["queryMessage"][0])
    assert any("not in the index" in n for n in result.notes)


def test_truncated_commit_log_past_the_broker_end():
    """crash-fast/e2: recovery cut the commit log at a bad body CRC but the rest of the
    first file stays on disk (the later files were deleted) and the index still names its
    records. The broker returns what lies before the cut; rmqtool finds every record that
    is there, and with the broker's end it agrees with the broker."""
    variant = V4 / "crash-fast" / "e2-corrupt-body-in-first-commitlog-file"
    truth = load_truth(variant / "truth.json")
    pre_crash = load_truth(variant.parent / "pre-crash-truth.json")
    store = variant / "expected" / "store"
    cut = truth["truth"]["commitlog"]["maxPhyOffset"]
    first_file = (store / "commitlog" / f"{0:020d}").stat().st_size
    assert len(list((store / "commitlog").iterdir())) == 1
    q = next(q for q in truth["queryMessage"] if q["key"] == "ck-shared")
    on_disk = [m["physicalOffset"] for m in pre_crash["truth"]["messages"]
               if m["topic"] == q["topic"] and _holds_key(m, q["key"]) and m["physicalOffset"] < first_file]
    assert _kept(q) == [o for o in on_disk if o < cut] and len(on_disk) > len(_kept(q))
    found = _query(store, q)
    assert [m.commit_log_offset for m in found.messages] == on_disk
    assert [m.commit_log_offset for m in _query(store, q, commit_log_end=cut).messages] == _kept(q)
    flipped = truth["mutation"]["messagePhysicalOffset"]
    assert flipped == cut
    bad = [m for m in found.messages + _query(store, {**q, "key": "ck-5"}).messages if m.commit_log_offset == flipped]
    assert bad and all(m.body_crc_ok is False for m in bad)  # the record whose body byte was flipped


def _oracle(truth: dict, topic, key, begin=0, end=LONG_MAX, max_num=64, uniq=False):
    hits = [m["physicalOffset"] for m in truth["truth"]["messages"]
            if (topic is None or m["topic"] == topic) and begin <= m["storeTimestamp"] <= end
            and (m.get("uniqKey") == key if uniq else _holds_key(m, key))]
    return hits[-max_num:]


def test_no_index_dir_falls_back_to_a_scan(store_copy):
    """Index gone: the same messages, found by scanning; time windows on real store times."""
    store = store_copy(TIMEKEY / "store")
    shutil.rmtree(store / "index")
    truth = load_truth(TIMEKEY / "truth.json")
    for q in truth["queryMessage"]:
        result = _query(store, q)
        expected = _oracle(truth, q["topic"], q["key"], q["begin"], q["end"], q["maxNum"])
        assert [m.commit_log_offset for m in result.messages] == expected, q
        assert any("scanning the whole commit log" in n for n in result.notes)
        assert not result.used_index
        if q["begin"] == 0 and q["end"] == LONG_MAX:
            assert [m.commit_log_offset for m in result.messages] == _kept(q)


def test_no_index_flag_agrees_with_the_index_on_basic():
    truth = load_truth(V4 / "basic" / "truth.json")
    store = V4 / "basic" / "store"
    for q in truth["queryMessage"]:
        scanned = _query(store, q, use_index=False)
        assert [m.commit_log_offset for m in scanned.messages] == _kept(q)
        assert set(scanned.sources.values()) <= {"scan"}


def _full_window_queries(truth):
    return [q for q in truth["queryMessage"] if q["begin"] == 0 and q["end"] == LONG_MAX]


def test_unreadable_index_file_is_scanned_instead(store_copy):
    store = store_copy(TIMEKEY / "store")
    victim = sorted((store / "index").iterdir())[1]
    with open(victim, "r+b") as f:
        f.truncate(30)
    truth = load_truth(TIMEKEY / "truth.json")
    for q in _full_window_queries(truth):
        result = _query(store, q)
        expected = _oracle(truth, q["topic"], q["key"], max_num=q["maxNum"])
        assert [m.commit_log_offset for m in result.messages] == expected, q["key"]
        assert any(victim.name in n and "cannot be read" in n for n in result.notes)


def test_looping_chain_marks_the_file_damaged(store_copy):
    """A prevIndex that points back up the chain: the walk stops, and the file's range is
    scanned so nothing behind the damage is lost."""
    store = store_copy(TIMEKEY / "store")
    newest = sorted((store / "index").iterdir())[-1]
    listing = list_index_files(store)
    f = listing.open_all()[-1]
    slots = f.hash_slot_num
    chain = [n for n, _ in f.lookup_chain(index_key_hash(build_key("KeyTopic", "Aa")))]
    f.close()
    assert len(chain) > 4
    with open(newest, "r+b") as fh:  # the 3rd entry of the chain now points back to the 1st
        fh.seek(entry_position(slots, chain[2]) + 16)
        fh.write(struct.pack(">i", chain[0]))
    truth = load_truth(TIMEKEY / "truth.json")
    q = next(q for q in truth["queryMessage"] if q["key"] == "Aa" and q["topic"] == "KeyTopic")
    result = _query(store, q)
    assert [m.commit_log_offset for m in result.messages] == _kept(q)
    assert any("damaged" in n and newest.name in n for n in result.notes)


def test_uniq_key_lookup_matches_only_uniq_keys():
    truth = load_truth(TIMEKEY / "truth.json")
    store = TIMEKEY / "store"
    sample = [m for m in truth["truth"]["messages"] if m.get("uniqKey")][::37]
    assert len(sample) >= 10
    for m in sample:
        result = query_by_key(store, m["uniqKey"], topic=m["topic"], uniq_key=True)
        assert [x.commit_log_offset for x in result.messages] == [m["physicalOffset"]]
        wrong_topic = "OtherTopic" if m["topic"] != "OtherTopic" else "KeyTopic"
        assert query_by_key(store, m["uniqKey"], topic=wrong_topic, uniq_key=True).messages == []
    assert query_by_key(store, "hot", topic="KeyTopic", uniq_key=True).messages == []


def test_without_topic_every_topic_is_searched():
    truth = load_truth(TIMEKEY / "truth.json")
    store = TIMEKEY / "store"
    assert store_topics(store) == ["KeyTopic", "OtherTopic", "TimeTopic"]
    for key in ("Aa", "hot"):
        result = query_by_key(store, key, max_num=500)
        assert [m.commit_log_offset for m in result.messages] == _oracle(truth, None, key, max_num=500)
        assert {m.topic for m in result.messages} == {"KeyTopic", "OtherTopic"}


def test_max_num_keeps_the_newest():
    truth = load_truth(TIMEKEY / "truth.json")
    store = TIMEKEY / "store"
    all_hot = _oracle(truth, "KeyTopic", "hot", max_num=1000)
    assert len(all_hot) > 64  # more than the broker's maxMsgsNumBatch
    for n in (1, 10, 64):
        result = query_by_key(store, "hot", topic="KeyTopic", max_num=n)
        assert [m.commit_log_offset for m in result.messages] == all_hot[-n:]
    # rmqtool honours a --max above the broker's maxMsgsNumBatch (64)
    result = query_by_key(store, "hot", topic="KeyTopic", max_num=100)
    assert [m.commit_log_offset for m in result.messages] == all_hot


def test_explain_trace_names_files_slots_entries_and_verdicts():
    lines = []
    query_by_key(TIMEKEY / "store", "Aa", topic="KeyTopic", trace=Trace(lines.append))
    text = "\n".join(lines)
    aa = _aa(load_truth(TIMEKEY / "truth.json"))
    key_hash = index_key_hash("KeyTopic#Aa")
    assert f"keyHash {key_hash}" in text
    assert f"slot {slot_of(key_hash, 16)} of 16" in text
    assert "collected" in text and "other key (keyHash differs)" in text
    assert text.count(": kept:") == len(_kept(aa))
    assert text.count("dropped: hash collision") == len(aa["queryMessageResults"]) - len(_kept(aa))
    assert "scanning what it does not" in text


def test_bad_arguments_are_usage_errors():
    store = TIMEKEY / "store"
    for kwargs in ({"key": ""}, {"key": "a", "max_num": 0}, {"key": "a", "begin": 10, "end": 5}):
        key = kwargs.pop("key")
        with pytest.raises(UsageError):
            query_by_key(store, key, **kwargs)


def test_lookup_never_writes(store_copy):
    store = store_copy(TIMEKEY / "store")
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in store.rglob("*") if p.is_file()}
    truth = load_truth(TIMEKEY / "truth.json")
    for q in truth["queryMessage"][:5]:
        _query(store, q)
        _query(store, q, use_index=False)
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in store.rglob("*") if p.is_file()}
    assert before == after


def test_a_scan_over_a_file_cut_inside_a_header_finds_the_keys_before_it(tmp_path):
    """--no-index over a middle commit log file cut two bytes past a record's end: the key's
    messages are found (its hop read the next header past the end of what was read, and the
    command stopped with a traceback)."""
    from helpers import cli_runner
    from rmqtool.cli.app import app
    truth = load_truth(TIMEKEY / "truth.json")["truth"]
    store = tmp_path / "store"
    copy_tree(TIMEKEY / "store", store)
    files = sorted((store / "commitlog").iterdir())
    middle = files[1]
    base = int(middle.name)
    ends = [m["physicalOffset"] + m["storeSize"] - base for m in truth["messages"]
            if base <= m["physicalOffset"] and m["physicalOffset"] + m["storeSize"] - base + 2 <= middle.stat().st_size]
    with open(middle, "r+b") as f:
        f.truncate(ends[-1] + 2)
    first = truth["messages"][0]
    key = first["propertiesString"].split("KEYS\x01")[1].split("\x02")[0].split(" ")[0]
    r = cli_runner().invoke(app, ["query", str(store), "--key", key, "--topic", first["topic"], "--no-index",
                                  "-f", "jsonl", "--body", "none"])
    assert r.exit_code == 0, r.output
    found = {json.loads(line)["commit_log_offset"] for line in r.stdout.splitlines()}
    gone = range(base + ends[-1], int(files[2].name))  # the records cut away, up to the next file
    want = {m["physicalOffset"] for m in truth["messages"] if m["topic"] == first["topic"]
            and key in m["propertiesString"].split("KEYS\x01")[-1].split("\x02")[0].split(" ")
            and m["physicalOffset"] not in gone}
    assert first["physicalOffset"] in found and found == want


def test_fewer_than_max_because_the_index_s_newest_name_nothing_says_more_may_exist(tmp_path):
    """The commit log's last file cut short: of the key's 64 newest index entries some name
    offsets past the end. As the broker, the answer is the rest and older entries are not
    read; the command says more may exist (it once said nothing, though --no-index finds them)."""
    from helpers import cli_runner
    from rmqtool.cli.app import app
    truth = load_truth(TIMEKEY / "truth.json")["truth"]
    store = tmp_path / "store"
    copy_tree(TIMEKEY / "store", store)
    last = sorted((store / "commitlog").iterdir())[-1]
    cut = int(last.name) + last.stat().st_size // 4
    hot = [m for m in truth["messages"] if m["topic"] == "KeyTopic"
           and "hot" in m["propertiesString"].split("KEYS\x01")[-1].split("\x02")[0].split(" ")]
    assert len([m for m in hot if m["physicalOffset"] >= cut]) > 0 and len(hot) > 64
    with open(last, "r+b") as f:
        f.truncate(cut - int(last.name))
    runner = cli_runner()

    def offsets(*extra):
        r = runner.invoke(app, ["query", str(store), "--key", "hot", "-t", "KeyTopic", "-f", "jsonl", "--body", "none",
                                *extra])
        assert r.exit_code == 0, r.output
        return [json.loads(line)["commit_log_offset"] for line in r.stdout.splitlines()], r.stderr

    indexed, said = offsets()
    scanned, _ = offsets("--no-index")
    whole = sorted(m["physicalOffset"] for m in hot if m["physicalOffset"] + m["storeSize"] <= cut)
    assert scanned == whole[-64:] and len(indexed) < 64 and set(indexed) < set(scanned)
    assert "fewer than --max 64" in said and "more may exist" in said


def test_a_chain_link_to_no_earlier_entry_makes_the_file_s_range_scanned(tmp_path):
    """A damaged prevIndex (past indexCount) cuts a slot's chain: the broker's walk stops there
    and never sees the older entries. rmqtool calls the file damaged and scans its range, so
    a message whose entry lay past the cut is still found (it once answered "not found")."""
    from rmqtool.store.indexfile import IndexFile
    truth = load_truth(TIMEKEY / "truth.json")
    store = tmp_path / "store"
    copy_tree(TIMEKEY / "store", store)
    for q in truth["queryMessage"]:
        kept = _kept(q)
        key_hash = index_key_hash(build_key(q["topic"], q["key"]))
        for path in list_index_files(store).paths:
            with IndexFile(path) as f:
                chain = [(n, e.phy_offset, e.position) for n, e in f.lookup_chain(key_hash)]
                count = f.header.index_count
            behind = [o for _, o, _ in chain[1:] if o in kept]
            if behind and len(kept) < q["maxNum"]:
                break
        else:
            continue
        break
    else:
        pytest.fail("no query whose message lies behind its chain's head")
    with open(path, "r+b") as f:
        f.seek(chain[0][2] + 16)  # the head entry's prevIndex
        f.write(struct.pack(">i", count + 1000))
    result = _query(store, q)
    assert set(behind) <= {m.commit_log_offset for m in result.messages}
    assert any(f"index file {path.name} is damaged" in n for n in result.notes)


def test_not_found_through_a_zeroed_slot_points_at_the_scan(tmp_path):
    """The key's slot zeroed in the index file that holds it: the walk finds nothing, as the
    broker's would, and "not found" says the index answered and --no-index scans; the scan
    finds the broker's answer."""
    from helpers import cli_runner
    from rmqtool.cli.app import app
    from rmqtool.store.indexfile import IndexFile
    truth = load_truth(TIMEKEY / "truth.json")
    q = next(q for q in truth["queryMessage"] if q["topic"] == "TimeTopic" and len(_kept(q)) == 1)
    store = tmp_path / "store"
    copy_tree(TIMEKEY / "store", store)
    key_hash = index_key_hash(build_key(q["topic"], q["key"]))
    for path in list_index_files(store).paths:
        with IndexFile(path) as f:
            if any(e.phy_offset in _kept(q) for _, e in f.lookup_chain(key_hash)):
                slot = slot_position(slot_of(key_hash, f.hash_slot_num))
                break
    with open(path, "r+b") as f:
        f.seek(slot)
        f.write(bytes(4))
    runner = cli_runner()
    r = runner.invoke(app, ["query", str(store), "--key", q["key"], "-t", q["topic"], "-f", "jsonl"])
    assert r.exit_code == 1 and "--no-index scans the whole commit log" in r.stderr
    r = runner.invoke(app, ["query", str(store), "--key", q["key"], "-t", q["topic"], "--no-index", "-f", "jsonl"])
    assert [json.loads(line)["commit_log_offset"] for line in r.stdout.splitlines()] == _kept(q)


CRASH_INPUTS = [(f"{base.name}/{d.name}", d / "input" / "store", d / "truth.json")
                for base in CRASH_BASES for d in sorted(p for p in base.iterdir() if p.is_dir())
                if (d / "input" / "store").is_dir() and "queryMessage" in load_truth(d / "truth.json")
                and load_truth(d / "truth.json").get("loadOk", True)]


@pytest.mark.parametrize("name, store, truth_path", CRASH_INPUTS, ids=[s[0] for s in CRASH_INPUTS])
def test_served_only_on_a_crashed_store_answers_as_the_broker_after_its_start(name, store, truth_path, tmp_path):
    """--served-only on the store as the crash left it: the index the broker answers from after its
    start (the files it destroys gone, the log cut where it cuts it), --max counted over that:
    the messages its queryMessage returned once started (truth, asked of the started broker).
    Where the crash took index files the start does not make again, rmqtool scans for their
    messages (as a plain query does): more, but only messages the started broker serves."""
    from helpers import expand_store
    from rmqtool.inspect.lookup import Lookup, look_up

    root = expand_store(store, tmp_path / "store")
    truth = load_truth(truth_path)
    index_whole = (store / "index").is_dir()
    served = {(m["topic"], k): set() for m in truth["truth"]["messages"] for k in (m.get("keys") or "").split()}
    for m in truth["truth"]["messages"]:
        for k in (m.get("keys") or "").split():
            served[(m["topic"], k)].add(m["physicalOffset"])
    for q in truth["queryMessage"]:
        ask = Lookup("--key", key=q["key"], topic=q["topic"], begin=q["begin"], end=q["end"], max_num=q["maxNum"],
                     served_only=True)
        try:
            found = look_up(root, ask, None, lambda _line: None)
        except Exception as exc:  # noqa: BLE001 - NothingFound is an answer: none
            assert type(exc).__name__ == "NothingFound", exc
            found = []
        offsets = {m.commit_log_offset for m in found}
        if index_whole:
            assert sorted(offsets) == sorted(_kept(q)), (name, q["key"])
        else:
            assert set(_kept(q)) <= offsets <= served.get((q["topic"], q["key"]), set()), (name, q["key"])
