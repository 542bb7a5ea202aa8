"""`rmqtool offsets`: each committed offset against its queue as the broker's next start
loads it (cut where info cuts it: recovery/loaded_end.queue_cut)."""
from __future__ import annotations

import os

from rmqtool.recovery.loaded_end import queue_cut, simulate_for_info
from rmqtool.store.consumer_offsets import ConsumerOffsets, consumer_offsets
from rmqtool.store.view import StoreView, open_store


def loaded_offsets(store: str | os.PathLike | StoreView, group: str | None = None,
                   topic: str | None = None) -> ConsumerOffsets:
    """The offsets command's rows and findings (store/consumer_offsets.py), the queues cut as
    the next start leaves them: a crash's recovery that cuts the log cuts them too."""
    view = store if isinstance(store, StoreView) else open_store(store, simulate=simulate_for_info)
    return consumer_offsets(view, group=group, topic=topic, commit_log_max_offset=queue_cut(view))
