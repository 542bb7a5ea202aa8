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
    # commit log records
    "bodyCrcMismatch": (Severity.ERROR, "the body CRC field does not match the body"),
    "propertyCrcMismatch": (Severity.ERROR, "the __CRC32# property does not match the record"),
    "recordMagicInvalid": (Severity.ERROR, "no record magic code where a record should start"),
    "recordSizeInvalid": (Severity.ERROR, "a totalSize that cannot be right (negative, too small, past the file end)"),
    "recordLengthMismatch": (Severity.ERROR, "the record's field lengths do not add up to its totalSize"),
    "recordOffsetMismatch": (Severity.WARNING, "the record's physicalOffset field differs from where it lies"),
    "recordTruncated": (Severity.ERROR, "a record cut off by the end of its file"),
    "propertiesInvalidUtf8": (Severity.WARNING, "properties bytes that are not valid UTF-8"),
    "topicInvalidUtf8": (Severity.WARNING, "topic bytes that are not valid UTF-8"),
    "blankRecordInvalid": (Severity.ERROR, "an end-of-file blank record whose totalSize is not the bytes left"),
    "blankRecordMissing": (Severity.WARNING, "a segment that is not the last one ends without a blank record"),
    "trailingGarbage": (Severity.ERROR, "non-zero bytes after the last record of a segment"),
    "bodyDecompressFailed": (Severity.ERROR, "a body flagged compressed that does not decompress with its codec"),
    "recordTorn": (Severity.ERROR, "a last record whose header is there but not the rest: recovery cuts the log there"),
    # checkpoint and markers
    "checkpointInvalid": (Severity.ERROR, "a checkpoint file that cannot be read (wrong size)"),
    "abortFilePresent": (Severity.WARNING, "the abort file exists: the last broker did not shut down cleanly"),
    "abortFileUnexpected": (Severity.WARNING, "an abort file that is neither empty nor a PID"),
    "lockFileUnexpected": (Severity.WARNING, "a lock file that does not start with the bytes 'lock'"),
    # config/*.json
    "configUnparseable": (Severity.ERROR, "a config file that is not fastjson text"),
    "configBakUsed": (Severity.WARNING, "a config file missing, empty or broken: the broker loads its .bak"),
    "configTmpLeftover": (Severity.WARNING, "a .tmp config file left by an interrupted persist"),
    "configTableInvalid": (Severity.ERROR, "a config file that parses but whose tables are not as the broker writes them"),
    "configTooLarge": (Severity.ERROR, "a config file too large to be one the broker wrote: not read"),
    # consume queues
    "queueDirInvalid": (Severity.WARNING, "an entry under a consume queue root that is not TOPIC/QUEUEID/"),
    "consumeQueueFileMisaligned": (Severity.ERROR, "a consume queue file named off the unit size"),
    "consumeQueueHole": (Severity.ERROR, "unwritten (all-zero) units before the end of a consume queue"),
    "consumeQueueUnitInvalid": (Severity.ERROR, "a unit with offset < 0 or size <= 0 that is not all zeros"),
    "batchConsumeQueueOffsetGap": (Severity.ERROR, "a batch unit whose msgBaseOffset does not follow on"),
    "consumeQueueBeyondCommitLog": (Severity.WARNING, "units pointing at or past the commit log's max offset"),
    "consumeQueueFileAfterEnd": (Severity.WARNING, "a consume queue file after its queue's end: the broker deletes it"),
    # index files
    "indexFileNameInvalid": (Severity.WARNING, "a file in index/ whose name is not a yyyyMMddHHmmssSSS time"),
    "indexFileUnreadable": (Severity.ERROR, "an index file whose header or entries cannot be located"),
    "indexGeometryUnknown": (Severity.WARNING, "an index file whose slot and entry counts cannot be inferred"),
    "indexChainBroken": (Severity.ERROR, "a hash chain that points outside the entries or loops"),
    "indexHeaderInvalid": (Severity.ERROR, "an index header with a negative indexCount or hashSlotCount, "
                                           "or more slots in use than entries"),
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
# commit log records
BODY_CRC_MISMATCH = "bodyCrcMismatch"
PROPERTY_CRC_MISMATCH = "propertyCrcMismatch"
RECORD_MAGIC_INVALID = "recordMagicInvalid"
RECORD_SIZE_INVALID = "recordSizeInvalid"
RECORD_LENGTH_MISMATCH = "recordLengthMismatch"
RECORD_OFFSET_MISMATCH = "recordOffsetMismatch"
RECORD_TRUNCATED = "recordTruncated"
PROPERTIES_INVALID_UTF8 = "propertiesInvalidUtf8"
TOPIC_INVALID_UTF8 = "topicInvalidUtf8"
BLANK_RECORD_INVALID = "blankRecordInvalid"
BLANK_RECORD_MISSING = "blankRecordMissing"
TRAILING_GARBAGE = "trailingGarbage"
BODY_DECOMPRESS_FAILED = "bodyDecompressFailed"
RECORD_TORN = "recordTorn"
# checkpoint and markers
CHECKPOINT_INVALID = "checkpointInvalid"
ABORT_FILE_PRESENT = "abortFilePresent"
ABORT_FILE_UNEXPECTED = "abortFileUnexpected"
LOCK_FILE_UNEXPECTED = "lockFileUnexpected"
# config/*.json
CONFIG_UNPARSEABLE = "configUnparseable"
CONFIG_BAK_USED = "configBakUsed"
CONFIG_TMP_LEFTOVER = "configTmpLeftover"
CONFIG_TABLE_INVALID = "configTableInvalid"
CONFIG_TOO_LARGE = "configTooLarge"
# consume queues
QUEUE_DIR_INVALID = "queueDirInvalid"
CONSUME_QUEUE_FILE_MISALIGNED = "consumeQueueFileMisaligned"
CONSUME_QUEUE_HOLE = "consumeQueueHole"
CONSUME_QUEUE_UNIT_INVALID = "consumeQueueUnitInvalid"
BATCH_CONSUME_QUEUE_OFFSET_GAP = "batchConsumeQueueOffsetGap"
CONSUME_QUEUE_BEYOND_COMMIT_LOG = "consumeQueueBeyondCommitLog"
CONSUME_QUEUE_FILE_AFTER_END = "consumeQueueFileAfterEnd"
# index files
INDEX_FILE_NAME_INVALID = "indexFileNameInvalid"
INDEX_FILE_UNREADABLE = "indexFileUnreadable"
INDEX_GEOMETRY_UNKNOWN = "indexGeometryUnknown"
INDEX_CHAIN_BROKEN = "indexChainBroken"
INDEX_HEADER_INVALID = "indexHeaderInvalid"


@dataclasses.dataclass(slots=True, frozen=True)
class Finding:
    id: str
    path: str | None
    offset: int | None
    message: str
    severity: Severity = None  # filled from the registry

    def __post_init__(self):
        if self.id not in REGISTRY:
            raise KeyError(f"unknown finding id {self.id!r}")
        if self.severity is None:
            object.__setattr__(self, "severity", REGISTRY[self.id][0])

    def to_json(self) -> dict:
        return {"finding": self.id, "severity": self.severity.value, "path": self.path,
                "offset": self.offset, "message": self.message}

    def one_line(self) -> str:
        where = self.path or ""
        if self.offset is not None:
            where += f" at offset {self.offset}"
        return f"{self.severity.value}: {self.id}: {where}: {self.message}"
