"""Issue 20, items 2, 5 and 13: which broker version's recovery rules a store gets, from the
whole store (never from one record of the last file), and records written with the
``__CRC32#`` entry the store's 5.x broker wrote.

Expected values come from the fixtures' truth: the 5.3.3 records (``rocketmq-5.3.3/*/truth.json``),
what the real engines did to the crash-made shapes (``crash-made/*/truth.json``), and the
5.3.3 broker's rule that a failed body CRC ends recovery at that record (crash5 b/d).
"""
from __future__ import annotations

import base64
import hashlib
import json
import pathlib

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES, V4, V5, load_truth
from helpers import copy_tree
from rmqtool.cli.app import app
from rmqtool.engine.encoder import Encoder
from rmqtool.engine.message_inner import MessageInner
from rmqtool.errors import ExitCode
from rmqtool.findings import PROPERTY_CRC_MISSING, PROPERTY_CRC_MISSING_AT_END
from rmqtool.formats.crc import CRC32_RESERVED_LEN, crc32_property, ends_with_crc32_entry, record_crc
from rmqtool.recovery.outcome import Settings, simulate
from rmqtool.recovery.plan import plan_recovery
from rmqtool.recovery.semantics import detect_semantics
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.message import Message
from rmqtool.store.paths import StorePaths
from rmqtool.store.segments import discover

MADE = FIXTURES / "crash-made"
runner = CliRunner()


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def _tree(root: pathlib.Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
            for p in sorted(root.rglob("*"))}


def _made_ahead(store: pathlib.Path) -> pathlib.Path:
    """The all-zero next file AllocateMappedFileService makes before the last one fills (crash5's README)."""
    segments = sorted((store / "commitlog").iterdir())
    size = segments[-1].stat().st_size
    ahead = store / "commitlog" / f"{int(segments[-1].name) + size:020d}"
    with open(ahead, "wb") as f:
        f.truncate(size)
    return ahead


def _flip_body_byte(store: pathlib.Path, m: dict) -> None:
    """Flip the first body byte of the truth record ``m`` (in commit log file 0)."""
    topic_len = len(m["topic"].encode())
    body_end = m["storeSize"] - 2 - m["propertiesLength"] - topic_len - m["topicLengthFieldSize"]
    at = m["physicalOffset"] + body_end - m["bodyLength"]
    seg = store / "commitlog" / f"{0:020d}"
    raw = bytearray(seg.read_bytes())
    raw[at] ^= 0xFF
    seg.write_bytes(bytes(raw))


def _last_in_file_0(messages: list, size: int) -> dict:
    return max((m for m in messages if m["physicalOffset"] + m["storeSize"] <= size and m["bodyLength"]),
               key=lambda m: m["physicalOffset"])


# --- item 2 -----------------------------------------------------------------------------------

@pytest.mark.parametrize("src,truth_file", [
    (MADE / "prop-crc-digits" / "input" / "store", V5 / "v2-and-crc" / "truth.json"),
    (V5 / "crash5" / "a-as-is" / "input" / "store", V5 / "crash5" / "pre-crash-truth.json"),
], ids=["prop-crc-digits", "crash5-a"])
def test_a_crashed_5_3_3_store_with_a_made_ahead_file_gets_5_3_rules(store_copy, src, truth_file):
    """The issue's case: a 5.3.3 crash store whose last file is the made-ahead all-zero one,
    a body byte flipped in file 0. The default plan is the 5.3 plan: the log ends at the
    flipped record, and every message from it on is lost (5.3.3 fails the body CRC there;
    V2 records before it are kept, which 4.9 rules would cut at)."""
    store = store_copy(src)
    if not any(p.name == "00000000000000196608" for p in (store / "commitlog").iterdir()):
        _made_ahead(store)
    truth = load_truth(truth_file)
    messages = truth["truth"]["messages"]
    written = sorted([m["physicalOffset"] for m in messages] +  # crash5: and those put after the dump
                     [p["wroteOffset"] for p in truth.get("tailPutResultsBeforeHalt", ())])
    flipped = _last_in_file_0(messages, (store / "commitlog" / f"{0:020d}").stat().st_size)
    _flip_body_byte(store, flipped)

    default = plan_recovery(store).to_json()
    five = plan_recovery(store, settings=Settings(semantics="5.3")).to_json()
    four = plan_recovery(store, settings=Settings(semantics="4.9")).to_json()
    assert default["semantics"] == "5.3" and default["semantics_known"]
    assert default["commit_log"]["max_offset_after"] == flipped["physicalOffset"] == five["commit_log"]["max_offset_after"]
    lost = [o for o in written if o >= flipped["physicalOffset"]]
    assert [m["commit_log_offset"] for m in default["lost_messages"]] == lost
    assert default["lost_messages"] == five["lost_messages"] and default["actions"] == five["actions"]
    if any(m["magicCodeHex"] == "0xDAA320AB" and m["physicalOffset"] < flipped["physicalOffset"] for m in messages):
        assert len(four["lost_messages"]) > len(lost)  # what the old detection planned


def _bare_v2_and_crc(store_copy) -> pathlib.Path:
    """The 5.3.3 store with its abort.bak gone: only its records say 5.x (V2 magic codes in
    the middle of files, __CRC32# entries everywhere), and its last file is all zeros."""
    store = store_copy(V5 / "v2-and-crc" / "store")
    (store / "abort.bak").unlink()
    _made_ahead(store)
    return store


def test_records_before_the_last_file_say_5_x(store_copy):
    store = _bare_v2_and_crc(store_copy)
    paths = StorePaths(store)
    found = detect_semantics(paths, discover(paths.commitlog).segments)
    assert found.semantics == "5.3" and "__CRC32#" in found.reason
    out = simulate(store, Settings())
    assert out.semantics == "5.3" and out.semantics_known and out.semantics_undecided is None


def _mark(store: pathlib.Path, kind: str) -> None:
    if kind == "abort.bak":
        (store / "abort.bak").write_bytes(b"")
    elif kind == "abort-pid":
        (store / "abort").write_bytes(b"4242")
    elif kind in ("batchconsumequeue", "timerlog", "compaction"):
        (store / kind).mkdir()
    elif kind == "timerwheel":
        (store / kind).write_bytes(bytes(64))
    elif kind.startswith("config/"):
        (store / "config").mkdir(exist_ok=True)
        (store / kind).write_text("{}")
    elif kind == "checkpoint":
        raw = bytearray((store / "checkpoint").read_bytes())
        raw[32:40] = (1234).to_bytes(8, "big")  # confirmPhyOffset
        (store / "checkpoint").write_bytes(bytes(raw))


FIVE_MARKS = ["abort.bak", "abort-pid", "batchconsumequeue", "timerwheel", "timerlog", "compaction",
              "config/timercheck", "config/timermetrics", "config/topicQueueMapping.json",
              "config/consumerOrderInfo.json", "config/transactionMetrics", "config/messageRequestMode.json",
              "checkpoint"]


@pytest.mark.parametrize("kind", FIVE_MARKS)
def test_each_thing_only_5_x_writes_says_5_x(store_copy, kind):
    """A clean 4.9.8 store says nothing either way; one 5.x-only file or field, and it is 5.x."""
    store = store_copy(V4 / "basic" / "store")
    paths = StorePaths(store)
    assert detect_semantics(paths, discover(paths.commitlog).segments).semantics is None
    _mark(store, kind)
    found = detect_semantics(paths, discover(paths.commitlog).segments)
    assert found.semantics == "5.3", found.reason


def test_an_empty_abort_without_abort_bak_says_4_9_and_with_a_5_x_mark_could_not_tell(store_copy):
    store = store_copy(V4 / "crash" / "a-as-is" / "input" / "store")
    out = simulate(store, Settings())
    assert out.semantics == "4.9" and out.semantics_known and "empty" in out.semantics_reason
    _mark(store, "config/timercheck")
    out = simulate(store, Settings())
    assert not out.semantics_known and out.semantics_reason.startswith("could not tell")


def test_could_not_tell_and_the_rules_differ_refuses_apply_until_semantics(store_copy, tmp_path):
    """torn-middle-normal: a 4.9.8 store with no abort file and nothing 5.x-only, where the
    real 4.9.8 and 5.3.3 engines end the log at different offsets (truth.json)."""
    engines = json.loads((MADE / "torn-middle-normal" / "truth.json").read_text())["engines"]
    store = store_copy(MADE / "torn-middle-normal" / "input" / "store")
    before = _tree(store)
    r = _run("recover", store, "-f", "json")
    doc = json.loads(r.stdout)
    assert not doc["semantics_known"] and doc["semantics_reason"].startswith("could not tell")
    assert doc["semantics_undecided"] and str(engines["5.3.3"]["maxPhyOffset"]) in doc["semantics_undecided"]
    table = _run("recover", store)
    assert "could not tell" in table.stdout and "--apply waits for --semantics" in table.stdout
    r = _run("recover", store, "--apply")
    assert r.exit_code == ExitCode.USAGE and "--semantics" in r.stderr and "could not tell" in r.stderr
    r = _run("recover", store, "--apply", "--to", tmp_path / "copy")
    assert r.exit_code == ExitCode.USAGE and not (tmp_path / "copy").exists()
    r = _run("append", store, "--recover", "--topic", "T", "--body", "x")
    assert r.exit_code == ExitCode.USAGE and "--semantics" in r.stderr
    assert _tree(store) == before
    r = _run("recover", store, "--semantics", "5.3", "--apply", "--backup-dir", tmp_path / "b", "-f", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["commit_log"]["max_offset_after"] == engines["5.3.3"]["maxPhyOffset"]


def test_could_not_tell_but_alike_applies(store_copy, tmp_path):
    """A clean 4.9.8 store says nothing of its version, but both versions' starts leave it
    as it is: nothing waits for --semantics."""
    store = store_copy(V4 / "basic" / "store")
    doc = plan_recovery(store).to_json()
    assert not doc["semantics_known"] and doc["semantics_undecided"] is None
    assert "the same files" in doc["semantics_reason"]
    assert _run("recover", store, "--apply").exit_code == 0


def test_verify_prop_crc_alone_is_not_as_asked(store_copy):
    store = store_copy(V5 / "v2-and-crc" / "store")
    doc = json.loads(_run("recover", store, "--verify-prop-crc", "-f", "json").stdout)
    assert doc["semantics"] == "5.3" and "as asked" not in doc["semantics_reason"]
    assert "--verify-prop-crc" in doc["semantics_reason"] and "abort.bak" in doc["semantics_reason"]
    asked = json.loads(_run("recover", store, "--semantics", "5.3", "-f", "json").stdout)
    assert asked["semantics_reason"] == "as asked (--semantics)"


# --- item 13: acknowledged appends into a 5.3.3 store survive a crash ---------------------------

def _jsonl(path: pathlib.Path, n: int, size: int, topic: str = "OrderTopic") -> pathlib.Path:
    rows = [{"topic": topic, "queue_id": i % 2, "body": base64.b64encode(bytes([65 + i % 26]) * size).decode()}
            for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _appended(stdout: str) -> list[int]:
    return [json.loads(line)["commit_log_offset"] for line in stdout.splitlines() if line.strip()]


def test_appends_that_roll_a_5_3_3_store_are_kept_after_a_crash(store_copy, tmp_path):
    """The issue's fault run: 200 x 3 KB appended to v2-and-crc (into new files), then the
    abort file as a kill leaves it: the plan keeps every acknowledged append and every
    record the 5.3.3 broker wrote (truth), under the rules the store shows (5.3)."""
    store = store_copy(V5 / "v2-and-crc" / "store")
    truth = load_truth(V5 / "v2-and-crc" / "truth.json")["truth"]
    files_before = len(list((store / "commitlog").iterdir()))
    r = _run("append", store, "--from-jsonl", _jsonl(tmp_path / "m.jsonl", 200, 3000))
    assert r.exit_code == 0, r.output
    acked = _appended(r.stdout)
    assert len(acked) == 200 and len(list((store / "commitlog").iterdir())) > files_before
    (store / "abort").touch()
    doc = json.loads(_run("recover", store, "-f", "json").stdout)
    assert doc["semantics"] == "5.3" and doc["lost_messages"] == []
    assert doc["commit_log"]["max_offset_after"] == doc["commit_log"]["max_offset_before"] > max(acked)
    kept = {m["commit_log_offset"] for m in plan_recovery(store, settings=Settings(semantics="5.3")).to_json()[
        "lost_messages"]}
    assert not kept & ({m["physicalOffset"] for m in truth["messages"]} | set(acked))
    # append --recover takes --semantics as recover does, and keeps them all too
    r = _run("append", store, "--recover", "--semantics", "5.3", "--topic", "OrderTopic", "--body", "after")
    assert r.exit_code == 0, r.output
    offsets = {m.commit_log_offset for m in CommitLog(store / "commitlog").scan() if isinstance(m, Message)}
    assert set(acked) <= offsets and {m["physicalOffset"] for m in truth["messages"]} <= offsets
    assert _run("append", store, "--semantics", "6.0", "--topic", "T", "--body", "x").exit_code == ExitCode.USAGE


# --- item 5: records written with the __CRC32# entry as 5.3.3 writes it --------------------------

def _as_stored(m: Message) -> MessageInner:
    """The message a stored record came from, as the broker's put receives it again."""
    return MessageInner(m.topic, m.body, queue_id=m.queue_id, flag=m.flag, properties=m.properties,
                            properties_string=m.properties_raw, born_timestamp=m.born_timestamp,
                            born_host=(bytes(m.born_ip), m.born_port), store_host=(bytes(m.store_ip), m.store_port),
                            reconsume_times=m.reconsume_times, sys_flag=m.sys_flag,
                            prepared_transaction_offset=m.prepared_transaction_offset,
                            store_timestamp=m.store_timestamp)


def test_the_encoder_writes_each_5_3_3_record_byte_for_byte():
    """Every record of v2-and-crc (V1 and V2, empty properties, an incoming __CRC32# the
    broker replaced) encoded again at its place: the same bytes the 5.3.3 broker wrote,
    entry and all; the entry's CRC is the one the truth gives."""
    store = V5 / "v2-and-crc" / "store"
    truth = {m["physicalOffset"]: m for m in load_truth(V5 / "v2-and-crc" / "truth.json")["truth"]["messages"]}
    encoder = Encoder(("127.0.0.1", 10911))
    encoder.append_prop_crc = True
    seen = 0
    for m in CommitLog(store / "commitlog").scan():
        if not isinstance(m, Message):
            continue
        raw = (store / "commitlog" / pathlib.Path(m.path).name).read_bytes()[m.position:m.position + m.store_size]
        p = encoder.prepare(_as_stored(m))
        out = p.to_bytes(m.queue_offset, m.physical_offset, m.store_timestamp)
        assert out == raw, m.commit_log_offset
        t = truth[m.commit_log_offset]
        assert out[-CRC32_RESERVED_LEN:].decode() == t["propertyCrc32Raw"][-CRC32_RESERVED_LEN:]
        assert record_crc(out) == t["crc32OverRecordWithoutReservedTail_UtilAll"]
        seen += 1
    assert seen == len(truth)


def _records(store: pathlib.Path, after: int) -> list[Message]:
    return [m for m in CommitLog(store / "commitlog").scan() if isinstance(m, Message) and m.commit_log_offset >= after]


@pytest.mark.parametrize("many", [False, True], ids=["one", "from-jsonl"])
def test_append_into_a_store_whose_records_carry_the_entry_writes_it(store_copy, tmp_path, many):
    store = store_copy(V5 / "v2-and-crc" / "store")
    end = load_truth(V5 / "v2-and-crc" / "truth.json")["truth"]["commitlog"]["maxPhyOffset"]
    args = (["--from-jsonl", _jsonl(tmp_path / "m.jsonl", 5, 100, "LongTopic-" + "x" * 190)] if many else
            ["--topic", "OrderTopic", "--body", "hello", "--keys", "k1"])
    r = _run("append", store, *args)
    assert r.exit_code == 0, r.output
    assert "__CRC32#" in r.stderr and "last record" in r.stderr  # and says so
    new = _records(store, end)
    assert new and all(ends_with_crc32_entry(m.properties_raw) and m.property_crc_ok and m.body_crc_ok for m in new)
    assert all(m.properties_raw.count(b"__CRC32#") == 1 for m in new)
    # a broker with forceVerifyPropCRC keeps them, and verify finds nothing wrong
    doc = json.loads(_run("recover", store, "--verify-prop-crc", "-f", "json").stdout)
    assert doc["lost_messages"] == [] and doc["commit_log"]["max_offset_after"] == new[-1].commit_log_offset + \
        new[-1].store_size
    r = _run("verify", store, "-f", "json")
    assert r.exit_code == 0 and not [f for f in json.loads(r.stdout) if f["severity"] != "info"]


def test_prop_crc_overrides_what_the_store_shows(store_copy):
    five = store_copy(V5 / "v2-and-crc" / "store")
    end = load_truth(V5 / "v2-and-crc" / "truth.json")["truth"]["commitlog"]["maxPhyOffset"]
    r = _run("append", five, "--prop-crc", "off", "--topic", "OrderTopic", "--body", "x")
    assert r.exit_code == 0 and "__CRC32#" not in r.stderr
    (m,) = _records(five, end)
    assert not ends_with_crc32_entry(m.properties_raw) and m.property_crc_ok is None
    assert _run("append", five, "--prop-crc", "maybe", "--topic", "T", "--body", "x").exit_code == ExitCode.USAGE


def test_prop_crc_on_into_a_4_9_8_store(tmp_path):
    store = tmp_path / "store"
    copy_tree(V4 / "basic" / "store", store)
    for p in [store, *store.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    end = load_truth(V4 / "basic" / "truth.json")["truth"]["commitlog"]["maxPhyOffset"]
    r = _run("append", store, "--prop-crc", "on", "--topic", "T", "--body", "x", "--property", "a=b")
    assert r.exit_code == 0 and "as asked" in r.stderr
    (m,) = _records(store, end)
    assert m.property_crc_ok and m.properties_raw.endswith(crc32_property(record_crc(
        (store / "commitlog" / pathlib.Path(m.path).name).read_bytes()[m.position:m.position + m.store_size])))


def test_verify_flags_records_without_the_entry_after_records_with_it(store_copy):
    """Today silent: records appended without __CRC32# after a 5.x broker's records that
    carry it. One finding at the first of them, with how many; the broker with
    forceVerifyPropCRC cuts there (recover --verify-prop-crc shows the same records lost)."""
    store = store_copy(V5 / "v2-and-crc" / "store")
    end = load_truth(V5 / "v2-and-crc" / "truth.json")["truth"]["commitlog"]["maxPhyOffset"]
    clean = json.loads(_run("verify", store, "-f", "json").stdout)
    assert not [f for f in clean if f["finding"] == PROPERTY_CRC_MISSING_AT_END]
    for i in range(3):
        assert _run("append", store, "--prop-crc", "off", "--topic", "OrderTopic", "--body", f"m{i}").exit_code == 0
    found = json.loads(_run("verify", store, "-f", "json").stdout)
    (f,) = [f for f in found if f["finding"] == PROPERTY_CRC_MISSING_AT_END]
    assert f["commit_log_offset"] == end and f["messages"] == 3 and f["severity"] == "warning"
    lost = json.loads(_run("recover", store, "--verify-prop-crc", "-f", "json").stdout)["lost_messages"]
    assert [m["commit_log_offset"] for m in lost][0] == end and len(lost) == 3
    # a record with the entry after them makes them records between two that carry one
    assert _run("append", store, "--prop-crc", "on", "--topic", "OrderTopic", "--body", "z").exit_code == 0
    found = json.loads(_run("verify", store, "-f", "json").stdout)
    assert not [f for f in found if f["finding"] == PROPERTY_CRC_MISSING_AT_END]
    assert len([f for f in found if f["finding"] == PROPERTY_CRC_MISSING]) == 3
