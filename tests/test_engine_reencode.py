"""The engine writes what the 4.9.8 broker wrote: every fixture store, replayed through the
engine from the same inputs (messages as the broker received them, the same store timestamps
and sizes), comes out byte for byte the same: commit log segments (records and blank
records), every consume queue file and every index file (header, slots, entries)."""
from __future__ import annotations

import base64
import ipaddress
import pathlib
import time

import pytest

from conftest import V4, load_truth
from rmqtool.formats import properties as props
from rmqtool.dispatch.rules import RMQ_SYS_SCHEDULE_TOPIC
from rmqtool.engine.encoder import Encoder
from rmqtool.engine.message_inner import MessageBatch, MessageInner
from rmqtool.engine.producer import broker_inner, producer_message, producer_properties
from rmqtool.engine.property_map import PropertyMap, properties_string, string_to_property_map
from rmqtool.store.compression import compress as compress_body
from rmqtool.formats import sysflag
from rmqtool.engine.store import Store

STORE_HOST = "192.0.2.10:10911"
SYSTEM = {"TAGS", "KEYS", "WAIT", "UNIQ_KEY", "CLUSTER", "TRAN_MSG", "PGROUP", "DELAY", "REAL_TOPIC", "REAL_QID"}
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"


def _host(ip: str, port: int):
    return ipaddress.ip_address(ip).packed, port


def _pairs(text: str) -> list[tuple[str, str]]:
    return [tuple(p.split("\x01", 1)) for p in text.split("\x02")] if text else []


def _producer_map(pairs) -> PropertyMap:
    """The map a 4.9.8 producer builds, in the order it fills it (see producer_properties);
    user properties in the order they were stored (the only order the fixture keeps)."""
    d = dict(pairs)
    return producer_properties(
        tags=d.get("TAGS"), keys=d.get("KEYS"), uniq_key=d.get("UNIQ_KEY"), generate_uniq_key=False,
        user_properties={k: v for k, v in pairs if k not in SYSTEM},
        delay_level=int(d.get("DELAY", 0)), transaction_prepared="TRAN_MSG" in d, producer_group=d.get("PGROUP"))


def _common(m) -> dict:
    return dict(flag=m["flag"], born_timestamp=m["bornTimestamp"], born_host=_host(m["bornHost"], m["bornPort"]),
                store_host=_host(m["storeHost"], m["storePort"]), reconsume_times=m["reconsumeTimes"])


def message_input(m: dict) -> MessageInner:
    """The MessageExtBrokerInner the broker stored this record from."""
    pairs = _pairs(m["propertiesString"])
    d = dict(pairs)
    body = base64.b64decode(m["body"])
    sys_flag = m["sysFlag"] & ~0x30  # the V6 bits are the store's to set
    if m["topic"] == OP_TOPIC:
        # TransactionalMessageBridge.makeOpMessageInner: Message(topic, "d", body), WAIT=false, UNIQ_KEY
        pm = PropertyMap(TAGS=d["TAGS"], WAIT=d["WAIT"], UNIQ_KEY=d["UNIQ_KEY"])
        inner = MessageInner(m["topic"], body, m["queueId"], properties=pm, sys_flag=sys_flag, **_common(m))
    elif m["topic"] == HALF_TOPIC:
        # SendMessageProcessor, then parseHalfMessageInner: REAL_TOPIC/REAL_QID put, re-serialised
        inner = broker_inner(d["REAL_TOPIC"], body, _producer_map(pairs), queue_id=int(d["REAL_QID"]),
                                 sys_flag=sysflag.TRANSACTION_PREPARED_TYPE, cluster=d["CLUSTER"], **_common(m))
        inner.properties[props.PROPERTY_REAL_TOPIC] = inner.topic
        inner.properties[props.PROPERTY_REAL_QUEUE_ID] = str(inner.queue_id)
        inner.properties_string = inner.properties.to_string()
        inner.topic, inner.queue_id, inner.sys_flag = HALF_TOPIC, 0, sys_flag
    elif "REAL_TOPIC" in d and m["topic"] != RMQ_SYS_SCHEDULE_TOPIC:
        # EndTransactionProcessor / ScheduleMessageService: the stored string of the half or
        # schedule record, whose map then loses REAL_* or DELAY
        pm = string_to_property_map(m["propertiesString"])
        text = pm.to_string()
        for name in ("REAL_TOPIC", "REAL_QID") if "DELAY" not in d else ("DELAY",):
            pm.pop(name)
        inner = MessageInner(m["topic"], body, m["queueId"], properties=pm, properties_string=text,
                                 sys_flag=sys_flag, prepared_transaction_offset=m["preparedTransactionOffset"],
                                 **_common(m))
    else:
        pm = _producer_map(pairs)
        queue_id = m["queueId"]
        topic = m["topic"]
        if topic == RMQ_SYS_SCHEDULE_TOPIC:
            topic, queue_id = d["REAL_TOPIC"], int(d["REAL_QID"])
            tags = d.get("TAGS", "")
            if tags.startswith("delay") and tags[5:].isdigit():
                pm[props.PROPERTY_DELAY_TIME_LEVEL] = tags[5:]  # the level sent (99 is clamped to 18)
            for name in ("REAL_TOPIC", "REAL_QID"):
                pm.pop(name, None)
        inner = broker_inner(topic, body, pm, queue_id=queue_id, sys_flag=sys_flag, cluster=d.get("CLUSTER"),
                                 prepared_transaction_offset=m["preparedTransactionOffset"], **_common(m))
    inner.store_timestamp = m["storeTimestamp"]
    return inner


def batch_input(b: dict, first: dict) -> MessageBatch:
    """SendMessageProcessor.sendBatchMessage: the batch body as sent, the batch map (WAIT
    from the producer, then CLUSTER)."""
    wire = PropertyMap(WAIT="true")
    pm = string_to_property_map(properties_string(wire))
    pm[props.PROPERTY_CLUSTER] = dict(_pairs(b["batchPropertiesString"]))["CLUSTER"]
    return MessageBatch(b["topic"], base64.b64decode(b["batchBodyBase64"]), b["queueId"], properties=pm,
                            born_timestamp=first["bornTimestamp"], born_host=_host(first["bornHost"], first["bornPort"]),
                            store_host=_host(first["storeHost"], first["storePort"]),
                            sys_flag=first["sysFlag"] & ~0x30, reconsume_times=first["reconsumeTimes"],
                            store_timestamp=b["storeTimestamp"])


def operations(truth: dict) -> list:
    """The puts of a scenario in commit log order: MessageInner or MessageBatch."""
    messages = truth["truth"]["messages"]
    batches = {b["wroteOffset"]: b for b in truth.get("batchPutResults", [])}
    ops = []
    skip_until = -1
    for m in messages:
        off = m["physicalOffset"]
        if off < skip_until:
            continue
        b = batches.get(off)
        if b is not None:
            ops.append(batch_input(b, m))
            skip_until = off + b["wroteBytes"]
        else:
            ops.append(message_input(m))
    return ops


def name_clock(index_dir: pathlib.Path):
    """A clock that gives, call by call, the creation times the fixture's index file names
    say (read as local time, as the engine formats them)."""
    times = []
    for p in sorted(index_dir.iterdir()):
        t = time.strptime(p.name[:14], "%Y%m%d%H%M%S")
        times.append(int(time.mktime(t)) * 1000 + int(p.name[14:]))
    it = iter(times)
    return lambda: next(it)


def tree(root: pathlib.Path, sub: str) -> dict[str, bytes]:
    base = root / sub
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def replay(scenario: str, target: pathlib.Path, dispatch: str = "inline", bulk: int = 0) -> tuple[dict, pathlib.Path]:
    """The scenario's puts through the engine; ``bulk`` > 0 puts runs of single messages with
    append_many, up to ``bulk`` at a time."""
    src = V4 / scenario
    truth = load_truth(src / "truth.json")
    cfg = truth["messageStoreConfig"]["effectiveGetterValues"]
    store = Store.open(target, writable=True, commitlog_size=cfg["mappedFileSizeCommitLog"],
                       cq_size=cfg["mappedFileSizeConsumeQueue"], index_slots=cfg["maxHashSlotNum"],
                       index_entries=cfg["maxIndexNum"], store_host=STORE_HOST, dispatch=dispatch,
                       clock=name_clock(src / "store" / "index"), message_delay_level=cfg["messageDelayLevel"])
    results = []
    with store:
        run: list = []
        for op in operations(truth) + [None]:
            if run and (not isinstance(op, MessageInner) or len(run) == bulk):
                results.extend(store.append_many(run))
                run = []
            if isinstance(op, MessageBatch):
                results.append(store.put_messages(op))
            elif op is not None and bulk:
                run.append(op)
            elif op is not None:
                results.append(store.append(op))
        if dispatch == "background":
            assert store.wait_dispatched()
        assert store.dispatch_behind_bytes == 0
    return {"truth": truth, "results": results}, src / "store"


SCENARIOS = ["basic", "batch", "txdelay", "timekey"]


@pytest.mark.parametrize("scenario,bulk", [(s, 0) for s in SCENARIOS] + [(s, 64) for s in SCENARIOS])
def test_replay_is_byte_identical(scenario, bulk, tmp_path):
    """One append per message, and (bulk) append_many over runs of them: the same bytes."""
    out, fixture = replay(scenario, tmp_path / "store", bulk=bulk)
    ours = tmp_path / "store"
    truth = out["truth"]
    # commit log: same segment names, same bytes (records, blank records, zero tails)
    theirs_cl, ours_cl = tree(fixture, "commitlog"), tree(ours, "commitlog")
    assert list(ours_cl) == list(theirs_cl)
    for name in theirs_cl:
        assert ours_cl[name] == theirs_cl[name], name
    # every consume queue file, SCHEDULE_TOPIC_XXXX included
    theirs_cq, ours_cq = tree(fixture, "consumequeue"), tree(ours, "consumequeue")
    assert list(ours_cq) == list(theirs_cq)
    for name in theirs_cq:
        assert ours_cq[name] == theirs_cq[name], name
    # every index file: names (from the same creation times) and bytes
    theirs_ix, ours_ix = tree(fixture, "index"), tree(ours, "index")
    assert list(ours_ix) == list(theirs_ix)
    for name in theirs_ix:
        assert ours_ix[name] == theirs_ix[name], name
    # markers as a clean shutdown leaves them
    assert (ours / "lock").read_bytes() == (fixture / "lock").read_bytes() == b"lock"
    assert not (ours / "abort").exists()
    # checkpoint: the values that do not depend on flush timing
    cp = (ours / "checkpoint").read_bytes()
    assert len(cp) == 4096 and cp[24:] == bytes(4072)
    disk = truth["onDiskAfterShutdown"]["checkpoint"]
    assert int.from_bytes(cp[8:16], "big") == disk["logicsMsgTimestamp"]
    assert int.from_bytes(cp[16:24], "big") == disk["indexMsgTimestamp"]
    assert int.from_bytes(cp[0:8], "big") == max(m["storeTimestamp"] for m in truth["truth"]["messages"])


@pytest.mark.parametrize("scenario,bulk", [(s, 0) for s in SCENARIOS] + [("basic", 64), ("txdelay", 7)])
def test_put_results_match_the_brokers(scenario, bulk, tmp_path):
    out, _ = replay(scenario, tmp_path / "store", bulk=bulk)
    truth = out["truth"]
    expected = truth.get("putResults") or sorted(
        truth.get("batchPutResults", []) + truth.get("singlePutResults", []), key=lambda r: r["wroteOffset"])
    got = {r.wrote_offset: r for r in out["results"]}
    # txdelay: the broker's ScheduleMessageService put 4 deliveries that are not in putResults
    delivered = [m for m in truth["truth"]["messages"]
                 if m["topic"] == "DelayTopic" and "REAL_TOPIC" in m["properties"]]
    assert len(got) == len(expected) + len(delivered)
    for e in expected:
        r = got[e["wroteOffset"]]
        assert (r.wrote_offset, r.wrote_bytes, r.queue_offset, r.store_timestamp, r.msg_num) == (
            e["wroteOffset"], e["wroteBytes"], e["logicsOffset"], e["storeTimestamp"], e.get("msgNum", 1))
        assert r.msg_id == e["msgId"]
        assert r.status == "PUT_OK"


def test_background_dispatch_writes_the_same_files(tmp_path):
    """ReputMessageService reading the commit log back builds what inline dispatch builds."""
    replay("txdelay", tmp_path / "inline")
    replay("txdelay", tmp_path / "background", dispatch="background")
    for sub in ("consumequeue", "index", "commitlog"):
        a, b = tree(tmp_path / "inline", sub), tree(tmp_path / "background", sub)
        assert a == b


def test_client_compression_is_byte_identical():
    """compress_body gives the bytes of the 4.9.8 client's zlib, lz4 and zstd compressors."""
    truth = load_truth(V4 / "basic" / "truth.json")
    seen = set()
    for m in truth["truth"]["messages"]:
        codec = (m.get("compressionType") or "").lower()
        if codec:
            raw = base64.b64decode(m["bodyDecompressed"])
            assert compress_body(raw, codec) == base64.b64decode(m["body"])
            seen.add(codec)
    assert seen == {"zlib", "lz4", "zstd"}


def test_producer_path_compresses_like_the_client():
    """producer_message with the original body gives the stored record, sysFlag included."""
    truth = load_truth(V4 / "basic" / "truth.json")
    size = truth["messageStoreConfig"]["changedFromDefault"]["mappedFileSizeCommitLog"]
    encoder = Encoder(STORE_HOST)
    checked = 0
    for m in truth["truth"]["messages"]:
        codec = (m.get("compressionType") or "").lower()
        if not codec:
            continue
        d = dict(_pairs(m["propertiesString"]))
        inner = producer_message(
            m["topic"], base64.b64decode(m["bodyDecompressed"]), tags=d.get("TAGS"), keys=d.get("KEYS"),
            user_properties={k: v for k, v in _pairs(m["propertiesString"]) if k not in SYSTEM},
            uniq_key=d.get("UNIQ_KEY"), generate_uniq_key=False, queue_id=m["queueId"], compress=codec,
            **_common(m))
        rec = encoder.prepare(inner).to_bytes(m["queueOffset"], m["physicalOffset"], m["storeTimestamp"])
        seg = m["physicalOffset"] // size * size
        raw = (V4 / "basic" / "store" / "commitlog" / f"{seg:020d}").read_bytes()
        pos = m["physicalOffset"] - seg
        assert rec == raw[pos:pos + m["storeSize"]]
        checked += 1
    assert checked == sum(1 for m in truth["truth"]["messages"] if m.get("compressionType")) > 0
