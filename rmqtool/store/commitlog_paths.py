"""A commit log kept in several directories (``storePathCommitLog=/disk1/commitlog,/disk2/commitlog``),
read as one log.

What the broker does (MultiPathMappedFileQueue, the same in 4.9.8 and 5.3.3):

* CommitLog's constructor takes MultiPathMappedFileQueue when storePathCommitLog contains
  ``MixAll.MULTI_PATH_SPLITTER`` (the system property ``rocketmq.broker.multiPathSplitter``,
  default ``,``); otherwise one directory, and readOnlyCommitLogStorePaths is never read.
* getPaths(): ``storePathCommitLog.trim().split(splitter)`` into a HashSet (each piece as
  written: not trimmed); getReadonlyPaths() the same of readOnlyCommitLogStorePaths (blank: none).
* load(): the files of every path, read-only ones included, handed to doLoad, which sorts
  them by file name alone: the directories are one log, and a file is loaded wherever it is.
  Two files of the same name both load (checkSelf logs "[BUG] ... offset don't match").
* tryCreateMappedFile(offset): fileIdx = offset / mappedFileSize; the writable paths less the
  read-only ones and those CleanCommitLogService found fuller than diskSpaceCleanForciblyRatio
  (if none is left: the writable less the read-only), sorted as Java sorts Strings; the new
  file goes into ``paths[fileIdx % n]``. With no disk full that is "file i in path i mod n"
  of the sorted paths; a disk full when a file was made puts it elsewhere.

Nothing here writes; the engine appends to such a log by the rule above with no disk full
(``engine/store.py``, ``rule_directory``) and recovers it in place, each file on its own disk
(truncateDirtyFiles moves none).
"""
from __future__ import annotations

import dataclasses
import os
import pathlib

from rmqtool.errors import NotAStore
from rmqtool.findings import (COMMIT_LOG_FILE_DUPLICATED, COMMIT_LOG_FILE_MISPLACED, COMMIT_LOG_FILES_NOT_LOADED,
                              COMMIT_LOG_PATH_MISSING, Finding)
from rmqtool.store.broker_conf import FIVE_X, BrokerConfig, StringReading, java_trim
from rmqtool.store.given import PerStore
from rmqtool.store.paths import COMMITLOG_DIR, is_segment_name
from rmqtool.store.segments import Segment, SegmentQueue, check_sequence, infer_mapped_file_size, list_segments

MULTI_PATH_SPLITTER = ","  # MixAll.MULTI_PATH_SPLITTER's default (-Drocketmq.broker.multiPathSplitter)
STORE_PATH_COMMIT_LOG = "storePathCommitLog"
READ_ONLY_COMMIT_LOG_STORE_PATHS = "readOnlyCommitLogStorePaths"
STORE_PATH_ROOT_DIR = "storePathRootDir"


def split_paths(text: str | None, splitter: str = MULTI_PATH_SPLITTER) -> tuple[str, ...]:
    """``text.trim().split(splitter)`` as Java splits (trailing empty pieces dropped), each
    piece once, in the order written (the broker's HashSet keeps no order; rmqtool keeps the
    operator's for display)."""
    if text is None or not java_trim(text):
        return ()
    pieces = java_trim(text).split(splitter)
    while pieces and pieces[-1] == "":
        pieces.pop()
    return tuple(dict.fromkeys(pieces))


def java_sorted(paths) -> list[str]:
    """Arrays.sort of Strings: by UTF-16 code units (Python's order differs past the BMP)."""
    return sorted(paths, key=lambda s: s.encode("utf-16-be", "surrogatepass"))


@dataclasses.dataclass(frozen=True)
class CommitLogPaths:
    """Where a store's commit log lives when not in ROOT/commitlog, and what said so."""
    writable: tuple[str, ...]  # storePathCommitLog's pieces
    readonly: tuple[str, ...] = ()  # readOnlyCommitLogStorePaths' pieces (read by a multi-path broker only)
    source: str = "--commitlog-path"  # the option, or the broker config file and its key
    multi: bool = True  # the broker runs MultiPathMappedFileQueue (the setting holds the splitter)

    @property
    def directories(self) -> list[str]:
        """Every directory the broker loads files from, each once: the writable ones in the
        order written, then the read-only ones (a single-path broker: its one directory)."""
        loaded = self.writable + self.readonly if self.multi else self.writable[:1]
        return list(dict.fromkeys(loaded))

    @property
    def creating(self) -> list[str]:
        """The directories tryCreateMappedFile chooses among when no disk is full, sorted as it sorts them."""
        return java_sorted(set(self.writable) - set(self.readonly))

    def rule_directory(self, base_offset: int, mapped_file_size: int) -> str | None:
        """Where tryCreateMappedFile puts the file starting at ``base_offset`` when no disk is full
        (None: the rule names none, or every writable path is read-only and the broker cannot create)."""
        creating = self.creating
        if not self.multi or not creating or not mapped_file_size:
            return None
        return creating[(base_offset // mapped_file_size) % len(creating)]

    @property
    def ignored_readonly(self) -> list[str]:
        """readOnlyCommitLogStorePaths a single-path broker never reads."""
        return [] if self.multi else [p for p in self.readonly if p not in self.writable]


def from_option(values: list[str] | tuple[str, ...], readonly: list[str] | tuple[str, ...] = ()) -> CommitLogPaths | None:
    """``--commitlog-path`` (repeatable, each split at the splitter) and ``--readonly-commitlog-path``:
    several directories are a multi-path log; one is a commit log kept outside the root (with
    read-only paths given too, they are read: the operator asked, whatever the broker's splitter)."""
    writable = tuple(dict.fromkeys(p for v in values for p in split_paths(v)))
    if not writable:
        return None
    ro = tuple(dict.fromkeys(p for v in readonly for p in split_paths(v)))
    return CommitLogPaths(writable, ro, "--commitlog-path", multi=len(writable) > 1 or bool(ro))


def from_broker_config(conf: BrokerConfig, root: str | os.PathLike, reading: StringReading) -> CommitLogPaths | None:
    """The commit log paths a broker config file sets, its String settings read as ``reading``
    says (None: it sets no storePathCommitLog, so the commit log is ROOT/commitlog as the
    broker's getter makes it of storePathRootDir). One directory elsewhere moves the commit log
    only when ROOT has no commitlog/ of its own: a copied store is read where it was copied,
    not at the live broker's path its config names."""
    setting = conf.string_setting(STORE_PATH_COMMIT_LOG, reading)
    if setting is None:
        return None
    multi = MULTI_PATH_SPLITTER in setting
    writable = split_paths(setting) if multi else (setting,)
    readonly = split_paths(conf.string_setting(READ_ONLY_COMMIT_LOG_STORE_PATHS, reading))
    if not writable:
        return None
    if not multi and (pathlib.Path(root) / COMMITLOG_DIR).is_dir():
        return None  # ROOT/commitlog spelled out, or the store's own commitlog/ (a copy): the plain store
    source = f"{conf.path}: {STORE_PATH_COMMIT_LOG}"
    if reading_matters(conf):  # the versions read it apart: say which was taken and why
        source += f" ({reading.reason})"
    return CommitLogPaths(writable, readonly, source, multi)


def reading_matters(conf: BrokerConfig) -> bool:
    """Whether 4.9 and 5.x find the commit log in different places: a storePathCommitLog of one
    directory with blanks around it (the several-directory setting is trimmed by getPaths in both)."""
    setting = conf.settings.get(STORE_PATH_COMMIT_LOG)
    return setting is not None and MULTI_PATH_SPLITTER not in setting and java_trim(setting) != setting


def reading_by_directories(conf: BrokerConfig, unknown: str) -> StringReading:
    """When which broker version reads ``conf`` is not known (``unknown`` says why): the reading
    whose storePathCommitLog is a directory, the other's not; else 5.x's."""
    as_written = conf.settings[STORE_PATH_COMMIT_LOG]
    trimmed = java_trim(as_written)
    there = os.path.isdir(as_written), os.path.isdir(trimmed)
    if there == (True, False):
        return StringReading(False, f"{unknown}; read untrimmed as 4.9 does: {as_written!r} is a directory, "
                                    f"{trimmed!r} is not")
    if there == (False, True):
        return StringReading(True, f"{unknown}; read trimmed as 5.x does: {trimmed!r} is a directory, "
                                   f"{as_written!r} is not")
    both = "both are directories" if there[0] else "neither is a directory"
    return StringReading(True, f"{unknown}; read trimmed as 5.x does ({both}: {as_written!r} and {trimmed!r}): "
                               f"give --semantics 4.9 where a 4.9 broker reads it")


def list_commit_log(paths: CommitLogPaths, root: str | os.PathLike | None = None,
                    mapped_file_size: int | None = None) -> SegmentQueue:
    """The commit log of several directories listed as MultiPathMappedFileQueue.load takes it:
    every file of every path, merged by base offset, with findings for what one directory
    alone would not show (a file twice, a file where the rule would not put it, a path
    missing, ROOT/commitlog left out of the paths)."""
    findings: list[Finding] = []
    found: list[Segment] = []
    for d in paths.directories:
        directory = pathlib.Path(d)
        if not directory.exists():
            findings.append(Finding(COMMIT_LOG_PATH_MISSING, d, None,
                                    f"a commit log path ({paths.source}) that does not exist: the broker loads "
                                    f"nothing from it"))
            continue
        if not directory.is_dir():
            raise NotAStore(f"a commit log path ({paths.source}) that is not a directory", directory)
        found += list_segments(directory, findings)
    found.sort(key=lambda s: (s.base_offset, str(s.path)))
    size = mapped_file_size or infer_mapped_file_size(_unique(found))
    segments = _without_duplicates(found, paths, size, findings)
    _check_places(segments, paths, size, findings)
    check_sequence(segments, size, findings, where=lambda base: _where(paths, base, size))
    if root is not None:
        _check_root_left_out(pathlib.Path(root), paths, findings)
    first = pathlib.Path(paths.directories[0])
    return SegmentQueue(first, segments, size, findings, tuple(pathlib.Path(d) for d in paths.directories))


def _unique(segments: list[Segment]) -> list[Segment]:
    seen: dict[int, Segment] = {}
    for s in segments:
        seen.setdefault(s.base_offset, s)
    return list(seen.values())


def _without_duplicates(found: list[Segment], paths: CommitLogPaths, size: int | None,
                        findings: list[Finding]) -> list[Segment]:
    """One segment a base offset: the copy in the rule's directory, else the first by path; each
    other copy a finding (the broker loads every copy, and which one it reads an offset from
    depends on its HashSet's order)."""
    by_base: dict[int, list[Segment]] = {}
    for s in found:
        by_base.setdefault(s.base_offset, []).append(s)
    kept = []
    for base, copies in by_base.items():
        if len(copies) > 1:
            rule = paths.rule_directory(base, size or 0)
            keep = next((c for c in copies if rule is not None and _same_dir(c.path.parent, rule)), copies[0])
            for other in copies:
                if other is not keep:
                    same = _same_bytes(keep.path, other.path)
                    findings.append(Finding(COMMIT_LOG_FILE_DUPLICATED, str(other.path), None,
                                            f"{other.name} is also in {keep.path.parent} "
                                            f"({'the same bytes' if same else 'different bytes'}): the broker "
                                            f"loads both copies and reads this range from either; rmqtool reads "
                                            f"{keep.path}"))
            copies = [keep]
        kept.append(copies[0])
    return kept


def _same_bytes(a: pathlib.Path, b: pathlib.Path) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def _same_dir(directory: pathlib.Path, configured: str) -> bool:
    return os.path.normpath(directory) == os.path.normpath(configured)


def _check_places(segments: list[Segment], paths: CommitLogPaths, size: int | None,
                  findings: list[Finding]) -> None:
    """A file in another writable directory than tryCreateMappedFile's rule gives it. The broker
    loads it all the same (it is not damage to the log), but either a disk was full when the
    file was made or someone moved it: files in a read-only path are where operators put them."""
    if not paths.multi or not size:
        return
    for s in segments:
        rule = paths.rule_directory(s.base_offset, size)
        if rule is None or _same_dir(s.path.parent, rule) or any(_same_dir(s.path.parent, r) for r in paths.readonly):
            continue
        findings.append(Finding(COMMIT_LOG_FILE_MISPLACED, str(s.path), None,
                                f"file {s.base_offset // size} of the log is in {s.path.parent}, where the "
                                f"broker's rule (file i in path i mod {len(paths.creating)} of the sorted paths) "
                                f"puts it in {rule}: the broker still loads it from here (a disk full when it "
                                f"was made also puts it elsewhere)"))


def _where(paths: CommitLogPaths, base: int, size: int | None) -> str:
    """For a missing file's message: the directory it belongs in."""
    rule = paths.rule_directory(base, size or 0)
    return f" (it belongs in {rule})" if rule is not None else ""


def _check_root_left_out(root: pathlib.Path, paths: CommitLogPaths, findings: list[Finding]) -> None:
    """ROOT/commitlog holding segments while the paths do not name it: the broker never loads them."""
    directory = root / COMMITLOG_DIR
    if not directory.is_dir() or any(_same_dir(directory, d) for d in paths.directories):
        return
    names = [n for n in sorted(os.listdir(directory)) if is_segment_name(n)]
    if names:
        findings.append(Finding(COMMIT_LOG_FILES_NOT_LOADED, str(directory), None,
                                f"{len(names)} commit log file(s) ({names[0]}..{names[-1]}) in a directory "
                                f"{paths.source} does not name: the broker does not load them"))


# --- the paths a command was given for its store --------------------------------------------------
# A command's option (``--commitlog-path``, ``--broker-config``) names where its STORE's commit log
# is; every view of that root opened while the command runs takes it (store/view.py).
_GIVEN: PerStore[CommitLogPaths] = PerStore("rmqtool_commit_log_paths")


def given_paths(root: str | os.PathLike, paths: CommitLogPaths | None):
    """While the block runs, views of ``root`` read their commit log from ``paths``."""
    return _GIVEN.given(root, paths)


def paths_given(root: str | os.PathLike) -> CommitLogPaths | None:
    """The commit log paths given for ``root`` (None: ROOT/commitlog)."""
    return _GIVEN.get(root)


# A broker started without -c persists its config (on an admin's updateBrokerConfig) to
# BrokerPathConfigHelper's default, ~/store/config/broker.properties: the default root's config/.
BROKER_PROPERTIES = "broker.properties"


def found_in_store(root: str | os.PathLike) -> CommitLogPaths | None:
    """The paths a store shows by itself: ROOT has no commitlog/ and ROOT/config/broker.properties
    names a storePathCommitLog of which a directory exists. A store with commitlog/ is read as it
    always was (a copied store's config may name the old machine's disks)."""
    root = pathlib.Path(root)
    conf_path = root / "config" / BROKER_PROPERTIES
    if (root / COMMITLOG_DIR).exists() or not conf_path.is_file():
        return None
    from rmqtool.errors import RmqError
    from rmqtool.store.broker_conf import read_broker_config
    try:
        conf = read_broker_config(conf_path)
    except RmqError:
        return None  # not readable as the broker reads it: the plain store's error says what is missing
    reading = reading_by_directories(conf, "which broker version reads config/broker.properties is not "
                                            "known before the commit log it names is found") \
        if reading_matters(conf) else FIVE_X
    found = from_broker_config(conf, root, reading)
    if found is None or not any(os.path.isdir(d) for d in found.directories):
        return None
    return found


def commit_log_paths_of(root: str | os.PathLike) -> CommitLogPaths | None:
    """Where ROOT's commit log is: as the command was told, else as the store shows, else None (ROOT/commitlog)."""
    return paths_given(root) or found_in_store(root)
