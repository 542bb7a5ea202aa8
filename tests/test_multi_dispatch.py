"""Multi-dispatch (light message queues): the rules of dispatch/multi_dispatch.py, and verify on a
store whose %LMQ% queues hold units of other queues' records, as a broker with enableLmq and
enableMultiDispatch writes them (ConsumeQueue.multiDispatchLmqQueue: the record's offset, size
and tags code, at the queue offset INNER_MULTI_QUEUE_OFFSET names).

No fixture was written by a real broker with LMQ on: the store here is the engine's, its LMQ
units written by the test as multiDispatchLmqQueue writes them."""
from __future__ import annotations

import json
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


def _lmq_store(root, lmq_units):
    """Six records of TopicTest/0, each naming %LMQ%one and every other one %LMQ%two too, with
    their queue offsets there; the LMQ queues' files written from ``lmq_units(record, name,
    queue offset)`` (a unit's bytes, or None for none)."""
    placed, next_offset = [], {}
    with Store.open(root, writable=True) as store:
        for i in range(6):
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


def test_redispatch_keeps_the_queues_records_multi_dispatch_to(tmp_path):
    root = tmp_path / "store"
    _lmq_store(root, _as_the_broker)
    lmq = {p: p.read_bytes() for p in (root / "consumequeue").glob("%LMQ%*/0/*")}
    plan = cli_runner().invoke(app, ["redispatch", str(root), "--cq", "-f", "json"])
    doc = json.loads(plan.stdout)
    assert doc["multi_dispatch_queues_kept"] == ["%LMQ%one", "%LMQ%two"]
    assert not [c for c in doc["changes"] if "%LMQ%" in c["file"]]  # neither rebuilt without their units nor deleted
    applied = cli_runner().invoke(app, ["redispatch", str(root), "--cq", "--apply", "--backup-dir",
                                        str(tmp_path / "backup")])
    assert applied.exit_code == 0, applied.stderr
    assert {p: p.read_bytes() for p in (root / "consumequeue").glob("%LMQ%*/0/*")} == lmq


def test_recover_says_the_queues_dispatch_will_not_fill_again(tmp_path):
    root = tmp_path / "store"
    _lmq_store(root, _as_the_broker)
    (root / "abort").touch()  # an abnormal start dispatches again from the checkpoint's file
    doc = json.loads(cli_runner().invoke(app, ["recover", str(root), "-f", "json"]).stdout)
    notes = [n for n in doc["notes"] if "multi-dispatch" in n]
    assert len(notes) == 1 and "%LMQ%one, %LMQ%two" in notes[0]
