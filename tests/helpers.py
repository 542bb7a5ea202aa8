"""Shared test helpers."""
from __future__ import annotations

import contextlib
import os
import pathlib
import re
import shutil
import subprocess
import sys

import construct as cs

from conftest import CLEAN_SCENARIOS, QUICK_EXAMPLES, REPO, V4, V5
from rmqtool.store.commitlog import Blank, Corrupt
from rmqtool.store.message import HEADER_FIELDS, Message

LONG_TOPIC = "LongTopic-" + "x" * 190  # > 127 bytes: V2 records, as 5.x writes them
FIELDS = [f for f in HEADER_FIELDS if f != "body_length"]


def roundtrip(schema: cs.Construct, data: bytes, size: int | None = None, **ctx):
    """Parse, rebuild and compare; check sizeof when the schema is fixed-size. Returns the parse."""
    obj = schema.parse(data, **ctx)
    assert schema.build(obj, **ctx) == data
    if size is not None:
        assert schema.sizeof(**ctx) == size == len(data)
    return obj


DAMAGE_KINDS = ("flip", "zero", "garbage", "int")


def damage(raw: bytearray, data, *, span: int | None = None, max_damages: int = 4,
           kinds=DAMAGE_KINDS) -> bytearray:
    """``raw`` with hypothesis-drawn damage in its first ``span`` bytes: bit flips, zeroed runs,
    0xEE garbage, a 4-byte field gone wrong ("int"), or cut off ("truncate", never to nothing)."""
    import hypothesis.strategies as st

    span = len(raw) if span is None else span
    for _ in range(data.draw(st.integers(1, max_damages))):
        kind = data.draw(st.sampled_from(kinds))
        at = data.draw(st.integers(0, max(min(span, len(raw)) - 1, 0)))
        n = data.draw(st.integers(1, 64))
        if kind == "flip":
            raw[at] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "zero":
            raw[at:at + n] = bytes(len(raw[at:at + n]))
        elif kind == "garbage":
            raw[at:at + n] = b"\xee" * len(raw[at:at + n])
        elif kind == "int":
            value = data.draw(st.integers(-(1 << 31), (1 << 31) - 1)).to_bytes(4, "big", signed=True)
            raw[at:at + 4] = value[:len(raw[at:at + 4])]
        else:  # truncate
            del raw[max(at, 1):]
    return raw


def damaged_commitlog(tmp_path_factory, data, *, body_sizes, max_damages, kinds=DAMAGE_KINDS):
    """A generated two-segment commit log with hypothesis-drawn damage: bit flips, zeroed
    runs, 0xEE garbage, length fields gone wrong, and sometimes a truncated last segment.
    Returns its directory."""
    import hypothesis.strategies as st

    from benchmarks.gen import GenSpec, build_commitlog

    spec = GenSpec(segment_size=24 << 10, segments=2, body_size=data.draw(st.sampled_from(body_sizes)),
                   topics=("T", LONG_TOPIC), queues=2, ipv6_queues=(1,), append_prop_crc=data.draw(st.booleans()))
    directory = tmp_path_factory.mktemp("damage") / "commitlog"
    result = build_commitlog(directory, spec)
    seg = directory / "00000000000000000000"
    raw = bytearray(seg.read_bytes())
    raw = damage(raw, data, span=result.segments[0].record_bytes + 8, max_damages=max_damages, kinds=kinds)
    seg.write_bytes(bytes(raw))
    if data.draw(st.booleans()):
        last = directory / "00000000000000024576"
        last.write_bytes(last.read_bytes()[:data.draw(st.integers(1, result.segments[1].record_bytes))])
    return directory


def canonical(r) -> tuple:
    """Everything a scan result says, for comparing two scans."""
    if isinstance(r, Message):
        return ("message", r.commit_log_offset, r.path, r.position, *(getattr(r, f) for f in FIELDS), r.body,
                r.topic, r.properties_raw, r.properties, r.body_crc_ok, r.property_crc_ok, r.topic_utf8_ok,
                r.properties_utf8_ok)
    if isinstance(r, Blank):
        return ("blank", r.offset, r.size, r.path, r.position, r.valid)
    assert isinstance(r, Corrupt)
    return ("corrupt", r.offset, r.size, r.path, r.position, r.finding_id, r.reason)


def fixture_commitlogs():
    dirs = [s / "store" / "commitlog" for s in CLEAN_SCENARIOS.values()]
    for root in (V4 / "crash", V4 / "crash-fast", V5 / "crash5"):
        dirs += sorted(root.glob("*/input/store/commitlog"))
    return dirs


def read_at(commit_log, offset: int, *, check_crc: bool = True):
    """The message whose record starts at a commit log offset (lookMessageByOffset)."""
    from rmqtool.store.commitlog_reader import CommitLogReader

    with CommitLogReader(commit_log) as reader:
        return reader.read(offset, check_crc=check_crc)


def examples(quick: int) -> int:
    """A property test's example count: ``quick`` under the quick profile, scaled alike under the
    deep one (conftest's profiles)."""
    from hypothesis import settings
    return max(1, quick * settings.default.max_examples // QUICK_EXAMPLES)


def copy_keeping_holes(src, dst, *, follow_symlinks: bool = True):
    """shutil.copytree's copy_function for the tests' copies of stores: only the data extents are
    copied (in the kernel), the holes left holes, nothing forced. A store's files are mostly
    holes (an index file, a DLedger or QMQ segment, a commit log file made ahead): a whole copy
    wrote their zeros, hundreds of MB a test, and the suite's time went to the disk."""
    from rmqtool.store.extents import data_extents
    with open(src, "rb") as source, open(dst, "wb") as target:
        size = os.fstat(source.fileno()).st_size
        for start, stop in data_extents(source.fileno(), 0, size, src):
            while start < stop:
                try:
                    n = os.copy_file_range(source.fileno(), target.fileno(), stop - start, start, start)
                except OSError:  # no kernel copy between these file systems: by hand
                    n = os.pwrite(target.fileno(), os.pread(source.fileno(), min(stop - start, 1 << 20), start),
                                  start)
                if n == 0:
                    break
                start += n
        target.truncate(size)
    shutil.copystat(src, dst, follow_symlinks=follow_symlinks)
    return dst


def copy_tree(src, dst, **options) -> pathlib.Path:
    """shutil.copytree keeping holes (:func:`copy_keeping_holes`)."""
    return pathlib.Path(shutil.copytree(src, dst, copy_function=copy_keeping_holes, **options))


def writable_copy(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    """A copy of a fixture store a test may change (fixture files may be read-only on disk)."""
    copy_tree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    return dst


def split_commit_log(src: pathlib.Path, base: pathlib.Path, file_size: int) -> tuple[pathlib.Path, list[pathlib.Path]]:
    """A writable copy of the store ``src`` at ``base``/store whose commit log files lie on
    ``base``/disk-a and disk-b as MultiPathMappedFileQueue puts them (file i on sorted path
    i mod 2), its own commitlog/ gone: (store root, [disk-a, disk-b])."""
    store = writable_copy(src, base / "store")
    disks = [base / f"disk-{c}" / "commitlog" for c in "ab"]
    for disk in disks:
        disk.mkdir(parents=True)
    for f in sorted((store / "commitlog").iterdir()):
        shutil.move(f, disks[int(f.name) // file_size % 2] / f.name)
    (store / "commitlog").rmdir()
    return store, disks


def cli_runner():
    """A CliRunner whose results keep stderr apart from stdout (click before 8.2 needs asking)."""
    from typer.testing import CliRunner

    try:
        return CliRunner(mix_stderr=False)
    except TypeError:  # click 8.2 keeps stderr apart already
        return CliRunner()


def expand_store(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    """A fixture store kept small (files trimmed of their trailing zeros, their real sizes in a
    ``sizes.json`` beside them; empty directories listed as ``"dir/": 0``) written out as its
    engine left it: each file extended to its size as a sparse file. Returns ``dst``."""
    import json
    import shutil
    copy_tree(src, dst, ignore=shutil.ignore_patterns("sizes.json"))
    for listing in sorted(src.rglob("sizes.json")):
        base = dst / listing.parent.relative_to(src)
        for rel, size in json.loads(listing.read_text()).items():
            target = base / rel
            if rel.endswith("/"):
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "ab") as f:
                f.truncate(size)
    for p in [dst, *dst.rglob("*")]:  # fixture files may be read-only on disk
        p.chmod(p.stat().st_mode | 0o200)
    return dst


def file_fingerprint(path: pathlib.Path) -> tuple:
    """A file's size and the sha256 of its non-zero 64 KiB blocks with their positions: equal
    for equal bytes, and quick on a sparse file (its holes are skipped, not read)."""
    import hashlib
    import os
    from rmqtool.store.extents import data_extents
    digest, block = hashlib.sha256(), 1 << 16
    with open(path, "rb") as f:
        fd, size = f.fileno(), os.fstat(f.fileno()).st_size
        pos = 0
        for data, hole in data_extents(fd, 0, size, path):
            at = max(pos, data - data % block)
            while at < hole:
                chunk = os.pread(fd, min(block, size - at), at)
                if chunk.count(0) != len(chunk):
                    digest.update(at.to_bytes(8, "big") + chunk)
                at += block
            pos = max(at, hole)
    return size, digest.hexdigest()


def tree_fingerprint(root: pathlib.Path) -> dict:
    """Every file (fingerprinted) and directory under ``root``."""
    return {str(p.relative_to(root)): file_fingerprint(p) if p.is_file() else "dir" for p in sorted(root.rglob("*"))}


def file_mtimes(root: pathlib.Path) -> dict:
    """Every file under ``root`` by name: its mtime in nanoseconds."""
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*")) if p.is_file()}


def aged_files(root: pathlib.Path) -> dict:
    """Every file under ``root`` given an mtime of its own in 2023, as a stopped broker's are old
    (a change made now shows, however fast); :func:`file_mtimes` after."""
    import os
    for i, p in enumerate(sorted(p for p in root.rglob("*") if p.is_file())):
        os.utime(p, ns=(1_700_000_000_000_000_000 + i * 10**9,) * 2)
    return file_mtimes(root)


def kernel_and_pure(fn) -> tuple:
    """(fn() with native.kernel as it is, fn() with native.kernel None: the pure path). No
    monkeypatch fixture: hypothesis tests call it too."""
    from rmqtool import native

    with_kernel = fn()
    kernel, native.kernel = native.kernel, None
    try:
        pure = fn()
    finally:
        native.kernel = kernel
    return with_kernel, pure


def both_ways(monkeypatch, dump, *args, **options) -> tuple:
    """``dump(*args, **options)`` (giving its output, its findings and how much of it the native
    kernel wrote) with the kernel and on the pure path: (the output, the kernel's share), the
    outputs and findings asserted the same and the pure path's share none."""
    from rmqtool import native

    out, findings, written = dump(*args, **options)
    with monkeypatch.context() as m:
        m.setattr(native, "kernel", None)
        pure, pure_findings, pure_written = dump(*args, **options)
    assert pure_written == 0
    assert out == pure
    assert findings == pure_findings
    return out, written


def cli_both_ways(args: list[str], **env) -> bytes:
    """The CLI's stdout with the native kernel (in this process) and with RMQTOOL_NATIVE=0 (a
    process of its own, from the repo), asserted the same bytes and exit code 0 both ways."""
    from rmqtool.cli.app import app

    ours = cli_runner().invoke(app, args, env=env or None)
    pure = subprocess.run([sys.executable, "-m", "rmqtool", *args], capture_output=True, cwd=REPO,
                          env=dict(os.environ, RMQTOOL_NATIVE="0", PYTHONPATH=str(REPO), **env))
    assert ours.exit_code == pure.returncode == 0
    assert ours.stdout_bytes == pure.stdout
    return ours.stdout_bytes


def encoded(text: str) -> bytes:
    """A made string's bytes as a broker would store them (lone surrogates kept: invalid UTF-8)."""
    return text.encode("utf-8", "surrogatepass")


def built_record(fields: dict, crc_holds) -> bytes:
    """MessageRecord.build(fields), its __CRC32# entry (when its properties end in one) filled with
    the record's CRC when ``crc_holds()`` says so (asked only then: it may draw an example)."""
    from rmqtool.formats import crc as crc_rules
    from rmqtool.formats.commitlog import MessageRecord

    raw = MessageRecord.build(fields)
    if crc_rules.stored_record_crc(fields["properties"]) is not None and crc_holds():
        raw = raw[:-crc_rules.CRC32_RESERVED_LEN] + crc_rules.crc32_property(crc_rules.record_crc(raw))
    return raw


def made_segments(record, fewest: int, most: int):
    """A hypothesis strategy of commit log bytes: fewest to most records one after another,
    ``record(position)`` the strategy of the one made at each position."""
    from hypothesis import strategies as st

    @st.composite
    def segment(draw) -> bytes:
        out = b""
        for _ in range(draw(st.integers(fewest, most))):
            out += draw(record(len(out)))
        return out
    return segment()


def made_windows(size: int):
    """A hypothesis strategy of what a damaged caller might hand a native part that reads clean
    records (report/native_records' shapes): (a buffer of 1 to ``size`` bytes, one record's spans
    anywhere about it with any hosts kind, its CRC verdicts or None)."""
    import numpy as np
    from hypothesis import strategies as st

    def window(buf, cuts, hosts, flags):
        pos, end, body_at, body_end, topic_at, topic_end, props_at = cuts
        spans = np.array([[pos, end, hosts, body_at, body_end, topic_at, topic_end, props_at]], np.int64)
        return buf, spans, None if flags is None else np.frombuffer(flags, np.uint8).reshape(1, 3)
    return st.builds(window, st.binary(min_size=1, max_size=size),
                     st.lists(st.integers(-8, size + 100), min_size=7, max_size=7), st.integers(-2, 5),
                     st.one_of(st.none(), st.binary(min_size=3, max_size=3)))


class KernelSpy:
    """The native kernel with some functions wrapped (a module's attributes cannot be set per
    test): ``monkeypatch.setattr(native, "kernel", KernelSpy(kernel, appender=counted))``."""

    def __init__(self, kernel, **wrapped):
        self._kernel, self._wrapped = kernel, wrapped

    def __getattr__(self, name):
        return self._wrapped.get(name) or getattr(self._kernel, name)


def qmq_records(store: pathlib.Path) -> list:
    """Every message record of a QMQ store's message log, in log order (the careful reader's)."""
    from rmqtool.formats.qmq.messagelog import PER_SEGMENT_FILE_SIZE
    from rmqtool.store.qmq import messagelog
    from rmqtool.store.qmq.segments import list_log
    log = list_log(store / "messagelog", PER_SEGMENT_FILE_SIZE)
    return [i for s in log.segments for i in messagelog.scan_segment(s) if isinstance(i, messagelog.MessageRecord)]


def busiest_subject(records: list) -> tuple[str, list]:
    """The subject with the most records, and its records in log order."""
    counts: dict = {}
    for r in records:
        counts[r.subject] = counts.get(r.subject, 0) + 1
    subject = max(counts, key=counts.get)
    return subject, [r for r in records if r.subject == subject]


@contextlib.contextmanager
def lock_held_elsewhere(lock: pathlib.Path, seconds: int = 60):
    """``lock`` held by another process as a running broker holds it (fcntl.lockf on its first
    byte, FileChannel.tryLock's kind), for the block; the holder is killed after."""
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, time\n"
                               f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)\n"
                               f"fcntl.lockf(fd, fcntl.LOCK_EX, 1, 0)\nprint('held', flush=True)\ntime.sleep({seconds})"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


def table_sections(text: str) -> list[tuple[list[str], list[dict]]]:
    """A text table's sections (a new one under each header: another kind, or a column widened):
    each its column names and its rows as {column: the cell's text, stripped}, the cells found by
    the rule under the header (each column a run of dashes). Lines that are no row of a section
    (a note) are left out."""
    lines = text.splitlines()
    sections = []
    for i, line in enumerate(lines):
        if i and line and set(line) <= {"-", " "}:
            spans = [(m.start(), m.end()) for m in re.finditer(r"-+", line)]
            names = [lines[i - 1][a:b].strip() for a, b in spans]
            sections.append((names, []))
        elif sections and line and i + 1 < len(lines) and set(lines[i + 1] or "x") <= {"-", " "}:
            continue  # the next section's header
        elif sections and line:
            sections[-1][1].append({n: line[a:b].strip() for n, (a, b) in zip(names, spans)})
    return sections


# The crash fixtures whose queue files the engine's next start puts back by dispatching again:
# c2 lost CrashTopic/0's last file, c1 the whole CrashTopic/1 directory
REDISPATCHED = [("c2-delete-last-cq-file", 0), ("c1-delete-cq-queue-dir", 1)]


def crash_store_with_offsets(tmp_path: pathlib.Path, scenario: str, queue_id: int, committed: int) -> pathlib.Path:
    """A copy of a 4.9.8 crash fixture's input store with group g1's committed offset on CrashTopic's queue."""
    import json
    store = writable_copy(V4 / "crash" / scenario / "input" / "store", tmp_path / "store")
    (store / "config").mkdir()
    (store / "config" / "consumerOffset.json").write_text(
        json.dumps({"offsetTable": {"CrashTopic@g1": {str(queue_id): committed}}}), encoding="utf-8")
    return store
