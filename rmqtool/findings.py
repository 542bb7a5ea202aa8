"""One registry of findings: what a reader or check saw that is not as the broker writes it.

Each finding has a stable camelCase ID (scripts match on it) and a default severity,
in the manner of git's fsck message IDs. Readers yield or collect findings and go on.
"""
from __future__ import annotations

import dataclasses
import enum


class Severity(str, enum.Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class Consequence(str, enum.Enum):
    """What the broker's next start does about what a finding shows."""
    WONT_START = "wontStart"  # the broker's load fails, or its start never finishes
    DROPS_MESSAGES = "dropsMessages"  # recovery cuts the commit log: messages are gone for good
    UNREACHABLE = "unreachable"  # messages stay on disk but no consumer or lookup reaches them
    REBUILT = "rebuilt"  # the broker repairs it by itself
    NONE = "none"  # the broker does not care (it may matter to an operator or a client)
    SERVED_EMPTY = "servedEmpty"  # QMQ: sequences served as SUCCESS without their message
    PROGRESS_LOST = "progressLost"  # consumer progress goes back or is forgotten (QMQ; RocketMQ offset files)
    REDELIVERS = "redelivers"  # timer: messages already delivered are delivered again
    STRANDS = "strands"  # timer: messages stay in the timer log but are never delivered
    LOOPS = "loops"  # timer: dequeue walks a slot's chain forever: no timer message is delivered after it


# Consequence -> what it means for the operator, most pressing first (the HTML report's headings)
CONSEQUENCE_MEANINGS: dict[Consequence, str] = {
    Consequence.WONT_START: "the broker's load fails, or its start never finishes",
    Consequence.DROPS_MESSAGES: "the next start's recovery cuts the commit log: messages are gone for good",
    Consequence.UNREACHABLE: "messages stay on disk but no consumer or lookup reaches them",
    Consequence.SERVED_EMPTY: "QMQ: sequences served as SUCCESS without their message",
    Consequence.PROGRESS_LOST: "consumer progress goes back or is forgotten",
    Consequence.REDELIVERS: "timer: messages already delivered are delivered again",
    Consequence.STRANDS: "timer: messages stay in the timer log but are never delivered",
    Consequence.LOOPS: "timer: dequeue walks a slot's chain forever: no timer message is delivered after it",
    Consequence.REBUILT: "the broker repairs it by itself at its next start",
    Consequence.NONE: "the broker does not care (it may matter to an operator or a client)",
}


# ID -> (default severity, what it means). Add new IDs here; never rename one.
REGISTRY: dict[str, tuple[Severity, str]] = {
    # segments (commit log, consume queue, index files)
    "segmentNameInvalid": (Severity.WARNING, "a file whose name is not a 20-digit offset"),
    "segmentSizeOdd": (Severity.ERROR, "a segment whose size differs from the store's mapped file size"),
    "segmentGap": (Severity.ERROR, "segments that do not follow one another"),
    "segmentOverlap": (Severity.ERROR, "segments whose offset ranges overlap"),
    "segmentEmpty": (Severity.WARNING, "a segment of 0 bytes"),
    "segmentUnreadable": (Severity.ERROR, "a segment the OS refused to read"),
    "segmentAfterEnd": (Severity.ERROR, "a commit log segment after the end of the log that holds data"),
    "commitLogEnd": (Severity.INFO, "where the commit log ends: the last segment's written length"),
    # a commit log over several directories (storePathCommitLog with the multi-path splitter)
    "commitLogFileDuplicated": (Severity.ERROR, "a commit log file whose name is in two of the commit log paths"),
    "commitLogFileMisplaced": (Severity.WARNING, "a commit log file in another path than the broker's rule puts it"),
    "commitLogPathMissing": (Severity.WARNING, "a commit log path that does not exist"),
    "commitLogFilesNotLoaded": (Severity.WARNING, "commit log files in ROOT/commitlog while the broker's paths leave it out"),
    # commit log records
    "bodyCrcMismatch": (Severity.ERROR, "the body CRC field does not match the body"),
    "propertyCrcMismatch": (Severity.ERROR, "the __CRC32# property does not match the record"),
    "innerBatchPropertyInvalid": (Severity.ERROR, "INNER_BASE or INNER_NUM is not a number: a 5.x broker fails the record"),
    "recordMagicInvalid": (Severity.ERROR, "no record magic code where a record should start"),
    "recordSizeInvalid": (Severity.ERROR, "a totalSize that cannot be right (negative, too small, past the file end)"),
    "recordLengthMismatch": (Severity.ERROR, "the record's field lengths do not add up to its totalSize"),
    "recordOffsetMismatch": (Severity.WARNING, "the record's physicalOffset field differs from where it lies"),
    "recordQuarantined": (Severity.WARNING, "a damaged record recover --keep-past-damage replaced by one of its size"),
    "recordTruncated": (Severity.ERROR, "a record cut off by the end of its file"),
    "propertiesInvalidUtf8": (Severity.WARNING, "properties bytes that are not valid UTF-8"),
    "topicInvalidUtf8": (Severity.WARNING, "topic bytes that are not valid UTF-8"),
    "blankRecordInvalid": (Severity.ERROR, "an end-of-file blank record whose totalSize is not the bytes left"),
    "blankRecordMissing": (Severity.WARNING, "a segment that is not the last one ends without a blank record"),
    "trailingGarbage": (Severity.ERROR, "non-zero bytes after the last record of a segment"),
    "bodyDecompressFailed": (Severity.ERROR, "a body flagged compressed that does not decompress with its codec"),
    "recordTorn": (Severity.ERROR, "a last record whose header is there but not the rest: recovery cuts the log there"),
    "storeNotLoadable": (Severity.ERROR, "a store the broker's load refuses or never finishes starting on"),
    "recoveryCutsCommitLog": (Severity.ERROR, "a record the broker's recovery rejects with records after it: "
                              "the log is cut there and all that follows is dropped"),
    "messageUnreachable": (Severity.ERROR, "messages the broker will no longer serve after its next start: their "
                           "commit log file is missing, or their consume queue unit is lost and not dispatched again"),
    "propertyCrcUnreadable": (Severity.ERROR, "properties end like a __CRC32# entry whose name or digits are damaged"),
    "propertyCrcMissing": (Severity.ERROR, "a record without a __CRC32# entry between records that carry one"),
    "propertyCrcMissingAtEnd": (Severity.WARNING, "records without a __CRC32# entry after the last that carries "
                                "one: a broker with forceVerifyPropCRC cuts the log at the first of them"),
    "queueOffsetGap": (Severity.ERROR, "a topic-queue's queue offsets skip ahead between two records"),
    "queueOffsetRepeat": (Severity.ERROR, "a topic-queue's queue offset repeats or goes back"),
    "storeTimestampBackwards": (Severity.INFO, "a record stored earlier than the record before it (the clock stepped back)"),
    # checkpoint and markers
    "checkpointInvalid": (Severity.WARNING, "a checkpoint file of another size than the broker's 4096 bytes (the "
                                            "broker reads its fields in its first 4096, a shorter file zero-extended)"),
    "abortFilePresent": (Severity.WARNING, "the abort file exists: the last broker did not shut down cleanly"),
    "abortFileUnexpected": (Severity.WARNING, "an abort file that is neither empty nor a PID"),
    "lockFileUnexpected": (Severity.WARNING, "a lock file that does not start with the bytes 'lock', or a directory"),
    "checkpointMissing": (Severity.WARNING, "no checkpoint file: the broker starts from a zeroed one"),
    "checkpointZeroed": (Severity.WARNING, "a checkpoint whose timestamps are all zero"),
    "checkpointAheadOfData": (Severity.WARNING, "a checkpoint timestamp after the last stored message: flushed data is gone"),
    "checkpointWindow": (Severity.INFO, "messages stored after a checkpoint timestamp: what may not have been flushed"),
    "recoveryStartFile": (Severity.INFO, "the commit log file the broker's next recovery starts from, and why"),
    # config/*.json
    "configUnparseable": (Severity.ERROR, "a config file that is not fastjson text, or (consumerOffset.json, delayOffset.json) one the broker's decode throws on"),
    "configBakUsed": (Severity.WARNING, "a config file missing, empty or broken: the broker loads its .bak"),
    "configTmpLeftover": (Severity.WARNING, "a .tmp config file left by an interrupted persist"),
    "configTableInvalid": (Severity.ERROR, "a config file that parses but whose tables are not as the broker writes them"),
    "configTooLarge": (Severity.ERROR, "a config file too large to be one the broker wrote: not read"),
    "configBakStale": (Severity.WARNING, "the .bak the broker falls back to is older than the broken main file"),
    "delayOffsetOutOfRange": (Severity.WARNING, "a delayOffset.json offset outside its SCHEDULE_TOPIC_XXXX queue's [min, max]"),
    "consumerOffsetTopicMissing": (Severity.WARNING, "consumer offsets for a topic that topics.json no longer has"),
    "topicQueueCountMismatch": (Severity.WARNING, "consume queue directories that topics.json's queue counts do not cover"),
    "consumerOffsetTableInvalid": (Severity.ERROR, "a consumerOffset.json that loads no offsetTable: the broker has no committed offsets"),
    "consumerOffsetKeyInvalid": (Severity.WARNING, "a consumerOffset.json key that is not topic@group: the broker keeps it and no lookup finds it"),
    "consumerOffsetBelowMin": (Severity.WARNING, "a committed offset below its queue's min offset: messages deleted unconsumed"),
    "consumerOffsetAboveMax": (Severity.ERROR, "a committed offset past its queue's max offset: the queue lost consumed messages"),
    "consumerOffsetForMissingQueue": (Severity.WARNING, "a committed offset above 0 for a queue with no consume queue"),
    # consume queues
    "queueDirInvalid": (Severity.WARNING, "an entry under a consume queue root that is not TOPIC/QUEUEID/"),
    "consumeQueueFileMisaligned": (Severity.ERROR, "a consume queue file named off the unit size"),
    "consumeQueueHole": (Severity.ERROR, "unwritten (all-zero) units before the end of a consume queue"),
    "consumeQueueUnitInvalid": (Severity.ERROR, "a unit with offset < 0 or size <= 0 that is not all zeros"),
    "batchConsumeQueueOffsetGap": (Severity.ERROR, "a batch unit whose msgBaseOffset does not follow on"),
    "consumeQueueBeyondCommitLog": (Severity.WARNING, "units pointing at or past the commit log's max offset"),
    "consumeQueueFileAfterEnd": (Severity.WARNING, "a consume queue file after its queue's end: the broker deletes it"),
    "consumeQueueMissing": (Severity.ERROR, "messages in the commit log for a topic-queue that has no consume queue"),
    "consumeQueueUnitNoRecord": (Severity.ERROR, "a unit whose commit log offset is not the start of a message"),
    "consumeQueueUnitMismatch": (Severity.ERROR, "a unit that disagrees with its record (topic, queue, offset, size, tags code)"),
    "consumeQueueFillUnits": (Severity.INFO, "fill units: the queue was rebuilt from the middle of a file"),
    "messageNotInConsumeQueue": (Severity.ERROR, "messages whose queue offsets the queue holds no unit for: lost from the queue"),
    "messageNotDispatched": (Severity.WARNING, "messages past the end of their queue: not dispatched yet"),
    # consumequeue_ext (enableConsumeQueueExt)
    "cqExtAddressDangling": (Severity.ERROR, "consume queue units whose ext address finds no ext unit: getMessage gets "
                             "no tagsCode for them (TAG filtering falls back to the client)"),
    "cqExtUnitMismatch": (Severity.ERROR, "an ext unit whose tagsCode or msgStoreTime is not its message's: the broker "
                          "filters the message by another's tags and bit map"),
    "cqExtDirOrphaned": (Severity.WARNING, "an ext directory without its consume queue (a deleted topic's, "
                         "apache/rocketmq #6343), or a consume queue without its ext directory"),
    "cqExtGarbageAfterEnd": (Severity.WARNING, "non-zero bytes past where the broker's ext recovery ends the last "
                             "ext file: the next ext units are written over them"),
    # DLedger commit log (enableDLegerCommitLog: dledger-<id>/data and index)
    "dledgerEntryInvalid": (Severity.ERROR, "a DLedger entry header DLedger's recover rejects (magic, size, pos, index "
                            "or term order): the entry log ends there and every entry after it is dropped"),
    "dledgerRecordInvalid": (Severity.ERROR, "a DLedger entry whose body is not one clean commit log record: DLedger "
                             "keeps the entry, the broker's reput skips the record"),
    "dledgerIndexMismatch": (Severity.ERROR, "a DLedger index unit that is not its entry's (magic, pos, size, index, "
                             "term), missing, or past the last entry"),
    # index files
    "indexFileNameInvalid": (Severity.WARNING, "a file in index/ whose name is not a yyyyMMddHHmmssSSS time"),
    "indexFileUnreadable": (Severity.ERROR, "an index file whose header or entries cannot be located"),
    "indexGeometryUnknown": (Severity.WARNING, "an index file whose slot and entry counts cannot be inferred"),
    "indexChainBroken": (Severity.ERROR, "a hash chain that points outside the entries or loops"),
    "indexHeaderInvalid": (Severity.ERROR, "an index header with a negative indexCount or hashSlotCount, "
                                           "or more slots in use than entries"),
    "indexHeaderMismatch": (Severity.ERROR, "an index header whose count or offsets disagree with its entries"),
    "indexTimestampBackwards": (Severity.INFO, "index header times that go back because the store clock did"),
    "indexFileOutOfOrder": (Severity.WARNING, "an index file whose name sorts it after a file its entries come "
                                              "before"),
    "indexEntryNoRecord": (Severity.ERROR, "an index entry whose phyOffset is not the start of a message"),
    "indexEntryMismatch": (Severity.ERROR, "an index entry whose record has no key of that hash, or another store time"),
    "indexKeyNotIndexed": (Severity.ERROR, "messages with keys inside the index's range that no entry covers"),
    "indexMissing": (Severity.WARNING, "messages carry keys but index/ holds no index file"),
    "indexFileNewerThanCheckpoint": (Severity.WARNING, "an index file written after the checkpoint's "
                                     "indexMsgTimestamp: an abnormal start destroys it"),
    # QMQ's store (messagelog/, consumerlog/, actionlog/, pulllog_smt/, checkpoint/)
    "logSegmentNameInvalid": (Severity.ERROR, "QMQ: a file in a log directory whose name is not a number: "
                              "Long.parseLong fails and the broker does not start"),
    "logSegmentNameMisaligned": (Severity.ERROR, "QMQ: a segment whose name is not a multiple of its log's segment "
                                 "size: QMQ never names one so, and reads its bytes at offset % size, not where the "
                                 "name places them"),
    "logSegmentShort": (Severity.WARNING, "QMQ: a segment file shorter than its log's segment size (QMQ maps it "
                        "at full size: the rest reads as zeros)"),
    "messageRecordInvalid": (Severity.ERROR, "QMQ: bytes before the message log's written end that are not a record"),
    "payloadCrcMismatch": (Severity.ERROR, "QMQ: a message log record whose payload does not match its CRC"),
    "messageSequenceGap": (Severity.WARNING, "QMQ: a subject's sequences in the message log are not consecutive"),
    "consumerLogUnitPastEnd": (Severity.ERROR, "QMQ: consumer-log units pointing past the message log's end: "
                               "those the next start keeps are served as SUCCESS with no message"),
    "consumerLogUnitMismatch": (Severity.ERROR, "QMQ: a consumer-log unit that does not point at its subject's "
                                "record of that sequence"),
    "consumerLogUnitInvalid": (Severity.ERROR, "QMQ: a consumer-log unit of no known kind"),
    "messageNotInConsumerLog": (Severity.ERROR, "QMQ: message log records whose subject's consumer log has no "
                                "unit for them and the next start does not dispatch them"),
    "checkpointUnreadable": (Severity.WARNING, "QMQ: a checkpoint snapshot the broker's serde refuses (skipped at "
                             "load: an older one is used)"),
    "checkpointDirectoryInvalid": (Severity.WARNING, "QMQ: checkpoint is not a directory: SnapshotStore lists no "
                                   "snapshot in it (the start replays both logs from their start) and cannot save "
                                   "one there"),
    "checkpointSubjectMissing": (Severity.ERROR, "QMQ: a subject with a consumer log that the loaded message "
                                 "checkpoint does not list: its consumer log is truncated to nothing at load"),
    "actionRecordInvalid": (Severity.ERROR, "QMQ: bytes before the action log's written end that are not an action"),
    "pullLogTabletInvalid": (Severity.ERROR, "QMQ: a pull-log tablet whose magic or CRC fails: the load stops "
                             "there and it and later tablets are destroyed"),
    "actionReplaySkipsActions": (Severity.WARNING, "QMQ: the action replay starts one byte past the last tablet's "
                                 "end, so the actions written after it are not replayed: progress goes back"),
    "recoveryCutsMessageLog": (Severity.ERROR, "QMQ: the next start cuts the message log before its written end: "
                               "the records after the cut are dropped"),
    "messagesServedEmpty": (Severity.ERROR, "QMQ: after the next start these sequences are served as SUCCESS "
                            "with no message"),
    "messagesNotServed": (Severity.ERROR, "QMQ: records in the message log that no sequence serves after the "
                          "next start"),
    # compaction store (5.x cleanup.policy=COMPACTION: compaction/compactionLog, compactionCq, position-checkpoint)
    "compactionCqFileMissing": (Severity.ERROR, "a compaction log file without its compaction queue file of the same "
                                "name, or the other way round: TopicPartitionLog.sanityCheck fails the store's load"),
    "compactionCqUnitMismatch": (Severity.ERROR, "a compaction queue unit that names no record of the compaction log, "
                                 "or one of another queue offset or size"),
    "compactionRecordNotInCq": (Severity.WARNING, "a compaction log record no compaction queue unit names: consumers of "
                                "the compacted topic never read it"),
    "compactionCheckpointMismatch": (Severity.WARNING, "position-checkpoint names a queue offset past the compaction "
                                     "log's records, or a queue that has no compaction log"),
    # the 5.x timer store (timerwheel, timerlog/, config/timercheck, config/timermetrics)
    "timerState": (Severity.INFO, "the timer store's state: pending messages, next fire time, read and write times"),
    "timerStoreNotLoadable": (Severity.ERROR, "timer files the broker's TimerMessageStore cannot load: it does not start"),
    "timerLogCut": (Severity.ERROR, "the next start cuts the timer log before units the timercheck says were "
                    "written: their records are enqueued again"),
    "timerChainLoops": (Severity.ERROR, "a wheel slot whose chain of timer log units loops (now, or once the next "
                        "start has enqueued again): dequeue never leaves it"),
    "timerUnitStranded": (Severity.ERROR, "pending timer log units that no wheel slot's chain reaches, or that the "
                          "read time skips: never delivered"),
    "timerUnitPastCommitLog": (Severity.ERROR, "timer log units whose rmq_sys_wheel_timer record lies past the "
                               "commit log's recovered end: dropped silently when due"),
    "timerUnitRecordMismatch": (Severity.ERROR, "a timer log unit whose offsetPy/sizePy is not a rmq_sys_wheel_timer "
                                "record of its real topic's hash"),
    "timercheckMissing": (Severity.ERROR, "config/timercheck missing or zeroed while the timer log holds units: the "
                          "next start enqueues the whole timer queue again and re-reads a week of slots"),
    "timerLogDamaged": (Severity.WARNING, "timer log bytes that are no unit in a file before the one the next "
                                          "start's recovery walks from: nothing reads them again"),
    "timerMetricsDrift": (Severity.INFO, "config/timermetrics counts that differ from the pending units by topic"),
    # controller mode (epochFileCheckpoint and its .bak, brokerIdentity)
    "epochFileInvalid": (Severity.ERROR, "an epoch file whose count, CRC or entry is not a number Java parses (an "
                         "empty file included): NumberFormatException fails the store's start"),
    "epochFileChecksum": (Severity.WARNING, "an epoch file whose entry count or CRC does not match its entries: the "
                          "broker skips it (the .bak instead; after the .bak, an empty epoch cache)"),
    "epochBakDiffers": (Severity.WARNING, "epochFileCheckpoint.bak is not the file's previous state (one write behind)"),
    "epochOrderInvalid": (Severity.ERROR, "epochs or start offsets of the epoch file that do not increase line by line"),
    "epochPastCommitLog": (Severity.ERROR, "an epoch that starts past the commit log's written end: the data it "
                           "names is gone"),
    "epochStartNotRecord": (Severity.WARNING, "an epoch whose start offset is not where a record starts: a slave "
                            "truncating there refuses (offset not aligned)"),
    "epochRangeEmpty": (Severity.INFO, "an epoch whose range ends at or before the commit log's first offset: the "
                        "data it names was deleted"),
    "brokerIdentityInvalid": (Severity.WARNING, "a brokerIdentity file the broker does not load: it registers again "
                              "for a new broker id"),
    # the 5.x RocksDB consume queue (storeType=defaultRocksDB or rocksdbCQDoubleWriteEnable: RocksDB in consumequeue/)
    "rocksdbCqEntryInvalid": (Severity.ERROR, "a RocksDB consume queue key or value that is not laid out as "
                              "RocksDBConsumeQueueTable / RocksDBConsumeQueueOffsetTable write them"),
    "rocksdbCqUnitMismatch": (Severity.ERROR, "a RocksDB consume queue unit whose commit log offset holds no message "
                              "of that topic, queue, queue offset and size"),
    "rocksdbCqUnitMissing": (Severity.ERROR, "queue offsets between a RocksDB queue's first and last unit with no "
                             "unit: the broker's range read stops at the first one missing"),
    "rocksdbCqOffsetMismatch": (Severity.ERROR, "the RocksDB offset table (a queue's max/min entry, or the dispatch "
                                "checkpoint) disagrees with the units or the commit log"),
    "rocksdbCqFileQueueDiffers": (Severity.WARNING, "the file consume queue and the RocksDB one of the same queue "
                                  "differ at a queue offset (a unit on one side only, or other fields)"),
}

# ID -> what the broker's next start does about it, by default (a finding may say more, e.g.
# verify gives a damaged record the broker never reads ``none``). One line an ID, as REGISTRY.
_W, _D, _U, _R, _N = (Consequence.WONT_START, Consequence.DROPS_MESSAGES, Consequence.UNREACHABLE,
                      Consequence.REBUILT, Consequence.NONE)
CONSEQUENCES: dict[str, Consequence] = {
    # segments: MappedFileQueue.load refuses a file of another size or a name that is not an offset
    "segmentNameInvalid": _W, "segmentSizeOdd": _W, "segmentGap": _U, "segmentOverlap": _W,
    "segmentEmpty": _W, "segmentUnreadable": _W, "segmentAfterEnd": _D, "commitLogEnd": _N,
    # several commit log paths: load takes every file of every path; which copy of a name it reads is not fixed
    "commitLogFileDuplicated": _U, "commitLogFileMisplaced": _N, "commitLogPathMissing": _N,
    "commitLogFilesNotLoaded": _U,
    # commit log records: what checkMessageAndReturnSize fails cuts the log where recovery reads it
    "bodyCrcMismatch": _D, "propertyCrcMismatch": _N, "innerBatchPropertyInvalid": _D,
    "recordMagicInvalid": _D, "recordSizeInvalid": _D, "recordLengthMismatch": _D, "recordOffsetMismatch": _N,
    # a replaced record is served as a message that says what happened: the original is in a backup only
    "recordQuarantined": _N,
    "recordTruncated": _D, "propertiesInvalidUtf8": _N, "topicInvalidUtf8": _N, "blankRecordInvalid": _D,
    "blankRecordMissing": _D, "trailingGarbage": _N, "bodyDecompressFailed": _N, "recordTorn": _D,
    "storeNotLoadable": _W, "recoveryCutsCommitLog": _D, "messageUnreachable": _U,
    "propertyCrcUnreadable": _N, "propertyCrcMissing": _N, "queueOffsetGap": _N,
    # forceVerifyPropCRC (off by default) would cut the log at the first of them: see the finding's text
    "propertyCrcMissingAtEnd": _N, "queueOffsetRepeat": _N,
    "storeTimestampBackwards": _N,
    # checkpoint and markers
    "checkpointInvalid": _N, "abortFilePresent": _R, "abortFileUnexpected": _N, "lockFileUnexpected": _N,
    "checkpointMissing": _R, "checkpointZeroed": _N, "checkpointAheadOfData": _N, "checkpointWindow": _N,
    "recoveryStartFile": _N,
    # config/*.json: the broker falls back to the .bak; a table it cannot read fails its start
    "configUnparseable": _W, "configBakUsed": _R, "configTmpLeftover": _N, "configTableInvalid": _W,
    "configTooLarge": _R, "configBakStale": _N, "delayOffsetOutOfRange": _N, "consumerOffsetTopicMissing": _N,
    "topicQueueCountMismatch": _N, "consumerOffsetTableInvalid": _N, "consumerOffsetKeyInvalid": _N,
    "consumerOffsetBelowMin": _N,
    "consumerOffsetAboveMax": _N, "consumerOffsetForMissingQueue": _N,
    # consume queues
    "queueDirInvalid": _N, "consumeQueueFileMisaligned": _N, "consumeQueueHole": _U, "consumeQueueUnitInvalid": _U,
    "batchConsumeQueueOffsetGap": _U, "consumeQueueBeyondCommitLog": _R, "consumeQueueFileAfterEnd": _R,
    "consumeQueueMissing": _U, "consumeQueueUnitNoRecord": _U, "consumeQueueUnitMismatch": _U,
    "consumeQueueFillUnits": _N, "messageNotInConsumeQueue": _U, "messageNotDispatched": _R,
    # consumequeue_ext: a failed lookup only loses the broker-side filter (clients filter again)
    "cqExtAddressDangling": _N, "cqExtUnitMismatch": _U, "cqExtDirOrphaned": _N, "cqExtGarbageAfterEnd": _N,
    # DLedger: recover ends the entry log at a bad header; a bad record is skipped by dispatch; the
    # index is rewritten from the data where it differs (DLedgerMmapFileStore.recover)
    "dledgerEntryInvalid": _D, "dledgerRecordInvalid": _U, "dledgerIndexMismatch": _R,
    # index files: key lookups only; messages stay reachable through their queues
    "indexFileNameInvalid": _N, "indexFileUnreadable": _N, "indexGeometryUnknown": _N, "indexChainBroken": _N,
    "indexHeaderInvalid": _N, "indexHeaderMismatch": _N, "indexTimestampBackwards": _N, "indexFileOutOfOrder": _N,
    "indexEntryNoRecord": _N,
    "indexEntryMismatch": _N, "indexKeyNotIndexed": _N, "indexMissing": _N, "indexFileNewerThanCheckpoint": _R,
    # QMQ: LogManager.loadLogs throws on a name; DefaultStorage serves units past the log as SUCCESS
    "logSegmentNameInvalid": _W, "logSegmentNameMisaligned": _N, "logSegmentShort": _N, "messageRecordInvalid": _D, "payloadCrcMismatch": _D,
    "messageSequenceGap": _N, "consumerLogUnitPastEnd": Consequence.SERVED_EMPTY,
    "consumerLogUnitMismatch": Consequence.SERVED_EMPTY, "consumerLogUnitInvalid": Consequence.SERVED_EMPTY,
    "messageNotInConsumerLog": _U, "checkpointUnreadable": _N, "checkpointDirectoryInvalid": _N,
    "checkpointSubjectMissing": Consequence.SERVED_EMPTY, "actionRecordInvalid": Consequence.PROGRESS_LOST,
    "pullLogTabletInvalid": Consequence.PROGRESS_LOST, "actionReplaySkipsActions": Consequence.PROGRESS_LOST,
    "recoveryCutsMessageLog": _D, "messagesServedEmpty": Consequence.SERVED_EMPTY, "messagesNotServed": _U,
    # compaction: the load throws on a missing twin; a unit or record no reader matches is not served
    "compactionCqFileMissing": _W, "compactionCqUnitMismatch": _U, "compactionRecordNotInCq": _U,
    "compactionCheckpointMismatch": _N,
    # timer: what the next start's TimerMessageStore does (recovery/timer)
    "timerState": _N, "timerStoreNotLoadable": _W, "timerLogCut": Consequence.REDELIVERS,
    "timerChainLoops": Consequence.LOOPS, "timerUnitStranded": Consequence.STRANDS, "timerUnitPastCommitLog": _D,
    "timerUnitRecordMismatch": _N, "timerLogDamaged": _N, "timercheckMissing": Consequence.REDELIVERS, "timerMetricsDrift": _R,
    # controller mode: a start that throws on the epoch file; the rest changes what a sync truncates, not the start
    "epochFileInvalid": _W, "epochFileChecksum": _N, "epochBakDiffers": _N, "epochOrderInvalid": _N,
    "epochPastCommitLog": _N, "epochStartNotRecord": _N, "epochRangeEmpty": _R, "brokerIdentityInvalid": _N,
    # RocksDB consume queue: what the broker serves from it (RocksDBConsumeQueue reads, getMaxOffsetInQueue)
    "rocksdbCqEntryInvalid": _U, "rocksdbCqUnitMismatch": _U, "rocksdbCqUnitMissing": _U,
    "rocksdbCqOffsetMismatch": _U, "rocksdbCqFileQueueDiffers": _N,
}

# The IDs by name: code says BODY_CRC_MISMATCH, never the string, so a typo is an ImportError.
# One line each, in the registry's order; add new ones on new lines in their section.
# segments
SEGMENT_NAME_INVALID = "segmentNameInvalid"
SEGMENT_SIZE_ODD = "segmentSizeOdd"
SEGMENT_GAP = "segmentGap"
SEGMENT_OVERLAP = "segmentOverlap"
SEGMENT_EMPTY = "segmentEmpty"
SEGMENT_UNREADABLE = "segmentUnreadable"
SEGMENT_AFTER_END = "segmentAfterEnd"
COMMIT_LOG_END = "commitLogEnd"
COMMIT_LOG_FILE_DUPLICATED = "commitLogFileDuplicated"
COMMIT_LOG_FILE_MISPLACED = "commitLogFileMisplaced"
COMMIT_LOG_PATH_MISSING = "commitLogPathMissing"
COMMIT_LOG_FILES_NOT_LOADED = "commitLogFilesNotLoaded"
# commit log records
BODY_CRC_MISMATCH = "bodyCrcMismatch"
PROPERTY_CRC_MISMATCH = "propertyCrcMismatch"
INNER_BATCH_PROPERTY_INVALID = "innerBatchPropertyInvalid"
RECORD_MAGIC_INVALID = "recordMagicInvalid"
RECORD_SIZE_INVALID = "recordSizeInvalid"
RECORD_LENGTH_MISMATCH = "recordLengthMismatch"
RECORD_OFFSET_MISMATCH = "recordOffsetMismatch"
RECORD_QUARANTINED = "recordQuarantined"
RECORD_TRUNCATED = "recordTruncated"
PROPERTIES_INVALID_UTF8 = "propertiesInvalidUtf8"
TOPIC_INVALID_UTF8 = "topicInvalidUtf8"
BLANK_RECORD_INVALID = "blankRecordInvalid"
BLANK_RECORD_MISSING = "blankRecordMissing"
TRAILING_GARBAGE = "trailingGarbage"
BODY_DECOMPRESS_FAILED = "bodyDecompressFailed"
RECORD_TORN = "recordTorn"
RECOVERY_CUTS_COMMIT_LOG = "recoveryCutsCommitLog"
MESSAGE_UNREACHABLE = "messageUnreachable"
STORE_NOT_LOADABLE = "storeNotLoadable"
PROPERTY_CRC_UNREADABLE = "propertyCrcUnreadable"
PROPERTY_CRC_MISSING = "propertyCrcMissing"
PROPERTY_CRC_MISSING_AT_END = "propertyCrcMissingAtEnd"
QUEUE_OFFSET_GAP = "queueOffsetGap"
QUEUE_OFFSET_REPEAT = "queueOffsetRepeat"
STORE_TIMESTAMP_BACKWARDS = "storeTimestampBackwards"
# checkpoint and markers
CHECKPOINT_INVALID = "checkpointInvalid"
ABORT_FILE_PRESENT = "abortFilePresent"
ABORT_FILE_UNEXPECTED = "abortFileUnexpected"
LOCK_FILE_UNEXPECTED = "lockFileUnexpected"
CHECKPOINT_MISSING = "checkpointMissing"
CHECKPOINT_ZEROED = "checkpointZeroed"
CHECKPOINT_AHEAD_OF_DATA = "checkpointAheadOfData"
CHECKPOINT_WINDOW = "checkpointWindow"
RECOVERY_START_FILE = "recoveryStartFile"
# config/*.json
CONFIG_UNPARSEABLE = "configUnparseable"
CONFIG_BAK_USED = "configBakUsed"
CONFIG_TMP_LEFTOVER = "configTmpLeftover"
CONFIG_TABLE_INVALID = "configTableInvalid"
CONFIG_TOO_LARGE = "configTooLarge"
CONFIG_BAK_STALE = "configBakStale"
DELAY_OFFSET_OUT_OF_RANGE = "delayOffsetOutOfRange"
CONSUMER_OFFSET_TOPIC_MISSING = "consumerOffsetTopicMissing"
TOPIC_QUEUE_COUNT_MISMATCH = "topicQueueCountMismatch"
CONSUMER_OFFSET_TABLE_INVALID = "consumerOffsetTableInvalid"
CONSUMER_OFFSET_KEY_INVALID = "consumerOffsetKeyInvalid"
CONSUMER_OFFSET_BELOW_MIN = "consumerOffsetBelowMin"
CONSUMER_OFFSET_ABOVE_MAX = "consumerOffsetAboveMax"
CONSUMER_OFFSET_FOR_MISSING_QUEUE = "consumerOffsetForMissingQueue"
# consume queues
QUEUE_DIR_INVALID = "queueDirInvalid"
CONSUME_QUEUE_FILE_MISALIGNED = "consumeQueueFileMisaligned"
CONSUME_QUEUE_HOLE = "consumeQueueHole"
CONSUME_QUEUE_UNIT_INVALID = "consumeQueueUnitInvalid"
BATCH_CONSUME_QUEUE_OFFSET_GAP = "batchConsumeQueueOffsetGap"
CONSUME_QUEUE_BEYOND_COMMIT_LOG = "consumeQueueBeyondCommitLog"
CONSUME_QUEUE_FILE_AFTER_END = "consumeQueueFileAfterEnd"
CONSUME_QUEUE_MISSING = "consumeQueueMissing"
CONSUME_QUEUE_UNIT_NO_RECORD = "consumeQueueUnitNoRecord"
CONSUME_QUEUE_UNIT_MISMATCH = "consumeQueueUnitMismatch"
CONSUME_QUEUE_FILL_UNITS = "consumeQueueFillUnits"
MESSAGE_NOT_IN_CONSUME_QUEUE = "messageNotInConsumeQueue"
MESSAGE_NOT_DISPATCHED = "messageNotDispatched"
# consumequeue_ext
CQ_EXT_ADDRESS_DANGLING = "cqExtAddressDangling"
CQ_EXT_UNIT_MISMATCH = "cqExtUnitMismatch"
CQ_EXT_DIR_ORPHANED = "cqExtDirOrphaned"
CQ_EXT_GARBAGE_AFTER_END = "cqExtGarbageAfterEnd"
# DLedger commit log
DLEDGER_ENTRY_INVALID = "dledgerEntryInvalid"
DLEDGER_RECORD_INVALID = "dledgerRecordInvalid"
DLEDGER_INDEX_MISMATCH = "dledgerIndexMismatch"
# index files
INDEX_FILE_NAME_INVALID = "indexFileNameInvalid"
INDEX_FILE_UNREADABLE = "indexFileUnreadable"
INDEX_GEOMETRY_UNKNOWN = "indexGeometryUnknown"
INDEX_CHAIN_BROKEN = "indexChainBroken"
INDEX_HEADER_INVALID = "indexHeaderInvalid"
INDEX_HEADER_MISMATCH = "indexHeaderMismatch"
INDEX_TIMESTAMP_BACKWARDS = "indexTimestampBackwards"
INDEX_FILE_OUT_OF_ORDER = "indexFileOutOfOrder"
INDEX_ENTRY_NO_RECORD = "indexEntryNoRecord"
INDEX_ENTRY_MISMATCH = "indexEntryMismatch"
INDEX_KEY_NOT_INDEXED = "indexKeyNotIndexed"
INDEX_MISSING = "indexMissing"
INDEX_FILE_NEWER_THAN_CHECKPOINT = "indexFileNewerThanCheckpoint"
# QMQ
LOG_SEGMENT_NAME_INVALID = "logSegmentNameInvalid"
LOG_SEGMENT_NAME_MISALIGNED = "logSegmentNameMisaligned"
LOG_SEGMENT_SHORT = "logSegmentShort"
MESSAGE_RECORD_INVALID = "messageRecordInvalid"
PAYLOAD_CRC_MISMATCH = "payloadCrcMismatch"
MESSAGE_SEQUENCE_GAP = "messageSequenceGap"
CONSUMER_LOG_UNIT_PAST_END = "consumerLogUnitPastEnd"
CONSUMER_LOG_UNIT_MISMATCH = "consumerLogUnitMismatch"
CONSUMER_LOG_UNIT_INVALID = "consumerLogUnitInvalid"
MESSAGE_NOT_IN_CONSUMER_LOG = "messageNotInConsumerLog"
CHECKPOINT_UNREADABLE = "checkpointUnreadable"
CHECKPOINT_DIRECTORY_INVALID = "checkpointDirectoryInvalid"
CHECKPOINT_SUBJECT_MISSING = "checkpointSubjectMissing"
ACTION_RECORD_INVALID = "actionRecordInvalid"
PULL_LOG_TABLET_INVALID = "pullLogTabletInvalid"
ACTION_REPLAY_SKIPS_ACTIONS = "actionReplaySkipsActions"
RECOVERY_CUTS_MESSAGE_LOG = "recoveryCutsMessageLog"
MESSAGES_SERVED_EMPTY = "messagesServedEmpty"
MESSAGES_NOT_SERVED = "messagesNotServed"
# compaction store
COMPACTION_CQ_FILE_MISSING = "compactionCqFileMissing"
COMPACTION_CQ_UNIT_MISMATCH = "compactionCqUnitMismatch"
COMPACTION_RECORD_NOT_IN_CQ = "compactionRecordNotInCq"
COMPACTION_CHECKPOINT_MISMATCH = "compactionCheckpointMismatch"
# timer
TIMER_STATE = "timerState"
TIMER_STORE_NOT_LOADABLE = "timerStoreNotLoadable"
TIMER_LOG_CUT = "timerLogCut"
TIMER_CHAIN_LOOPS = "timerChainLoops"
TIMER_UNIT_STRANDED = "timerUnitStranded"
TIMER_UNIT_PAST_COMMIT_LOG = "timerUnitPastCommitLog"
TIMER_UNIT_RECORD_MISMATCH = "timerUnitRecordMismatch"
TIMERCHECK_MISSING = "timercheckMissing"
TIMER_METRICS_DRIFT = "timerMetricsDrift"
TIMER_LOG_DAMAGED = "timerLogDamaged"
# controller mode
EPOCH_FILE_INVALID = "epochFileInvalid"
EPOCH_FILE_CHECKSUM = "epochFileChecksum"
EPOCH_BAK_DIFFERS = "epochBakDiffers"
EPOCH_ORDER_INVALID = "epochOrderInvalid"
EPOCH_PAST_COMMIT_LOG = "epochPastCommitLog"
EPOCH_START_NOT_RECORD = "epochStartNotRecord"
EPOCH_RANGE_EMPTY = "epochRangeEmpty"
BROKER_IDENTITY_INVALID = "brokerIdentityInvalid"
# RocksDB consume queue
ROCKSDB_CQ_ENTRY_INVALID = "rocksdbCqEntryInvalid"
ROCKSDB_CQ_UNIT_MISMATCH = "rocksdbCqUnitMismatch"
ROCKSDB_CQ_UNIT_MISSING = "rocksdbCqUnitMissing"
ROCKSDB_CQ_OFFSET_MISMATCH = "rocksdbCqOffsetMismatch"
ROCKSDB_CQ_FILE_QUEUE_DIFFERS = "rocksdbCqFileQueueDiffers"


def finding(finding_id: str, path, offset: int | None, message: str, *, consequence: "Consequence | None" = None,
            **details) -> "Finding":
    """A finding with the fields that locate it (None values left out); ``consequence`` when
    this one's is known to differ from its ID's default."""
    return Finding(finding_id, None if path is None else str(path), offset, message,
                   details={k: v for k, v in details.items() if v is not None} or None, consequence=consequence)


@dataclasses.dataclass(slots=True, frozen=True)
class Finding:
    id: str
    path: str | None
    offset: int | None
    message: str
    severity: Severity = None  # filled from the registry
    # what locates it in RocketMQ's terms (topic, queue_id, queue_offset, commit_log_offset,
    # counts): extra fields of its JSON row
    details: dict | None = None
    consequence: Consequence = None  # filled from CONSEQUENCES

    def __post_init__(self):
        if self.id not in REGISTRY:
            raise KeyError(f"unknown finding id {self.id!r}")
        if self.severity is None:
            object.__setattr__(self, "severity", REGISTRY[self.id][0])
        if self.consequence is None:
            object.__setattr__(self, "consequence", CONSEQUENCES[self.id])

    def to_json(self) -> dict:
        row = {"finding": self.id, "severity": self.severity.value, "consequence": self.consequence.value,
               "path": self.path, "offset": self.offset, "message": self.message}
        if self.details:
            row.update(self.details)
        return row

    def one_line(self) -> str:
        where = self.path or ""
        if self.offset is not None:
            where += f" at offset {self.offset}"
        return f"{self.severity.value}: {self.id}: {where}: {self.message}"


# ID -> what an operator should do about it (the README's findings table is made from this).
OPERATOR_ACTIONS: dict[str, str] = {
    "segmentNameInvalid": "Move the file out of the directory; the broker ignores or trips over it.",
    "segmentSizeOdd": "The broker refuses to load it: restore the file from a backup, or salvage its records.",
    "segmentGap": "The file the message names (its base offset, 20 digits) is missing: restore it from a backup "
                  "or the slave; the messages in that range are gone otherwise.",
    "segmentOverlap": "Two files claim the same offsets: keep the one whose records prove themselves.",
    "segmentEmpty": "Delete the empty file once no broker runs (it was created and never written).",
    "segmentUnreadable": "Check permissions and the disk (dmesg); copy the store off a failing disk.",
    "commitLogEnd": "Nothing; compare with the checkpoint and the consume queues.",
    "commitLogFileDuplicated": ("With the broker stopped, compare the copies (rmqtool dump commitlog on each) and move "
                                "the one that is not the log's out of every commit log path."),
    "commitLogFileMisplaced": ("Nothing is needed: the broker loads it from any path. If a disk was not full when it was "
                               "made, someone moved it: check that no copy is missing elsewhere."),
    "commitLogPathMissing": ("Mount the disk or correct storePathCommitLog; files that belong there show as a "
                             "segmentGap."),
    "commitLogFilesNotLoaded": ("The broker does not read these files: move them into one of the commit log paths "
                                "(broker stopped) if their messages are not elsewhere, or delete them once they are."),
    "bodyCrcMismatch": "The body is damaged: recovery truncates the commit log there; save the rest first.",
    "propertyCrcMismatch": "The record is damaged: recovery with forceVerifyPropCRC truncates there.",
    "innerBatchPropertyInvalid": ("The record is damaged: a 5.x broker's recovery cuts the commit log there "
                                  "(rmqtool recover shows it); salvage the records after it first."),
    "recordMagicInvalid": "Damaged bytes: the region is skipped; salvage the records after it.",
    "recordSizeInvalid": "Damaged header: the region is skipped; salvage the records after it.",
    "recordLengthMismatch": "Damaged record: salvage the records after it.",
    "recordOffsetMismatch": "The record was copied from elsewhere or damaged: check where it came from.",
    "recordQuarantined": "Its message is gone from the store: recover the original bytes from the backup that "
                         "recover --keep-past-damage named, and tell its consumers it was replaced.",
    "recordTruncated": "The file was cut: restore it, or accept the loss of its last record.",
    "propertiesInvalidUtf8": "Clients wrote bytes that are not UTF-8, or the record is damaged: check the producer.",
    "topicInvalidUtf8": "The topic bytes are damaged: check the record with dump.",
    "blankRecordInvalid": "The end of the file is damaged: the broker stops reading the file there.",
    "blankRecordMissing": "The file's tail was lost: the broker stops its recovery there; salvage later files.",
    "trailingGarbage": "Bytes after the last record: recovery truncates them; look at them before it does.",
    "bodyDecompressFailed": "The body is damaged or the sysFlag wrong: consumers cannot read it.",
    "propertyCrcUnreadable": "The record's CRC entry is damaged: treat the record as damaged.",
    "propertyCrcMissing": "The record's CRC entry was lost (damage): treat the record as damaged.",
    "propertyCrcMissingAtEnd": ("Records written without the entry (enabledAppendPropCRC turned off, or a writer that "
                                "leaves it out): with forceVerifyPropCRC the next start drops them all; salvage "
                                "them first, or keep that setting off."),
    "queueOffsetGap": "Records are missing from the commit log (or were never written): compare with the queue.",
    "queueOffsetRepeat": "Two records share queue offsets: a copy or a replay; consumers may see duplicates.",
    "storeTimestampBackwards": "Nothing, unless time lookups matter: check the broker host's clock (NTP).",
    "checkpointInvalid": "The broker reads it as it is (the fields shown); not a file it wrote: find what cut or grew it.",
    "abortFilePresent": "Expect an abnormal recovery at the next start; keep a copy of the store first.",
    "abortFileUnexpected": "Look at its content; the broker only needs it to exist.",
    "lockFileUnexpected": "A file: harmless to the broker, someone wrote into it. A directory: move it out of the "
                          "store, the broker cannot start on it (it makes its lock file).",
    "checkpointMissing": "The broker recreates it; an abnormal recovery then rescans from the first file.",
    "checkpointZeroed": "An abnormal recovery will rescan from the first file: slow but safe.",
    "checkpointAheadOfData": "Messages the broker had flushed are gone: restore the commit log or salvage a replica.",
    "checkpointWindow": "Nothing; these messages may be lost if the host (not only the broker) crashed.",
    "recoveryStartFile": "Nothing; it says how long the next start will take and what it rescans.",
    "configUnparseable": "Restore the file from its .bak or a backup before the broker starts (wontStart when the .bak fails too; rebuilt when the .bak stands in; with no .bak the broker starts with the table empty: progressLost for the offset files, none for the others).",
    "configBakUsed": "Check the .bak holds what you expect; persist it as the main file.",
    "configTmpLeftover": "Remove the .tmp after checking the main file is complete.",
    "configTableInvalid": "Fix or restore the file: the broker will fail to load it.",
    "configBakStale": "The .bak predates the main file: consumers may re-consume; restore a newer copy if you have one.",
    "delayOffsetOutOfRange": "The schedule service resumes from a wrong place: delayed messages are re-sent or skipped.",
    "consumerOffsetTopicMissing": "Delete the stale offsets (updateConsumerOffset or the admin tool), or recreate the topic.",
    "topicQueueCountMismatch": "Update the topic's queue counts, or remove the stray queue directories.",
    "queueDirInvalid": "Move the entry out of the consume queue directory.",
    "consumeQueueFileMisaligned": "Remove the file (the broker rebuilds queues from the commit log on an abnormal start).",
    "consumeQueueHole": "Rebuild the queue: stop the broker, remove the queue dir, start with the abort file present.",
    "consumeQueueUnitInvalid": "Rebuild the queue from the commit log.",
    "batchConsumeQueueOffsetGap": "Rebuild the batch consume queue from the commit log.",
    "consumeQueueBeyondCommitLog": "The commit log lost its tail: the broker drops these units on load.",
    "consumeQueueMissing": "Rebuild the queue: remove nothing, start the broker with the abort file present.",
    "consumeQueueUnitNoRecord": "Rebuild the queue from the commit log.",
    "consumeQueueUnitMismatch": "Rebuild the queue from the commit log.",
    "consumeQueueFillUnits": "Nothing; messages before the fill are not reachable through the queue.",
    "messageNotInConsumeQueue": "Consumers cannot reach these messages: rebuild the queue from the commit log.",
    "messageNotDispatched": ("The broker's next start dispatches them (verify simulates it; those it would not "
                             "are messageUnreachable)."),
    "indexFileNameInvalid": "Move the file out of index/.",
    "indexFileUnreadable": "Remove the file; key queries then fall back to a commit log scan (rmqtool query does).",
    "indexGeometryUnknown": "Pass the broker's maxHashSlotNum and maxIndexNum.",
    "indexChainBroken": "Remove the index file; key queries for its keys fall back to a scan.",
    "indexHeaderMismatch": "Remove the index file; key queries for its range fall back to a scan.",
    "indexTimestampBackwards": "Nothing; time-bounded key queries may miss messages stored across the clock step.",
    "indexFileOutOfOrder": ("Rename the files so their names sort as their offsets do (redispatch --index --apply names "
                            "a file it adds after those kept): IndexService.load orders them by name, a key query "
                            "bounded in time stops short, and the oldest files are not aged out."),
    "indexEntryNoRecord": "The index or the commit log is damaged: query by scanning (--no-index).",
    "indexEntryMismatch": "The index is damaged: query by scanning (--no-index).",
    "indexKeyNotIndexed": "Key queries miss these messages: query with --no-index.",
    "indexMissing": "Key queries scan the commit log; the broker rebuilds the index only for rescanned files.",
    "segmentAfterEnd": "A segment after the end holds data: recovery deletes it; look at it (dump) or salvage it first.",
    "recordTorn": "The last record was cut by the crash: recovery drops it; its message is lost unless salvaged.",
    "storeNotLoadable": "Read the plan's reason: restore or move aside the file it names (salvage its messages first).",
    "recoveryCutsCommitLog": "Run rmqtool recover to see every message lost; salvage them before recover --apply.",
    "messageUnreachable": ("Lost units: rebuild the queues from the commit log (rmqtool redispatch STORE --apply, "
                           "the finding names it); a missing file: restore it, its messages are gone otherwise."),
    "indexFileNewerThanCheckpoint": "Keep it with recover --keep-index, or let the broker rebuild what it rescans.",
    "configTooLarge": "Not a file the broker wrote: move it aside; the broker falls back to the .bak.",
    "consumeQueueFileAfterEnd": "The broker deletes it at the next start; redispatch rebuilds what the commit log holds.",
    "indexHeaderInvalid": "The broker reads the file as empty: its keys are not found; rebuild the index (redispatch).",
    "consumerOffsetTableInvalid": "The broker loads no offsets from it: consumers restart from ConsumeFromWhere; restore the .bak or fix the file.",
    "consumerOffsetKeyInvalid": "Nothing for the broker (no consumer's offset is there); remove the entry when the broker is stopped.",
    "consumerOffsetBelowMin": "Messages expired unconsumed: the next pull moves the group to the min offset (rmqtool offsets shows the lag).",
    "consumerOffsetAboveMax": "The queue lost consumed messages or the file is from another store: the next pull moves the group back.",
    "consumerOffsetForMissingQueue": "The queue is gone (deleted topic or lost directory): redispatch or clean the group's offsets.",
    "logSegmentNameInvalid": "Move the file out of the log directory before the broker starts (it refuses to start).",
    "logSegmentNameMisaligned": "Rename it to the multiple of the segment size its bytes belong at (its consumer-log units' offsets say which) before anything else; rmqtool recover refuses until then.",
    "logSegmentShort": "Nothing by itself (QMQ reads zeros past it); a record crossing the file's end is damaged.",
    "messageRecordInvalid": "Damaged bytes: the next start cuts the message log there; salvage the records after it first.",
    "payloadCrcMismatch": "The payload is damaged: the next start cuts the message log there; salvage what follows first.",
    "messageSequenceGap": "Records of the subject are missing (or were written elsewhere): compare with its consumer log.",
    "consumerLogUnitPastEnd": "Consumers get SUCCESS with no message for those of these sequences the next start keeps: rmqtool recover --apply cuts them.",
    "consumerLogUnitMismatch": "Rebuild the subject's consumer log from the message log (rmqtool recover --apply).",
    "consumerLogUnitInvalid": "Rebuild the subject's consumer log from the message log (rmqtool recover --apply).",
    "messageNotInConsumerLog": "Consumers cannot reach these messages: rebuild the consumer log (rmqtool recover --apply).",
    "checkpointUnreadable": "Nothing is lost (an older snapshot is used, the replay is longer); remove or restore the file.",
    "checkpointDirectoryInvalid": "Move it aside before the broker starts (QMQ makes the directory then); rmqtool recover --apply refuses until then.",
    "checkpointSubjectMissing": "The subject's earlier messages will be served empty: rmqtool recover --apply rebuilds its consumer log.",
    "actionRecordInvalid": "Pulls and acks after the damage are lost at the next start: consumers re-receive messages.",
    "pullLogTabletInvalid": "Progress from the tablet on is replayed from the action log, or lost where that is gone.",
    "actionReplaySkipsActions": "Expect consumers to re-receive messages after the next start (a QMQ replay quirk).",
    "recoveryCutsMessageLog": "Run rmqtool recover to see every record lost; salvage them before the broker starts.",
    "messagesServedEmpty": "Consumers would skip these messages: rmqtool recover --apply rebuilds the consumer logs first.",
    "messagesNotServed": "Consumers cannot reach these records: rmqtool recover --apply rebuilds the consumer logs first.",
    "compactionCqFileMissing": ("Restore the missing file (or move the unpaired one aside, with its records lost to "
                                "the compacted view) before the broker starts: its load fails otherwise."),
    "compactionCqUnitMismatch": ("Consumers of the compacted topic miss or misread this offset: move the queue's "
                                 "compaction directories aside on a stopped broker (the plain consume queue still "
                                 "holds every message) or restore them."),
    "compactionRecordNotInCq": ("Consumers of the compacted topic never see it (the load also truncates the log to the "
                                "queue's last unit): check the queue's files; the commit log still holds the message."),
    "compactionCheckpointMismatch": ("The next compactions skip records up to that offset (superseded values and "
                                     "tombstones stay): restore position-checkpoint from its .bak if that is right."),
    "cqExtAddressDangling": ("Rebuild the queue and its ext files before new messages arrive (rmqtool redispatch "
                             "STORE --cq --topic T --queue Q --apply). Otherwise new ext units take these addresses "
                             "and the units resolve to other messages' tags and bit maps (SQL92 groups miss messages)."),
    "cqExtUnitMismatch": ("Rebuild the queue and its ext files from the commit log (rmqtool redispatch STORE --cq "
                          "--topic T --queue Q --apply)."),
    "cqExtDirOrphaned": ("A deleted topic's ext files: remove the directory while the broker is stopped (a topic "
                         "created again under that name would append after the old units)."),
    "cqExtGarbageAfterEnd": "Nothing to do for the broker; look at the bytes (rmqtool dump cqext) if they matter.",
    "dledgerEntryInvalid": ("Copy the dledger-<id> directory aside before the broker starts: DLedger's recover "
                            "truncates the data files here (rmqtool dump dledger shows the entries after it; a "
                            "follower gets them back from the leader only if the leader still has them)."),
    "dledgerRecordInvalid": ("The message is lost to consumers (the reput skips it); its msgId still resolves to a "
                             "damaged record. Resend it if the producer can (rmqtool dump dledger shows the entry)."),
    "dledgerIndexMismatch": "Nothing: DLedger's recover rewrites the index from the data files from this unit on.",
    "timerState": "Nothing: read it (pending messages, next fire time, read and write times).",
    "timerStoreNotLoadable": "Move the named timer file aside (the broker recreates an empty one): its pending timer messages are then lost.",
    "timerLogCut": "Run rmqtool recover to see what the next start enqueues again; timerChainLoops says if it loops.",
    "timerChainLoops": "Do not start the broker as is: rmqtool recover --apply rebuilds the slot's lastPos from the log.",
    "timerUnitStranded": "These timer messages will never fire: resend them (rmqtool query shows each record).",
    "timerUnitPastCommitLog": "The records are gone with the commit log's tail: resend those timer messages; recover --apply cuts the units.",
    "timerUnitRecordMismatch": "The timer log or the commit log is damaged: compare with rmqtool dump timerlog; resend what is lost.",
    "timercheckMissing": "Restore config/timercheck from a backup before the start, or expect consumers to receive a week of timer messages again.",
    "timerLogDamaged": "Nothing for the broker: look at them with rmqtool dump timerlog (a pending unit among them is timerUnitStranded).",
    "timerMetricsDrift": "Nothing: the broker revises the counts itself (checkAndReviseMetrics).",
    "epochFileInvalid": ("Before the start: restore the file from its .bak if that one reads (rmqtool dump epochfile "
                         "STORE/epochFileCheckpoint.bak), or move the damaged file aside."),
    "epochFileChecksum": ("The broker loads the .bak, one write behind: compare the two (rmqtool dump epochfile) and "
                          "the master's, and restore the last entry by hand if it is missing."),
    "epochBakDiffers": "Find out which tool wrote the files; rmqtool dump epochfile shows both.",
    "epochOrderInvalid": ("The truncation point at the next sync is computed from these entries: compare with the "
                          "master's file (rmqtool diff MASTER SLAVE) before the broker syncs."),
    "epochPastCommitLog": ("Commit log files are missing or the log was cut: rmqtool diff MASTER THIS shows where "
                           "this store truncates at its next sync."),
    "epochStartNotRecord": ("Compare with the master's epoch file (rmqtool diff MASTER THIS): a sync that must "
                            "truncate there fails and needs a manual fix."),
    "epochRangeEmpty": "Nothing: the broker drops it when it next deletes a commit log file.",
    "brokerIdentityInvalid": ("Restore the file (clusterName#brokerName#brokerId as the controller knows it) before "
                              "the start, or the broker registers as a new replica."),
    "rocksdbCqEntryInvalid": ("The broker cannot read that entry: look at it (rmqtool dump rocksdbcq); with the file "
                              "queues double-written, they still serve the queue."),
    "rocksdbCqUnitMismatch": ("Consumers of that queue offset get another message or none: compare with the file "
                              "queue (verify shows rocksdbCqFileQueueDiffers) and query the commit log by offset."),
    "rocksdbCqUnitMissing": ("Consumers stop at the missing offset until it is skipped: the commit log still holds "
                             "the messages (rmqtool dump commitlog -t T -q Q)."),
    "rocksdbCqOffsetMismatch": ("The broker's max (min) offset for the queue is wrong: new messages may take offsets "
                                "already used, or consumers stop early. Stop the broker and compare with rmqtool "
                                "dump rocksdbcq before switching storeType."),
    "rocksdbCqFileQueueDiffers": ("The two queues disagree: do not switch storeType (or turn off the double write) "
                                  "until they agree; the one that matches the commit log is right (verify's "
                                  "rocksdbCqUnitMismatch and the consumequeue checks say which)."),
}

