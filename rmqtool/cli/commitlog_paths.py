"""Where a store's commit log is when it is not ROOT/commitlog: ``--commitlog-path`` (several
directories, the broker's storePathCommitLog), ``--readonly-commitlog-path``
(readOnlyCommitLogStorePaths), or the broker's config file (``--broker-config``), one
definition for every command that reads the commit log. The command runs with the paths
given for its STORE (store/commitlog_paths.given_paths), so every view of that store it opens
reads the log across them; the command's own code does not change.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import pathlib
import typing
from typing import Annotated, List, Optional

import typer

from rmqtool.errors import UsageError

CommitLogPath = Annotated[List[str], typer.Option(
    "--commitlog-path", metavar="DIR[,DIR...]",
    help="The commit log's directories when not STORE/commitlog, as the broker's storePathCommitLog lists them "
         "(comma-separated or repeated): read as one log.")]
ReadOnlyCommitLogPath = Annotated[List[str], typer.Option(
    "--readonly-commitlog-path", metavar="DIR[,DIR...]",
    help="The broker's readOnlyCommitLogStorePaths: directories it loads commit log files from but never writes.")]
BrokerConfigPaths = Annotated[Optional[pathlib.Path], typer.Option(
    "--broker-config", metavar="FILE",
    help="The broker's own config file: its storePathCommitLog and readOnlyCommitLogStorePaths say where the "
         "commit log is, its timerPrecisionMs and timerRollWindowSlot how the timer store is read.")]


def paths_of_options(commitlog_path, readonly_commitlog_path, broker_config, root, semantics=None):
    """The CommitLogPaths the options give for ``root`` (None: ROOT/commitlog); also for a
    command of two stores that takes them per side (``diff``'s ``--commitlog-path-a``).
    ``broker_config``: a path, or the BrokerConfig read from it, its String settings read as the
    store's broker version reads them (``semantics``: the command's --semantics)."""
    from rmqtool.recovery.semantics import config_reading
    from rmqtool.store.broker_conf import BrokerConfig, read_broker_config
    from rmqtool.store.commitlog_paths import from_broker_config, from_option

    given = from_option(commitlog_path, readonly_commitlog_path)
    if given is None and readonly_commitlog_path:
        raise UsageError("--readonly-commitlog-path goes with --commitlog-path (the broker reads read-only "
                         "paths only with several commit log paths)")
    if given is None and broker_config is not None:
        conf = broker_config if isinstance(broker_config, BrokerConfig) else read_broker_config(broker_config)
        given = from_broker_config(conf, root, config_reading(root, conf, semantics))
    return given


def commit_log_path_words(root) -> list[str]:
    """``--commitlog-path`` and ``--readonly-commitlog-path`` as given for ``root``, as the words
    of a command run again (an interrupted repair's finish), each directory absolute; a broker
    config's paths go with the writers' own ``--broker-config`` (cli/sizes.size_words)."""
    import os

    from rmqtool.store.commitlog_paths import paths_given

    paths = paths_given(root)
    if paths is None or paths.source != "--commitlog-path":
        return []
    words = ["--commitlog-path", ",".join(os.path.abspath(d) for d in paths.writable)]
    if paths.readonly:
        words += ["--readonly-commitlog-path", ",".join(os.path.abspath(d) for d in paths.readonly)]
    return words


def _refuse_on_other_families(roots, cl, ro) -> None:
    """A store of another family has no commit log to find elsewhere: the options are refused
    there (every command alike), not passed over."""
    from rmqtool.store.family import ROCKETMQ, detect_family
    flags = [flag for flag, value in (("--commitlog-path", cl), ("--readonly-commitlog-path", ro)) if value]
    for root in roots if flags else ():
        family = detect_family(root) if root is not None and not str(root).count("://") else None
        if family is not None and family is not ROCKETMQ:
            raise UsageError(f"{', '.join(flags)}: RocketMQ options; a {family.title} store takes none of them", root)


def commit_log_paths_option(store: str):
    """Decorate a command whose STORE parameter is ``store`` (a path or a list of them): it takes
    ``--commitlog-path``, ``--readonly-commitlog-path`` and (unless it has it already, as the
    writers' ``--broker-config`` of ``@size_options``) ``--broker-config``."""

    def decorate(fn):
        hints = typing.get_type_hints(fn, include_extras=True)
        params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in inspect.signature(fn).parameters.values()]
        owns_config = "broker_config" not in {p.name for p in params}
        added = [inspect.Parameter("commitlog_path", inspect.Parameter.KEYWORD_ONLY, default=[], annotation=CommitLogPath),
                 inspect.Parameter("readonly_commitlog_path", inspect.Parameter.KEYWORD_ONLY, default=[],
                                   annotation=ReadOnlyCommitLogPath)]
        if owns_config:
            added.append(inspect.Parameter("broker_config", inspect.Parameter.KEYWORD_ONLY, default=None,
                                           annotation=BrokerConfigPaths))
        keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]

        @functools.wraps(fn)
        def command(*args, **kwargs):
            from rmqtool.cli.params import check_semantics
            from rmqtool.store.broker_conf import given_config, read_broker_config
            from rmqtool.store.commitlog_paths import given_paths
            cl, ro = kwargs.pop("commitlog_path", []), kwargs.pop("readonly_commitlog_path", [])
            config = kwargs.pop("broker_config", None) if owns_config else kwargs.get("broker_config")
            roots = kwargs.get(store)
            roots = list(roots) if isinstance(roots, (list, tuple)) else [roots]
            with contextlib.ExitStack() as stack:
                _refuse_on_other_families(roots, cl, ro)
                if cl or ro or config is not None:
                    if len(roots) != 1:
                        raise UsageError("--commitlog-path and --broker-config name one store's commit log: "
                                         "give one store")
                    conf = read_broker_config(config) if config is not None else None
                    if conf is not None and not owns_config:
                        kwargs["broker_config"] = conf  # the writer's sizes read this one reading
                    stack.enter_context(given_config(roots[0], conf))  # its settings no file shows (the timer's)
                    semantics = check_semantics(kwargs.get("semantics"))  # recover's, append's, redispatch's
                    stack.enter_context(given_paths(roots[0], paths_of_options(cl, ro, conf, roots[0], semantics)))
                return fn(*args, **kwargs)

        command.__signature__ = inspect.Signature(keyword + added)
        command.__annotations__ = {p.name: p.annotation for p in keyword + added}
        return command

    return decorate
