"""The store size options, one definition for every command that writes files (append,
recover, redispatch), and how they become the engine's GivenSizes.

A size comes from what the store's files show first; these options (or the broker's own
config file) say it when nothing does, and must agree with the files when something does.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import pathlib
import typing
from typing import Annotated, Optional

import typer

_WHEN = "Default: what the store's files show, else --broker-config's"

CqSize = Annotated[Optional[int], typer.Option(
    "--cq-size", min=20, metavar="BYTES",
    help=f"Consume queue file size (mappedFileSizeConsumeQueue; rounded up to 20-byte units, as the broker "
         f"does). {_WHEN}, else 6000000.")]
BatchCqSize = Annotated[Optional[int], typer.Option(
    "--batch-cq-size", min=46, metavar="BYTES",
    help=f"5.x batch consume queue file size (mapperFileSizeBatchConsumeQueue). {_WHEN}, else 13800000.")]
IndexSlots = Annotated[Optional[int], typer.Option(
    "--index-slots", min=1, help=f"Hash slots per index file (maxHashSlotNum). {_WHEN}, else 5000000.")]
IndexEntries = Annotated[Optional[int], typer.Option(
    "--index-entries", min=2, help=f"Entries per index file (maxIndexNum). {_WHEN}, else 20000000.")]
BrokerConfigFile = Annotated[Optional[pathlib.Path], typer.Option(
    "--broker-config", metavar="FILE",
    help="The broker's own config file (broker.conf, as given to mqbroker -c): the sizes it sets "
         "(mappedFileSizeCommitLog, mappedFileSizeConsumeQueue, mapperFileSizeBatchConsumeQueue, maxHashSlotNum, "
         "maxIndexNum) where the store's files do not show them.")]
AssumeDefaults = Annotated[bool, typer.Option(
    "--assume-defaults",
    help="Write files whose size nothing shows in the broker's default size (without it, such a write is "
         "refused: a broker configured otherwise would read them at the wrong places).")]


@dataclasses.dataclass(frozen=True)
class SizeOptions:
    """The size options as a command receives them (``@size_options``)."""
    cq_size: int | None = None
    batch_cq_size: int | None = None
    index_slots: int | None = None
    index_entries: int | None = None
    broker_config: pathlib.Path | None = None  # or the BrokerConfig read from it
    assume_defaults: bool = False

    def given(self, commitlog_size: int | None = None):
        return given_sizes(commitlog_size=commitlog_size,  # shallow: a BrokerConfig stays one
                           **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)})


# each size option's parameter, in the order --help lists them
_SIZE_PARAMETERS = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                      annotation=annotation)
                    for name, annotation, default in (
                        ("cq_size", CqSize, None), ("batch_cq_size", BatchCqSize, None),
                        ("index_slots", IndexSlots, None), ("index_entries", IndexEntries, None),
                        ("broker_config", BrokerConfigFile, None), ("assume_defaults", AssumeDefaults, False))]


def size_options(fn):
    """The one definition of the size options on every command that writes files: the
    command's ``sizes: SizeOptions`` parameter becomes the six options in its place (typer
    reads the signature), and the command is called with them gathered into ``sizes``."""
    hints = typing.get_type_hints(fn, include_extras=True)
    parameters = []
    for p in inspect.signature(fn).parameters.values():
        if p.name == "sizes":
            parameters += _SIZE_PARAMETERS
        else:
            parameters.append(p.replace(annotation=hints.get(p.name, p.annotation)))
    names = [p.name for p in _SIZE_PARAMETERS]

    @functools.wraps(fn)
    def command(*args, **kwargs):
        return fn(*args, sizes=SizeOptions(**{n: kwargs.pop(n) for n in names if n in kwargs}), **kwargs)

    command.__signature__ = inspect.Signature(parameters)
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    return command


def given_sizes(*, cq_size: int | None = None, batch_cq_size: int | None = None, index_slots: int | None = None,
                index_entries: int | None = None, broker_config: pathlib.Path | None = None,
                assume_defaults: bool = False, commitlog_size: int | None = None):
    """The options as the engine's GivenSizes (the broker config file read here, unless
    ``@commit_log_paths_option`` read it already: a bad one is refused before anything else)."""
    from rmqtool.engine.store_sizes import GivenSizes  # the engine loads only for a command that writes
    from rmqtool.store.broker_conf import BrokerConfig, read_broker_config

    conf = broker_config if isinstance(broker_config, BrokerConfig) or broker_config is None \
        else read_broker_config(broker_config)
    return GivenSizes(commit_log=commitlog_size, consume_queue=cq_size, batch_consume_queue=batch_cq_size,
                      index_slots=index_slots, index_entries=index_entries, broker_config=conf,
                      assume_defaults=assume_defaults)


def size_words(given) -> list[str]:
    """The size options of ``given`` (GivenSizes) as command-line words: what a command that
    finishes an interrupted repair must be run with again (from anywhere: paths absolute)."""
    words = []
    for flag, value in (("--cq-size", given.consume_queue), ("--batch-cq-size", given.batch_consume_queue),
                        ("--index-slots", given.index_slots), ("--index-entries", given.index_entries),
                        ("--broker-config", os.path.abspath(given.broker_config.path) if given.broker_config
                         else None)):
        if value is not None:
            words += [flag, str(value)]
    return words + (["--assume-defaults"] if given.assume_defaults else [])
