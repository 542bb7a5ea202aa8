"""A broker config file given by the operator (``--broker-config FILE``): the store sizes
the broker reads from it (MessageStoreConfig's settings), as BrokerStartup reads them.
Read-only; the text is parsed by rmqtool.formats.broker_conf.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib

from rmqtool.errors import FormatError, NotAStore, StoreAccessError, StoreNotFound
from rmqtool.formats.broker_conf import java_parse_int, parse_properties
from rmqtool.store.given import PerStore

MAX_BROKER_CONFIG_SIZE = 16 << 20  # a broker.conf is a page of settings; anything this big is not one


def java_trim(text: str) -> str:
    """String.trim: every char up to U+0020 off both ends."""
    return text.strip("".join(chr(c) for c in range(0x21)))


@dataclasses.dataclass(frozen=True)
class StringReading:
    """How a broker reads the file's String settings: 5.x's properties2Object trims them, 4.9's
    keeps their blanks (formats/broker_conf.py); and what says which broker that is."""
    trims: bool
    reason: str


FIVE_X = StringReading(True, "trimmed as 5.x's properties2Object trims a String setting")


@dataclasses.dataclass(frozen=True)
class BrokerConfig:
    path: str
    settings: dict[str, str]  # every key as Properties.load read it

    def int_setting(self, name: str, default: int) -> tuple[int, str] | None:
        """(the value the broker runs with, what says so) of an int setting the file names;
        None when it does not name it. A value Integer.parseInt refuses is skipped by
        properties2Object: the broker keeps ``default``, and the reason says so."""
        if name not in self.settings:
            return None
        raw = self.settings[name]
        value = java_parse_int(raw)
        if value is None:
            return default, (f"{self.path}: {name}={raw!r} is no int to Integer.parseInt, which the broker "
                             f"skips without a word: it keeps its default {default}")
        return value, f"{self.path}: {name}={value}"

    def string_setting(self, name: str, reading: StringReading) -> str | None:
        """A String setting as properties2Object hands it to the setter under ``reading``;
        None when the file does not name it."""
        raw = self.settings.get(name)
        return java_trim(raw) if raw is not None and reading.trims else raw

    def bool_setting(self, name: str) -> tuple[bool, str] | None:
        """(the value the broker runs with, what says so) of a boolean setting the file names;
        None when it does not name it. properties2Object reads it with Boolean.parseBoolean:
        true only for "true" in any case, anything else is false."""
        if name not in self.settings:
            return None
        raw = self.settings[name]
        return raw.lower() == "true", f"{self.path}: {name}={raw}"


def read_broker_config(path: str | os.PathLike) -> BrokerConfig:
    """The broker config file at ``path``; errors name it (StoreNotFound, StoreAccessError,
    FormatError where the broker's own Properties.load would throw)."""
    p = pathlib.Path(path)
    try:
        size = p.stat().st_size
        if p.is_dir():
            raise NotAStore("a directory, not a broker config file", p)
        if size > MAX_BROKER_CONFIG_SIZE:
            raise FormatError(f"{size} bytes: not a broker config file (more than {MAX_BROKER_CONFIG_SIZE})", p)
        data = p.read_bytes()
    except FileNotFoundError:
        raise StoreNotFound("no such broker config file", p) from None
    except OSError as exc:
        raise StoreAccessError(f"cannot read the broker config file ({exc.strerror})", p) from None
    try:
        settings = parse_properties(data)
    except FormatError as exc:
        raise FormatError(exc.message, p) from None
    return BrokerConfig(str(p), settings)


# The broker config a command was given for its STORE (``--broker-config``): readers of that
# store that depend on a setting no file of the store shows (the timer wheel's precision) take
# it from here while the command runs.
_GIVEN: PerStore[BrokerConfig] = PerStore("rmqtool_broker_config")


def given_config(root: str | os.PathLike, conf: BrokerConfig | None):
    """While the block runs, readers of ``root`` see ``conf``."""
    return _GIVEN.given(root, conf)


def config_given(root: str | os.PathLike) -> BrokerConfig | None:
    """The broker config given for ``root`` (None: none)."""
    return _GIVEN.get(root)
