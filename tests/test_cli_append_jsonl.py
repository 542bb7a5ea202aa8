"""dump commitlog | append --from-jsonl: a copy is exact, record for record, byte for byte.

Every clean fixture store is dumped to JSON Lines and appended into a fresh store of the
same sizes with --keep-store-timestamp and --keep-store-host; each record of the copy is
compared with the broker-written one. What must differ, and why, is named per scenario.
"""
from __future__ import annotations

import base64
import json

import pytest
from typer.testing import CliRunner

from conftest import CLEAN_SCENARIOS, V4, load_truth
from rmqtool.cli.app import app
from rmqtool.formats.commitlog import MessagePrefix
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.message import Message

runner = CliRunner()


def _field(name: str) -> slice:
    """Where a record's fixed-position field lies (formats/commitlog.py MessagePrefix)."""
    pos = 0
    for sc in MessagePrefix.subcons:
        if sc.name == name:
            return slice(pos, pos + sc.sizeof())
        pos += sc.sizeof()
    raise KeyError(name)


QUEUE_OFFSET, PHYSICAL_OFFSET = _field("queue_offset"), _field("physical_offset")


def _records(store) -> list[tuple[Message, bytes]]:
    out = []
    for r in CommitLog(store / "commitlog").scan():
        if isinstance(r, Message):
            with open(r.path, "rb") as f:
                f.seek(r.position)
                out.append((r, f.read(r.store_size)))
    return out


def _copy(src_store, tmp_path, truth, *extra):
    dumped = runner.invoke(app, ["dump", "commitlog", str(src_store), "-f", "jsonl"])
    jsonl = tmp_path / "dump.jsonl"
    jsonl.write_text(dumped.stdout, encoding="utf-8")
    cfg = truth["messageStoreConfig"]["effectiveGetterValues"]
    dst = tmp_path / "copy"
    out = runner.invoke(app, ["append", str(dst), "--create", "--from-jsonl", str(jsonl), "--keep-store-timestamp",
                              "--keep-store-host", "--commitlog-size", str(cfg["mappedFileSizeCommitLog"]),
                              "--cq-size", str(cfg["mappedFileSizeConsumeQueue"]), *extra])
    return dumped, out, dst


def _masked(record: bytes, like: bytes, fields) -> bytes:
    """``record`` with ``fields`` taken from ``like``."""
    b = bytearray(record)
    for f in fields:
        b[f] = like[f]
    return bytes(b)


# Scenario -> (fields that must differ, why)
MUST_DIFFER = {
    # putMessages moves a whole batch to the next file when it does not fit; the rows do not say
    # which records were one batch, so the copy puts them one by one and rolls where single puts
    # roll: from the first such roll on, records lie at other commit log offsets.
    "4.9.8/batch": ((PHYSICAL_OFFSET,), "a batch that did not fit rolled to the next file whole"),
}
# 5.x inner batches (sysFlag INNER_BATCH, a BatchCQ topic) take INNER_NUM queue offsets each, their
# INNER_BASE numbered by the broker's put: the engine does not write them. Copied as one message
# each, they overlapped their queue's next offsets (a rebuilt batch queue ended at a lower max).
REFUSED = {"5.3.3/batchcq"}


@pytest.mark.parametrize("name", sorted(CLEAN_SCENARIOS))
def test_dump_then_append_copies_every_record_exactly(tmp_path, name):
    """Before the fix: batch records lost their second WAIT (10 bytes shorter), IPv6 store hosts
    became the run's one, 5.x properties lost their trailing separator (and __CRC32# matched no more)."""
    scenario = CLEAN_SCENARIOS[name]
    truth = load_truth(scenario / "truth.json")
    # a 5.x store's copy is a 5.x store (its long topics' V2 records, refused in a 4.9 one)
    dumped, out, dst = _copy(scenario / "store", tmp_path, truth,
                             *(("--semantics", "5.3") if name.startswith("5.3.3/") else ()))
    if name in REFUSED:
        first = next(i for i, line in enumerate(dumped.stdout.splitlines(), 1)
                     if {"INNER_BASE", "INNER_NUM"} <= set(json.loads(line).get("properties") or {}))
        assert out.exit_code == 2 and f"line {first}: a 5.x inner batch record" in out.stderr, out.output
        return
    assert dumped.exit_code == 0 and out.exit_code == 0, out.output
    src, copy = _records(scenario / "store"), _records(dst)
    assert len(src) == len(copy) == len(truth["truth"]["messages"])
    fields, _why = MUST_DIFFER.get(name, ((), ""))
    batch_cq_topics = {t for t, qs in truth["truth"]["consumeQueues"].items()
                       if any(q.get("cqType") == "BatchCQ" for q in qs.values())}
    for (m, record), (c, copied) in zip(src, copy):
        differ = fields if QUEUE_OFFSET not in fields or m.topic in batch_cq_topics else ()
        assert _masked(record, copied, differ) == copied, (name, m.commit_log_offset)
        assert c.body_crc_ok and c.property_crc_ok in (None, True)
    if not fields:
        assert [c.commit_log_offset for c, _ in copy] == [m["physicalOffset"] for m in truth["truth"]["messages"]]


def test_the_rows_before_a_refused_one_are_appended_and_counted(tmp_path):
    """A row refused mid-stream: the rows before it were written or not by where a chunk of 1000
    ended. Now they are all in the store, and the line says how many; the rest is not."""
    from conftest import V5
    rows = runner.invoke(app, ["dump", "commitlog", str(V5 / "batchcq" / "store"), "-f", "jsonl"]).stdout.splitlines()
    inner = [r for r in rows if {"INNER_BASE", "INNER_NUM"} <= set(json.loads(r).get("properties") or {})]
    plain = [r for r in rows if r not in inner]
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("\n".join([*plain[:2], inner[0], plain[2]]) + "\n", encoding="utf-8")
    dst = tmp_path / "copy"
    out = runner.invoke(app, ["append", str(dst), "--create", "--semantics", "5.3", "--from-jsonl", str(jsonl),
                              "--commitlog-size", "65536", "--cq-size", "2000", "--index-slots", "100",
                              "--index-entries", "400", "-f", "jsonl"])
    assert out.exit_code == 2 and "line 3: a 5.x inner batch record" in out.stderr, out.output
    assert "(2 message(s) before it were appended)" in out.stderr
    copied = [json.loads(r)["uniq_key"] for r in runner.invoke(app, ["dump", "commitlog", str(dst), "-f",
                                                                       "jsonl"]).stdout.splitlines()]
    assert copied == [json.loads(r)["uniq_key"] for r in plain[:2]]


def test_copy_skips_rows_that_are_not_messages_and_keeps_bytes_that_are_not_utf8(store_copy, tmp_path):
    """A corrupt row stopped the append ("topic is missing") and left a half-made store;
    properties that are not valid UTF-8 were written as U+FFFD."""
    truth = load_truth(V4 / "basic" / "truth.json")
    msgs = truth["truth"]["messages"]
    store = store_copy(V4 / "basic" / "store")
    seg = store / "commitlog" / "00000000000000000000"
    data = bytearray(seg.read_bytes())
    props_at = msgs[0]["storeSize"] - msgs[0]["propertiesLength"]
    data[props_at + 6] = 0xFF  # inside the first message's KEYS
    hit = msgs[3]
    data[hit["physicalOffset"] + 4:hit["physicalOffset"] + 8] = b"\0\0\0\0"  # no magic: a corrupt region
    seg.write_bytes(bytes(data))
    dumped, out, dst = _copy(store, tmp_path, truth, "--progress")
    assert dumped.exit_code == 3
    assert {json.loads(x)["record"] for x in dumped.stdout.splitlines()} == {"message", "corrupt"}
    assert out.exit_code == 0, out.output
    assert "skipped 1 row(s) that are not messages (1 corrupt)" in out.stderr
    src, copy = _records(store), _records(dst)
    assert [m.commit_log_offset for m, _ in src] == [m["physicalOffset"] for m in msgs if m is not hit]
    assert len(copy) == len(src)
    assert copy[0][0].properties_utf8_ok is False and copy[0][1] == src[0][1]  # the 0xFF kept as it was
    row = json.loads(dumped.stdout.splitlines()[0])
    assert base64.b64decode(row["properties_raw"]) == src[0][0].properties_raw


def test_rows_without_a_body_are_refused_not_written_empty(tmp_path):
    """A dump with --body none or hex cannot be copied: refused, not written wrong."""
    for mode in ("none", "hex"):
        dumped = runner.invoke(app, ["dump", "commitlog", str(V4 / "basic" / "store"), "-f", "jsonl",
                                     "--limit", "3", "--body", mode])
        jsonl = tmp_path / f"{mode}.jsonl"
        jsonl.write_text(dumped.stdout)
        out = runner.invoke(app, ["append", str(tmp_path / mode), "--create", "--from-jsonl", str(jsonl)])
        assert out.exit_code == 2 and "body_length" in out.stderr and "line 1" in out.stderr


@pytest.mark.parametrize("count", [1, 3])  # one message (one by one) and a run of one shape (the batch path)
def test_an_empty_uniq_key_is_not_indexed(tmp_path, count):
    """A UNIQ_KEY of "" is dropped by the broker's decoder (string2messageProperties keeps a
    pair only with a value): its dispatch indexes the KEYS only, so the index rmqtool writes
    holds one entry a message and verify finds nothing to say."""
    from rmqtool.formats.indexfile import index_key_hash
    rows = "".join(json.dumps({"topic": "P", "queue_id": 0, "body": "", "properties": {"KEYS": f"k{i}", "UNIQ_KEY": ""}})
                   + "\n" for i in range(count))
    (tmp_path / "in.jsonl").write_text(rows)
    store = tmp_path / "store"
    r = runner.invoke(app, ["append", str(store), "--create", "--commitlog-size", "65536", "--cq-size", "200",
                            "--index-slots", "10", "--index-entries", "40", "--from-jsonl", str(tmp_path / "in.jsonl")])
    assert r.exit_code == 0, r.output
    entries = [json.loads(x) for x in runner.invoke(app, ["dump", "index", str(store), "-f", "jsonl"]).stdout.splitlines()
               if '"entry"' in x]
    assert sorted(e["key_hash"] for e in entries) == sorted(index_key_hash(f"P#k{i}") for i in range(count))
    assert runner.invoke(app, ["verify", str(store)]).exit_code == 0

