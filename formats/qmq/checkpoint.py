"""Checkpoint snapshots: ``checkpoint/message-checkpoint.<20-digit>`` and
``checkpoint/action-checkpoint.<20-digit>``, UTF-8 text.

Mirrors ``qmq-store/.../store/SnapshotStore.java`` (the file name's number is the
snapshot's version), ``MessageCheckpointSerde.java`` (version 2) and
``ActionCheckpointSerde.java`` (version 3)::

    message checkpoint           action checkpoint
    2                            3
    <message-log offset>         <action-log offset>
    <subject>/<max sequence>     <subject>/<group count>
    ...                          <group>/<broadcast 0|1>/<max pulled message sequence>/<consumer count>
                                 <consumerId>/<pull>/<ack>        (pull-log sequences)
                                 ...

Fields are split on ``/`` (Guava ``Splitter.on('/')``), so a name holding ``/`` cannot be
read back; lines end at ``\\n``, ``\\r`` or ``\\r\\n`` (Guava ``LineReader``); an empty line
or the end ends the list. Numbers are read by ``Long.parseLong`` / ``Integer.parseInt`` /
``Short.parseShort``. A file that fails to parse is skipped by the broker's load (logged),
so the parsers here raise ``CheckpointSyntaxError`` exactly where the serde throws.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .java import NumberFormatError, java_parse

MESSAGE_CHECKPOINT_PREFIX = "message-checkpoint."
ACTION_CHECKPOINT_PREFIX = "action-checkpoint."
MESSAGE_CHECKPOINT_VERSION = 2
ACTION_CHECKPOINT_VERSION = 3

_LINE_END = re.compile(r"\r\n|\r|\n")


class CheckpointSyntaxError(ValueError):
    """Where the broker's serde throws: the snapshot file is skipped at load."""


def _number(text: str | None, kind: str = "long") -> int:
    try:
        return java_parse(text, kind)
    except NumberFormatError as exc:  # the exception as the engine reports it: its class and message
        raise CheckpointSyntaxError(f"java.lang.NumberFormatException: {exc}") from None


def snapshot_version(file_name: str, prefix: str) -> int:
    """``SnapshotStore.parseSnapshotVersion``: the number after the prefix."""
    return java_parse(file_name[len(prefix):])


class _Lines:
    """Guava's LineReader over a string: None at the end."""

    def __init__(self, text: str):
        self._lines = _LINE_END.split(text)
        if self._lines and self._lines[-1] == "":
            self._lines.pop()  # a final line ending ends the last line, it starts none
        self._next = 0

    def read(self) -> str | None:
        if self._next >= len(self._lines):
            return None
        self._next += 1
        return self._lines[self._next - 1]


def _decode(data: bytes) -> str:
    # new String(data, UTF_8) replaces malformed input rather than failing
    return data.decode("utf-8", errors="replace")


def _version(lines: _Lines, expected: int) -> None:
    version = _number(lines.read(), "int")
    if version != expected:
        raise CheckpointSyntaxError(f"snapshot content version {version}, not {expected}")


@dataclass(frozen=True)
class MessageCheckpoint:
    offset: int  # message-log offset the consumer logs were dispatched to
    max_sequences: dict[str, int] = field(default_factory=dict)


def parse_message_checkpoint(data: bytes) -> MessageCheckpoint:
    lines = _Lines(_decode(data))
    _version(lines, MESSAGE_CHECKPOINT_VERSION)
    offset = _number(lines.read())
    sequences: dict[str, int] = {}
    while (line := lines.read()):
        parts = line.split("/")
        if len(parts) < 2:
            raise CheckpointSyntaxError(f"no max sequence in {line!r}")
        sequences[parts[0]] = _number(parts[1])
    return MessageCheckpoint(offset, sequences)


def build_message_checkpoint(cp: MessageCheckpoint) -> bytes:
    text = f"{MESSAGE_CHECKPOINT_VERSION}\n{cp.offset}\n"
    text += "".join(f"{subject}/{seq}\n" for subject, seq in cp.max_sequences.items())
    # a subject read from a directory name that is not UTF-8 (Python keeps its bytes as lone
    # surrogates): Java's File.list decoded it with U+FFFD in their place, and writes that
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace").encode("utf-8")


@dataclass(frozen=True)
class ConsumerProgress:
    consumer_id: str
    pull: int  # pull-log sequences
    ack: int


@dataclass(frozen=True)
class GroupProgress:
    subject: str
    group: str
    broadcast: bool
    max_pulled_message_sequence: int
    consumers: tuple[ConsumerProgress, ...] = ()


@dataclass(frozen=True)
class ActionCheckpoint:
    offset: int  # action-log offset the progress was replayed to
    groups: tuple[GroupProgress, ...] = ()


def _fields(line: str | None, count: int) -> list[str]:
    if line is None:
        raise CheckpointSyntaxError("the file ends inside a group")
    parts = line.split("/")
    if len(parts) < count:
        raise CheckpointSyntaxError(f"{count} fields expected in {line!r}")
    return parts


def parse_action_checkpoint(data: bytes) -> ActionCheckpoint:
    lines = _Lines(_decode(data))
    _version(lines, ACTION_CHECKPOINT_VERSION)
    offset = _number(lines.read())
    groups: dict[tuple[str, str], GroupProgress] = {}  # a HashBasedTable: a repeated pair replaces
    while (subject_line := lines.read()):
        subject, group_count = _fields(subject_line, 2)[:2]
        for _ in range(_number(group_count, "int")):
            group, broadcast, pulled, consumer_count = _fields(lines.read(), 4)[:4]
            consumers = {}
            is_broadcast = _number(broadcast, "short") != 0
            max_pulled = _number(pulled)
            for _ in range(_number(consumer_count, "int")):
                consumer_id, pull, ack = _fields(lines.read(), 3)[:3]
                consumers[consumer_id] = ConsumerProgress(consumer_id, _number(pull), _number(ack))
            groups[(subject, group)] = GroupProgress(subject, group, is_broadcast, max_pulled,
                                                     tuple(consumers.values()))
    return ActionCheckpoint(offset, tuple(groups.values()))


def build_action_checkpoint(cp: ActionCheckpoint) -> bytes:
    by_subject: dict[str, list[GroupProgress]] = {}
    for g in cp.groups:
        by_subject.setdefault(g.subject, []).append(g)
    out = [f"{ACTION_CHECKPOINT_VERSION}", f"{cp.offset}"]
    for subject, groups in by_subject.items():
        out.append(f"{subject}/{len(groups)}")
        for g in groups:
            out.append(f"{g.group}/{int(g.broadcast)}/{g.max_pulled_message_sequence}/{len(g.consumers)}")
            out += [f"{c.consumer_id}/{c.pull}/{c.ack}" for c in g.consumers]
    return ("\n".join(out) + "\n").encode("utf-8")
