"""QMQ's pull-log tablets (``pulllog_smt/``) as ``SortedPullLogTable`` loads them.

Layout in ``formats/qmq/tablet.py``. This says what each tablet holds and why
one is unusable (for info, dump and verify); what the broker's load does with them (where
it stops, what it destroys, where the action replay starts) is ``recovery/qmq/tablets.py``.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import zlib

import construct as cs

import rmqtool.findings as ids
from rmqtool.findings import Finding, finding
from rmqtool.formats.qmq.java import NumberFormatError, java_parse
from rmqtool.formats.qmq.tablet import (SORTED_MESSAGES_TABLE_MAGIC_V1, TABLET_CRC_SIZE, TABLET_HEADER_SIZE,
                                        TabletCrc, TabletHeader, TabletIndex)


@dataclasses.dataclass(frozen=True, slots=True)
class Tablet:
    path: pathlib.Path
    tablet_id: int
    header: cs.Container | None
    index: tuple  # TabletIndexEntry containers
    crc_ok: bool
    error: str | None  # why the broker's load stops here; None for a valid tablet

    @property
    def valid(self) -> bool:
        return self.error is None


def read_tablet(path: pathlib.Path, tablet_id: int) -> Tablet:
    data = path.read_bytes()
    if len(data) < TABLET_HEADER_SIZE:
        return Tablet(path, tablet_id, None, (), False, f"{len(data)} bytes, shorter than the tablet header")
    header = TabletHeader.parse(data)
    if header.magic != SORTED_MESSAGES_TABLE_MAGIC_V1:
        return Tablet(path, tablet_id, header, (), False, f"magic 0x{header.magic:08x}")
    end = TABLET_HEADER_SIZE + header.total_payload_size
    if header.total_payload_size < 0 or end + TABLET_CRC_SIZE > len(data):
        return Tablet(path, tablet_id, header, (), False, f"payload size {header.total_payload_size} past the file")
    crc_ok = TabletCrc.parse(data[end:end + TABLET_CRC_SIZE]) == zlib.crc32(data[TABLET_HEADER_SIZE:end])
    if not crc_ok:
        return Tablet(path, tablet_id, header, (), False, "CRC mismatch")
    if not TABLET_HEADER_SIZE <= header.position_of_index <= end:
        return Tablet(path, tablet_id, header, (), True, f"index position {header.position_of_index}")
    try:
        index = tuple(TabletIndex.parse(data[header.position_of_index:end]))
    except (cs.ConstructError, UnicodeDecodeError) as exc:
        return Tablet(path, tablet_id, header, (), True, f"index unreadable ({type(exc).__name__})")
    return Tablet(path, tablet_id, header, index, True, None)


def _listing(store: str | os.PathLike) -> tuple[list[tuple[int, pathlib.Path]], list[pathlib.Path]]:
    """``pulllog_smt/``'s names: (id, path) of those ``VarLogSegment`` parses (decimal ids), and
    those not starting with "." whose Long.parseLong throws, by name."""
    directory = pathlib.Path(store) / "pulllog_smt"
    found, refused = [], []
    if directory.is_dir():
        for path in sorted(directory.iterdir()):
            try:
                found.append((java_parse(path.name), path))
            except NumberFormatError:
                if not path.name.startswith("."):
                    refused.append(path)
    return found, refused


def tablets(store: str | os.PathLike) -> list[Tablet]:
    """Every tablet in id order (``VarLogSegment`` names are decimal ids)."""
    return [read_tablet(path, tid) for tid, path in sorted(_listing(store)[0])]


def unparsable_tablet_names(store: str | os.PathLike) -> list[pathlib.Path]:
    """Names in ``pulllog_smt/`` that SortedPullLogTable's load fails on: every name not
    starting with "." becomes a VarLogSegment, whose Long.parseLong throws (QMQ does not start)."""
    return _listing(store)[1]


def tablet_findings(store: str | os.PathLike) -> list[Finding]:
    """The first tablet that is not valid: SortedPullLogTable's load stops there and destroys
    it and every later one (verify and info say it alike)."""
    for t in tablets(store):
        if not t.valid:
            return [finding(ids.PULL_LOG_TABLET_INVALID, t.path, None,
                            f"tablet {t.tablet_id}: {t.error}: the load stops here and destroys it and later ones")]
    return []
