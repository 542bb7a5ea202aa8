"""Controller mode's files read (``epochFileCheckpoint`` and its ``.bak``, ``brokerIdentity`` and
``brokerIdentity-temp``; layouts in ``formats/epoch_file.py`` and ``formats/broker_identity.py``),
what the broker loads of them, and what a slave's next sync does with two epoch caches.

Which epoch file the broker loads is ``CheckpointFile.read``'s rule (:func:`load_epoch_cache`);
the cache it builds is ``EpochFileCache.initEntries``' (entries by epoch, each ending where the
next one in the file starts, the last open). A slave's sync is ``AutoSwitchHAClient.doTruncate``
(:func:`slave_sync`): both caches get their last epoch ended at their commit log's max offset,
the slave's epochs are walked from the highest down to the first one the master holds with the
same start offset, and the slave keeps the log up to the smaller of the two ends of that epoch
(``EpochFileCache.findConsistentPoint``).
"""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Iterator

from rmqtool.errors import CorruptData, FormatError, NothingFound, StoreAccessError, StoreNotFound
from rmqtool.findings import (EPOCH_BAK_DIFFERS, EPOCH_FILE_CHECKSUM, EPOCH_FILE_INVALID, Consequence, Finding,
                              finding)
from rmqtool.formats.broker_identity import (BROKER_IDENTITY_FILE, TEMP_SUFFIX, BrokerIdentity,
                                             parse_broker_identity)
from rmqtool.formats.commitlog import BLANK_MAGIC_CODE
from rmqtool.formats.epoch_file import (BAK_SUFFIX, EPOCH_FILE_NAME, LONG_MAX, OK, SKIPPED, THROWS, EpochFileRead,
                                        EpochLine, parse_epoch_file)
from rmqtool.store.small_file import read_head

READ_LIMIT = 1 << 20  # an epoch a line of ~30 bytes: a broker's file is far smaller
IDENTITY_LIMIT = 64 << 10


@dataclasses.dataclass(frozen=True)
class EpochEntry:
    """An epoch in the cache: the commit log range [start_offset, end_offset) its master wrote
    (end_offset None: open, Long.MAX_VALUE in the broker)."""
    epoch: int
    start_offset: int
    end_offset: int | None


@dataclasses.dataclass(frozen=True)
class EpochFile:
    """One of the two files: where it is, and how it reads (None: no such file)."""
    path: pathlib.Path
    read: EpochFileRead | None

    @property
    def exists(self) -> bool:
        return self.read is not None


@dataclasses.dataclass(frozen=True)
class EpochCache:
    """What ``AutoSwitchHAService.init`` loads: the file the entries come from (None: none),
    why, the cache, and whether the load throws (the store's start fails)."""
    main: EpochFile
    bak: EpochFile
    loaded_from: pathlib.Path | None
    why: str
    entries: tuple[EpochEntry, ...]
    start_fails: bool = False

    @property
    def present(self) -> bool:
        return self.main.exists or self.bak.exists

    @property
    def lines(self) -> tuple[EpochLine, ...]:
        """The loaded file's entry lines, in file order."""
        source = self.main if self.loaded_from == self.main.path else self.bak
        return source.read.entries if self.loaded_from is not None else ()


def _read(path: pathlib.Path) -> EpochFile:
    try:
        data, _size = read_head(path, READ_LIMIT, what="epoch file")
    except StoreNotFound:
        return EpochFile(path, None)
    except FormatError as exc:  # a directory in its place: the reader throws IOException
        return EpochFile(path, EpochFileRead(SKIPPED, why=exc.message))
    return EpochFile(path, parse_epoch_file(data))


def epoch_cache_entries(lines) -> tuple[EpochEntry, ...]:
    """EpochFileCache.initEntries: each entry ends where the next one in the given order starts,
    the last stays open; kept by epoch (a repeated epoch: the later line), in epoch order."""
    by_epoch: dict[int, list] = {}
    previous = None
    for line in lines:
        entry = [line.epoch, line.start_offset, None]
        if previous is not None:
            previous[2] = line.start_offset
        by_epoch[line.epoch] = entry
        previous = entry
    return tuple(EpochEntry(*by_epoch[e]) for e in sorted(by_epoch))


def load_epoch_cache(root: str | pathlib.Path, path: str | pathlib.Path | None = None) -> EpochCache:
    """The epoch files of a store root (or the file at ``path``) and what the broker loads of them
    (CheckpointFile.read: the file unless it is missing, empty or throws IOException; then the .bak)."""
    main_path = pathlib.Path(path) if path is not None else pathlib.Path(root) / EPOCH_FILE_NAME
    main, bak = _read(main_path), _read(main_path.with_name(main_path.name + BAK_SUFFIX))

    def cache(source: EpochFile | None, why: str, fails: bool = False) -> EpochCache:
        lines = source.read.entries if source is not None else ()
        return EpochCache(main, bak, source.path if source is not None else None, why,
                          epoch_cache_entries(lines), fails)

    if main.exists and main.read.outcome == THROWS:
        return cache(None, f"{main.path.name} {main.read.why}: the store's start fails", True)
    if main.exists and main.read.outcome == OK and main.read.entries:
        return cache(main, f"{main.path.name} reads")
    first = (f"{main.path.name} is missing" if not main.exists else
             f"{main.path.name} holds no entries" if main.read.outcome == OK else
             f"{main.path.name} is skipped ({main.read.why})")
    if not bak.exists:
        return cache(None, f"{first} and there is no {bak.path.name}: the epoch cache starts empty")
    if bak.read.outcome == THROWS:
        return cache(None, f"{first}; {bak.path.name} {bak.read.why}: the store's start fails", True)
    if bak.read.outcome == SKIPPED:
        return cache(None, f"{first}; {bak.path.name} is skipped too ({bak.read.why}): the epoch cache starts empty")
    return cache(bak, f"{first}: {bak.path.name} reads" + ("" if bak.read.entries else ", with no entries"))


@dataclasses.dataclass(frozen=True)
class IdentityFiles:
    """brokerIdentity and brokerIdentity-temp (None: no such file)."""
    path: pathlib.Path
    identity: BrokerIdentity | None
    temp_path: pathlib.Path
    temp: BrokerIdentity | None

    @property
    def present(self) -> bool:
        return self.identity is not None or self.temp is not None


def read_broker_identity(root: str | pathlib.Path) -> IdentityFiles:
    path = pathlib.Path(root) / BROKER_IDENTITY_FILE
    temp_path = path.with_name(path.name + TEMP_SUFFIX)
    found = []
    for p, temp in ((path, False), (temp_path, True)):
        try:
            data, _size = read_head(p, IDENTITY_LIMIT, what="broker identity file")
        except StoreNotFound:
            found.append(None)
            continue
        except FormatError as exc:
            found.append(BrokerIdentity(None, None, None, why=exc.message))
            continue
        found.append(parse_broker_identity(data, temp=temp))
    return IdentityFiles(path, found[0], temp_path, found[1])


def _file_findings(cache: EpochCache) -> Iterator[Finding]:
    """Each file as the reader takes it: one that throws, one that is skipped. The .bak counts
    only when the reader gets to it (the file missing, empty or skipped)."""
    main = cache.main.read
    bak_reached = main is None or main.outcome == SKIPPED or (main.outcome == OK and not main.entries)
    for f, reached in ((cache.main, True), (cache.bak, bak_reached)):
        if not f.exists:
            continue
        read = f.read
        aside = "" if reached else f" (the broker does not read it while {cache.main.path.name} reads)"
        if read.outcome == THROWS:
            yield finding(EPOCH_FILE_INVALID, f.path, read.position, read.why + aside,
                          consequence=None if reached else Consequence.NONE)
        elif read.outcome == SKIPPED:
            yield finding(EPOCH_FILE_CHECKSUM, f.path, read.position,
                          read.why + (f": {cache.why}" if reached else aside))


def _bak_findings(cache: EpochCache) -> Iterator[Finding]:
    """The .bak against the file: one write (an entry appended, entries dropped from one end) apart."""
    main, bak = cache.main, cache.bak
    if not (main.exists and bak.exists and main.read.outcome == OK and bak.read.outcome == OK):
        return
    now = [(e.epoch, e.start_offset) for e in main.read.entries]
    before = [(e.epoch, e.start_offset) for e in bak.read.entries]
    appended = now[:-1] == before
    dropped = any(before[i:i + len(now)] == now for i in range(len(before) - len(now) + 1)) if now else True
    if now == before or appended or dropped:
        return
    yield finding(EPOCH_BAK_DIFFERS, bak.path, None,
                  f"{bak.path.name} holds {_entries_text(before)}, {main.path.name} {_entries_text(now)}: no "
                  f"single write (an entry appended, entries dropped from either end) turns one into the other")


def _entries_text(entries: list[tuple[int, int]]) -> str:
    shown = ", ".join(f"{e}-{s}" for e, s in entries[:6])
    return f"[{shown}{', ...' if len(entries) > 6 else ''}]"


def cache_findings(cache: EpochCache) -> list[Finding]:
    """The two files' findings: each as the reader takes it, and the .bak against the file."""
    return [*_file_findings(cache), *_bak_findings(cache)]


# --- a slave's next sync ------------------------------------------------------------------------------
NEW_REPLICA, NO_CONSISTENT_POINT, NOTHING_TO_TRUNCATE, TRUNCATES = (
    "new_replica", "no_consistent_point", "nothing_to_truncate", "truncates")


@dataclasses.dataclass(frozen=True)
class SlaveSync:
    """What AutoSwitchHAClient.doTruncate does at the slave's next handshake: ``outcome`` one of
    NEW_REPLICA (the slave's cache is empty: no truncation), NO_CONSISTENT_POINT (the handshake
    fails, again and again), NOTHING_TO_TRUNCATE (the point is at or past the slave's end) or
    TRUNCATES (the slave's commit log is cut to ``truncate_offset``)."""
    outcome: str
    consistent_point: int | None  # findConsistentPoint (None: -1)
    epoch: int | None  # the epoch it was found in
    slave_max_offset: int
    master_max_offset: int


def _sync_entries(entries: tuple[EpochEntry, ...], max_offset: int) -> dict[int, tuple[int, int]]:
    """epoch -> (start, end) as doTruncate rebuilds a cache: initCacheFromEntries over the entries in
    epoch order (the last keeps the end it had), then setLastEpochEntryEndOffset(max offset)."""
    ends = {}
    for i, e in enumerate(entries):
        last = i == len(entries) - 1
        end = (e.end_offset if e.end_offset is not None else LONG_MAX) if last else entries[i + 1].start_offset
        if last and e.start_offset <= max_offset:
            end = max_offset
        ends[e.epoch] = (e.start_offset, end)
    return ends


def slave_sync(master: tuple[EpochEntry, ...], master_max_offset: int,
               slave: tuple[EpochEntry, ...], slave_max_offset: int) -> SlaveSync:
    """doTruncate with the master's epoch entries (as its handshake sends them: start offsets
    only, so their ends are rebuilt) and its max offset, against the slave's cache."""
    if not slave:
        return SlaveSync(NEW_REPLICA, None, None, slave_max_offset, master_max_offset)
    bare = tuple(EpochEntry(e.epoch, e.start_offset, None) for e in master)
    theirs, ours = _sync_entries(bare, master_max_offset), _sync_entries(slave, slave_max_offset)
    for epoch in sorted(ours, reverse=True):
        start, end = ours[epoch]
        if epoch in theirs and theirs[epoch][0] == start:
            point = min(end, theirs[epoch][1])
            outcome = NOTHING_TO_TRUNCATE if point >= slave_max_offset else TRUNCATES
            return SlaveSync(outcome, point, epoch, slave_max_offset, master_max_offset)
    return SlaveSync(NO_CONSISTENT_POINT, None, None, slave_max_offset, master_max_offset)


def offset_aligned(reader, offset: int) -> tuple[bool, str | None]:
    """DefaultMessageStore.isOffsetAligned on a CommitLogReader: no file holds the offset, or a
    record the broker's check accepts starts there (a message whose body CRC matches, or an
    end-of-file blank); (False, why) otherwise."""
    try:
        seg, position = reader.locate(offset)
    except NothingFound:
        return True, None
    head = reader.pread(seg, position, 8)
    if len(head) == 8 and int.from_bytes(head[4:], "big") == BLANK_MAGIC_CODE:
        return True, None
    try:
        message = reader.read(offset, check_crc=True)
    except (NothingFound, CorruptData, StoreAccessError) as exc:
        return False, exc.message
    if message.body_crc_ok is False:
        return False, "the record there fails its body CRC"
    return True, None
