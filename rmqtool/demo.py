"""``python -m rmqtool.demo`` (``make demo``): build a sample store with the engine, then look
at it with the command line tools.

The store is written the way a 4.9.x broker writes one, with small file sizes so that it
has several commit log segments (end-of-file blank records), rolled consume queue files and
several index files: three topics over several queues, keys and tags, user properties, a
batch, delayed messages and a transaction. Then ``rmqtool info``, ``dump``, ``query``,
``append`` and ``verify`` run on it as subprocesses and what they print is shown. Last, a
copy is crashed the way a killed broker leaves a store (a record half written after the
last one, the abort file still there) and ``recover`` shows its plan, applies it with a
backup, and finds nothing left to do. The demo fails when a command does not exit as it
should.
"""
from __future__ import annotations

import argparse
import pathlib
import shlex
import shutil
import subprocess
import sys
import tempfile

from rmqtool.engine.producer import batch_item, producer_batch, producer_message
from rmqtool.engine.uniq_key import UniqIdGenerator
from rmqtool.findings import CHECKPOINT_WINDOW, COMMIT_LOG_END, RECOVERY_START_FILE
from rmqtool.engine.store import Store

TOPICS = {"OrderTopic": 4, "PaymentTopic": 2, "AuditTopic": 1}
BORN_TIME = 1_717_200_000_000


def build(root: pathlib.Path, messages: int = 600) -> dict:
    """Write the sample store; returns what a reader should find in it."""
    uniq_ids = UniqIdGenerator(ip=bytes([198, 51, 100, 7]), pid=4242, loader_hash=0x5F5E100)
    written = {"messages": 0, "batches": 0, "delayed": 0, "keys": []}
    with Store.open(root, writable=True, commitlog_size=64 * 1024, cq_size=30 * 20, index_slots=64,
                    index_entries=256, store_host="192.0.2.10:10911") as store:
        names = list(TOPICS)
        for i in range(messages):
            topic = names[i % len(names)]
            queue = i % TOPICS[topic]
            key = f"order-{i}" if topic == "OrderTopic" else f"{topic.lower()}-{i}"
            body = (f"message {i} to {topic}/{queue} " + "x" * (i % 400)).encode()
            msg = producer_message(
                topic, body, tags=("TagA", "TagB", None)[i % 3], keys=[key, "shared-key"] if i % 10 == 0 else key,
                user_properties={"seq": str(i), "城市": "杭州"} if i % 7 == 0 else None, queue_id=queue,
                born_timestamp=BORN_TIME + 37 * i, born_host=f"198.51.100.{1 + i % 50}:40000",
                delay_level=3 if i % 97 == 13 else 0, uniq_ids=uniq_ids)
            store.append(msg)
            written["messages"] += 1
            written["delayed"] += i % 97 == 13
            written["keys"].append((topic, key))
            if i % 150 == 149:  # now and then a batch, as putMessages(MessageExtBatch)
                items = [batch_item(f"batch {i}/{j}".encode(), tags="BatchTag", keys=f"batch-{i}-{j}",
                                        uniq_ids=uniq_ids) for j in range(5)]
                store.put_messages(producer_batch("OrderTopic", items, queue_id=0, born_timestamp=BORN_TIME,
                                                      born_host="198.51.100.200:40001"))
                written["batches"] += 1
                written["messages"] += len(items)
        # a transaction: the half message, then its commit record
        half = store.append(producer_message("PaymentTopic", b"pay 100", keys="tx-1", transaction="prepared",
                                                 producer_group="demo-tx-group", uniq_ids=uniq_ids,
                                                 born_timestamp=BORN_TIME))
        store.append(producer_message("PaymentTopic", b"pay 100", keys="tx-1", transaction="commit",
                                          prepared_transaction_offset=half.wrote_offset, uniq_ids=uniq_ids,
                                          born_timestamp=BORN_TIME))
        written["messages"] += 2
        written["max_offset"] = store.max_offset
    return written


def crash_copy(root: pathlib.Path, target: pathlib.Path) -> pathlib.Path:
    """A copy of the store as a broker killed in the middle of a put leaves it."""
    shutil.copytree(root, target)
    with Store.open(target) as store:  # read-only: where the log ends, and its last record
        end = store.max_offset
    segment_size = 64 * 1024
    path = target / "commitlog" / f"{end - end % segment_size:020d}"
    with open(path, "r+b") as f:
        f.seek(0)
        head = f.read(256)  # a record's first bytes, written again after the end, cut short
        f.seek(end % segment_size)
        f.write(head[:128])
    (target / "abort").write_bytes(b"")
    return target


def run_cli(args: list[str]) -> int:
    """Run one command as a user would, show what it prints; its exit code."""
    shown = shlex.join(["rmqtool", *args])
    print(f"\n$ {shown}", flush=True)
    done = subprocess.run([sys.executable, "-m", "rmqtool", *args], capture_output=True, text=True)
    out = done.stdout.rstrip("\n")
    lines = out.splitlines()
    if len(lines) > 40:
        out = "\n".join(lines[:40] + [f"... ({len(lines) - 40} more lines)"])
    if out:
        print(out)
    if done.stderr.strip():
        print(done.stderr.rstrip("\n"))
    print(f"(exit code {done.returncode})")
    return done.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rmqtool.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=pathlib.Path, help="build the store here (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the store afterwards")
    args = parser.parse_args(argv)
    base = args.dir or pathlib.Path(tempfile.mkdtemp(prefix="rmqtool-demo-"))
    root = base / "store"
    if root.exists():
        print(f"{root} exists already; give another --dir", file=sys.stderr)
        return 2
    try:
        written = build(root)
        segments = sorted(p.name for p in (root / "commitlog").iterdir())
        print(f"Built a sample store in {root}:")
        print(f"  {written['messages']} messages ({written['batches']} batches, {written['delayed']} delayed, "
              f"one transaction), commit log up to offset {written['max_offset']}")
        print(f"  {len(segments)} commit log segments of 64 KiB, "
              f"{sum(1 for _ in (root / 'consumequeue').rglob('0*'))} consume queue files, "
              f"{len(list((root / 'index').iterdir()))} index files")
        topic, key = written["keys"][42]
        commands = [
            ["info", str(root)],
            ["dump", "commitlog", str(root), "--limit", "5"],
            ["dump", "consumequeue", str(root), "--limit", "5"],
            ["query", str(root), "--key", key, "--topic", topic],
            ["query", str(root), "--key", "shared-key", "--topic", "OrderTopic"],
            ["append", str(root), "--topic", "OrderTopic", "--body", "one more", "--tags", "TagA",
             "--keys", "order-demo"],
            ["query", str(root), "--key", "order-demo", "--topic", "OrderTopic"],
            ["verify", str(root), "--no-progress", "--summary", "--format", "jsonl", "--skip", COMMIT_LOG_END,
             "--skip", CHECKPOINT_WINDOW, "--skip", RECOVERY_START_FILE],  # info findings: not the demo's point
        ]
        failed = [c[0] for c in commands if run_cli(c) != 0]
        # the monitoring probe: Nagios codes, and the disk measure is this machine's (WARNING on a full disk)
        if run_cli(["check", str(root)]) not in (0, 1, 2):
            failed.append("check")
        if run_cli(["report", str(root), "--html", str(base / "report.html")]) != 0:
            failed.append("report")
        crashed = crash_copy(root, base / "crashed")
        print(f"\nA copy crashed as a killed broker leaves it: {crashed} (half a record after the last one, "
              f"the abort file there)")
        for cmd, expected in ((["recover", str(crashed)], 3),  # the plan: it changes the store
                               (["recover", str(crashed), "--apply", "--backup-dir", str(base / "backup")], 0),
                               (["recover", str(crashed)], 0),  # nothing left to do: the broker can start
                               (["verify", str(crashed), "--no-progress", "--summary", "--format", "jsonl",
                                 "--skip", COMMIT_LOG_END, "--skip", CHECKPOINT_WINDOW, "--skip",
                                 RECOVERY_START_FILE], 0)):
            if run_cli(cmd) != expected:
                failed.append(" ".join(cmd[:2]))
        if run_cli(["diff", str(root), str(crashed)]) != 0:  # recovered, the copy holds what the store holds
            failed.append("diff")
        if failed:
            print(f"\ndemo: these commands failed: {', '.join(failed)}", file=sys.stderr)
            return 1
    finally:
        if args.keep or args.dir:
            print(f"\nThe store stays in {root}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
