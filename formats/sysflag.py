"""sysFlag: the 32-bit field of a commit log record whose bits say how to read the rest.

Mirrors ``common/src/main/java/org/apache/rocketmq/common/sysflag/MessageSysFlag.java``
(4.9.8 has bits 0-5; 5.3.3 adds need-unwrap, inner-batch and the compression type).

::

    bit  31 .............. 11 | 10  9  8 |  7  |  6  |  5   |  4   | 3  2 |  1  |  0
        +---------------------+----------+-----+-----+------+------+------+-----+-----+
        |      reserved       | compress |inner|need |store |born  | tran |multi|compr|
        |                     |   type   |batch|unwrp|hostv6|hostv6| type |tags |essed|
        +---------------------+----------+-----+-----+------+------+------+-----+-----+

    transaction type: 0 not, 1 prepared, 2 commit, 3 rollback
    compression type: 1 lz4, 2 zstd, 3 zlib (0: none given; 4.x clients meant zlib)
"""
from construct import BitStruct, BitsInteger, Enum, Flag

COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x1 << 1
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED_TYPE = 0x1 << 2
TRANSACTION_COMMIT_TYPE = 0x2 << 2
TRANSACTION_ROLLBACK_TYPE = 0x3 << 2
TRANSACTION_MASK = TRANSACTION_ROLLBACK_TYPE
BORNHOST_V6_FLAG = 0x1 << 4
STOREHOSTADDRESS_V6_FLAG = 0x1 << 5
NEED_UNWRAP_FLAG = 0x1 << 6
INNER_BATCH_FLAG = 0x1 << 7
COMPRESSION_LZ4_TYPE = 0x1 << 8
COMPRESSION_ZSTD_TYPE = 0x2 << 8
COMPRESSION_ZLIB_TYPE = 0x3 << 8
COMPRESSION_TYPE_MASK = 0x7 << 8

TransactionType = Enum(BitsInteger(2), not_type=0, prepared=1, commit=2, rollback=3)
CompressionType = Enum(BitsInteger(3), none=0, lz4=1, zstd=2, zlib=3)

# The field as named bits. Big-endian int32, so the low byte comes last.
SysFlag = BitStruct(
    "reserved" / BitsInteger(21),
    "compression_type" / CompressionType,
    "inner_batch" / Flag,
    "need_unwrap" / Flag,
    "store_host_v6" / Flag,
    "born_host_v6" / Flag,
    "transaction_type" / TransactionType,
    "multi_tags" / Flag,
    "compressed" / Flag,
)
assert SysFlag.sizeof() == 4

TRANSACTION_NAMES = {0: "not", 1: "prepared", 2: "commit", 3: "rollback"}
COMPRESSION_NAMES = {0: None, 1: "lz4", 2: "zstd", 3: "zlib"}


def transaction_type(sys_flag: int) -> int:
    """0 not, 1 prepared, 2 commit, 3 rollback (MessageSysFlag.getTransactionValue >> 2)."""
    return (sys_flag & TRANSACTION_MASK) >> 2


def enters_consume_queue(sys_flag: int) -> bool:
    """Whether a record gets a queue offset and a consume queue unit: not a transaction's
    PREPARED or ROLLBACK half (doAppend gives those queue offset 0; dispatch writes no unit)."""
    return sys_flag & TRANSACTION_MASK in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)


def compression_type(sys_flag: int) -> int:
    return (sys_flag & COMPRESSION_TYPE_MASK) >> 8


def describe(sys_flag: int) -> dict:
    """The sysFlag as a dict of named bits, for people and JSON output."""
    bits = SysFlag.parse((sys_flag & 0xFFFFFFFF).to_bytes(4, "big"))
    return {
        "compressed": bits.compressed,
        "multi_tags": bits.multi_tags,
        "transaction_type": TRANSACTION_NAMES[int(bits.transaction_type)],
        "born_host_v6": bits.born_host_v6,
        "store_host_v6": bits.store_host_v6,
        "need_unwrap": bits.need_unwrap,
        "inner_batch": bits.inner_batch,
        "compression_type": COMPRESSION_NAMES.get(int(bits.compression_type), str(int(bits.compression_type))),
        "reserved": bits.reserved,
    }
