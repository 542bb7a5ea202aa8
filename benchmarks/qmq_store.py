"""The 1,000,000-message QMQ store that QMQ verify is timed on.

1,000,000 messages with 1 KB payloads (the client's encoding: flags, times, subject, message
id, and an attribute holding 1 KB-ish of random text) over 8 subjects, laid out as QMQ's
``DefaultStorage`` lays them (``formats/qmq``): V3 message log records in 1 GiB segments (a
record that does not fit ends the segment with the 13-byte end record), each subject's V1
consumer log, a message checkpoint at the end. Segments are sparse at their full size, as
QMQ maps them. Built once under the work directory and reused while its parameters hold.
"""
from __future__ import annotations

import json
import pathlib
import random
import shutil
import struct
import time
import zlib

from rmqtool.formats.qmq.checkpoint import MessageCheckpoint, build_message_checkpoint
from rmqtool.formats.qmq.consumerlog import CONSUMER_LOG_UNIT_BYTES, SEGMENT_SIZE_V1
from rmqtool.formats.qmq.messagelog import (ATTR_EMPTY_RECORD, ATTR_MESSAGE_RECORD, MESSAGE_LOG_MAGIC_V3,
                                            MIN_RECORD_BYTES, PER_SEGMENT_FILE_SIZE, header_size)

MESSAGES = 1_000_000
PAYLOAD_SIZE = 1024
SUBJECTS = tuple(f"bench.subject.{i}" for i in range(8))
T0 = 1_700_000_000_000
BUILD_MARK = "qmq-store.json"
BUILD_VERSION = 1
DIRECTORY = "qmq-store"

_PREFIX = struct.Struct(">IbqqH")  # magic, attributes, timestamp, sequence, subject length
_TAIL = struct.Struct(">qi")  # payload CRC, payload size
_UNIT = struct.Struct(">qqih")  # V1 consumer-log unit


def _short(text: str) -> bytes:
    raw = text.encode()
    return len(raw).to_bytes(2, "big", signed=True) + raw


def payload_of(subject: str, i: int, filler: bytes) -> bytes:
    """The client's encoding of message i (flag 0: no tags, not delayed)."""
    body = _short("body") + _short(filler.decode("ascii"))
    return (b"\0" + (T0 + i).to_bytes(8, "big") + (T0 + i).to_bytes(8, "big") + _short(subject)
            + _short(f"261125.000000.192.0.2.10.4021.{i}") + len(body).to_bytes(4, "big") + body)


def build(store: pathlib.Path, messages: int) -> int:
    """Write the store; the message log's written end."""
    if store.exists():
        shutil.rmtree(store)
    for d in ("messagelog", "actionlog", "checkpoint"):
        (store / d).mkdir(parents=True)
    rng = random.Random(20261126)
    fillers = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(PAYLOAD_SIZE - 90))
               for _ in range(16)]
    units = {s: bytearray() for s in SUBJECTS}
    sequences = dict.fromkeys(SUBJECTS, 0)
    base, segment = 0, bytearray()

    def close_segment() -> None:
        with open(store / "messagelog" / f"{base:020d}", "wb") as f:
            f.write(segment)
            f.truncate(PER_SEGMENT_FILE_SIZE)

    for i in range(messages):
        subject = SUBJECTS[i % len(SUBJECTS)]
        payload = payload_of(subject, i, fillers[i % len(fillers)])
        subject_bytes = subject.encode()
        size = header_size(len(subject_bytes)) + len(payload)
        if len(segment) + size + MIN_RECORD_BYTES > PER_SEGMENT_FILE_SIZE:  # MessageLog's end-of-segment rule
            segment += struct.pack(">Ibq", MESSAGE_LOG_MAGIC_V3, ATTR_EMPTY_RECORD, T0 + i)
            close_segment()
            base, segment = base + PER_SEGMENT_FILE_SIZE, bytearray()
        offset = base + len(segment)
        seq = sequences[subject]
        segment += _PREFIX.pack(MESSAGE_LOG_MAGIC_V3, ATTR_MESSAGE_RECORD, T0 + i, seq, len(subject_bytes))
        segment += subject_bytes + _TAIL.pack(zlib.crc32(payload), len(payload)) + payload
        units[subject] += _UNIT.pack(T0 + i, offset, size, size - len(payload))
        sequences[subject] = seq + 1
    close_segment()
    end = base + len(segment)
    for subject, data in units.items():
        directory = store / "consumerlog" / subject
        directory.mkdir(parents=True)
        with open(directory / f"{0:020d}", "wb") as f:
            f.write(data)
            f.truncate(max(SEGMENT_SIZE_V1, len(data)))
    assert all(len(units[s]) == sequences[s] * CONSUMER_LOG_UNIT_BYTES for s in SUBJECTS)
    checkpoint = MessageCheckpoint(end, {s: n - 1 for s, n in sequences.items()})
    (store / "checkpoint" / f"message-checkpoint.{end:020d}").write_bytes(build_message_checkpoint(checkpoint))
    return end


def ensure(workdir: pathlib.Path, messages: int = MESSAGES) -> pathlib.Path:
    """The store under ``workdir``, built when missing or built with other parameters."""
    store = pathlib.Path(workdir) / DIRECTORY
    mark = store / BUILD_MARK
    wanted = {"version": BUILD_VERSION, "messages": messages, "payload": PAYLOAD_SIZE}
    built = json.loads(mark.read_text()) if mark.exists() else {}
    if {k: built.get(k) for k in wanted} != wanted:
        started = time.perf_counter()
        print(f"qmq store: building {messages:,} x {PAYLOAD_SIZE} B messages in {store} (once) ...", flush=True)
        end = build(store, messages)
        mark.write_text(json.dumps({**wanted, "written_end": end}))
        print(f"qmq store: built in {time.perf_counter() - started:.0f} s", flush=True)
    return store


def written_end(store: pathlib.Path) -> int:
    return json.loads((store / BUILD_MARK).read_text())["written_end"]
