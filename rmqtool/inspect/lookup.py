"""query's lookups as the command asks them of one store: which lookup the options name, what a
running broker has not written yet left out, and with ``served_only`` what the broker's
recovery cuts (the notes said through ``note``, a line for people on stderr, in order)."""
from __future__ import annotations

import dataclasses
import pathlib

from rmqtool.errors import NothingFound
from rmqtool.query.by_key import DEFAULT_MAX_NUM, LONG_MAX, query_by_key
from rmqtool.query.by_offset import message_at_offset, message_by_msg_id, message_by_queue_offset
from rmqtool.store.view import open_store


@dataclasses.dataclass(frozen=True)
class Lookup:
    """One of --key, --uniq-key, --msg-id, --offset, --queue-offset (``mode``) and its options."""
    mode: str
    key: str | None = None
    uniq_key: str | None = None
    msg_id: str | None = None
    offset: int | None = None
    queue_offset: int | None = None
    topic: str | None = None
    queue: int | None = None
    begin: int | None = None
    end: int | None = None
    max_num: int | None = None
    no_index: bool = False
    index_only: bool = False
    served_only: bool = False


def look_up(store, ask: Lookup, trace, note) -> list:
    """The messages one store answers; NothingFound when it has none."""
    view = open_store(store)  # the path checked once; every lookup reads this view
    live = view.live  # a running broker's store: nothing past its written end is read
    if live is not None:
        note(live.note())
        if ask.mode == "--offset" and ask.offset >= live.commit_log_end:
            raise NothingFound(f"commit log offset {ask.offset} is not written yet (the written end is "
                               f"{live.commit_log_end})", store)
    start = _served_start(view) if ask.served_only else None
    if ask.mode in ("--key", "--uniq-key"):
        result = _by_key(view, ask, start, trace, note)
    elif ask.mode == "--msg-id":
        result = message_by_msg_id(view, ask.msg_id, trace=trace)
    elif ask.mode == "--offset":
        result = message_at_offset(view, ask.offset, trace=trace)
    else:
        result = message_by_queue_offset(view, ask.topic, ask.queue, ask.queue_offset, trace=trace)
    for text in result.notes:
        note(f"rmqtool: {text}")
    limit = DEFAULT_MAX_NUM if ask.max_num is None else ask.max_num
    if ask.mode in ("--key", "--uniq-key") and len(result.messages) >= limit and result.more is not False:
        note(more_exist_note(len(result.messages), f"--max {limit}") if result.more
             else f"rmqtool: {len(result.messages)} shown: --max {limit} reached, more may exist")
    elif ask.mode in ("--key", "--uniq-key") and result.more is None:  # the index gave --max offsets, some no message
        note(f"rmqtool: {len(result.messages)} shown, fewer than --max {limit}: of the {limit} newest index entries "
             f"of the key some name no message of it (--explain says which), and older entries are not read, as "
             f"the broker does not read them: more may exist (--no-index scans the commit log)")
    messages = result.messages
    if live is not None:
        messages = [m for m in messages if m.commit_log_offset < live.commit_log_end]
    if start is not None:
        messages = _served(start, messages, note)
    return messages


def _by_key(view, ask: Lookup, start, trace, note):
    """--key/--uniq-key. ``start`` (--served-only): the index the broker answers from after its
    start (the files it destroys gone, the log cut where its recovery cuts it), so that --max
    counts what it collects there; what the files hold past the cut is said, not shown."""
    key = ask.key if ask.mode == "--key" else ask.uniq_key
    options = dict(topic=ask.topic, begin=0 if ask.begin is None else ask.begin,
                   end=LONG_MAX if ask.end is None else ask.end,
                   max_num=DEFAULT_MAX_NUM if ask.max_num is None else ask.max_num,
                   uniq_key=ask.mode == "--uniq-key", use_index=not ask.no_index, index_only=ask.index_only)
    if start is None:
        return query_by_key(view, key, trace=trace, **options)
    gone = frozenset(pathlib.Path(p).name for p, _ts in start.index_files_destroyed)
    result = query_by_key(view, key, trace=trace, commit_log_end=start.recovered_end, index_files_gone=gone, **options)
    _served(start, query_by_key(view, key, **options).messages, note)  # the files as they are: the cut said
    return result


def _served_start(view):
    from rmqtool.recovery.outcome import served_start  # numpy and the simulation: when asked for

    return served_start(view)


def _served(start, messages: list, note) -> list:
    """--served-only: what lies past where the broker's recovery cuts the log (or before its
    first file) is left out, and said: a message by its offset, many in one line."""
    low, high = start.min_offset, start.recovered_end
    for offsets, where in (([m.commit_log_offset for m in messages if m.commit_log_offset >= high],
                            f"past {high}, where the broker's recovery cuts the log"),
                           ([m.commit_log_offset for m in messages if m.commit_log_offset < low],
                            f"before {low}, the commit log's first offset")):
        if len(offsets) == 1:
            note(f"rmqtool: left out (--served-only): the message at commit log offset {offsets[0]} lies {where}")
        elif offsets:
            note(f"rmqtool: left out (--served-only): {len(offsets)} messages at commit log offsets "
                 f"{min(offsets)}..{max(offsets)} lie {where}")
    return [m for m in messages if low <= m.commit_log_offset < high]


def more_exist_note(shown: int, cap: str, where: str = "") -> str:
    """The line for a lookup that kept the newest ``shown`` of the messages matching (``cap``:
    the option that capped it, as given; ``where``: the store, when several answer)."""
    return f"rmqtool: {where}{shown} shown; more exist ({cap} kept the newest)"


def crc_mismatch_notes(messages) -> list[str]:
    """A line for each message found with a bad body or ``__CRC32#`` CRC: printed, since its
    bytes are all there is, but never passed off as sound."""
    return [line for m in messages if (line := crc_mismatch_note(m.path, m.position, m.commit_log_offset,
                                                                   m.body_crc_ok, m.property_crc_ok))]


def crc_mismatch_note(path: str, position: int, commit_log_offset: int, body_crc_ok, property_crc_ok) -> str | None:
    """The line for one message found (a Message's fields, or a row's: spark query) whose body
    or ``__CRC32#`` CRC fails; None when neither does."""
    what = " and ".join(w for w, ok in (("body CRC", body_crc_ok), ("__CRC32# property CRC", property_crc_ok))
                        if ok is False)
    if not what:
        return None
    return damaged_message_note(path, position, what, f"commit log offset {commit_log_offset}")


def damaged_message_note(path, position: int, what: str, where: str) -> str:
    """query's line for a damaged message it found, in either family: its file and position,
    which check fails, and where the message lies in its log."""
    return f"rmqtool: {path}: offset {position}: {what} mismatch: the message at {where} is damaged"
