"""Names instead of positions: the encoder's files, the broker start's phases, and the tuples
the append path hands around (issue 21, "Names")."""
from __future__ import annotations

import ast
import pathlib

from rmqtool.dispatch.dispatcher import DispatchRequest
from rmqtool.engine import store as engine_store
from rmqtool.engine.encoder import Encoder
from rmqtool.engine.prepared_record import TOTAL_SIZE, PreparedRecord
from rmqtool.engine.producer import producer_message
from rmqtool.engine.uniq_key import UniqIdGenerator

ROOT = pathlib.Path(__file__).resolve().parents[1] / "rmqtool"
# the files this issue split or named; each function in them fits on a screen
SPLIT = ["recovery/outcome.py", "recovery/undo.py", "engine/encoder.py", "engine/property_map.py",
         "engine/uniq_key.py", "engine/java_text.py", "engine/message_inner.py", "engine/batch_body.py",
         "engine/producer.py", "engine/record_structs.py", "engine/prepared_record.py"]


def test_no_function_over_80_lines_in_the_split_files():
    long = []
    for name in SPLIT:
        for node in ast.walk(ast.parse((ROOT / name).read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                long.append(f"{name}:{node.name}")
    assert long == []


def test_simulate_is_its_five_phases_in_the_docstrings_order():
    from rmqtool.recovery import outcome
    phases = ["_load", "_recover_consume_queues", "_recover_commit_log", "_truncate_dirty_files",
              "_recover_topic_queue_table_and_reput"]
    for number, name in enumerate(phases, 1):
        assert f"{number}. ``{name}``" in outcome.__doc__
        assert getattr(outcome, name).__doc__.startswith(f"{number}. ")
    calls = [n.func.id for n in ast.walk(ast.parse(pathlib.Path(outcome.__file__).read_text()))
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in phases]
    assert [c for c in calls if c in phases] == phases  # simulate calls each once, in order


def test_prepare_fields_is_prepared_record_in_order():
    encoder = Encoder("127.0.0.1:10911")
    msg = producer_message("NamesTopic", b"body", tags="t", keys="k1 k2", born_timestamp=1,
                           uniq_ids=UniqIdGenerator(ip=bytes(4), pid=1, loader_hash=1, clock=lambda: 0))
    fields = encoder.prepare_fields(msg)
    prepared = encoder.prepare(msg)
    assert type(fields) is tuple and prepared == fields
    assert dict(zip(PreparedRecord._fields, fields)) == prepared._asdict()
    assert fields[TOTAL_SIZE] == prepared.total_size == len(prepared.record)


def test_the_put_runs_requests_are_a_prefix_of_dispatch_request():
    # _put_run makes plain tuples in DispatchRequest's field order; _dispatch_inline reads them by name
    assert DispatchRequest._fields[engine_store._REQUEST_OFFSET] == "commit_log_offset"
    assert DispatchRequest._fields[engine_store._REQUEST_SIZE] == "msg_size"
    assert engine_store.PutResult._fields[:4] == ("status", "wrote_offset", "wrote_bytes", "queue_offset")
