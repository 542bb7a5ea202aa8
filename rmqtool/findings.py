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
    # checkpoint and markers
    "checkpointInvalid": (Severity.ERROR, "a checkpoint file that cannot be read (wrong size)"),
    "abortFilePresent": (Severity.WARNING, "the abort file exists: the last broker did not shut down cleanly"),
    "abortFileUnexpected": (Severity.WARNING, "an abort file that is neither empty nor a PID"),
    "lockFileUnexpected": (Severity.WARNING, "a lock file that does not start with the bytes 'lock'"),
    # config/*.json
    "configUnparseable": (Severity.ERROR, "a config file that is not fastjson text"),
    "configBakUsed": (Severity.WARNING, "a config file missing, empty or broken: the broker loads its .bak"),
    "configTmpLeftover": (Severity.WARNING, "a .tmp config file left by an interrupted persist"),
    "consumerOffsetTableInvalid": (Severity.ERROR, "a consumerOffset.json offsetTable (or entry) the broker cannot load"),
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
    # index files
    "indexFileNameInvalid": (Severity.WARNING, "a file in index/ whose name is not a yyyyMMddHHmmssSSS time"),
    "indexFileUnreadable": (Severity.ERROR, "an index file whose header or entries cannot be located"),
    "indexGeometryUnknown": (Severity.WARNING, "an index file whose slot and entry counts cannot be inferred"),
    "indexChainBroken": (Severity.ERROR, "a hash chain that points outside the entries or loops"),
}


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
