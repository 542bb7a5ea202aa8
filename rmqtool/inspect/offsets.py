"""`rmqtool offsets`: each committed offset against its queue as the broker's next start
leaves it (recovery/loaded_end.loaded_queues: the simulated start's queues, recover's
ranges, when the start is simulated; else the files cut where info cuts them)."""
from __future__ import annotations

import os

from rmqtool.recovery.loaded_end import loaded_queues, simulate_for_info
from rmqtool.store.consumer_offsets import ConsumerOffsets, consumer_offsets
from rmqtool.store.view import StoreView, open_store


def loaded_offsets(store: str | os.PathLike | StoreView, group: str | None = None,
                   topic: str | None = None) -> ConsumerOffsets:
    """The offsets command's rows and findings (store/consumer_offsets.py), the queues cut as
    the next start leaves them: a crash's recovery that cuts the log cuts them too, and its
    dispatch puts back what a queue's files lost."""
    view = store if isinstance(store, StoreView) else open_store(store, simulate=simulate_for_info)
    return consumer_offsets(view, group=group, topic=topic, queues=loaded_queues(view))
