"""rmqtool dump rocksdbcq|rocksdbconfig PATH: the 5.x RocksDB consume queue and config store, read offline.

Both need the rocksdb extra (rocksdict); a store without them dumps nothing (said on stderr).
"""
from __future__ import annotations

import itertools
import pathlib
from typing import Optional

import typer

from rmqtool.cli.common import OutputFormat, boundary
from rmqtool.cli.dump import (ColumnsOpt, FormatOpt, FromQueueOffsetOpt, LimitOpt, QueueOpt, ToQueueOffsetOpt,
                              TopicOpt, WideOpt, _finish, dump_app)
from rmqtool.cli.params import check_range, examples
from rmqtool.report.sink import Sink, render_document, warn


def register(app: typer.Typer) -> None:
    """The RocksDB kinds are commands of ``rmqtool dump`` (dump_app, added by cli/dump.py)."""


@dump_app.command("rocksdbcq", epilog=examples(
    "rmqtool dump rocksdbcq /data/store -t OrderTopic -q 0",
    "rmqtool dump rocksdbcq /data/store/consumequeue -f jsonl"))
@boundary
def dump_rocksdbcq(
    path: pathlib.Path = typer.Argument(..., help="Store dir, or its consumequeue/ dir holding the RocksDB files."),
    fmt: OutputFormat = FormatOpt,
    topic: Optional[str] = TopicOpt,
    queue: Optional[int] = QueueOpt,
    from_offset: Optional[int] = FromQueueOffsetOpt,
    to_offset: Optional[int] = ToQueueOffsetOpt,
    limit: Optional[int] = LimitOpt,
    wide: bool = WideOpt,
    columns: Optional[str] = ColumnsOpt,
):
    """RocksDB consume queue units (storeType=defaultRocksDB or rocksdbCQDoubleWriteEnable), as dump
    consumequeue's rows with store_timestamp."""
    from rmqtool.inspect.rocksdb_dumps import RocksDump, rocksdb_cq_rows  # a RocksDB store's reader: when asked for
    check_range("--from-offset", from_offset, "--to-offset", to_offset)
    findings: list = []
    dump = RocksDump()
    sink = Sink(fmt.value, kind="cq_unit", wide=wide, select=columns)
    sink.rows(itertools.islice(rocksdb_cq_rows(path, dump, topic, queue, from_offset, to_offset, findings), limit))
    if dump.note:
        warn(f"rmqtool: {dump.note}")
    _finish(sink, findings)


@dump_app.command("rocksdbconfig", epilog=examples(
    "rmqtool dump rocksdbconfig /data/store -f json",
    "rmqtool dump rocksdbconfig /data/store --type consumerOffsets -f json",
    "rmqtool dump rocksdbconfig /data/store/config/topics -f json"))
@boundary
def dump_rocksdbconfig(
    path: pathlib.Path = typer.Argument(..., help="Store dir, its config/ dir, or config/topics|subscriptionGroups|"
                                        "consumerOffsets/."),
    fmt: OutputFormat = FormatOpt,
    config_type: Optional[str] = typer.Option(None, "--type", metavar="topics|subscriptionGroups|consumerOffsets",
                                              help="Only this config (rocksDBConfigToJson -t)."),
):
    """The RocksDB config store as mqadmin rocksDBConfigToJson prints it, read offline (no broker)."""
    from rmqtool.inspect.rocksdb_dumps import RocksDump, rocksdb_config
    findings: list = []
    dump = RocksDump()
    doc = rocksdb_config(path, dump, config_type, findings)
    render_document(doc, fmt.value, title="rocksdbconfig")  # None: null in JSON
    if dump.note:
        warn(f"rmqtool: {dump.note}")
    _finish(None, findings)
