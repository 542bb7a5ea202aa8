"""Which columns a table shows, per kind of row, and how a cell reads for people.

Every column is a JSON field of the row (docs/vocabulary.md): a table shows the same
values as JSON, only written for people: ``*_timestamp`` fields as UTC ISO 8601 with
milliseconds, a file's size in KiB/MiB/GiB (a column made by :func:`file_size`; every other
byte count, a record's or a region's, stays exact: offsets add up with it), lists joined by
spaces, free text cut with an ellipsis (and only free text: see ``Column.cut``). Each kind
lists its columns in display order with a rank: at a given width the lowest ranks that fit
are shown (the narrowest set at 80 columns, more at 120); rank None is a ``--wide`` column.
``--columns a,b,c`` shows exactly those, and any JSON field of the kind is valid there.
"""
from __future__ import annotations

import dataclasses
import datetime
import functools
import unicodedata

from rmqtool.errors import UsageError

GAP = 2  # spaces between columns
DEFAULT_WIDTH = 80  # stdout not a terminal and COLUMNS unset, as Python's shutil and GNU ls


# How a column's values may be shortened to fit its width (report/shorten.py does it). A table
# leaves out whole columns before it cuts anything else than free text, and never cuts a value
# so far that two different values print alike.
NEVER = "never"  # numbers, offsets, times, flags, IDs (msgId, UNIQ_KEY, a finding): whole, always
TEXT = "text"  # free text (a body, properties, a message): cut at its end
ITEMS = "items"  # a list (keys, offsets): cut between its items, never inside one
HEAD = "head"  # an identifier, then words (OFFSET_TOO_SMALL: PULL_OFFSET_MOVED, ...): only the words cut
NAME = "name"  # a topic, group or subject: cut at its end while the names shown stay distinct
PATH = "path"  # a file: cut at its start, never into its file name, while the files shown stay distinct
VALUE = "value"  # diff's values: a number or a string whole, an object or a list as TEXT


@dataclasses.dataclass(frozen=True, slots=True)
class Column:
    name: str  # the JSON field
    rank: int | None  # lower shows first as width allows; None: only with --wide or --columns
    width: int = 0  # the width kept for it when there is room (0: the header's); text: the most it grows to
    flex: int = 0  # > 0: a column that can be cut, to as few as this many cells (with an ellipsis)
    right: bool = False  # numbers align right
    file_size: bool = False  # a file's size in bytes, shown in KiB/MiB/GiB
    cut: str = NEVER  # how its values may be shortened (above); a number never is, in any column
    old: bool = False  # a renamed field's old name (docs/vocabulary.md): --columns may ask for it, --wide shows the new


def num(name: str, rank: int | None, width: int = 0) -> Column:
    return Column(name, rank, max(width, len(name)), right=True)


def old_num(name: str) -> Column:
    """A number's old name, which rows carry until the renaming's release: not a --wide column."""
    return dataclasses.replace(num(name, None), old=True)


def file_size(name: str, rank: int | None, width: int = 0) -> Column:
    """A file's size (a segment's, an index file's): read in KiB/MiB/GiB. A record's length or
    any other count of bytes is a :func:`num`, exact."""
    return Column(name, rank, max(width, len(name)), right=True, file_size=True)


def text(name: str, rank: int | None, most: int, least: int = 8, cut: str = TEXT) -> Column:
    """A column that can be cut (free text unless ``cut`` says otherwise), from ``most`` cells to ``least``."""
    return Column(name, rank, max(most, len(name)), flex=max(least, len(name)), cut=cut)


def fixed(name: str, rank: int | None, width: int = 0) -> Column:
    """Text never cut (a flag, a time, an ID): as wide as its values."""
    return Column(name, rank, max(width, len(name)))


TIME = 24  # 2026-11-22T02:43:15.033Z

# What every finding row has, and what locates one in each family's terms (the details
# its checks give: rmqtool.findings.finding's keyword fields)
_FINDING = (fixed("finding", 1, 30), fixed("severity", 2, 8), text("path", 4, 60, 24, cut=PATH), num("offset", 5, 10),
            text("message", 3, 120, 36), fixed("consequence", None, 13))
_ROCKETMQ_FINDING = (text("topic", None, 40, cut=NAME), num("queue_id", None), num("queue_offset", None),
                     num("commit_log_offset", None))
_QMQ_FINDING = (text("subject", None, 40, cut=NAME), num("sequence", None), num("message_log_offset", None),
                num("action_log_offset", None), num("store_size", None), num("records", None), num("sequences", None),
                num("actions", None))

# Kinds of rows and their columns, in display order. A kind's full list names every field a
# row of that kind has in JSON (docs/vocabulary.md), so --columns can ask for any of them.
VIEWS: dict[str, tuple[Column, ...]] = {
    "message": (
        text("store_path", 0, 40, 12, cut=PATH), num("commit_log_offset", 1), num("store_size", 6, 5),
        text("topic", 2, 40, 10, cut=NAME), num("queue_id", 3),
        num("queue_offset", 4), fixed("store_timestamp", 5, TIME), text("tags", 8, 24, cut=NAME),
        text("keys", 7, 40, cut=ITEMS), fixed("body_crc_ok", 10), text("body", 9, 60, 10),
        fixed("record", None), fixed("magic_code", None, 10), num("message_version", None), num("body_crc", None),
        num("flag", None), num("physical_offset", None), num("sys_flag", None), fixed("born_timestamp", None, TIME),
        fixed("born_host", None, 47), fixed("store_host", None, 47), num("reconsume_times", None),
        num("prepared_transaction_offset", None), num("body_length", None), fixed("body_compression", None),
        text("properties", None, 80), text("properties_raw", None, 80), fixed("uniq_key", None, 32),
        fixed("msg_id", None, 56), text("file", None, 80, cut=PATH), num("file_position", None),
        fixed("property_crc_ok", None), fixed("properties_utf8_ok", None), fixed("topic_utf8_ok", None),
        fixed("body_decompressed", None), text("body_decompress_error", None, 60)),
    "cq_unit": (
        text("topic", 1, 40, 10, cut=NAME), num("queue_id", 2), num("queue_offset", 3), num("commit_log_offset", 4),
        num("store_size", 5), num("tags_code", 6, 20), fixed("valid", 7), fixed("is_fill", 8),
        fixed("store_timestamp", 9, TIME), num("msg_base_offset", 10), num("batch_size", 11),
        num("compacted_offset", None), text("file", None, 100, cut=PATH), num("file_position", None), old_num("size"),
        num("ext_address", None, 20), fixed("ext_lookup", None, 19), fixed("filter_bit_map", None, 28)),
    "compaction_record": (
        text("topic", 1, 40, 10, cut=NAME), num("queue_id", 2), num("queue_offset", 3), num("compaction_log_offset", 4),
        num("store_size", 5, 5), fixed("compaction_key", 6, 40), fixed("tombstone", 7),
        fixed("store_timestamp", 8, TIME),
        text("tags", 9, 24, cut=NAME), fixed("body_crc_ok", None), fixed("record", None),
        text("keys", None, 40, cut=ITEMS),
        fixed("uniq_key", None, 32), num("body_length", None), num("physical_offset", None), fixed("finding", None, 24),
        text("reason", None, 60, cut=HEAD), text("file", None, 100, cut=PATH), num("file_position", None)),
    "compaction_unit": (
        text("topic", 1, 40, 10, cut=NAME), num("queue_id", 2), num("queue_offset", 3), num("compaction_log_offset", 4),
        num("store_size", 5), fixed("end_position", 6), num("tags_code", 7, 20), fixed("store_timestamp", 8, TIME),
        num("batch_size", None), num("compacted_offset", None), text("file", None, 100, cut=PATH),
        num("file_position", None)),
    "position_checkpoint": (
        text("topic", 1, 40, 10, cut=NAME), num("queue_id", 2), num("checkpoint_offset", 3),
        text("path", 4, 100, 20, cut=PATH)),
    "epoch_entry": (
        num("epoch", 1), num("start_offset", 2), num("end_offset", 3), num("line", 4),
        text("file", 5, 100, 20, cut=PATH)),
    "compaction_queue": (
        text("topic", 1, 40, 10, cut=NAME), num("queue_id", 2), num("min_queue_offset", 3), num("max_queue_offset", 4),
        num("messages", 5, 8), num("records", 6, 7), num("tombstones", 7), num("live_keys", 8),
        num("checkpoint_offset", 9), num("files", 10, 5)),
    "dledger_entry": (
        fixed("record", 1, 13), num("entry_index", 2), num("term", 3), num("pos", 4, 12), num("size", 5, 10),
        num("commit_log_offset", 6, 12), text("topic", 7, 40, 10, cut=NAME), num("queue_id", 8), num("queue_offset", 9),
        fixed("body_crc_ok", 10), num("magic", None), num("channel", None), num("chain_crc", None),
        num("entry_body_crc", None), num("body_length", None), num("store_size", None),
        num("physical_offset", None), fixed("store_timestamp", None, TIME), fixed("msg_id", None, 32),
        num("valid", None), fixed("finding", None, 24), text("reason", None, 60, cut=HEAD),
        text("file", None, 100, cut=PATH),
        num("file_position", None)),
    "dledger_index_unit": (
        num("slot", 1), num("entry_index", 2), num("term", 3), num("pos", 4, 12), num("size", 5, 10), num("magic", 6),
        text("file", None, 100, cut=PATH), num("file_position", None)),
    "cq_ext_unit": (
        text("topic", 1, 40, 10, cut=NAME), num("queue_id", 2), fixed("record", 3, 4), num("real_offset", 4),
        num("tags_code", 5, 20), fixed("store_timestamp", 6, TIME), num("bit_map_size", 7),
        fixed("filter_bit_map", 8, 28), fixed("stop", 9, 18), num("address", None, 20), num("size", None),
        num("size_field", None), text("file", None, 100, cut=PATH), num("file_position", None)),
    "index_header": (
        text("file", 1, 100, 20, cut=PATH), fixed("begin_timestamp", 2, TIME), fixed("end_timestamp", 3, TIME),
        num("index_count", 4), num("begin_commit_log_offset", 5), num("end_commit_log_offset", 6),
        num("hash_slot_count", 7), fixed("write_full", 8), num("max_hash_slot_num", None),
        num("max_index_num", None), fixed("record", None), fixed("begin_time", None, TIME),
        fixed("end_time", None, TIME), old_num("begin_phy_offset"), old_num("end_phy_offset")),
    "index_entry": (
        num("index", 1, 9), num("key_hash", 2, 11), num("commit_log_offset", 3), fixed("timestamp", 4, TIME),
        num("time_diff", 5, 10), num("prev_index", 6, 10), num("file_position", 7, 10),
        text("file", None, 100, cut=PATH), fixed("record", None), fixed("time", None, TIME), old_num("phy_offset")),
    "index_slot": (num("slot", 1, 10), num("index", 2, 10), text("file", 3, 100, 20, cut=PATH), fixed("record", None)),
    "checkpoint": (
        fixed("physic_msg_timestamp", 1, TIME), fixed("logics_msg_timestamp", 2, TIME),
        fixed("index_msg_timestamp", 3, TIME), fixed("min_timestamp", None, TIME),
        num("master_flushed_offset", None), num("confirm_phy_offset", None), fixed("has_5x_fields", None),
        text("file", None, 100, cut=PATH)),
    "config": (text("file", 1, 24, cut=PATH), fixed("source", 2, 6), text("document", 3, 200, 20),
               text("path", None, 100, cut=PATH)),
    # the 5.x timer store (inspect/timer/dumps.py)
    "timer_slot": (
        num("slot_index", 1, 8), fixed("slot_timestamp", 2, TIME), num("first_timer_log_offset", 4),
        num("last_timer_log_offset", 3), num("num", 5, 5), fixed("index_matches_time", 6), num("magic", None),
        num("time_value", None), text("file", None, 100, cut=PATH), num("file_position", None),
        fixed("slot_time", None, TIME)),
    "timer_unit": (
        fixed("record", 7, 7), num("timer_log_offset", 1), num("prev_timer_log_offset", 5), num("magic", None, 5),
        text("magic_flags", 6, 40, 13, cut=ITEMS), num("commit_log_offset", 3), num("size", 8, 5),
        fixed("write_timestamp", 9, TIME), fixed("deliver_timestamp", 2, TIME), num("slot_index", 4, 8),
        num("real_topic_hash", None, 11), num("delay_ms", None), num("unit_size", None), num("reserved", None),
        text("reason", 10, 60, 12, cut=HEAD), fixed("non_zero_after", None), text("file", None, 100, cut=PATH),
        num("file_position", None), fixed("write_time", None, TIME), fixed("deliver_time", None, TIME),
        text("real_topic", 4, 30, 10, cut=NAME), text("keys", 5, 24, 8, cut=ITEMS),
        text("record_topic", None, 30, cut=NAME),
        fixed("uniq_key", None, 32), text("record_error", None, 60)),
    "timer_file": (fixed("name", 1, 24), fixed("present", 2)),
    "timer_pending_slot": (
        num("slot_index", 1, 8), fixed("slot_timestamp", 2, TIME), num("num", 3, 5), num("last_timer_log_offset", 4),
        fixed("slot_time", None, TIME)),
    "timer_topic_count": (text("topic", 1, 40, 10, cut=NAME), num("count", 2), fixed("metric_timestamp", 3, TIME),
                          fixed("metric_time", None, TIME)),
    "side_store": (fixed("name", 1, 20), text("read_by", 2, 28, 12), text("description", 3, 70, 20),
                   text("path", None, 100, cut=PATH)),
    "timer_message": (
        text("keys", 1, 24, 8, cut=ITEMS), fixed("timer_state", 2, 12), text("real_topic", 3, 30, 10, cut=NAME),
        num("real_queue_id", None),
        fixed("fire_timestamp", 4, TIME), fixed("delivered_timestamp", 5, TIME), num("roll_times", 7, 5),
        text("timer_log_offsets", 6, 30, 10, cut=ITEMS), fixed("uniq_key", 8, 32), num("slot_index", None, 8),
        text("timer_record_offsets", None, 40, cut=ITEMS), text("timer_queue_offsets", None, 30, cut=ITEMS),
        text("delivered_offsets", None, 40, cut=ITEMS), text("recall_offsets", None, 40, cut=ITEMS),
        fixed("read_timestamp", None, TIME),
        text("store_path", None, 40, cut=PATH), fixed("fire_time", None, TIME), fixed("delivered_time", None, TIME),
        fixed("read_time", None, TIME)),
    "timer_metric": (
        text("topic", 1, 40, 10, cut=NAME), num("count", 2), fixed("metric_timestamp", 3, TIME), fixed("source", 4, 6),
        num("data_version_counter", 5), fixed("data_version_timestamp", None, TIME),
        num("data_version_state_version", None), text("file", None, 100, cut=PATH), fixed("metric_time", None, TIME),
        fixed("data_version_time", None, TIME)),
    # QMQ's store (report/qmq/records.py)
    "qmq_message": (
        num("message_log_offset", 1), text("subject", 2, 40, 10, cut=NAME), num("sequence", 3), num("store_size", 6, 5),
        fixed("store_timestamp", 5, TIME), fixed("message_id", 4, 40), text("tags", 8, 24, cut=NAME),
        fixed("payload_crc_ok", 7), text("body", 9, 60, 10), fixed("record", None), fixed("family", None),
        num("header_size", None), fixed("magic_code", None, 10), num("message_version", None),
        num("payload_crc", None), num("payload_length", None), text("payload_subject", None, 60, cut=NAME),
        num("flag", None), fixed("delay", None), fixed("low_reliability", None),
        fixed("created_timestamp", None, TIME), fixed("expire_timestamp", None, TIME), text("attrs", None, 80),
        num("body_length", None), text("payload_error", None, 60), text("reason", None, 60, cut=HEAD),
        text("file", None, 100, cut=PATH), num("file_position", None)),
    "qmq_unit": (
        text("subject", 1, 40, 10, cut=NAME), num("sequence", 2), fixed("kind", 3, 7), num("message_log_offset", 4),
        num("store_size", 5), num("header_size", 6), fixed("store_timestamp", 7, TIME), fixed("record", None),
        fixed("family", None), num("tablet_id", None), num("tablet_position", None), text("file", None, 100, cut=PATH),
        num("file_position", None)),
    "qmq_action": (
        num("action_log_offset", 1), fixed("action", 2, 15), text("subject", 3, 40, 10, cut=NAME),
        text("group", 4, 30, 10, cut=NAME),
        fixed("consumer_id", 5, 30), num("first_sequence", 6), num("last_sequence", 7),
        fixed("store_timestamp", 8, TIME), num("first_pull_sequence", None), num("last_pull_sequence", None),
        fixed("broadcast", None), num("action_log_end_offset", None), num("store_size", None),
        fixed("record", None), fixed("family", None), text("reason", None, 60, cut=HEAD),
        text("file", None, 100, cut=PATH),
        num("file_position", None)),
    "qmq_pull": (
        fixed("consumer_id", 1, 30), text("group", 2, 30, 10, cut=NAME), text("subject", 3, 40, 10, cut=NAME),
        num("pull_sequence", 4), num("sequence", 5), fixed("record", None), fixed("family", None),
        text("file", None, 100, cut=PATH), num("file_position", None)),
    "qmq_checkpoint": (  # a message checkpoint and an action checkpoint: the record says which
        fixed("record", 1), text("file", 2, 80, 20, cut=PATH), num("version", 3, 12), fixed("loaded", 4),
        num("message_log_offset", 5), num("action_log_offset", 6), text("reason", 7, 60, 12, cut=HEAD),
        text("max_sequences", None, 80), text("groups", None, 80), fixed("family", None)),
    # findings: every family's rows share the first fields and locate the damage in their own
    # engine's terms (verify and info: the store's family's kind, FamilyTools.finding_kind)
    "finding": (*_FINDING, *_ROCKETMQ_FINDING),
    "qmq_finding": (*_FINDING, *_QMQ_FINDING),
    # spark verify: stores of both families, each row naming its store
    "fleet_finding": (fixed("store_name", 0, 24), *_FINDING, *_ROCKETMQ_FINDING, *_QMQ_FINDING),
    # rmqtool diff (inspect/diff.py): one kind, a ``record`` a difference, then the summary
    "diff": (
        fixed("record", 1, 21), fixed("side", 2, 4), num("commit_log_offset", 3), text("reason", 4, 60, 12, cut=HEAD),
        text("topic", 8, 30, 10, cut=NAME), num("queue_id", 9), text("field", 5, 40, 16, cut=ITEMS),
        text("a", 6, 30, 8, cut=VALUE),
        text("b", 7, 30, 8, cut=VALUE), text("group", 10, 30, 10, cut=NAME), text("file", 11, 40, 12, cut=PATH),
        num("queue_offset", None),
        fixed("uniq_key", None, 32), num("store_size", None), fixed("store_timestamp", None, TIME),
        num("first_different_byte", None), num("bytes_past", None), num("messages_past", None),
        text("fields", None, 60, cut=ITEMS), fixed("equal", None), num("differences", None), text("counts", None, 80),
        text("store_a", None, 100, cut=PATH), text("store_b", None, 100, cut=PATH), num("written_end_a", None),
        num("written_end_b", None), num("messages_only_in_a", None), num("messages_only_in_b", None),
        num("messages_matched_by_uniq_key", None), fixed("store_time", None, TIME), num("epoch", None),
        fixed("sync", None, 19), num("consistent_point", None), num("max_offset_a", None), num("max_offset_b", None)),
    # its rows of one queue's range on each side, and of one field (a checkpoint's or config file's,
    # an epoch's): tables of their own, so that at 80 columns the field and both sides' values show
    "diff_queue": (
        fixed("record", 1, 11), text("topic", 2, 30, 10, cut=NAME), num("queue_id", 3),
        text("field", 4, 40, 16, cut=ITEMS), text("a", 5, 30, 8, cut=VALUE), text("b", 6, 30, 8, cut=VALUE)),
    "diff_field": (
        fixed("record", 1, 16), text("field", 2, 40, 16, cut=ITEMS), text("a", 3, 30, 8, cut=VALUE),
        text("b", 4, 30, 8, cut=VALUE), text("file", 5, 40, 12, cut=PATH), text("topic", 6, 30, 10, cut=NAME),
        text("group", 7, 30, 10, cut=NAME), num("queue_id", 8), num("epoch", 9), text("reason", 10, 60, 12, cut=HEAD)),
    "offset": (
        # the lag first after where it is: what an operator opens offsets for, at 80 columns too
        text("group", 1, 30, 10, cut=NAME), text("topic", 2, 30, 10, cut=NAME), num("queue_id", 3),
        num("committed_offset", 7, 12),
        num("lag_messages", 4, 12), num("min_queue_offset", 9, 12), num("max_queue_offset", 8, 12),
        old_num("min_offset"), old_num("max_offset"), num("lag_ms", 6, 10),
        fixed("next_store_timestamp", 10, TIME), fixed("newest_store_timestamp", 11, TIME),
        text("status", 5, 80, 16, cut=HEAD), fixed("pull_status", None, 21), num("next_pull_offset", None)),
    # QMQ info: the action checkpoint's groups, and the progress the next start has (inspect/qmq/inventory.py)
    "qmq_group": (
        text("subject", 1, 40, 12, cut=NAME), text("group", 2, 30, 12, cut=NAME), num("max_pulled_sequence", 3),
        fixed("broadcast", 5),
        text("consumers", 4, 100, 16)),
    "qmq_consumer_progress": (
        text("subject", 1, 40, 12, cut=NAME), text("group", 2, 30, 12, cut=NAME), num("pull", 3), fixed("broadcast", 5),
        text("consumers", 4, 100, 16)),
    # QMQ report: a subject's consumer log range (inspect/qmq/report_model.py)
    "qmq_consumer_log": (text("subject", 1, 60, 12, cut=NAME), num("first_sequence", 2), num("next_sequence", 3)),
    # QMQ diff (inspect/qmq/diff.py): the rows of two QMQ stores' differences
    "qmq_diff": (
        # subject and group early: a subject's range and a group's progress say nothing without them
        fixed("record", 1, 22), fixed("side", 2, 4), num("message_log_offset", 4), text("reason", 3, 60, 12, cut=HEAD),
        text("subject", 5, 30, 10, cut=NAME), num("sequence", 10), text("field", 7, 40, 9, cut=ITEMS),
        text("a", 8, 30, 8, cut=VALUE), text("b", 9, 30, 8, cut=VALUE), text("group", 6, 30, 10, cut=NAME),
        num("action_log_offset", 11), fixed("message_id", None, 40), num("store_size", None),
        fixed("store_timestamp", None, TIME), num("first_different_byte", None), num("bytes_past", None),
        num("messages_past", None), text("fields", None, 60, cut=ITEMS), fixed("equal", None),
        num("differences", None), text("counts", None, 80), text("store_a", None, 100, cut=PATH),
        text("store_b", None, 100, cut=PATH), num("written_end_a", None), num("written_end_b", None),
        num("messages_only_in_a", None), num("messages_only_in_b", None), num("messages_matched_by_message_id", None),
        num("units_differing", None), num("last_sequence", None)),
    # its rows of one field on each side, a subject's, a group's or a checkpoint's: tables of their
    # own, each with the columns its rows have, so that at 80 columns the field and both sides' values
    # show beside the subject and group (a checkpoint's long field names beside no group column)
    "qmq_diff_subject": (
        fixed("record", 1, 18), text("subject", 2, 30, 10, cut=NAME), text("field", 3, 40, 9, cut=ITEMS),
        text("a", 4, 30, 8, cut=VALUE), text("b", 5, 30, 8, cut=VALUE), num("sequence", 6),
        num("units_differing", 7), num("last_sequence", 8)),
    "qmq_diff_group": (
        fixed("record", 1, 14), text("subject", 2, 30, 10, cut=NAME), text("group", 3, 30, 10, cut=NAME),
        text("field", 4, 40, 4, cut=ITEMS), text("a", 5, 30, 8, cut=VALUE), text("b", 6, 30, 8, cut=VALUE),
        fixed("side", 7, 4), text("reason", 8, 60, 12, cut=HEAD)),
    "qmq_diff_checkpoint": (
        fixed("record", 1, 16), text("subject", 2, 30, 10, cut=NAME), text("field", 3, 40, 9, cut=ITEMS),
        text("a", 4, 30, 8, cut=VALUE), text("b", 5, 30, 8, cut=VALUE)),
    # QMQ offsets: a group's progress in a subject and its lag (inspect/qmq/offsets.py)
    "qmq_offset": (
        text("subject", 1, 40, 12, cut=NAME), text("group", 2, 30, 12, cut=NAME), num("lag_messages", 3, 12),
        num("lag_ms", 4, 10), num("pull", 5), num("next_sequence", 6), num("first_sequence", 8), fixed("broadcast", 7),
        fixed("next_store_timestamp", 9, TIME), fixed("newest_store_timestamp", 10, TIME),
        text("consumers", 11, 100, 16)),
    "offset_reset": (  # rmqtool offsets reset's plan (recovery/offset_reset.py)
        text("group", 1, 30, 10, cut=NAME), text("topic", 2, 30, 10, cut=NAME), num("queue_id", 3),
        num("committed_offset", 4, 12),
        num("new_offset", 5, 12), fixed("changed", 6, 7), num("min_queue_offset", 8, 12),
        num("max_queue_offset", 7, 12), text("note", 9, 80, 16)),
    "check_measure": (
        text("store_path", 1, 40, 12, cut=PATH), fixed("measure", 2, 26), text("topic", 4, 30, 10, cut=NAME),
        num("queue_id", 5),
        text("group", 6, 30, 10, cut=NAME), num("value", 3, 14), fixed("unit", 7, 8), fixed("state", 0, 8),
        fixed("record", None)),
    "appended": (
        text("topic", 1, 40, 10, cut=NAME), num("queue_id", 2), num("queue_offset", 3), num("commit_log_offset", 4),
        fixed("msg_id", 5, 32), fixed("uniq_key", 6, 32)),
    "queue_time": (
        text("store_path", 0, 40, 12, cut=PATH), text("topic", 1, 40, 10, cut=NAME), num("queue_id", 2),
        fixed("time", 3, TIME), num("queue_offset", 4),
        fixed("store_timestamp", 5, TIME)),
    "stats_queue": (
        fixed("store_name", 0, 24), text("topic", 1, 40, 10, cut=NAME), num("queue_id", 2), num("messages", 3, 10),
        num("bytes", 4, 10), num("messages_per_hour", 7, 10),
        fixed("first_store_timestamp", 5, TIME), fixed("last_store_timestamp", 6, TIME),
        num("min_queue_offset", None), num("max_queue_offset", None), fixed("record", None)),
    "stats_finding": (fixed("finding", 1, 30), fixed("severity", 2, 8), num("count", 3, 8),
                      num("bytes_skipped", 4), fixed("record", None)),
    # the fleet (rmqtool spark ...)
    "duplicate_uniq_key": (
        fixed("uniq_key", 1, 32), num("copy_count", 2), num("store_count", 3), text("copies", 4, 200, 30),
        fixed("record", None)),
    "verify_summary": (
        fixed("store_name", 1, 24), num("finding_count", 2), num("error_count", 3), num("warning_count", 4),
        num("info_count", 5), num("exit_code", 6), text("error", 7, 80, 20), text("store_path", None, 100, cut=PATH),
        fixed("record", None)),
    "finding_id": (fixed("finding", 1, 30), fixed("severity", 2, 8), fixed("consequence", 5, 13),
                   text("meaning", 4, 90, 40), text("action", 3, 120, 16)),
    # info's sections
    "segment": (
        text("file", 1, 20, 20, cut=PATH), num("base_offset", 2, 12), num("end_offset", 3, 12), file_size("size", 4, 9),
        num("written_to", 5, 12), fixed("first_store_timestamp", 6, TIME), fixed("preallocated", 7),
        fixed("first_store_time", None, TIME)),
    "consume_queue": (
        text("topic", 1, 40, 10, cut=NAME), num("queue_id", 2), num("min_queue_offset", 3), num("max_queue_offset", 4),
        num("messages", 5, 10), fixed("type", 6, 8), num("files", 7, 5), file_size("mapped_file_size", None, 9),
        old_num("min_offset"), old_num("max_offset"), fixed("served_by", None, 10)),
    "index_file": (
        text("file", 1, 17, 17, cut=PATH), fixed("begin_timestamp", 2, TIME), fixed("end_timestamp", 3, TIME),
        num("index_count", 4, 9), num("begin_commit_log_offset", None), num("end_commit_log_offset", 5),
        num("hash_slot_count", None), num("max_hash_slot_num", None), num("max_index_num", None),
        fixed("write_full", 6), file_size("size", 7, 9), fixed("begin_time", None, TIME), fixed("end_time", None, TIME),
        old_num("begin_phy_offset"), old_num("end_phy_offset")),
    "config_file": (text("file", 1, 24, 18, cut=PATH), fixed("source", 2, 6), num("topics", 3, 6), num("groups", 4, 6),
                    num("topic_groups", 5), num("queues", 6, 6), num("delay_levels", 7), text("error", 8, 80, 16),
                    text("keys", None, 60, cut=ITEMS), text("path", None, 100, cut=PATH)),
}
# dump commitlog --decode-system: what a system topic's record means, shown early (its text is long)
VIEWS["message_system"] = tuple(
    c for col in VIEWS["message"] for c in ((col, text("system", 2, 80, 24)) if col.name == "queue_offset" else (col,)))

# Rows of a kind that show as a table of another (a kind's own rows of another shape), by record
SUB_KINDS = {"diff": {"queue_range": "diff_queue", **dict.fromkeys(("checkpoint_field", "config_entry", "epoch_entry"),
                                                                    "diff_field")},
             "qmq_diff": {"subject_range": "qmq_diff_subject", "consumer_log_units": "qmq_diff_subject",
                          "group_progress": "qmq_diff_group", "checkpoint_field": "qmq_diff_checkpoint"}}

# How each field's values may be cut, one way for a field in every kind (a table of no kind,
# a document's section, takes it from here)
FIELD_CUTS = {c.name: c.cut for cols in VIEWS.values() for c in cols}

# Fields that are a file's size wherever they are (a document's ``name  value`` lines, a table of
# no kind read them by name): those no kind shows otherwise. ``size`` is a file's in info's
# segments but a record's length in a DLedger entry or a timer unit: a column says which.
FILE_SIZE_FIELDS = frozenset({c.name for cols in VIEWS.values() for c in cols if c.file_size}
                             - {c.name for cols in VIEWS.values() for c in cols if not c.file_size})
# Fields that are epoch ms: shown as UTC ISO 8601 with milliseconds (0 means "none").
_TIME_SUFFIX = "_timestamp"
_TIME_FIELDS = frozenset({"timestamp", "time"})  # time: query --time's, the time asked for


def valid_columns(kind: str) -> tuple[str, ...]:
    return tuple(c.name for c in VIEWS[kind])


def select_columns(kind: str, names: str | list[str] | None) -> tuple[Column, ...] | None:
    """The columns ``--columns a,b,c`` names, in that order; UsageError naming the valid ones."""
    if names is None:
        return None
    if isinstance(names, str):
        names = [n for n in (x.strip() for x in names.split(",")) if n]
    if not names:
        raise UsageError("--columns names no column")
    by_name = {c.name: c for c in VIEWS[kind]}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise UsageError(f"unknown column {', '.join(unknown)}; valid: {', '.join(by_name)}")
    return tuple(by_name[n] for n in names)


def fit(sized, width: int, *, wide: bool = False, given: bool = False) -> list[tuple[Column, int]]:
    """(column, cell width) of the columns shown at ``width`` terminal columns, in display order.

    ``sized``: (column, least, most) of each column that may be shown, the cells its values need
    at least (what may not be cut of them) and at most. By rank, columns are taken while they fit
    at their least (none after the first that does not: a less important one never stands in
    for it); the room left widens the columns that cut their values, then gives numbers
    the room kept for the rows to come. ``wide``: every column, at its most. ``given``
    (``--columns``): every column asked for, at its least and more as room allows.
    """
    if wide:
        return [(c, most) for c, _, most in sized if not c.old]
    if given:
        shown = list(sized)
    else:
        chosen: set[str] = set()
        used = -GAP
        for c, least, _ in sorted((s for s in sized if s[0].rank is not None), key=lambda s: s[0].rank):
            if chosen and used + least + GAP > width:
                break  # the least important first: no column after one that does not fit
            chosen.add(c.name)
            used += least + GAP
        shown = [s for s in sized if s[0].name in chosen]
    widths = {c.name: least for c, least, _ in shown}
    room = width - (sum(widths.values()) + GAP * (len(shown) - 1))
    shared = [(c, most) for c, _, most in shown if c.cut == VALUE]  # a diff's two sides grow together
    for c, _, most in sorted(shown, key=lambda s: (not s[0].flex, s[0].rank or 0)):
        if room <= 0:
            break
        if c.cut == VALUE and len(shared) > 1:
            room = _share(widths, shared, room)
            shared = []
            continue
        grow = min(room, most - widths[c.name])
        if grow > 0:
            widths[c.name] += grow
            room -= grow
    return [(c, widths[c.name]) for c, _, _ in shown]


def _share(widths: dict, columns: list, room: int) -> int:
    """``room`` handed out to ``columns`` (column, most) in turns, a cell each, as each still
    wants it; the room left."""
    wanting = [(c, most) for c, most in columns if widths[c.name] < most]
    while room > 0 and wanting:
        for c, most in wanting:
            if room > 0 and widths[c.name] < most:
                widths[c.name] += 1
                room -= 1
        wanting = [(c, most) for c, most in wanting if widths[c.name] < most]
    return room


# --- cells ---

# Control characters a terminal would act on (C0, DEL, C1: ESC, BEL, CSI...) shown as
# escapes, so a body or key can neither clear the screen nor retitle the terminal.
_CONTROL_ESCAPES = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F]}
_CONTROL_ESCAPES.update({c: f"\\u{c:04x}" for c in range(0x80, 0xA0)})
# Lone UTF-16 surrogates (a config string's "\\ud800") cannot be written as UTF-8: escaped too.
_CONTROL_ESCAPES.update({c: f"\\u{c:04x}" for c in range(0xD800, 0xE000)})
# Bidirectional controls: a key "abc<U+202E>fdp.exe" would show as "abcexe.pdf" (Trojan Source).
_CONTROL_ESCAPES.update({c: f"\\u{c:04x}" for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
                                                     *range(0x2066, 0x206A))})


def terminal_safe(text: str) -> str:
    """``text`` with every control character written as an escape (``\\x1b``, ``\\u009b``)."""
    return text.translate(_CONTROL_ESCAPES)

# The seconds' text by whole second: a row's times are a few distinct seconds (stored, created,
# expires) that the next rows repeat; bounded, a dump of years of records asks for many.
_SECONDS: dict = {}
_SECONDS_MAX = 1024


def iso_ms(ms: int) -> str:
    """Epoch ms as ``2026-11-22T02:43:15.033Z``, from whole seconds and milliseconds as the
    native kernel's rmq_put_time writes it (years of four digits); the seconds' text is kept
    by second; the number itself where no date is (past the year 9999)."""
    sec, milli = divmod(ms, 1000)
    head = _SECONDS.get(sec)
    if head is None:
        try:
            head = datetime.datetime.fromtimestamp(sec, tz=datetime.timezone.utc).isoformat(timespec="seconds")[:-6]
        except (OverflowError, OSError, ValueError):
            return str(ms)
        if len(_SECONDS) >= _SECONDS_MAX:
            _SECONDS.clear()
        _SECONDS[sec] = head
    return f"{head}.{milli:03d}Z"


def human_size(n: int) -> str:
    """Bytes in B, KiB, MiB or GiB (powers of 1024), one decimal above bytes."""
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    return str(n)


def cell_text(name: str, value) -> str:
    """What a table shows for field ``name``'s value (before escaping and cutting). ``name`` may
    be a key of the data (fastjson writes a map's integer keys bare, JSON then reads them as ints)."""
    name = str(name)
    if value is None:
        return ""
    if value is True:
        return "yes"
    if value is False:
        return "no"
    if isinstance(value, int):
        if value > 0 and (name.endswith(_TIME_SUFFIX) or name in _TIME_FIELDS):
            return iso_ms(value)
        if name in FILE_SIZE_FIELDS:
            return human_size(value)
        return str(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # a list of records (QMQ's consumers of a group): one "; " apart
        return ("; " if any(isinstance(x, dict) for x in value) else " ").join(cell_text(name, x) for x in value)
    if isinstance(value, dict):
        return " ".join(f"{k}={cell_text(k, v)}" for k, v in value.items())
    return str(value)


@functools.lru_cache(maxsize=4096)
def char_width(ch: str) -> int:
    """Terminal cells one character takes: East Asian wide and full-width characters two,
    combining characters none (kept once seen: a table asks for the same few again and again)."""
    return 2 if unicodedata.east_asian_width(ch) in "WF" else 0 if unicodedata.combining(ch) else 1


def display_width(s: str) -> int:
    """Terminal cells ``s`` takes: East Asian wide and full-width characters take two."""
    if s.isascii():
        return len(s)
    return sum(map(char_width, s))


def cut(s: str, width: int) -> str:
    """``s`` in at most ``width`` terminal cells, ending in an ellipsis when it was longer."""
    if s.isascii():
        return s if len(s) <= width else s[:max(width - 1, 0)] + "…"
    used = 0
    for ch in s:  # whether it fits, reading no further than ``width`` cells (a body's text is long)
        used += char_width(ch)
        if used > width:
            break
    else:
        return s
    out, used = [], 0
    for ch in s:
        w = char_width(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…"
