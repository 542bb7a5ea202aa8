"""verify's checks on QMQ stores (rmqtool/verify/qmq/), on the fixtures QMQ's DefaultStorage
wrote, each expanded to the sizes the engine left: no error on the clean stores, and on
each crash variant the finding at the file and offset its mutation names (truth.json)."""
from __future__ import annotations

import pytest

from conftest import FIXTURES, load_truth
from helpers import expand_store
from rmqtool import findings as ids
from rmqtool.findings import Consequence, Severity
from rmqtool.formats.qmq.consumerlog import is_fill_unit
from rmqtool.verify.qmq.checks import check_store

QMQ = FIXTURES / "qmq"
CRASH = QMQ / "crash"


def verify(src, tmp_path):
    return list(check_store(expand_store(src, tmp_path / "store")))


def runs_text(sequences) -> str:
    """Sorted sequences as "a-b, c" runs."""
    runs = []
    for q in sequences:
        if runs and runs[-1][1] == q - 1:
            runs[-1][1] = q
        else:
            runs.append([q, q])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def by_id(found, finding_id):
    return [f for f in found if f.id == finding_id]


@pytest.mark.parametrize("scenario", ["basic", "v2-consumerlog"])
def test_clean_stores_have_no_error(scenario, tmp_path):
    found = verify(QMQ / scenario / "store", tmp_path)
    assert not [f for f in found if f.severity == Severity.ERROR], [f.one_line() for f in found]


def test_basic_says_the_action_replay_skips_what_follows_the_tablet(tmp_path):
    """README: the replay starts one byte past the tablet's end and progress falls back."""
    truth = load_truth(QMQ / "basic" / "truth.json")
    found = by_id(verify(QMQ / "basic" / "store", tmp_path), ids.ACTION_REPLAY_SKIPS_ACTIONS)
    after = [r for r in truth["readBack"]["actionLog"]["records"]
             if r["endOffset"] > truth["readBack"]["pullLogs"]["sortedPullLogTableActionReplayState"] - 1]
    assert len(found) == 1 and found[0].details["actions"] == len(after) > 0


def test_a_stray_name_in_the_message_log(tmp_path):
    found = by_id(verify(CRASH / "b-stray-file-in-messagelog" / "input", tmp_path), ids.LOG_SEGMENT_NAME_INVALID)
    assert [f.path.rsplit("/", 1)[1] for f in found] == ["00000000000000000000.bak"]


def test_a_header_of_payload_size_minus_one(tmp_path):
    variant = load_truth(CRASH / "c-header-len-minus1-after-tail" / "truth.json")
    truth = variant["mutation"]
    every = verify(CRASH / "c-header-len-minus1-after-tail" / "input", tmp_path)
    found = by_id(every, ids.MESSAGE_RECORD_INVALID)
    assert [(f.path.endswith(truth["file"]), f.offset) for f in found] == [(True, truth["offset"])]
    # QMQ's load throws there (truth: the exception, no start): the record drops nothing, the store does not start
    assert not variant["started"] and variant["exception"]["class"] == "java.lang.NegativeArraySizeException"
    (refused,) = by_id(every, ids.STORE_NOT_LOADABLE)
    assert (refused.path, refused.offset) == (found[0].path, truth["offset"])
    assert found[0].consequence == refused.consequence == Consequence.WONT_START


def test_a_flipped_payload_byte(tmp_path):
    truth = load_truth(CRASH / "d-flipped-payload-byte-mid-log" / "truth.json")
    found = by_id(verify(CRASH / "d-flipped-payload-byte-mid-log" / "input", tmp_path), ids.PAYLOAD_CRC_MISMATCH)
    record = truth["mutation"]["record"]
    assert [(f.offset, f.details["subject"], f.details["sequence"]) for f in found] == \
        [(record["offset"], record["subject"], record["sequence"])]


def test_a_torn_last_record(tmp_path):
    truth = load_truth(CRASH / "j-torn-last-record" / "truth.json")
    found = by_id(verify(CRASH / "j-torn-last-record" / "input", tmp_path), ids.PAYLOAD_CRC_MISMATCH)
    assert [f.offset for f in found] == [r["offset"] for r in truth["mutation"]["records"]]


def test_a_deleted_consumer_log_file(tmp_path):
    """crash/e: the subject's messages are in the message log, no unit reaches them, and the
    replay from the checkpoint starts after them (QMQ then serves them as SUCCESS, empty)."""
    truth = load_truth(CRASH / "e-deleted-consumerlog-file" / "truth.json")
    found = by_id(verify(CRASH / "e-deleted-consumerlog-file" / "input", tmp_path), ids.MESSAGE_NOT_IN_CONSUMER_LOG)
    (subject, ranges), = truth["summary"]["servedSuccessWithoutMessage"].items()
    assert [f.details["subject"] for f in found] == [subject]
    assert found[0].details["sequences"] == sum(b - a + 1 for a, b in ranges)


def test_a_garbled_checkpoint_is_skipped(tmp_path):
    truth = load_truth(CRASH / "f-garbled-latest-message-checkpoint" / "truth.json")["mutation"]
    found = by_id(verify(CRASH / "f-garbled-latest-message-checkpoint" / "input", tmp_path), ids.CHECKPOINT_UNREADABLE)
    assert [f.path.endswith(truth["file"]) for f in found] == [True]


def test_a_subject_missing_from_the_checkpoint(tmp_path):
    variant = CRASH / "h-subject-missing-from-checkpoint"
    truth = load_truth(variant / "truth.json")
    found = by_id(verify(variant / "input", tmp_path), ids.CHECKPOINT_SUBJECT_MISSING)
    assert [f.details["subject"] for f in found] == list(truth["summary"]["servedSuccessWithoutMessage"])


def test_a_short_message_log_segment(tmp_path):
    variant = CRASH / "i-short-messagelog-segment"
    truth = load_truth(variant / "truth.json")
    found = verify(variant / "input", tmp_path)
    short = by_id(found, ids.LOG_SEGMENT_SHORT)
    assert [f.offset for f in short] == [truth["mutation"]["truncatedTo"]]
    assert [f.offset for f in by_id(found, ids.PAYLOAD_CRC_MISMATCH)] == [truth["messageLog"]["cutAt"]]


def test_a_zeroed_action_log_tail_reads_as_the_written_end(tmp_path):
    """crash/l: zeros are not damage (the broker reads them as the end): no error."""
    found = verify(CRASH / "l-zeroed-actionlog-tail" / "input", tmp_path)
    assert not by_id(found, ids.ACTION_RECORD_INVALID)


VARIANTS = sorted(p.name for p in CRASH.iterdir() if p.is_dir())


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_consequences_are_what_qmq_did(variant, tmp_path):
    """Each variant's next-start findings against what the real start did (truth.json):
    refused or not, where the log was cut, and per subject the sequences served empty."""
    truth = load_truth(CRASH / variant / "truth.json")
    found = verify(CRASH / variant / "input", tmp_path)
    refused = by_id(found, ids.STORE_NOT_LOADABLE)
    assert bool(refused) == (not truth["started"])
    if not truth["started"]:
        assert truth["exception"]["class"].rsplit(".", 1)[-1] in refused[0].message
        return
    cut = by_id(found, ids.RECOVERY_CUTS_MESSAGE_LOG)
    assert [f.details["message_log_offset"] for f in cut] == \
        ([truth["messageLog"]["cutAt"]] if truth["messageLog"]["cutAt"] is not None else [])
    empty = {f.details["subject"]: f.details["sequences"] for f in by_id(found, ids.MESSAGES_SERVED_EMPTY)}
    assert empty == {s: sum(b - a + 1 for a, b in p["servedSuccessWithoutMessage"])
                     for s, p in truth["perSubject"].items() if p["servedSuccessWithoutMessage"]}
    # and why: the replay's fill units (as the restarted engine read its consumer logs back), or a unit of
    # the sequence's own pointing past the kept log
    for f in by_id(found, ids.MESSAGES_SERVED_EMPTY):
        units = {u["sequence"]: u for u in truth["recovered"]["consumerLogs"][f.details["subject"]]["units"]}
        empty = [q for a, b in truth["perSubject"][f.details["subject"]]["servedSuccessWithoutMessage"]
                 for q in range(a, b + 1)]
        filled = [q for q in empty
                  if is_fill_unit(units[q]["wroteOffset"], units[q]["wroteBytes"], units[q]["headerSize"])]
        why = [f"{what} {runs_text(qs)}" for what, qs in (
            ("filled by the replay, their records not replayed:", filled),
            ("units pointing past the kept message log:", sorted(set(empty) - set(filled)))) if qs]
        assert f.message.endswith(f" ({'; '.join(why)})"), f.message


@pytest.mark.parametrize("variant", ["a-as-is", "f-garbled-latest-message-checkpoint", "g-lost-message-checkpoints"])
def test_variants_qmq_recovers_whole_have_no_error(variant, tmp_path):
    found = verify(CRASH / variant / "input", tmp_path)
    assert not [f for f in found if f.severity == Severity.ERROR], [f.one_line() for f in found]
