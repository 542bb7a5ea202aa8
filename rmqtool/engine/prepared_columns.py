"""Many messages encoded at once (:class:`PreparedColumns`, from Encoder.prepare_columns) and
their records laid out once placed (:func:`records_of`): the append_many path for messages
of one shape (topic, hosts, sysFlag), the columns a record takes from each message side by
side, so the work a message is done by C loops (map, join, numpy) instead of Python ones.
The bytes are prepare_fields' and write_record's: the head is the record schema's own
numpy dtype (formats/commitlog.py through store/arrays.dtype_of)."""
from __future__ import annotations

from typing import NamedTuple

from rmqtool.store.message import PROPERTIES_LENGTH

_HEAD_DTYPES: dict[int, object] = {}


def head_dtype(hosts_index: int):
    """A record's head (prefix and hosts, up to bodyLength) as a numpy dtype, for a host kind."""
    dtype = _HEAD_DTYPES.get(hosts_index)
    if dtype is None:
        import construct as cs

        from rmqtool.formats.commitlog import MessageHosts, MessagePrefix
        from rmqtool.store.arrays import dtype_of
        dtype = _HEAD_DTYPES[hosts_index] = dtype_of(cs.Struct(*MessagePrefix.subcons,
                                                                *MessageHosts[hosts_index].subcons))
    return dtype


class PreparedColumns(NamedTuple):
    """What prepare_fields gives for each message, as columns (lists, numpy int64 arrays where
    the head takes them), with what the shape gives once."""
    topic: str
    magic: int
    tpart: bytes  # topic length field + topic
    sys_flag: int  # with the V6 bits
    hosts_index: int
    born_ip: bytes
    born_port: int
    store_ip: bytes
    store_port: int
    gets_queue_offset: bool
    sizes: object  # totalSize of each record (numpy)
    bodies: list
    props: list  # stored properties, encoded
    crcs: object  # body CRCs, masked (numpy)
    queue_ids: list
    flags: list
    born_timestamps: list
    reconsume_times: list
    prepared_transaction_offsets: list
    tags_codes: list
    keys: list
    uniq_keys: list
    store_timestamps: list | None  # None: the store's clock, per record

    def __len__(self) -> int:
        return len(self.bodies)


def records_of(cols: PreparedColumns, i: int, j: int, queue_offsets, physical_offsets, store_timestamps) -> bytes:
    """Records ``i`` to ``j`` of ``cols`` as placed (queue and physical offsets and store
    timestamps of those records, numpy arrays), end to end: what write_record writes for each."""
    import numpy as np

    dtype = head_dtype(cols.hosts_index)
    n = j - i
    head = np.zeros(n, dtype)
    head["total_size"] = cols.sizes[i:j]
    head["magic_code"] = cols.magic
    head["body_crc"] = cols.crcs[i:j]
    head["queue_id"] = cols.queue_ids[i:j]
    head["flag"] = cols.flags[i:j]
    head["queue_offset"] = queue_offsets
    head["physical_offset"] = physical_offsets
    head["sys_flag"] = cols.sys_flag
    head["born_timestamp"] = cols.born_timestamps[i:j]
    head["born_host"] = np.void(cols.born_ip)
    head["born_port"] = cols.born_port
    head["store_timestamp"] = store_timestamps
    head["store_host"] = np.void(cols.store_ip)
    head["store_port"] = cols.store_port
    head["reconsume_times"] = cols.reconsume_times[i:j]
    head["prepared_transaction_offset"] = cols.prepared_transaction_offsets[i:j]
    bodies = cols.bodies[i:j]
    head["body_length"] = list(map(len, bodies))
    raw = head.tobytes()
    size = dtype.itemsize
    props = cols.props[i:j]
    lengths = list(map(len, props))
    tails = {n: cols.tpart + PROPERTIES_LENGTH.pack(n) for n in set(lengths)}
    pieces = [b""] * (4 * n)
    pieces[0::4] = map(raw.__getitem__, map(slice, range(0, n * size, size), range(size, n * size + size, size)))
    pieces[1::4] = bodies
    pieces[2::4] = map(tails.__getitem__, lengths)
    pieces[3::4] = props
    return b"".join(pieces)
