"""The broker's own topics and what their records carry: transactions, delayed messages,
the 5.x timer wheel and POP's revive log. Names and properties only, no I/O.

Mirrors, at rocketmq-all-4.9.8 and 5.3.3: ``common/.../topic/TopicValidator.java`` (the
names), ``common/.../message/MessageConst.java`` (the properties),
``broker/.../transaction/queue/TransactionalMessageUtil.java`` (the op record: tag ``d``,
body = the half messages' queue offsets joined by ``,``), ``broker/.../schedule/
ScheduleMessageService.java`` (queue id = delay level - 1), ``store/.../timer/
TimerMessageStore.java`` (``buildDeleteKey``: ``realTopic + "+" + uniqKey``) and
``store/.../pop/PopCheckPoint.java``, ``AckMsg.java``, ``BatchAckMsg.java`` (5.3.3, the
fastjson field names of a revive record's body), ``common/.../PopAckConstants.java``.

* ``RMQ_SYS_TRANS_HALF_TOPIC``: a prepared (half) message as stored, sysFlag reset to 0,
  its topic and queue in REAL_TOPIC / REAL_QID. Commit copies it to the real topic (sysFlag
  COMMIT, preparedTransactionOffset = the half record's commit log offset); commit and
  rollback both put an op record. A check that re-puts a half message records the
  original's queue offset in TRAN_PREPARED_QUEUE_OFFSET.
* ``RMQ_SYS_TRANS_OP_HALF_TOPIC``: op records, queue id = the half queue's id, tag ``d``
  (removed), body = half queue offsets (one per record at 4.9.8, several joined by ``,`` at 5.x).
* ``SCHEDULE_TOPIC_XXXX``: a delayed message until it is due, queue id = level - 1,
  DELAY = the level, REAL_TOPIC / REAL_QID.
* ``rmq_sys_wheel_timer``: a 5.x timer message until it fires: REAL_TOPIC / REAL_QID,
  TIMER_OUT_MS = when it fires, TIMER_ROLL_TIMES = times it was put back for a later round;
  TIMER_DEL_UNIQKEY = ``topic+uniqKey`` of the timer message this record recalls (deletes).
* ``rmq_sys_REVIVE_LOG_<cluster>``: POP's revive log. Tag ``ck``: a check point (a pop of
  ``n`` messages from queue offset ``so`` of topic ``t`` queue ``q`` by group ``c``, at ``pt``,
  invisible for ``it`` ms; ``d`` = each message's offset - ``so``); ``ack`` / ``bAck``: their
  acks (``ao``, or ``aol`` a list).
"""
from __future__ import annotations

SYSTEM_TOPIC_PREFIX = "rmq_sys_"  # TopicValidator.SYSTEM_TOPIC_PREFIX
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TIMER_TOPIC = SYSTEM_TOPIC_PREFIX + "wheel_timer"
REVIVE_TOPIC_PREFIX = SYSTEM_TOPIC_PREFIX + "REVIVE_LOG_"  # + the broker's cluster name

# MessageConst properties these records carry (REAL_TOPIC, REAL_QID, DELAY, PGROUP: properties.py)
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_ID = "__transactionId__"
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"

OP_REMOVE_TAG = "d"  # TransactionalMessageUtil.REMOVE_TAG
OP_OFFSET_SEPARATOR = ","  # TransactionalMessageUtil.OFFSET_SEPARATOR
TIMER_DELETE_KEY_SEPARATOR = "+"  # TimerMessageStore.buildDeleteKey
POP_CK_TAG, POP_ACK_TAG, POP_BATCH_ACK_TAG = "ck", "ack", "bAck"  # PopAckConstants

# fastjson names of PopCheckPoint / AckMsg / BatchAckMsg fields (@JSONField(name=...))
CK_TOPIC, CK_QUEUE_ID, CK_GROUP, CK_START_OFFSET, CK_NUM = "t", "q", "c", "so", "n"
CK_POP_TIME, CK_INVISIBLE_TIME, CK_OFFSET_DIFFS, CK_BIT_MAP = "pt", "it", "d", "bm"
ACK_OFFSET, BATCH_ACK_OFFSETS = "ao", "aol"
