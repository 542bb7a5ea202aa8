"""An index file's first entry: putKey computes its timeDiff against the begin time the file was
made with, the end time of the file before it (IndexFile's constructor), and only then takes
the entry's own store time as the begin. verify checks it that way: the real 5.3.3 broker's
timer-crash stores (a new index file two seconds after the last) hold such entries."""
from __future__ import annotations

import json
import struct

import pytest

from conftest import FIXTURES
from helpers import cli_runner, expand_store
from rmqtool.cli.app import app
from rmqtool.formats.indexfile import FIRST_INDEX, entry_position
from rmqtool.store.indexfile import list_index_files

TIME_DIFF_AT = 4 + 8  # keyHash, phyOffset, then timeDiff (an int)
VARIANTS = sorted(p.parent for p in (FIXTURES / "rocketmq-5.3.3" / "timer-crash").glob("*/expected/store"))


def _first_entries(root):
    """(path, position of its first entry's timeDiff, the timeDiff) of each index file after the first."""
    files = list_index_files(root).open_all()
    out = []
    for f in files[1:]:
        at = entry_position(f.hash_slot_num, FIRST_INDEX) + TIME_DIFF_AT
        out.append((f.path, at, struct.unpack(">i", f.path.read_bytes()[at:at + 4])[0]))
    return out


def _mismatches(root) -> list[dict]:
    r = cli_runner().invoke(app, ["verify", str(root), "-f", "jsonl", "--only", "index"])
    return [row for row in map(json.loads, r.stdout.splitlines()) if row.get("finding") == "indexEntryMismatch"]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: p.parent.name)
def test_the_brokers_first_entries_are_not_mismatches(variant, tmp_path):
    root = expand_store(variant / "store", tmp_path / "store")
    assert _mismatches(root) == []


def test_a_first_entry_off_its_inherited_begin_is_a_mismatch(tmp_path):
    stores = [expand_store(v / "store", tmp_path / v.parent.name) for v in VARIANTS]
    inherited = [(path, at, diff) for root in stores for path, at, diff in _first_entries(root) if diff != 0]
    assert inherited  # a first entry whose timeDiff is not 0: the case the rule is for
    path, at, diff = inherited[0]
    data = bytearray(path.read_bytes())
    data[at:at + 4] = struct.pack(">i", 0)  # what a begin taken from the entry itself would give
    path.write_bytes(bytes(data))
    (bad,) = _mismatches(path.parent.parent)
    assert bad["entry"] == FIRST_INDEX and bad["path"] == str(path) and "timeDiff 0 s" in bad["message"]
