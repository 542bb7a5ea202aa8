"""The stores a fleet job reads: paths, ``NAME=PATH``, or a file of them (``--stores-from``).

A store's name is what its rows carry (the ``store_name`` column and partition); it defaults
to the store directory's name, and to the parent's name for a directory called ``store``
(``/data/broker-a/store`` is ``broker-a``), as brokers' stores usually sit.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re

from rmqtool.errors import NotAStore, RmqError, StoreAccessError, StoreNotFound, UsageError

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")  # a partition directory name: no '=', '/', spaces


@dataclasses.dataclass(frozen=True)
class StoreSpec:
    name: str
    path: str  # a local path or a URI pyarrow's filesystem layer opens (file://, hdfs://, s3://)


def default_name(path: str) -> str:
    p = pathlib.PurePosixPath(path.rstrip("/").split("://", 1)[-1])
    return p.parent.name if p.name == "store" and p.parent.name else p.name


def parse_store(text: str) -> StoreSpec:
    """``PATH`` or ``NAME=PATH``."""
    name, sep, path = text.partition("=")
    if not sep or "/" in name or "://" in text.split("=", 1)[0]:
        name, path = "", text
    path = path.strip()
    if not path:
        raise UsageError(f"a store is PATH or NAME=PATH, not {text!r}")
    if "://" not in path:
        path = os.path.abspath(path)  # executors may run elsewhere: rows name the store by its full path
    name = name.strip() or default_name(path)
    if not _NAME.match(name):
        raise UsageError(f"store name {name!r}: letters, digits, '.', '_' and '-' only (it names a partition); "
                         f"give one with NAME=PATH")
    return StoreSpec(name, path)


def read_store_list(path: str | os.PathLike) -> list[str]:
    """The lines of a --stores-from file: a store a line, blank lines and # comments skipped."""
    try:
        text = pathlib.Path(path).read_text(encoding="utf-8")
    except IsADirectoryError:  # the wrong kind of input, as a file given for a store
        raise NotAStore("--stores-from: a directory, not a file of stores", path) from None
    except FileNotFoundError:
        raise StoreNotFound("--stores-from: no such file", path) from None
    except OSError as exc:
        raise StoreAccessError(f"--stores-from: cannot read ({exc.strerror})", path) from None
    except UnicodeDecodeError as exc:  # not a list of stores: say where, as a store file's damage is said
        raise NotAStore(f"--stores-from: not UTF-8 text (byte 0x{exc.object[exc.start]:02x}); a list of stores "
                        f"is UTF-8, a store a line", path, exc.start) from None
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def store_specs(stores: list[str], stores_from: str | os.PathLike | None = None) -> list[StoreSpec]:
    """Every store asked for, names unique."""
    texts = list(stores) + (read_store_list(stores_from) if stores_from else [])
    if not texts:
        raise UsageError("no store given (STORE... or --stores-from FILE)")
    specs = [parse_store(t) for t in texts]
    seen: dict[str, str] = {}
    for s in specs:
        if s.name in seen and seen[s.name] != s.path:
            raise UsageError(f"two stores are named {s.name!r} ({seen[s.name]} and {s.path}): name them with NAME=PATH")
        seen[s.name] = s.path
    return list({s.name: s for s in specs}.values())


def require_stores(specs: list[StoreSpec]) -> dict:
    """{name: StoreView} of the local stores (:func:`open_stores`); the first store that cannot
    be read raises its error."""
    _found, views, bad = open_stores(specs)
    if bad:
        raise bad[0]
    return views


def open_stores(specs: list[StoreSpec]) -> tuple[list[StoreSpec], dict, list[RmqError]]:
    """(the stores that can be read, {name: StoreView} of the local ones, the error of each
    other): each checked before a Spark session is started for them, a missing path exit 8, a
    file or a directory holding no store (or a family rmqtool does not read yet) exit 4, as in
    every command. A local store is opened once; a store behind a URI is checked where it lies
    and opened by the tasks that stage it."""
    from rmqtool.spark import remote
    found, views, bad = [], {}, []
    for spec in specs:
        try:
            if remote.is_uri(spec.path):
                require_remote(spec.path)
            else:
                view = open_local(spec.path)
                for directory in (spec.path, *map(str, getattr(view, "commit_log_directories", ()))):
                    require_utf8_path(directory)
                views[spec.name] = view
        except RmqError as exc:
            bad.append(exc)
            continue
        found.append(spec)
    return found, views, bad


def require_utf8_path(path: str) -> None:
    """A store's directory names its rows (``store_path``, ``file``), and Parquet's string
    columns hold UTF-8 only: a name with a byte that is not UTF-8 is refused in one line
    (exit 2) before Spark starts, where an executor stopped on it with a traceback."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError as exc:
        byte = ord(path[exc.start]) - 0xDC00  # os.fsdecode keeps such a byte as U+DC80..U+DCFF
        raise UsageError(f"a path that is not UTF-8 (byte 0x{byte:02x}): the tables name each file by its path, "
                         f"as UTF-8 text; give the store by a UTF-8 path (a symbolic link to it)", path) from None


def require_remote(uri: str) -> None:
    """A store behind a URI the export's tasks read: a RocketMQ store with its own commit log
    (the tasks stage its byte ranges). A QMQ store, or one whose records DLedger's entry log
    holds, is refused in one line (exit 4), as its local path would not be: the tasks of
    those read local files."""
    from rmqtool.spark import remote
    from rmqtool.store.dledger import dledger_refusal
    from rmqtool.store.family import QMQ, UnsupportedFamily
    from rmqtool.store.paths import COMMITLOG_DIR, DLEDGER_DIR_PREFIX
    family, dirs = remote.require_store(uri)
    if family is QMQ:
        raise UnsupportedFamily("a QMQ store behind a URI: spark export, query and stats read a QMQ store "
                                "from a local path (a shared or mounted filesystem); spark verify stages it", uri)
    if COMMITLOG_DIR not in dirs and any(d.startswith(DLEDGER_DIR_PREFIX) for d in dirs):
        raise dledger_refusal(uri, "spark export (which query and stats run first)")


def open_local(path: str):
    """The view of a local store of any family spark reads (RocketMQ's StoreView, QMQ's QmqView)."""
    from rmqtool.store.family import QMQ, detect_family
    if detect_family(path) is QMQ:
        from rmqtool.store.qmq.view import open_qmq_store
        return open_qmq_store(path)
    from rmqtool.store.dledger import refuse_dledger
    from rmqtool.store.view import open_store
    refuse_dledger(path, "spark export (which query and stats run first)")  # its tasks split plain commit log segments
    return open_store(path)
