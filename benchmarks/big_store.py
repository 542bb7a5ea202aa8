"""The 1,000,000-message store that `verify`, `recover` and `redispatch` are timed on.

1,000,000 messages with 1 KB bodies (random bytes, so the producer's 4 KiB compression
threshold is never crossed and a CRC reads real data), one topic with 8 queues, one KEYS
key and a UNIQ_KEY each, the broker's default sizes (1 GiB commit log segments, 300,000
units a consume queue file, index files of 5,000,000 slots and 20,000,000 entries), written
by rmqtool's engine the way the broker writes it: about 1.2 GB of records in two segments.
Built once under the work directory and reused while its parameters are unchanged.
"""
from __future__ import annotations

import itertools
import json
import os
import pathlib
import random
import shutil
import time

MESSAGES = 1_000_000
BODY_SIZE = 1024
QUEUES = 8
TOPIC = "BenchTopic"
T0 = 1_700_000_000_000
STORE_STEP_MS = 1  # store timestamps 1 ms apart: the whole store spans about 17 minutes
BUILD_MARK = "big-store.json"
BUILD_VERSION = 1
DIRECTORY = "big-store"


def params(messages: int = MESSAGES, commitlog_size: int | None = None) -> dict:
    return {"version": BUILD_VERSION, "messages": messages, "body": BODY_SIZE, "queues": QUEUES,
            "commitlog_size": commitlog_size}


def key_of(i: int) -> str:
    """The KEYS value of message i: one key a message."""
    return f"order-{i}"


def build(store: pathlib.Path, messages: int = MESSAGES, commitlog_size: int | None = None) -> int:
    """Write the store (replacing what is there); returns the commit log's max offset."""
    from rmqtool.engine.producer import producer_message
    from rmqtool.engine.store import Store

    if store.exists():
        shutil.rmtree(store)
    rng = random.Random(8)
    bodies = [rng.randbytes(BODY_SIZE) for _ in range(64)]  # a few distinct bodies: CRCs differ
    clock = itertools.count(T0, STORE_STEP_MS)
    with Store.open(store, writable=True, store_host="192.0.2.10:10911", clock=lambda: next(clock),
                    commitlog_size=commitlog_size) as engine:
        batch = []
        for i in range(messages):
            batch.append(producer_message(TOPIC, bodies[i % len(bodies)], keys=key_of(i), queue_id=i % QUEUES,
                                          born_timestamp=T0 + i, born_host="198.51.100.7:40000"))
            if len(batch) == 1000:
                engine.append_many(batch)
                batch.clear()
        if batch:
            engine.append_many(batch)
        return engine.max_offset


def ensure(workdir: pathlib.Path, messages: int = MESSAGES, commitlog_size: int | None = None,
           name: str = DIRECTORY) -> pathlib.Path:
    """The store under ``workdir/name``, built when missing or built with other parameters."""
    store = pathlib.Path(workdir) / name
    mark = store / BUILD_MARK
    wanted = params(messages, commitlog_size)
    built = json.loads(mark.read_text()) if mark.exists() else {}
    if {k: built.get(k) for k in wanted} != wanted:
        started = time.perf_counter()
        print(f"big store: building {messages:,} x {BODY_SIZE} B messages in {store} (once) ...", flush=True)
        max_offset = build(store, messages, commitlog_size)
        mark.write_text(json.dumps({**wanted, "max_offset": max_offset}))
        print(f"big store: built in {time.perf_counter() - started:.0f} s", flush=True)
    return store


def max_offset(store: pathlib.Path) -> int:
    return json.loads((store / BUILD_MARK).read_text())["max_offset"]


def data_files(store: pathlib.Path) -> list[pathlib.Path]:
    """Every file of the store but the build mark: what a raw read reads."""
    return sorted(p for p in pathlib.Path(store).rglob("*") if p.is_file() and p.name != BUILD_MARK)


def raw_read(files: list[pathlib.Path], upto: dict[pathlib.Path, int] | None = None) -> int:
    """Read files sequentially in 8 MiB chunks (up to ``upto[file]`` bytes where given); returns bytes read."""
    total = 0
    buf = bytearray(8 << 20)
    view = memoryview(buf)
    for path in files:
        left = (upto or {}).get(path, os.path.getsize(path))
        with open(path, "rb", buffering=0) as f:
            while left > 0:
                n = f.readinto(view[:min(len(buf), left)])
                if not n:
                    break
                total += n
                left -= n
    return total
