"""The sizes a store was written with: what its files show, else what the operator gave
(options, or the broker's own config file), else the broker's defaults, each with where it
came from.

The broker keeps commit log, consume queue and index file sizes in its config, not in the
store; whatever writes into a store must use the same ones, or the broker reads slots and
units at the wrong places. :func:`store_sizes` is the one place they are worked out (the
engine's writable open, ``append``, ``recover`` and ``redispatch`` all ask it). Sizes given
must agree with what the files show. A size that nothing shows and nobody gave is the
broker's default only by assumption: :meth:`StoreSizes.unknown` names those a write would
use, and writers refuse them unless told ``assume_defaults``.
"""
from __future__ import annotations

import dataclasses
import pathlib

from rmqtool.engine.cq_writer import consume_queue_file_size
from rmqtool.errors import CorruptData, UsageError
from rmqtool.formats.broker_conf import (MAPPED_FILE_SIZE_COMMIT_LOG, MAPPED_FILE_SIZE_CONSUME_QUEUE,
                                         MAPPER_FILE_SIZE_BATCH_CONSUME_QUEUE, MAX_HASH_SLOT_NUM, MAX_INDEX_NUM)
from rmqtool.formats.consumequeue import CQ_STORE_UNIT_SIZE, DEFAULT_BATCH_CQ_FILE_SIZE, DEFAULT_CQ_FILE_SIZE
from rmqtool.formats.indexfile import (DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM, FIRST_INDEX,
                                       default_geometry, entry_position, hash_slot_num_for, index_file_size,
                                       index_num_for)
from rmqtool.store import paths
from rmqtool.store.broker_conf import BrokerConfig
from rmqtool.store.consumequeue import first_queue_files, queue_file_size_shown
from rmqtool.store.indexfile import index_file_paths, infer_index_geometry, read_index_header
from rmqtool.store.segments import discover
from rmqtool.store.view import StoreView

DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG = 1024 * 1024 * 1024

# where a size came from
FILES = "files"  # the store's own files show it
OPTION = "option"  # given on the command line (or to Store.open)
BROKER_CONFIG = "broker-config"  # the broker's config file given
DEFAULT = "default"  # nothing shows it: the broker's default, assumed


@dataclasses.dataclass(frozen=True, slots=True)
class Size:
    value: int
    taken_from: str  # FILES, OPTION, BROKER_CONFIG or DEFAULT
    shown_by: str  # the file, option or config line that shows it; for DEFAULT, why nothing does

    def to_json(self) -> dict:
        return {"value": self.value, "taken_from": self.taken_from, "shown_by": self.shown_by}


@dataclasses.dataclass(frozen=True)
class GivenSizes:
    """What the operator said about the sizes (None: not said)."""
    commit_log: int | None = None
    consume_queue: int | None = None  # mappedFileSizeConsumeQueue as configured (rounded up as the broker does)
    batch_consume_queue: int | None = None
    index_slots: int | None = None
    index_entries: int | None = None
    broker_config: BrokerConfig | None = None
    assume_defaults: bool = False  # a size nothing shows may be the broker's default


# (StoreSizes field, JSON name (MessageStoreConfig's, snake_case), option that gives it)
FIELDS = (("commit_log", "mapped_file_size_commit_log", "--commitlog-size"),
          ("consume_queue", "mapped_file_size_consume_queue", "--cq-size"),
          ("batch_consume_queue", "mapper_file_size_batch_consume_queue", "--batch-cq-size"),
          ("index_slots", "max_hash_slot_num", "--index-slots"),
          ("index_entries", "max_index_num", "--index-entries"))


@dataclasses.dataclass(frozen=True)
class StoreSizes:
    commit_log: Size
    consume_queue: Size
    batch_consume_queue: Size
    index_slots: Size
    index_entries: Size
    assume_defaults: bool = False

    def to_json(self) -> dict:
        return {name: getattr(self, field).to_json() for field, name, _ in FIELDS}

    def unknown(self, *, consume_queue: bool, index: bool, batch_consume_queue: bool,
                commit_log: bool = False) -> list[str]:
        """The JSON names of the sizes a write of these kinds would use that nothing shows."""
        wanted = {"commit_log": commit_log, "consume_queue": consume_queue, "batch_consume_queue": batch_consume_queue,
                  "index_slots": index, "index_entries": index}
        return [name for field, name, _ in FIELDS if wanted.get(field) and getattr(self, field).taken_from == DEFAULT]

    def refusal(self, unknown: list[str]) -> str | None:
        """Why a write with these sizes is refused; None when none is unknown or defaults are assumed."""
        if not unknown or self.assume_defaults:
            return None
        size_of = {name: getattr(self, field) for field, name, _option in FIELDS}
        option_of = {name: option for _field, name, option in FIELDS}
        what = ", ".join(f"{name} ({size_of[name].value}, the broker's default)" for name in unknown)
        options = " and ".join(option_of[name] for name in unknown)
        return (f"nothing in the store shows {what}: files written with a size the broker was not configured "
                f"for are read at the wrong places. Give {options}, or --broker-config FILE (the broker's "
                f"broker.conf), or --assume-defaults if the broker runs with its defaults")

    def require(self, unknown: list[str], where) -> None:
        why = self.refusal(unknown)
        if why is not None:
            raise UsageError(why, where)


def store_sizes(root: str | pathlib.Path | StoreView, given: GivenSizes = GivenSizes()) -> StoreSizes:
    """Every size of the store at ``root``: what its files show (another queue's files, the
    index files' contents), which what is given must agree with; else the options; else the
    broker config file; else the broker's default (``taken_from`` DEFAULT). Raises UsageError
    when what is given contradicts the files or itself, CorruptData when the files disagree
    among themselves. ``root``: a store root, or the view a command opened (its commit log
    listing is taken, not made again)."""
    view = root if isinstance(root, StoreView) else None
    p = view.paths if view is not None else paths.StorePaths(root)
    conf = given.broker_config

    log = view.commit_log_listing() if view is not None else discover(p.commitlog, required=False)
    found = (Size(log.mapped_file_size, FILES, str(log.segments[0].path))
             if log.segments and log.mapped_file_size else None)
    commit_log = _pick("commit log file size", found,
                       _given(given.commit_log, "--commitlog-size", conf, MAPPED_FILE_SIZE_COMMIT_LOG,
                              DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG),
                       DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG, p.commitlog)

    said = _given(given.consume_queue, "--cq-size", conf, MAPPED_FILE_SIZE_CONSUME_QUEUE, DEFAULT_CQ_FILE_SIZE,
                  consume_queue_file_size)
    consume_queue = _pick("consume queue file size", _queue_files_show(p.consumequeue, said, "--cq-size",
                                                                       CQ_STORE_UNIT_SIZE),
                          said, DEFAULT_CQ_FILE_SIZE, p.consumequeue)
    said = _given(given.batch_consume_queue, "--batch-cq-size", conf, MAPPER_FILE_SIZE_BATCH_CONSUME_QUEUE,
                  DEFAULT_BATCH_CQ_FILE_SIZE)
    batch = _pick("batch consume queue file size", _queue_files_show(p.batch_consumequeue, said, "--batch-cq-size"),
                  said, DEFAULT_BATCH_CQ_FILE_SIZE, p.batch_consumequeue)
    slots, entries = index_geometry(
        p.index, _given(given.index_slots, "--index-slots", conf, MAX_HASH_SLOT_NUM, DEFAULT_MAX_HASH_SLOT_NUM),
        _given(given.index_entries, "--index-entries", conf, MAX_INDEX_NUM, DEFAULT_MAX_INDEX_NUM))
    for size, least, what in ((consume_queue, CQ_STORE_UNIT_SIZE, "consume queue file size"),
                              (batch, 1, "batch consume queue file size"), (slots, 1, "index slot count"),
                              (entries, 2, "index entry count")):
        if size.value < least:
            raise UsageError(f"{what} {size.value} ({size.shown_by}): no broker writes a store with it")
    return StoreSizes(commit_log, consume_queue, batch, slots, entries, given.assume_defaults)


def said_sizes(given: GivenSizes) -> tuple[Size | None, Size | None, Size | None]:
    """The consume queue file size, index slot and entry counts the options or the broker
    config say (None where neither does), as :func:`store_sizes` takes them: salvage
    --to-store holds them against its source's files."""
    conf = given.broker_config
    return (_given(given.consume_queue, "--cq-size", conf, MAPPED_FILE_SIZE_CONSUME_QUEUE, DEFAULT_CQ_FILE_SIZE,
                   consume_queue_file_size),
            _given(given.index_slots, "--index-slots", conf, MAX_HASH_SLOT_NUM, DEFAULT_MAX_HASH_SLOT_NUM),
            _given(given.index_entries, "--index-entries", conf, MAX_INDEX_NUM, DEFAULT_MAX_INDEX_NUM))


def plan_queue_file_size(root: pathlib.Path, given: GivenSizes) -> int | None:
    """The consume queue file size a recovery plan's load takes from the option or the broker
    config: where the store's files do not show one (none left, or their first files
    disagree with none after them); None where they show it (the plan reads it from them, and
    :func:`store_sizes` holds what was given against them)."""
    said = _given(given.consume_queue, "--cq-size", given.broker_config, MAPPED_FILE_SIZE_CONSUME_QUEUE,
                  DEFAULT_CQ_FILE_SIZE, consume_queue_file_size)
    if said is None:
        return None
    shown = queue_file_size_shown(paths.StorePaths(root).consumequeue, CQ_STORE_UNIT_SIZE)
    return said.value if shown.size is None else None


def _given(value: int | None, option: str, conf: BrokerConfig | None, key: str, default: int,
           effective=lambda v: v) -> Size | None:
    """What the option and the broker config say of one setting (``effective``: the
    broker's getter); they must agree when both say it."""
    said = Size(effective(value), OPTION, f"{option} {value}") if value is not None else None
    setting = conf.int_setting(key, default) if conf is not None else None
    if setting is None:
        return said
    from_conf = Size(effective(setting[0]), BROKER_CONFIG, setting[1])
    if said is not None and said.value != from_conf.value:
        raise UsageError(f"{said.shown_by} ({said.value} as the broker uses it) and {from_conf.shown_by} "
                         f"({from_conf.value}) disagree")
    return said or from_conf


def _pick(name: str, found: Size | None, given: Size | None, default: int, where) -> Size:
    if found is not None and given is not None and given.value != found.value:
        raise UsageError(f"the store's {name} is {found.value} ({found.shown_by}), not {given.value} "
                         f"({given.shown_by})", where)
    return found or given or Size(default, DEFAULT, f"nothing in the store shows the {name}")


def _queue_files_show(root: pathlib.Path, said: Size | None, option: str, unit_size: int = 1) -> Size | None:
    """The queue file size the files show (store/consumequeue.queue_file_size_shown). Where
    they disagree, what the option or broker config says decides (the files of another size
    are the damage the plan reports); with nothing said, CorruptData naming the option."""
    shown = queue_file_size_shown(root, unit_size)
    if shown.disagreement is not None and said is None:
        raise CorruptData(f"queue files of different sizes: {shown.disagreement}: {option} (or --broker-config) "
                          f"says which the broker uses", root)
    return Size(shown.size, FILES, shown.path) if shown.size is not None else None


def consume_queue_file_sizes(root: pathlib.Path) -> set[int]:
    """The file sizes the first files of the queues under ``root`` show (salvage compares them)."""
    sizes = set()
    for size, _path, _step in first_queue_files(root):
        sizes.add(size)
        if len(sizes) > 1:
            break
    return sizes


def index_geometry(directory: pathlib.Path, slots: Size | None, entries: Size | None,
                   newest: bool = False) -> tuple[Size, Size]:
    """(maxHashSlotNum, maxIndexNum) of the store's index files: what the contents of the
    newest file with entries show (the read side's inference), which settings given must
    agree with. When no file has entries: the settings given, the one left out worked out
    from the files' size; with neither given, the size split in the broker's default 1:4
    ratio (an assumption: taken_from DEFAULT). The settings given, or the broker's defaults,
    when there are no index files. Files of different sizes are an error, unless ``newest``:
    then only the files of the newest one's size count (the geometry the broker last wrote
    with, for a new store written from this one: salvage --to-store)."""
    files = [(path, path.stat().st_size) for path in index_file_paths(directory)]
    if not files:
        why = "no index file shows"
        return (slots or Size(DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT, f"{why} the index slot count"),
                entries or Size(DEFAULT_MAX_INDEX_NUM, DEFAULT, f"{why} the index entry count"))
    sizes = {size for _, size in files}
    last_path, size = files[-1]
    if len(sizes) > 1 and not newest:
        # the broker maps every index file at the size its settings give (a shorter file grows
        # to it): with both settings said, the files of another size are damage, as for queues
        if slots is None or entries is None:
            raise CorruptData(f"index files of different sizes: {sorted(sizes)}: --index-slots and --index-entries "
                              f"(or --broker-config) say which the broker uses", directory)
        size = index_file_size(slots.value, entries.value)
        if size not in sizes:
            raise UsageError(f"{slots.shown_by} and {entries.shown_by} give index files of {size} bytes: the "
                             f"store's are {sorted(sizes)}", directory)
    files = [(path, file_size) for path, file_size in files if file_size == size]
    for path, _ in reversed(files):
        found = infer_index_geometry(path)
        if found is not None:
            found_slots, found_entries = found
            return (_pick("index slot count", Size(found_slots, FILES, str(path)), slots, 0, directory),
                    _pick("index entry count", Size(found_entries, FILES, str(path)), entries, 0, directory))
    counted = _entries_counted(last_path)  # past FIRST_INDEX: its header says entries were put in it
    if (slots is not None and entries is not None and index_file_size(slots.value, entries.value) > size
            and counted > FIRST_INDEX):
        return slots, entries  # entries written, none left to show the geometry: cut short, it grows back
    if counted > FIRST_INDEX and (slots is None or entries is None):
        # entries put in it, and none shows the geometry: cut short or damaged, its size is no geometry's to
        # go by; the broker maps it at its settings' size, as for files of different sizes
        what = (f"more than {size} bytes hold: it is cut short" if entry_position(1, counted) > size else
                f"and no slot and entry counts read its {size} bytes as the broker writes them: cut short or damaged")
        raise CorruptData(f"index file {last_path.name}: its header counts {counted} entries, {what}; "
                          f"--index-slots and --index-entries (or --broker-config) say the size the broker maps it at",
                          last_path)
    shown_by = f"the size of {last_path} ({size} bytes, no entries)"
    if slots is not None:
        count = entries.value if entries is not None else index_num_for(size, slots.value)
        guess = (slots, entries or Size(count or 0, FILES, f"{shown_by} with {slots.shown_by}"))
    elif entries is not None:
        guess = (Size(hash_slot_num_for(size, entries.value) or 0, FILES, f"{shown_by} with {entries.shown_by}"),
                 entries)
    else:
        ratio = default_geometry(size) or (0, 0)
        why = f"{shown_by} split in the broker's default 1:4 slot/entry ratio"
        guess = (Size(ratio[0], DEFAULT, why), Size(ratio[1], DEFAULT, why))
    if not guess[0].value or not guess[1].value or index_file_size(guess[0].value, guess[1].value) != size:
        what = ("the default 1:4 slot/entry ratio" if slots is None and entries is None
                else f"{guess[0].value} slots and {guess[1].value} entries")
        raise UsageError(f"index files of {size} bytes, none with entries to tell their slot and entry "
                         f"counts, cannot hold {what}: give both", directory)
    return guess


def _entries_counted(path: pathlib.Path) -> int:
    """The indexCount an index file's header holds (0 when it has no whole header)."""
    header = read_index_header(path)
    return header.index_count if header is not None else 0
