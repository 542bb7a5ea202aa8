"""Reading the broker's ``config/*.json`` files, with the broker's ``.bak`` fallback.

``ConfigManager.load`` reads ``<name>``; when it is missing or empty, or does not parse, or
its manager's decode throws on it (formats.config.decode_refusal), it reads ``<name>.bak``
instead (a missing or empty .bak leaves the tables empty; a broken one fails the load). This
reader does the same and says which file it used. A leftover ``<name>.tmp`` means a
4.x broker stopped in the middle of persisting. Read-only; the text is parsed by
rmqtool.formats.config.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib

from rmqtool.errors import FormatError, StoreAccessError, StoreNotFound
from rmqtool.findings import (CONFIG_BAK_USED, CONFIG_TMP_LEFTOVER, CONFIG_TOO_LARGE, CONFIG_UNPARSEABLE,
                              Consequence, Finding, finding)
from rmqtool.formats.config import (BAK_SUFFIX, KNOWN_CONFIG_FILES, TMP_SUFFIX, ConfigFileSpec, decode_refusal,
                                    loads_fastjson)
from rmqtool.store.paths import CONFIG_DIR
from rmqtool.store.small_file import read_head

# The broker's config files hold tables of topics, groups and offsets: tens of MB on the
# largest clusters. A file past this is damage (a sparse or garbage file), refused unread.
MAX_CONFIG_FILE_SIZE = 256 << 20

# the files whose loss forgets where consumers (and the schedule service) were
OFFSET_TABLE_FILES = ("consumerOffset.json", "delayOffset.json")

MAIN = "main"
BAK = "bak"


@dataclasses.dataclass(slots=True, frozen=True)
class ConfigFile:
    name: str  # e.g. "consumerOffset.json"
    path: str  # the file the document came from (the main path when neither holds anything)
    source: str | None  # MAIN, BAK, or None: nothing loaded (nothing to load, or too large to read)
    document: object  # the parsed fastjson (dicts with int keys where fastjson wrote them); None if nothing
    findings: tuple[Finding, ...]

    @property
    def spec(self) -> ConfigFileSpec | None:
        return KNOWN_CONFIG_FILES.get(self.name)


def parse_config_bytes(data: bytes, path: str | os.PathLike):
    """Decode and parse one file's bytes; FormatError names the file and the byte offset."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError("not UTF-8 text", path, exc.start) from None
    try:
        return loads_fastjson(text)
    except FormatError as exc:
        char = exc.offset or 0
        raise FormatError(exc.message, path, len(text[:char].encode("utf-8", "surrogatepass"))) from None


def _too_large(size: int) -> str:
    return f"{size} bytes, more than the {MAX_CONFIG_FILE_SIZE} a broker's config file can sanely hold; not read"


def read_config_bytes(path: str | os.PathLike) -> bytes:
    """One config file's bytes. A file past MAX_CONFIG_FILE_SIZE is refused unread
    (FormatError), so memory never follows a damaged file's size."""
    path = pathlib.Path(path)
    # bounded even if the file grows meanwhile: one byte past the limit says it did
    data, _size = read_head(path, MAX_CONFIG_FILE_SIZE + 1, what="config file",
                            refuse=lambda size: _too_large(size) if size > MAX_CONFIG_FILE_SIZE else None)
    if len(data) > MAX_CONFIG_FILE_SIZE:
        raise FormatError(f"grew past {MAX_CONFIG_FILE_SIZE} bytes while being read; not read", path)
    return data


def _read_optional(path: pathlib.Path, findings: list[Finding]) -> bytes | None:
    """The file's bytes; None when it does not exist, or is too large to read (a finding)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreAccessError(f"cannot read ({exc.strerror})", path) from None
    if size > MAX_CONFIG_FILE_SIZE:
        findings.append(Finding(CONFIG_TOO_LARGE, str(path), None,
                                _too_large(size)))
        return None
    try:
        return read_config_bytes(path)
    except StoreNotFound:  # gone since the stat
        return None


def _decoded(data: bytes, path: pathlib.Path, name: str):
    """The document the broker's load gets from ``data``; FormatError where its parse or its
    manager's decode throws (ConfigManager.load catches either and tries the .bak)."""
    document = parse_config_bytes(data, path)
    why = decode_refusal(name, document)
    if why is not None:
        raise FormatError(f"the broker's decode of it throws: {why}", path)
    return document


def read_config_file(config_dir: str | os.PathLike, name: str) -> ConfigFile:
    """Load ``config_dir/name`` the way ConfigManager.load does. Raises FormatError when the
    broker's load fails (the .bak it falls back to broken too: loadBak returns false and the
    broker exits). A broken main file with no .bak is a finding: the broker starts with the
    table empty. A file too large to read is a finding and counts as absent."""
    main_path = pathlib.Path(config_dir) / name
    bak_path = main_path.with_name(name + BAK_SUFFIX)
    tmp_path = main_path.with_name(name + TMP_SUFFIX)
    findings: list[Finding] = []
    if tmp_path.exists():
        findings.append(Finding(CONFIG_TMP_LEFTOVER, str(tmp_path), None,
                                "left by a persist that did not finish; the broker ignores it"))
    read_before = len(findings)
    main = _read_optional(main_path, findings)
    main_too_large = len(findings) > read_before
    main_error: FormatError | None = None
    if main:  # ConfigManager.load: null or empty -> loadBak
        try:
            return ConfigFile(name, str(main_path), MAIN, _decoded(main, main_path, name), tuple(findings))
        except FormatError as exc:
            main_error = exc
    bak = _read_optional(bak_path, findings)
    if bak:
        try:
            document = _decoded(bak, bak_path, name)
        except FormatError as exc:
            if main_error is not None:
                raise FormatError(f"{main_error.message}; and its .bak: {exc.message}", main_path,
                                  main_error.offset) from None
            raise
        if main_error is not None:  # the .bak stands in: the next persist writes the main file again
            findings.append(finding(CONFIG_UNPARSEABLE, main_path, main_error.offset, main_error.message,
                                    consequence=Consequence.REBUILT))
        if main_too_large:
            text = f"{name} is too large to read; this is its .bak (the broker loads it if {name} fails)"
        else:
            why = "does not load" if main_error else ("is empty" if main is not None else "is missing")
            text = f"{name} {why}; the broker loads this .bak"
        findings.append(Finding(CONFIG_BAK_USED, str(bak_path), None, text))
        return ConfigFile(name, str(bak_path), BAK, document, tuple(findings))
    if main_error is not None:  # loadBak finds nothing and returns true: the table starts empty
        forgotten = Consequence.PROGRESS_LOST if name in OFFSET_TABLE_FILES else Consequence.NONE
        findings.append(finding(CONFIG_UNPARSEABLE, main_path, main_error.offset,
                                f"{main_error.message}; no .bak stands in: the broker starts with its table "
                                f"empty and writes that over this file at its next persist", consequence=forgotten))
    return ConfigFile(name, str(main_path), None, None, tuple(findings))


def _base_name(file_name: str) -> str:
    for suffix in (BAK_SUFFIX, TMP_SUFFIX):
        if file_name.endswith(suffix):
            return file_name[:-len(suffix)]
    return file_name


@dataclasses.dataclass(slots=True)
class ConfigDir:
    path: str
    files: dict[str, ConfigFile]  # by name, e.g. "topics.json"
    findings: list[Finding]

    def all_findings(self) -> list[Finding]:
        return self.findings + [f for c in self.files.values() for f in c.findings]


def read_config_dir(store_root: str | os.PathLike) -> ConfigDir:
    """Every ``*.json`` of ``<store>/config`` (a missing dir is empty). A file that cannot
    be read becomes a finding, so one broken file does not hide the others."""
    root = pathlib.Path(store_root)
    if not root.is_dir():
        raise StoreNotFound("no such directory", root)
    directory = root / CONFIG_DIR
    files: dict[str, ConfigFile] = {}
    findings: list[Finding] = []
    if not directory.is_dir():
        return ConfigDir(str(directory), files, findings)
    try:
        names = sorted({_base_name(e.name) for e in os.scandir(directory) if e.is_file()})
    except OSError as exc:
        raise StoreAccessError(f"cannot list directory ({exc.strerror})", directory) from None
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            files[name] = read_config_file(directory, name)
        except FormatError as exc:
            findings.append(Finding(CONFIG_UNPARSEABLE, exc.path, exc.offset, exc.message))
    return ConfigDir(str(directory), files, findings)


def known_topics(config_dir) -> set[str] | None:
    """Topics of topics.json (as the broker would load it, .bak fallback included), None
    when it cannot tell (no file, or none that parses)."""
    table = _topic_config_table(config_dir)
    return None if table is None else set(table)


def _topic_config_table(config_dir) -> dict | None:
    """topics.json's topicConfigTable as the broker loads it; None when there is none to read."""
    try:
        doc = read_config_file(config_dir, "topics.json").document
    except FormatError:
        return None
    table = doc.get("topicConfigTable") if isinstance(doc, dict) else None
    return table if isinstance(table, dict) else None


def batch_topics(store_root) -> set[str]:
    """Topics whose queues are 5.x batch consume queues: a batchconsumequeue/ directory, or
    ``queue.type`` BatchCQ among their attributes in topics.json."""
    from rmqtool.store.paths import StorePaths
    paths = StorePaths(store_root)
    found = {d.name for d in paths.batch_consumequeue.iterdir() if d.is_dir()} if paths.batch_consumequeue.is_dir() \
        else set()
    return found | (configured_batch_topics(paths.config) or set())


def configured_batch_topics(config_dir) -> set[str] | None:
    """The topics topics.json gives ``queue.type`` BatchCQ (QueueTypeUtils.getCQType: any
    other topic, listed or not, is SimpleCQ to a 5.x broker); None when there is no
    topics.json to tell."""
    table = _topic_config_table(config_dir)
    if table is None:
        return None
    found = set()
    for name, topic in table.items():
        attributes = topic.get("attributes") if isinstance(topic, dict) else None
        if isinstance(attributes, dict) and any(k.lstrip("+") == "queue.type" and str(v) == "BatchCQ"
                                                 for k, v in attributes.items()):
            found.add(name)
    return found
