"""Seeded fuzzing of every read command over damaged copies of broker-written stores.

Each case copies a small fixture store (with config files made from its truth, since no
fixture has any), damages one to three of its files (truncation, bit flips, a zeroed
range, random bytes, appended bytes, deletion), and runs every read command on it through CliRunner.
Whatever the damage: no traceback, an exit code from the README's table, stderr lines
that are rmqtool's own (errors, notes, findings), and not one byte of the store changed.
A failure names the seed and the damage, so the case can be replayed.
"""
from __future__ import annotations

import collections
import hashlib
import json
import pathlib
import random
import re
import shutil

import pytest
from typer.testing import CliRunner

from conftest import V4, V5, load_truth
from helpers import copy_tree, examples
from rmqtool.cli.app import app
from rmqtool.errors import ExitCode
from rmqtool.formats.config import dumps_fastjson

SEED = 20261122
CASES_PER_STORE = examples(8)  # x 4 stores: 32 damaged copies at the quick profile, 640 at the deep one
# the smallest fixture stores, one of each shape: 4.9.8 and 5.3.3, batch queues, a crash input
SOURCES = {
    "4.9.8/timekey": (V4 / "timekey" / "store", V4 / "timekey" / "truth.json"),
    "5.3.3/v2-and-crc": (V5 / "v2-and-crc" / "store", V5 / "v2-and-crc" / "truth.json"),
    "5.3.3/batchcq": (V5 / "batchcq" / "store", V5 / "batchcq" / "truth.json"),
    "5.3.3/crash5-input": (V5 / "crash5" / "a-as-is" / "input" / "store", V5 / "crash5" / "a-as-is" / "truth.json"),
}
DAMAGES = ("truncate", "flip", "zero", "random", "append", "delete")
EXIT_CODES = {int(code) for code in ExitCode}
STDERR_LINE = re.compile(r"(rmqtool: \S.*|(info|warning|error): [a-z][A-Za-z0-9]+: .*)")

runner = CliRunner()


def _write_config(store: pathlib.Path, truth: dict):
    """config/ as a broker persists it, from what the truth knows: topics and consumer offsets."""
    topics = {name: {"topicName": name, "readQueueNums": len(queues), "writeQueueNums": len(queues), "perm": 6}
              for name, queues in truth["truth"]["consumeQueues"].items()}
    offsets = {f"{name}@fuzz_group": {int(q): tq["maxOffset"] for q, tq in queues.items()}
               for name, queues in truth["truth"]["consumeQueues"].items()}
    config = store / "config"
    config.mkdir()
    (config / "topics.json").write_text(dumps_fastjson({"topicConfigTable": topics}), encoding="utf-8")
    (config / "consumerOffset.json").write_text(dumps_fastjson({"offsetTable": offsets}), encoding="utf-8")
    (config / "consumerOffset.json.bak").write_text(dumps_fastjson({"offsetTable": {}}), encoding="utf-8")


def _damage(rng: random.Random, path: pathlib.Path) -> str:
    kind = rng.choice(DAMAGES)
    if kind == "delete":
        path.unlink()
        return f"delete {path.name}"
    data = bytearray(path.read_bytes())
    if not data:
        data = bytearray(rng.randbytes(rng.randint(1, 64)))
        kind = "random"
    elif kind == "truncate":
        del data[rng.randrange(len(data)):]
    elif kind == "append":
        data += rng.randbytes(rng.choice((1, 20, 46, 4096)))
    elif kind == "flip":
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    else:
        at = rng.randrange(len(data))
        n = min(rng.choice((1, 4, 8, 20, 64, 512, 4096)), len(data) - at)
        data[at:at + n] = bytes(n) if kind == "zero" else rng.randbytes(n)
    path.write_bytes(bytes(data))
    return f"{kind} {path.relative_to(path.parents[1]) if path.parent.name != 'store' else path.name}"


def _fingerprint(store: pathlib.Path) -> dict:
    return {p.relative_to(store).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(store.rglob("*"))}


def _commands(store: pathlib.Path, truth: dict, damaged: list[pathlib.Path], rng: random.Random) -> list[list]:
    message = rng.choice(truth["truth"]["messages"])
    key = message.get("keys") or message.get("uniqKey") or "no-such-key"
    commands = [
        ["info", store, "-f", "json"],
        ["dump", "commitlog", store, "-f", "jsonl"],
        ["dump", "consumequeue", store, "-f", "jsonl"],
        ["dump", "index", store, "-f", "jsonl", "--slots"],
        ["dump", "checkpoint", store, "-f", "json"],
        ["dump", "config", store, "-f", "json"],
        ["query", store, "--key", key.split(" ")[0], "-f", "jsonl"],
        ["query", store, "--key", key.split(" ")[0], "--no-index", "-f", "jsonl"],  # the needle scan's own hop
        ["query", store, "--offset", message["physicalOffset"], "-f", "jsonl"],
    ]
    # and each damaged file that is still there, dumped as the kind its directory says
    kinds = {"commitlog": "commitlog", "index": "index", "config": "config"}
    for path in damaged:
        parts = path.relative_to(store).parts
        kind = "consumequeue" if parts[0] in ("consumequeue", "batchconsumequeue") else kinds.get(parts[0])
        if parts == ("checkpoint",):
            kind = "checkpoint"
        if kind and path.is_file():
            commands.append(["dump", kind, path, "-f", "jsonl"])
    return commands


def _cases():
    rng = random.Random(SEED)
    for name in SOURCES:
        for i in range(CASES_PER_STORE):
            yield name, rng.randrange(1 << 32)


def test_every_read_command_survives_damage(tmp_path):
    failures = []
    cases = 0
    exit_codes = collections.Counter()
    for name, case_seed in _cases():
        source, truth_path = SOURCES[name]
        truth = load_truth(truth_path)
        rng = random.Random(case_seed)
        store = tmp_path / f"{cases:03d}" / "store"
        copy_tree(source, store)
        for p in store.rglob("*"):
            p.chmod(p.stat().st_mode | 0o200)
        _write_config(store, truth)
        files = sorted(p for p in store.rglob("*") if p.is_file())
        damaged = rng.sample(files, rng.randint(1, 3))
        what = [_damage(rng, p) for p in damaged]
        before = _fingerprint(store)
        for args in _commands(store, truth, damaged, rng):
            r = runner.invoke(app, [str(a) for a in args])
            exit_codes[r.exit_code] += 1
            where = f"{name} seed {case_seed} ({'; '.join(what)}): rmqtool {' '.join(map(str, args[:2]))}"
            if r.exception is not None and not isinstance(r.exception, SystemExit):
                failures.append(f"{where}: traceback {type(r.exception).__name__}: {r.exception}")
            elif r.exit_code not in EXIT_CODES:
                failures.append(f"{where}: exit code {r.exit_code}")
            else:
                bad = [line for line in r.stderr.splitlines() if not STDERR_LINE.fullmatch(line)]
                if bad:
                    failures.append(f"{where}: stderr line {bad[0]!r}")
        assert _fingerprint(store) == before, f"{name} seed {case_seed}: a read command changed the store"
        shutil.rmtree(store.parent)
        cases += 1
    assert cases == CASES_PER_STORE * len(SOURCES)
    # the damage bites: commands report it (3) or refuse a file (4)
    assert {0, 3, 4} <= set(exit_codes), exit_codes
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_undamaged_copies_read_clean(tmp_path, name):
    """The fuzz's baseline: before any damage, each copy reads clean and holds its truth."""
    source, truth_path = SOURCES[name]
    truth = load_truth(truth_path)
    store = tmp_path / "store"
    copy_tree(source, store)
    _write_config(store, truth)
    r = runner.invoke(app, ["dump", "config", str(store), "-f", "json"])
    assert r.exit_code == 0, r.stderr
    r = runner.invoke(app, ["dump", "commitlog", str(store), "-f", "jsonl", "--body", "none"])
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [x["commit_log_offset"] for x in rows if x["record"] == "message"] == [
        m["physicalOffset"] for m in truth["truth"]["messages"]]
