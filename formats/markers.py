"""The store root's marker files: ``abort`` (and 5.x ``abort.bak``) and ``lock``.

Mirrors ``DefaultMessageStore.createTempFile`` / ``shutdown`` and the lock taken in
``DefaultMessageStore.start`` (``store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java``
at 4.9.8 and 5.3.3), and ``MixAll.string2File`` (``common/.../MixAll.java`` at 5.3.3).

``abort``: start() creates it and a clean shutdown() deletes it, so finding it means the
last broker did not shut down cleanly (recovery then takes the abnormal path)::

    4.9.8:  +--+        empty file (File.createNewFile)
            +--+
    5.3.3:  +-----------------+
            | PID, ASCII text |  MixAll.string2File(Long.toString(MixAll.getPID()))
            +-----------------+

``abort.bak`` (5.x only): string2File first copies the previous ``abort`` content here,
so after a clean run it stays behind: empty in a fresh store, the crashed broker's PID
after a recovery.

``lock``: the broker opens it read-write, takes an exclusive FileLock on byte 0 (length 1)
for as long as it runs, and writes the 4 ASCII bytes ``lock`` at position 0 (the file is
never truncated, so longer content could follow)::

     0 +----+----+----+----+
       | l  | o  | c  | k  |
     4 +----+----+----+----+
"""
from __future__ import annotations

from construct import Bytes, GreedyBytes, Struct

ABORT_FILE_NAME = "abort"
ABORT_BAK_FILE_NAME = "abort.bak"
LOCK_FILE_NAME = "lock"

LOCK_CONTENT = b"lock"
# The region a running broker holds: FileChannel.tryLock(0, 1, false), an exclusive lock.
LOCK_REGION_START = 0
LOCK_REGION_LENGTH = 1

# abort / abort.bak: nothing (4.x, or a fresh 5.x abort.bak) or the PID in decimal ASCII.
AbortFile = Struct(
    "pid_text" / GreedyBytes,
)

LockFile = Struct(
    "content" / Bytes(len(LOCK_CONTENT)),
)
assert LockFile.sizeof() == 4


def parse_pid(content: bytes) -> int | None:
    """The PID an abort file names, or None when it is empty or not a decimal number."""
    text = content.strip()
    if not text or not text.isdigit():
        return None
    return int(text)
