"""Multi-dispatch (light message queues): the rules of dispatch/multi_dispatch.py, and verify on a
store whose %LMQ% queues hold units of other queues' records, as a broker with enableLmq and
enableMultiDispatch writes them (ConsumeQueue.multiDispatchLmqQueue: the record's offset, size
and tags code, at the queue offset INNER_MULTI_QUEUE_OFFSET names).

No fixture was written by a real broker with LMQ on: the store here is the engine's, its LMQ
units written by the test as multiDispatchLmqQueue writes them."""
from __future__ import annotations

import json
import shutil
import struct

import pytest

from helpers import cli_runner
from rmqtool.cli.app import app
from rmqtool.dispatch.multi_dispatch import Target, is_target, targets
from rmqtool.dispatch.rules import tags_code
from rmqtool.engine.producer import producer_message
from rmqtool.engine.store import Store
from rmqtool.formats.properties import PROPERTY_INNER_MULTI_DISPATCH as NAMES
from rmqtool.formats.properties import PROPERTY_INNER_MULTI_QUEUE_OFFSET as OFFSETS
from rmqtool.store.message import Message
from rmqtool.store.view import as_view

UNIT = struct.Struct(">qiq")


@pytest.mark.parametrize("names, offsets, lmq, expected", [
    ("%LMQ%a,%LMQ%b", "3,7", True, [("%LMQ%a", 0, 3), ("%LMQ%b", 0, 7)]),
    ("%LMQ%a,%LMQ%b", "3,7", False, [("%LMQ%a", 5, 3), ("%LMQ%b", 5, 7)]),  # without enableLmq: the record's queue
    ("other,%LMQ%b", "3,7", True, [("other", 5, 3), ("%LMQ%b", 0, 7)]),
    ("%LMQ%a,%LMQ%b,", "3,7,,", True, [("%LMQ%a", 0, 3), ("%LMQ%b", 0, 7)]),  # String.split drops trailing empties
    ("%LMQ%a,%LMQ%b", "3", True, []),  # lengths differ: the broker dispatches none
    ("%LMQ%a,%LMQ%b", "x,7", True, [("%LMQ%b", 0, 7)]),
    ("%LMQ%a/b,%LMQ%c", "1,2", True, [("%LMQ%c", 0, 2)]),  # 5.3.3 skips a name with a path in it
    (" ", "1", True, []), ("%LMQ%a", None, True, []),
])
def test_targets_follow_the_brokers_split_and_queue_ids(names, offsets, lmq, expected):
    properties = {k: v for k, v in ((NAMES, names), (OFFSETS, offsets)) if v is not None}
    assert targets(5, properties, lmq=lmq) == [Target(*t) for t in expected]


def test_a_unit_is_a_target_with_enable_lmq_or_without():
    properties = {NAMES: "%LMQ%a", OFFSETS: "4"}
    assert is_target("%LMQ%a", 0, 4, 2, properties) and is_target("%LMQ%a", 2, 4, 2, properties)
    assert not is_target("%LMQ%a", 0, 5, 2, properties) and not is_target("%LMQ%z", 0, 4, 2, properties)
    assert not is_target("%LMQ%a", 0, 4, 2, None)


def _lmq_store(root, lmq_units, count: int = 6):
    """``count`` records of TopicTest/0, each naming %LMQ%one and every other one %LMQ%two too, with
    their queue offsets there; the LMQ queues' files written from ``lmq_units(record, name,
    queue offset)`` (a unit's bytes, or None for none)."""
    placed, next_offset = [], {}
    with Store.open(root, writable=True) as store:
        for i in range(count):
            names = ["%LMQ%one"] + (["%LMQ%two"] if i % 2 else [])
            offsets = [next_offset.get(n, 0) for n in names]
            next_offset.update({n: o + 1 for n, o in zip(names, offsets)})
            store.append_many([producer_message("TopicTest", f"body {i}".encode(), tags="TagA", queue_id=0,
                                                user_properties={NAMES: ",".join(names),
                                                                 OFFSETS: ",".join(map(str, offsets))},
                                                born_timestamp=1_717_200_000_000 + i)])
            placed.append(list(zip(names, offsets)))
    records = [r for r in as_view(root).commit_log.scan(check_crc=False) if isinstance(r, Message)]
    files: dict = {}
    for record, named in zip(records, placed):
        for name, queue_offset in named:
            unit = lmq_units(record, name, queue_offset)
            if unit is not None:
                files.setdefault(name, {})[queue_offset] = unit
    for name, units in files.items():
        directory = root / "consumequeue" / name / "0"
        directory.mkdir(parents=True)
        (directory / f"{0:020d}").write_bytes(b"".join(units[k] for k in sorted(units)).ljust(6_000_000, b"\0"))
    return records


def _as_the_broker(record, _name, _queue_offset):
    return UNIT.pack(record.commit_log_offset, record.store_size, tags_code(record.tags))


def _verify(root) -> list[dict]:
    result = cli_runner().invoke(app, ["verify", str(root), "-f", "jsonl"])
    return [json.loads(line) for line in result.stdout.splitlines()], result.exit_code


def test_verify_takes_light_message_queue_units_as_the_brokers(tmp_path):
    _lmq_store(tmp_path / "store", _as_the_broker)
    rows, code = _verify(tmp_path / "store")
    assert code == 0 and not [r for r in rows if r.get("severity") in ("error", "warning")], rows


def test_verify_still_finds_a_unit_the_records_multi_dispatch_does_not_name(tmp_path):
    records = _lmq_store(tmp_path / "store", _as_the_broker)
    # the first %LMQ%one unit pointed at the second record: named there, but at queue offset 0 of %LMQ%two only
    path = tmp_path / "store" / "consumequeue" / "%LMQ%one" / "0" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    second = records[1]
    data[0:20] = UNIT.pack(second.commit_log_offset, second.store_size, tags_code(second.tags))
    path.write_bytes(bytes(data))
    rows, code = _verify(tmp_path / "store")
    bad = [r for r in rows if r.get("finding") == "consumeQueueUnitMismatch"]
    assert code == 3 and len(bad) == 1 and bad[0]["topic"] == "%LMQ%one" and bad[0]["queue_offset"] == 0


def _lmq_files(root) -> dict:
    return {p.relative_to(root): p.read_bytes() for p in (root / "consumequeue").glob("%LMQ%*/0/*")}


def test_redispatch_builds_the_light_message_queues_as_the_broker_wrote_them(tmp_path):
    root = tmp_path / "store"
    _lmq_store(root, _as_the_broker)
    written = _lmq_files(root)
    doc = json.loads(cli_runner().invoke(app, ["redispatch", str(root), "--cq", "-f", "json"]).stdout)
    assert doc["multi_dispatch_queues_built"] == ["%LMQ%one", "%LMQ%two"] and doc["multi_dispatch_queues_kept"] == []
    assert [c for c in doc["changes"] if c["kind"] != "same"] == []  # every LMQ file as the broker's
    shutil.rmtree(root / "consumequeue" / "%LMQ%two")  # one queue lost: %LMQ%one shows the broker multi-dispatched
    r = cli_runner().invoke(app, ["redispatch", str(root), "--cq", "--apply", "--backup-dir", str(tmp_path / "bk")])
    assert r.exit_code == 0, r.stderr
    assert _lmq_files(root) == written


def test_bands_decoded_by_two_processes_build_them_too(tmp_path, monkeypatch):
    from rmqtool.engine import redispatch

    monkeypatch.setattr(redispatch, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(redispatch, "BAND_BYTES", 48 << 10)  # a few hundred records a band
    monkeypatch.setattr("rmqtool.store.parallel.default_workers", lambda: 2)
    used = []
    real_bands = redispatch._bands
    monkeypatch.setattr(redispatch, "_bands", lambda *a: used.append(real_bands(*a)) or used[-1])
    root = tmp_path / "store"
    _lmq_store(root, _as_the_broker, count=1500)
    doc = json.loads(cli_runner().invoke(app, ["redispatch", str(root), "--cq", "-f", "json"]).stdout)
    assert len(used[-1]) > 2  # the bands were used
    assert doc["multi_dispatch_queues_built"] == ["%LMQ%one", "%LMQ%two"]
    assert [c for c in doc["changes"] if c["kind"] != "same"] == []


def test_a_light_message_queue_starting_past_zero_gets_the_brokers_fill(tmp_path):
    """INNER_MULTI_QUEUE_OFFSET from 5 (the queue's earlier messages expired with their file): the
    queue's first file takes fill units before its first unit (putMessagePositionInfo's
    fillPreBlank: offset 0, size Integer.MAX_VALUE, tags code 0), as for any queue."""
    root = tmp_path / "store"
    with Store.open(root, writable=True) as store:
        for i in range(3):
            store.append_many([producer_message("TopicTest", b"x", tags="TagA", queue_id=1,
                                                user_properties={NAMES: "%LMQ%late", OFFSETS: str(5 + i)},
                                                born_timestamp=1_717_200_000_000 + i)])
    records = [r for r in as_view(root).commit_log.scan(check_crc=False) if isinstance(r, Message)]
    fill = UNIT.pack(0, 0x7FFFFFFF, 0)
    units = fill * 5 + b"".join(_as_the_broker(r, None, None) for r in records)
    directory = root / "consumequeue" / "%LMQ%late" / "0"
    directory.mkdir(parents=True)
    (directory / f"{0:020d}").write_bytes(units.ljust(6_000_000, b"\0"))
    doc = json.loads(cli_runner().invoke(app, ["redispatch", str(root), "--cq", "-f", "json"]).stdout)
    assert doc["multi_dispatch_queues_built"] == ["%LMQ%late"]
    assert [c for c in doc["changes"] if c["kind"] != "same"] == []


def test_a_selection_keeps_the_queues_records_multi_dispatch_to(tmp_path):
    root = tmp_path / "store"
    _lmq_store(root, _as_the_broker)
    written = _lmq_files(root)
    doc = json.loads(cli_runner().invoke(app, ["redispatch", str(root), "--cq", "-t", "TopicTest", "-f", "json"]).stdout)
    assert doc["multi_dispatch_queues_kept"] == ["%LMQ%one", "%LMQ%two"] and doc["multi_dispatch_queues_built"] == []
    assert not [c for c in doc["changes"] if "%LMQ%" in c["file"]]
    r = cli_runner().invoke(app, ["redispatch", str(root), "--cq", "-t", "TopicTest", "--apply", "--backup-dir",
                                  str(tmp_path / "bk")])
    assert r.exit_code == 0, r.stderr
    assert _lmq_files(root) == written


def test_recover_puts_back_the_light_message_queue_units_a_crash_lost(tmp_path):
    """A crash before the queues' last units were flushed: the abnormal start dispatches the
    records again, each one's units in its own queue and in the queues it names: the LMQ
    files come back as they were (the broker's multiDispatchLmqQueue after its reput)."""
    root = tmp_path / "store"
    _lmq_store(root, _as_the_broker)
    written = _lmq_files(root)
    for directory in (root / "consumequeue" / "%LMQ%one" / "0", root / "consumequeue" / "TopicTest" / "0"):
        path = next(directory.iterdir())
        data = bytearray(path.read_bytes())
        end = len(data.rstrip(b"\0")) + (-len(data.rstrip(b"\0")) % 20)
        data[end - 40:end] = bytes(40)  # the last two units never reached the disk
        path.write_bytes(bytes(data))
    (root / "abort").touch()  # an abnormal start dispatches again from the checkpoint's file
    doc = json.loads(cli_runner().invoke(app, ["recover", str(root), "-f", "json"]).stdout)
    notes = [n for n in doc["notes"] if "multi-dispatch" in n]
    assert len(notes) == 1 and "%LMQ%one, %LMQ%two" in notes[0] and "as the broker's does" in notes[0]
    r = cli_runner().invoke(app, ["recover", str(root), "--apply", "--backup-dir", str(tmp_path / "bk")])
    assert r.exit_code == 0, r.stderr
    assert _lmq_files(root) == written
