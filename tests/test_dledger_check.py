"""rmqtool check on DLedger stores (enableDLegerCommitLog): the tail read as DLedger's entries,
each holding one record; every expected value from the fixtures' truth.json, as DLedger and
the broker reported them."""
from __future__ import annotations

import pytest

from conftest import FIXTURES, load_truth
from helpers import cli_runner, expand_store
from rmqtool.cli.app import app
from rmqtool.formats.dledger import BODY_OFFSET
from rmqtool.inspect.check import State, run_check

DLEDGER = FIXTURES / "rocketmq-5.3.3" / "dledger"
CRASH = DLEDGER / "dledger-crash"
NOW = 1_900_000_000_000  # the probe's clock, passed in
DLEDGER_DEFAULT_INDEX_FILE_SIZE = 32 * 5 * 1024 * 1024  # DLedgerConfig's, which DLedgerCommitLog leaves


def _by(result) -> dict:
    (store,) = result.stores
    return {(m.measure, m.topic, m.queue_id): m.value for m in store.measures}


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    return expand_store(DLEDGER / "store", tmp_path_factory.mktemp("dledger") / "store"), load_truth(
        DLEDGER / "truth.json")["truth"]


def test_a_clean_dledger_store_measures_as_its_truth(clean):
    store, truth = clean
    d = truth["dledger"]
    got = _by(run_check([store], now=NOW))
    assert got["written_end", None, None] == d["writePos"]
    ends = {(topic, int(q)): c["maxPhysicOffset"] for topic, qs in truth["consumeQueues"].items() for q, c in qs.items()}
    assert got["dispatch_lag_bytes", None, None] == d["writePos"] - max(ends.values())
    for (topic, q), end in ends.items():
        assert got["queue_dispatch_lag_bytes", topic, q] == d["writePos"] - end, (topic, q)
    files = d["dataFiles"]
    assert got["recovery_bytes", None, None] == d["writePos"] - files[max(len(files) - 3, 0)]["fileFromOffset"]
    assert got["tail_errors", None, None] == 0 and got["dispatch_ahead_bytes", None, None] == 0
    # its entry index files are 4096 bytes: a real broker's DLedger refuses them at load (the README says so)
    assert got["load_refused", None, None] == int(d["indexFileSize"] != DLEDGER_DEFAULT_INDEX_FILE_SIZE) == 1
    assert not any(k[0].startswith("unflushed") for k in got)  # DLedger keeps its own flush position


def test_a_tail_window_of_any_size_finds_the_same_end(clean):
    """The window starts where it falls, inside an entry most often: the walk begins at the
    first header in it that names its own place."""
    store, truth = clean
    for tail in (1, 100, 3000, 1 << 20):
        got = _by(run_check([store], now=NOW, tail_bytes=tail))
        assert got["written_end", None, None] == truth["dledger"]["writePos"], tail
        assert got["tail_errors", None, None] == 0, tail


def test_a_torn_last_entry_is_in_the_log_and_its_record_is_damage(tmp_path):
    """dledger-crash: the last entry kept its header and half its record. DLedger's recover
    checks no CRC and keeps it (the log reaches its end, as at the halt); its record is damage
    in the tail, named at its offset in the data file."""
    truth = load_truth(CRASH / "truth.json")
    mutation, halted = truth["mutation"], truth["crash"]["dledgerStateAtHalt"]
    store = expand_store(CRASH / "input" / "store", tmp_path / "store")
    result = run_check([store], now=NOW)
    got = _by(result)
    assert got["written_end", None, None] == halted["writePos"]
    (checked,) = result.stores
    (torn,) = checked.findings
    data_file = store / mutation["dataFile"]
    file_base = int(data_file.name)
    assert (torn.id, torn.path, torn.offset) == ("dledgerRecordInvalid", str(data_file),
                                                 mutation["entryPos"] - file_base + BODY_OFFSET)
    assert got["tail_errors", None, None] == 1 and result.state == State.CRITICAL
    assert got["load_refused", None, None] == int(halted["indexFileSize"] != DLEDGER_DEFAULT_INDEX_FILE_SIZE) == 0


def test_the_command_reads_a_dledger_store(clean):
    store, truth = clean
    out = cli_runner().invoke(app, ["check", str(store), "--now", str(NOW)])
    assert out.exit_code == 2 and "load_refused=1" in out.stdout, out.stdout
    assert f"written_end={truth['dledger']['writePos']}B" in out.stdout


def test_a_held_dledger_store_leaves_its_last_entry_to_a_later_run(tmp_path):
    """A running broker may be writing the last entry: its record is not judged yet, and the
    OK line names no unflushed window (DLedger keeps its own flush position)."""
    from helpers import lock_held_elsewhere
    truth = load_truth(CRASH / "truth.json")
    store = expand_store(CRASH / "input" / "store", tmp_path / "store")
    with lock_held_elsewhere(store / "lock", 30):
        result = run_check([store], now=NOW)
    (checked,) = result.stores
    assert not checked.findings and result.state == State.OK
    assert _by(result)["written_end", None, None] == truth["crash"]["dledgerStateAtHalt"]["writePos"]
    line = result.status_line()
    assert "dispatch lag" in line.split("|")[0] and "unflushed" not in line
