"""rmqtool diff STORE_A STORE_B: two stores side by side (a master and its slave, a store and its copy).

Rows (stdout), one kind with a ``record`` each: commit_log_divergence, message_differs,
message_only_in, queue_range, checkpoint_field, config_entry, then a summary (two QMQ stores:
message_log_divergence, action_log_divergence, subject_range, group_progress and the message and
checkpoint rows, through their family's tools). Exit 0 when the stores are equal, 3 when they differ.
"""
from __future__ import annotations

import pathlib
from typing import List, Optional

import typer

from rmqtool.cli.commitlog_paths import paths_of_options
from rmqtool.cli.common import OutputFormat, boundary
from rmqtool.cli.params import examples
from rmqtool.errors import ExitCode
from rmqtool.report.records import with_human_times
from rmqtool.report.sink import Sink


def register(app: typer.Typer) -> None:
    app.command("diff", epilog=examples(
        "rmqtool diff /data/master/store /data/slave/store",
        "rmqtool diff /data/master/store /data/slave/store --broker-config-a /opt/rocketmq/conf/broker-a.conf",
        "rmqtool diff /data/master/store /data/slave/store -f jsonl | jq -c 'select(.record == \"message_only_in\")'",
        "rmqtool diff A B -f jsonl | jq -e 'select(.record == \"summary\") | .messages_only_in_a == 0'"))(diff)


@boundary
def diff(
    store_a: pathlib.Path = typer.Argument(..., help="The first store root (e.g. the master's)."),
    store_b: pathlib.Path = typer.Argument(..., help="The second store root (e.g. the slave's)."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, jsonl or json."),
    wide: bool = typer.Option(False, "--wide", help="Table: every column, not only those that fit the width."),
    columns: Optional[str] = typer.Option(None, "--columns", metavar="A,B,C", help="Table: exactly these columns."),
    commitlog_path_a: List[str] = typer.Option([], "--commitlog-path-a", metavar="DIR[,DIR...]",
                                               help="STORE_A's commit log directories when not STORE_A/commitlog "
                                                    "(its storePathCommitLog; comma-separated or repeated)."),
    commitlog_path_b: List[str] = typer.Option([], "--commitlog-path-b", metavar="DIR[,DIR...]",
                                               help="STORE_B's, as --commitlog-path-a."),
    broker_config_a: Optional[pathlib.Path] = typer.Option(None, "--broker-config-a", metavar="FILE",
                                                           help="STORE_A's broker config file: its storePathCommitLog "
                                                                "and readOnlyCommitLogStorePaths."),
    broker_config_b: Optional[pathlib.Path] = typer.Option(None, "--broker-config-b", metavar="FILE",
                                                           help="STORE_B's, as --broker-config-a."),
):
    """Where two stores differ: the first commit log divergence, messages on one side only, queue ranges, checkpoint and config.

    On two QMQ stores: the message and action logs, messages on one side only, subjects'
    consumer log ranges, groups' progress and the checkpoints.
    """
    from rmqtool.families import tools_at_both

    given = [name for name, value in (("--commitlog-path-a", commitlog_path_a), ("--commitlog-path-b", commitlog_path_b),
                                      ("--broker-config-a", broker_config_a), ("--broker-config-b", broker_config_b))
             if value]
    result = tools_at_both(store_a, store_b).diff(store_a, store_b, flags=given, paths=lambda: (
        paths_of_options(commitlog_path_a, [], broker_config_a, store_a),
        paths_of_options(commitlog_path_b, [], broker_config_b, store_b)))
    table = fmt == OutputFormat.table
    with Sink(fmt.value, kind=result.kind, wide=wide, select=columns) as sink:
        for row in result.rows:
            sink.row(with_human_times(row) if table else row)
    if not result.equal:
        raise typer.Exit(int(ExitCode.CORRUPT))
