"""Every registered finding has a producer: a damaged store that makes a reader report it."""
from __future__ import annotations

import ast
import pathlib
import shutil

import pytest

from conftest import REPO, V4, V5, load_truth
from rmqtool import findings as registry
from rmqtool.findings import REGISTRY, Finding
from rmqtool.store.commitlog import findings_of
from rmqtool.store.commitlog_end import CommitLog
from rmqtool.store.message import Message
from rmqtool.store.segments import discover

# Produced below by damaging copies of broker-written commit logs.
COMMIT_LOG_IDS = {
    registry.BODY_CRC_MISMATCH, registry.PROPERTY_CRC_MISMATCH, registry.RECORD_MAGIC_INVALID,
    registry.RECORD_SIZE_INVALID, registry.RECORD_LENGTH_MISMATCH, registry.RECORD_OFFSET_MISMATCH,
    registry.RECORD_TRUNCATED, registry.PROPERTIES_INVALID_UTF8, registry.TOPIC_INVALID_UTF8,
    registry.BLANK_RECORD_INVALID, registry.BLANK_RECORD_MISSING, registry.TRAILING_GARBAGE,
}
SEGMENT_IDS = {registry.SEGMENT_NAME_INVALID, registry.SEGMENT_SIZE_ODD, registry.SEGMENT_GAP,
               registry.SEGMENT_OVERLAP, registry.SEGMENT_EMPTY}


def _copy(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    shutil.copytree(src, dst)
    for p in dst.iterdir():
        p.chmod(0o644)
    return dst


def _messages(directory: pathlib.Path) -> list[Message]:
    return [r for r in CommitLog(directory).scan() if isinstance(r, Message)]


def _poke(path, position: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(data)


def _all_findings(directory: pathlib.Path) -> list[Finding]:
    found: list[Finding] = []
    for r in CommitLog(directory).scan(findings=found):
        found += findings_of(r)
    return found


@pytest.fixture(scope="module")
def commit_log_findings(tmp_path_factory) -> list[Finding]:
    root = tmp_path_factory.mktemp("findings")
    out: list[Finding] = []

    # 4.9.8 records, one damage per record, several segments
    v4 = _copy(V4 / "basic" / "store" / "commitlog", root / "v4")
    truth = load_truth(V4 / "basic" / "truth.json")
    blanks = truth["truth"]["commitlog"]["blankMarkers"]
    segs = CommitLog(v4).segments
    seg0 = [m for m in _messages(v4) if m.path == str(segs[0].path)]
    with_body = [m for m in seg0 if m.body and m.sys_flag & 0x30 == 0]

    def props_at(m):
        return m.position + m.store_size - len(m.properties_raw)

    def topic_at(m):
        return props_at(m) - 2 - len(m.topic.encode())

    m = with_body[5]
    body_at = topic_at(m) - 1 - len(m.body)
    _poke(m.path, body_at, bytes([m.body[0] ^ 0xFF]))  # bodyCrcMismatch
    m = with_body[10]
    _poke(m.path, m.position + 28, (m.physical_offset + 1).to_bytes(8, "big"))  # recordOffsetMismatch
    m = with_body[15]
    _poke(m.path, topic_at(m), b"\xff")  # topicInvalidUtf8
    m = with_body[20]
    _poke(m.path, props_at(m), b"\xff")  # propertiesInvalidUtf8
    m = with_body[30]
    _poke(m.path, m.position, (5).to_bytes(4, "big"))  # recordSizeInvalid
    m = with_body[40]
    _poke(m.path, topic_at(m) - 1, bytes([len(m.topic.encode()) + 1]))  # recordLengthMismatch
    seg1 = [m for m in _messages(v4) if m.path == str(segs[1].path)]
    _poke(seg1[3].path, seg1[3].position, b"\xee" * (seg1[5].position - seg1[3].position))  # recordMagicInvalid
    b = blanks[2]
    _poke(segs[2].path, b["positionInFile"], (b["totalSizeField"] - 1).to_bytes(4, "big"))  # blankRecordInvalid
    b = blanks[3]
    _poke(segs[3].path, b["positionInFile"], bytes(8))  # blankRecordMissing
    end = truth["truth"]["commitlog"]["maxPhyOffset"] - segs[-1].base_offset
    _poke(segs[-1].path, end + 100, b"\xee" * 10)  # trailingGarbage
    out += _all_findings(v4)

    # 5.3.3 records with __CRC32#; the last segment cut inside its last record
    v5 = _copy(V5 / "v2-and-crc" / "store" / "commitlog", root / "v5")
    messages = _messages(v5)
    m = next(m for m in messages if m.property_crc_ok)
    _poke(m.path, m.position + 12, (m.queue_id ^ 1).to_bytes(4, "big"))  # propertyCrcMismatch
    last = messages[-1]
    with open(last.path, "r+b") as f:
        f.truncate(last.position + last.store_size // 2)  # recordTruncated
    out += _all_findings(v5)
    return out


@pytest.fixture(scope="module")
def segment_findings(tmp_path_factory) -> list[Finding]:
    d = tmp_path_factory.mktemp("segments")
    for name, size in (("00000000000000000000", 1000), ("00000000000000001000", 1000),
                       ("00000000000000001500", 1000), ("00000000000000005000", 10), ("00000000000000006000", 0)):
        (d / name).write_bytes(bytes(size))
    (d / "notes.txt").write_text("not a segment")
    return discover(d).findings


def test_commit_log_damage_is_reported_where_it_lies(commit_log_findings):
    ids = {f.id for f in commit_log_findings}
    assert COMMIT_LOG_IDS <= ids, sorted(COMMIT_LOG_IDS - ids)
    for f in commit_log_findings:
        assert f.path and f.offset is not None and pathlib.Path(f.path).is_file(), f


def test_segment_listing_findings(segment_findings):
    ids = {f.id for f in segment_findings}
    assert SEGMENT_IDS <= ids, sorted(SEGMENT_IDS - ids)


def _constant_names() -> dict[str, str]:
    return {name: value for name, value in vars(registry).items()
            if name.isupper() and isinstance(value, str) and not name.startswith("_")}


def test_every_registered_id_has_a_name_and_every_name_is_registered():
    names = _constant_names()
    assert set(names.values()) <= set(REGISTRY), sorted(set(names.values()) - set(REGISTRY))
    assert set(REGISTRY) <= set(names.values()), sorted(set(REGISTRY) - set(names.values()))


def _used_in_library() -> set[str]:
    """IDs that library code (not tests, not the registry) names, by constant or by string."""
    names = _constant_names()
    used = set()
    for path in (REPO / "rmqtool").rglob("*.py"):
        if path.name == "findings.py" and path.parent.name == "rmqtool":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name) and node.id in names:
                used.add(names[node.id])
            elif isinstance(node, ast.Attribute) and node.attr in names:
                used.add(names[node.attr])
            elif isinstance(node, ast.alias) and node.name in names:
                used.add(names[node.name])
            elif isinstance(node, ast.Constant) and node.value in REGISTRY:
                used.add(node.value)
    return used


@pytest.mark.parametrize("finding_id", sorted(REGISTRY))
def test_every_registered_finding_has_a_producer(finding_id, commit_log_findings, segment_findings):
    """A case above produces it; for the others, library code at least names it."""
    produced = {f.id for f in commit_log_findings} | {f.id for f in segment_findings}
    assert finding_id in produced or finding_id in _used_in_library(), f"{finding_id}: nothing reports it"


def test_library_code_names_ids_by_constant_never_by_string():
    """A typo in a string ID would only fail when that finding is raised; a constant fails at import."""
    import io
    import tokenize

    root = pathlib.Path(registry.__file__).resolve().parent
    spelled = []
    for path in sorted(root.rglob("*.py")):
        if path == pathlib.Path(registry.__file__).resolve():
            continue
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if tok.type == tokenize.STRING and tok.string[0] in "\"'" and tok.string[1:-1] in REGISTRY:
                spelled.append(f"{path.relative_to(root)}:{tok.start[0]} {tok.string}")
    assert not spelled, spelled
