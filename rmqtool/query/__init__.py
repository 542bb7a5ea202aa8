"""Lookups: the broker's queryMessage, lookMessageByOffset and getOffsetInQueueByTime,
answered from a store's files alone (``rmqtool query``).

* :mod:`.by_key` -- messages by KEYS or UNIQ_KEY through the index files' hash chains,
  without hash-collision false positives, with a commit log scan where the index does
  not reach;
* :mod:`.by_offset` -- a message by commit log offset, offset msgId, or
  topic/queue/queue offset through the consume queue;
* :mod:`.by_time` -- the queue offset for a store timestamp;
* :mod:`.explain` -- the ``--explain`` trace and the notes every result carries.
"""
from rmqtool.query.by_key import KeyQueryResult, query_by_key
from rmqtool.query.by_offset import OffsetLookup, message_at_offset, message_by_msg_id, message_by_queue_offset
from rmqtool.query.by_time import TimeLookup, offset_by_time
from rmqtool.query.explain import Trace

__all__ = ["KeyQueryResult", "OffsetLookup", "TimeLookup", "Trace", "message_at_offset",
           "message_by_msg_id", "message_by_queue_offset", "offset_by_time", "query_by_key"]
