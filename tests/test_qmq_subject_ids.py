"""record_kernel._subject_ids, the kernel's subject grouping (by each subject's first and last
8 bytes, longer ones proven byte for byte), gives each record the subject its bytes spell and
ends the run at the first subject that is not UTF-8, whatever the lengths: subjects alike in
their first and last 8 bytes but not between, many subjects of one length, subjects past the
gathered row, empty ones."""
from __future__ import annotations

import random
import struct

import numpy as np

from rmqtool.store.qmq.record_kernel import SUBJECT_AT, SUBJECT_LENGTH_AT, SubjectTable, _Rows, _subject_ids


def _records(subjects: list[bytes]) -> tuple[bytes, np.ndarray]:
    """A buffer holding a record header a subject (only the fields the grouping reads)."""
    buf, positions = bytearray(), []
    for raw in subjects:
        positions.append(len(buf))
        head = bytearray(SUBJECT_AT)
        struct.pack_into(">h", head, SUBJECT_LENGTH_AT, len(raw))
        buf += head + raw + bytes(12)
    return bytes(buf + bytes(64)), np.array(positions, np.int64)


def test_every_record_gets_the_subject_its_bytes_spell():
    rng = random.Random(23)
    alike = [b"order.paid." + bytes([c]) * 3 + b".shard.01" for c in b"abcd"]  # 23 bytes, same first and last 8
    short = [b"s" * 9, b"t" * 9, b"abcdefgh", b"abcdefgi", "sujet.été".encode()]  # up to 16 bytes: all in the pair
    many = [f"subject.{i:04d}".encode() for i in range(80)]  # more distinct ones of one length than rounds
    long = [b"L" * 50 + b"x", b"L" * 50 + b"y", "长主题".encode() * 6]  # past the 64-byte row
    pool = alike + short + many + long + [b"", b"abc"]
    subjects = [rng.choice(pool) for _ in range(600)]
    buf, pos = _records(subjects)
    rows = _Rows(buf, pos)
    table = SubjectTable()
    ids, n = _subject_ids(rows, rows.head["subject_length"].astype(np.int64), table)
    assert n == len(subjects)
    assert [table.names[i] for i in ids.tolist()] == [s.decode() for s in subjects]
    assert len(table.names) == len(set(subjects))


def test_the_run_ends_at_the_first_subject_not_utf8():
    subjects = [b"order.paid.shard.01", b"order.paid.shard.02", b"order.paid\xff.shard", b"order.paid.shard.01"]
    buf, pos = _records(subjects)
    rows = _Rows(buf, pos)
    ids, n = _subject_ids(rows, rows.head["subject_length"].astype(np.int64), SubjectTable())
    assert n == 2
