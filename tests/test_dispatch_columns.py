"""Dispatch reads clean records as columns (ReputMessageService with DispatchColumns): what it
builds is byte for byte what dispatching every record through check_message builds, on every
fixture store, crash store and generated log, selections and --from-offset included."""
from __future__ import annotations

import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CLEAN_SCENARIOS, FIXTURES, V4, V5
from helpers import examples, file_fingerprint
from rmqtool.dispatch import dispatcher
from rmqtool.engine.redispatch import Selection, build

# clean stores, and damaged inputs (built alike or refused alike): the made crashes (batch
# consume queues, torn and zeroed records, __CRC32# digits, INNER_BASE) and one broker crash of
# each version; what the records are is tests/test_record_kernel.py's business (against truth)
STORES = ([d / "store" for d in CLEAN_SCENARIOS.values()]
          + sorted(p / "input" / "store" for p in (FIXTURES / "crash-made").iterdir()
                   if (p / "input" / "store" / "commitlog").is_dir())
          + [V4 / "crash" / "e1-corrupt-body-in-last-commitlog-file" / "input" / "store",
             next(p / "input" / "store" for p in sorted((V5 / "crash5").iterdir())
                  if (p / "input" / "store" / "commitlog").is_dir())])


def _files(root: pathlib.Path) -> dict:
    # fingerprints of the bytes that skip the holes: a store the engine wrote has a 400 MB index file
    return {str(p.relative_to(root)): file_fingerprint(p) for p in sorted(root.rglob("*")) if p.is_file()}


def _both(store, tmp_path, **kw) -> tuple:
    out = []
    for flag in (True, False):
        saved, dispatcher.COLUMN_REPUT = dispatcher.COLUMN_REPUT, flag
        try:
            built = build(store, tmp_path / f"staging-{flag}", clock=lambda: 1_700_000_000_000, **kw)
        except Exception as exc:  # the same refusal either way, with the same files written before it
            staging = tmp_path / f"staging-{flag}"
            out.append(("refused", type(exc).__name__, str(exc), _files(staging) if staging.is_dir() else None))
            continue
        finally:
            dispatcher.COLUMN_REPUT = saved
        out.append((built.records, built.queues, _files(built.staging)))
    return tuple(out)


@pytest.mark.parametrize("store", STORES, ids=lambda p: "/".join(p.parts[-4:-1]))
def test_columns_build_what_check_message_builds(store, tmp_path):
    columns, one_by_one = _both(store, tmp_path)
    assert columns == one_by_one


def test_selection_and_from_offset(tmp_path):
    store = V4 / "basic" / "store"
    for i, kw in enumerate(({"selection": Selection(topics=("OrderTopic",))},
                            {"selection": Selection(queue_id=1)}, {"from_offset": 300_000})):
        columns, one_by_one = _both(store, tmp_path / str(i), **kw)
        assert columns == one_by_one and columns[0]


@settings(max_examples=examples(4), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(body=st.sampled_from([0, 100, 3000]), prop_crc=st.booleans(), index_entries=st.sampled_from([7, 50, 400]))
def test_generated_logs_with_small_index_files(tmp_path_factory, body, prop_crc, index_entries):
    from benchmarks.gen import GenSpec, build_commitlog

    from helpers import LONG_TOPIC

    root = tmp_path_factory.mktemp("gen")
    build_commitlog(root / "commitlog", GenSpec(segment_size=64 << 10, segments=3, body_size=body,
                                                topics=("T", LONG_TOPIC), queues=3, ipv6_queues=(1,),
                                                append_prop_crc=prop_crc))
    columns, one_by_one = _both(root, tmp_path_factory.mktemp("out"), index_slots=5, index_entries=index_entries)
    assert columns == one_by_one


def test_a_record_dispatch_refuses_stops_both_ways_at_the_same_place(tmp_path):
    """A delayed message whose DELAY is no number: checkMessageAndReturnSize refuses it, so
    dispatch stops there, with what came before it dispatched; the same with columns."""
    from rmqtool.dispatch.rules import RMQ_SYS_SCHEDULE_TOPIC
    from rmqtool.engine.producer import producer_message
    from rmqtool.engine.store import Store

    store = tmp_path / "store"
    clock = iter(range(1_700_000_000_000, 1_700_000_100_000))
    with Store.open(store, writable=True, clock=lambda: next(clock)) as engine:
        for i in range(200):
            if i == 150:
                msg = producer_message(RMQ_SYS_SCHEDULE_TOPIC, b"x", user_properties={"DELAY": "7"}, keys=f"k{i}")
            else:
                msg = producer_message("T", b"body %d" % i, keys=f"k{i}", tags="a", queue_id=i % 2)
            last = engine.append(msg)
    (segment,) = (store / "commitlog").iterdir()
    with open(segment, "r+b") as f:  # the records: the first KB of a 1 GiB file (not all of it read and written)
        raw = f.read(last.wrote_offset + last.wrote_bytes)
        assert raw.count(b"DELAY\x017") == 1
        f.seek(raw.index(b"DELAY\x017"))
        f.write(b"DELAY\x01x")  # properties are not in the body CRC
    columns, one_by_one = _both(store, tmp_path)
    assert columns == one_by_one and columns[0] == "refused" and columns[3]
