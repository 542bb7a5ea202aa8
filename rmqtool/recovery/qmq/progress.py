"""Consumer progress as ``CheckpointManager`` keeps it: the action checkpoint, then every
replayed action through ``MaxSequencesUpdater``.

A PULL raises the group's max pulled message sequence and the consumer's pull (pull-log
sequence), creating the group (with the action's broadcast flag) and the consumer as needed;
a RANGE_ACK raises the ack of a consumer that exists. FOREVER_OFFLINE changes nothing here
(the store does not subscribe a listener for it). ``PullLogBuilder`` builds the pull-log
memtable from the same PULLs; it moves the action checkpoint only when that memtable rolls
(10 minutes or its capacity), which a start's replay is assumed not to reach.
"""
from __future__ import annotations

import dataclasses

from rmqtool.formats.qmq.checkpoint import ActionCheckpoint


@dataclasses.dataclass(slots=True)
class GroupState:
    broadcast: bool
    pull: int  # max pulled message sequence
    consumers: dict[str, list[int]]  # consumer id -> [pull, ack] (pull-log sequences)


def progress_of(checkpoint: ActionCheckpoint) -> dict[tuple[str, str], GroupState]:
    return {(g.subject, g.group): GroupState(g.broadcast, g.max_pulled_message_sequence,
                                             {c.consumer_id: [c.pull, c.ack] for c in g.consumers})
            for g in checkpoint.groups}


def apply_action(progress: dict[tuple[str, str], GroupState], action: dict) -> None:
    key = (action["subject"], action["group"])
    if action["type"] == "PULL":
        group = progress.get(key)
        if (-1 if group is None else group.pull) < action["last_message_sequence"]:
            group = progress.setdefault(key, GroupState(action["broadcast"], -1, {}))
            group.pull = action["last_message_sequence"]
        group = progress.get(key)
        consumer = group.consumers.get(action["consumer_id"]) if group else None
        if (-1 if consumer is None else consumer[0]) < action["last_sequence"]:
            group = progress.setdefault(key, GroupState(action["broadcast"], -1, {}))
            group.consumers.setdefault(action["consumer_id"], [-1, -1])[0] = action["last_sequence"]
    elif action["type"] == "RANGE_ACK":
        group = progress.get(key)
        consumer = group.consumers.get(action["consumer_id"]) if group else None
        if consumer is not None and consumer[1] < action["last_sequence"]:
            consumer[1] = action["last_sequence"]


def progress_rows(progress: dict[tuple[str, str], GroupState]) -> list[dict]:
    """Per subject and group, in that order: broadcast, pull, consumers {id: [pull, ack]}."""
    return [{"subject": s, "group": g, "broadcast": st.broadcast, "pull": st.pull,
             "consumers": {c: list(v) for c, v in sorted(st.consumers.items())}}
            for (s, g), st in sorted(progress.items())]
