"""What a spark command reads: the stores it names (each checked before Spark starts), the
session, tasks done as lines on stderr, and the tables of an export (one given with
``--table``, or made for this command in a temporary directory removed at the end)."""
from __future__ import annotations

import contextlib
import pathlib
import shutil
import tempfile


def specs(stores, stores_from):
    """The stores asked for, none of them opened (verify: a store that is not there is a row
    of its own)."""
    from rmqtool.spark.stores import store_specs
    return store_specs(list(stores or []), stores_from)


def opened(stores, stores_from):
    """(the stores asked for that can be read, {name: StoreView} of the local ones, the error
    of each other): each checked and opened once before Spark starts; the export plans its
    tasks from these views. A store a running broker holds is said on stderr, as dump says it."""
    from rmqtool.report.sink import warn
    from rmqtool.spark.stores import open_stores
    found, views, bad = open_stores(specs(stores, stores_from))
    for view in views.values():
        if view.live is not None:
            warn(view.live.note())
    return found, views, bad


def session(master, conf):
    from rmqtool.spark.session import parse_conf, spark_session
    return spark_session(master, parse_conf(conf))


def task_progress(flag):
    """``--progress``: a callback saying each count of tasks done once, on stderr."""
    from rmqtool.report.progress import progress_enabled
    from rmqtool.report.sink import warn

    if not progress_enabled(flag):
        return None
    said = {}

    def show(label: str, done: int, total: int) -> None:
        if said.get(label) != done:
            said[label] = done
            warn(f"rmqtool: {label}: {done}/{total} tasks")
    return show


def check_table(table: str) -> None:
    """``--table``: an export's directory, whole: a missing path exit 8; a file, a directory
    that holds no export (a store), or an export that never finished (no completion record:
    a task failed, or it was stopped; its tables lack what was not read) exit 4, as a store
    is checked."""
    from rmqtool.errors import NotAStore, StoreNotFound
    from rmqtool.spark import remote
    from rmqtool.spark.parts import COMPLETE_FILE, MESSAGES_DIR, is_complete
    if remote.is_uri(table):
        import pyarrow.fs as pafs
        fs, root = remote.filesystem(table)
        kind = fs.get_file_info(root.rstrip("/")).type
        there = kind == pafs.FileType.Directory and \
            fs.get_file_info(f"{root.rstrip('/')}/{MESSAGES_DIR}").type == pafs.FileType.Directory
        missing = kind == pafs.FileType.NotFound
    else:
        path = pathlib.Path(table)
        there, missing = (path / MESSAGES_DIR).is_dir(), not path.exists()
    if missing:
        raise StoreNotFound("no such directory", table)
    if not there:
        raise NotAStore(f"not an export directory (no {MESSAGES_DIR}/ inside)", table)
    if not is_complete(table):
        raise NotAStore(f"no {COMPLETE_FILE}, the record an export writes once every task finished: one that "
                        f"stopped part way (its tables may lack messages), or one made before rmqtool wrote it; "
                        f"export again", table)


@contextlib.contextmanager
def export_tables(found, views, table, master, conf, progress):
    """(session, the export directory to read): ``table`` as given (:func:`check_table`), or the
    stores ``found`` (opened: ``views``, :func:`opened`) exported into a temporary directory that
    goes when the block ends."""
    if table is not None:
        yield session(master, conf), table
        return
    from rmqtool.spark.export import export as run_export

    spark = session(master, conf)
    temp = tempfile.mkdtemp(prefix="rmqtool-spark-")
    try:
        run_export(spark, found, pathlib.Path(temp) / "export", views=views, progress=task_progress(progress))
        yield spark, str(pathlib.Path(temp) / "export")
    finally:
        shutil.rmtree(temp, ignore_errors=True)
