"""Schemas of consume queues, index files, the checkpoint, marker files and config JSON,
checked byte for byte against every fixture file the real broker wrote."""
from __future__ import annotations

import pathlib
import struct

import pytest

from conftest import CLEAN_SCENARIOS, FIXTURES, V4, V5, load_truth
from helpers import roundtrip
from rmqtool.errors import FormatError, RmqError
from rmqtool.formats.checkpoint import (CHECKPOINT_FILE_SIZE, Checkpoint4, Checkpoint5, CheckpointFile,
                                        min_timestamp, min_timestamp_index)
from rmqtool.formats.config import (KNOWN_CONFIG_FILES, consumer_offsets, decode_refusal, delay_offsets,
                                    dumps_fastjson, loads_fastjson, topic_group)
from rmqtool.formats.consumequeue import (BATCH_CQ_STORE_UNIT_SIZE, COMPACTED_OFFSET_NONE, CQ_BLANK_UNIT_BYTES,
                                          CQ_FILL_UNIT_BYTES, CQ_STORE_UNIT_SIZE, FILL_SIZE, BatchCqUnit, CqUnit,
                                          is_fill_unit, is_written_unit)
from rmqtool.formats.cqext import CQ_EXT_MIN_UNIT_SIZE, CqExtUnit, ext_addr_to_offset, is_ext_addr
from rmqtool.formats.derive import field_names, struct_of
from rmqtool.formats.indexfile import (INDEX_HEADER_SIZE, IndexEntry, IndexHeader, IndexSlot, build_key,
                                       entry_position, index_file_size, index_key_hash, java_string_hash)
from rmqtool.formats.markers import LOCK_CONTENT, AbortFile, LockFile, parse_pid

CRASH_BASES = (V4 / "crash", V4 / "crash-fast", V5 / "crash5")


def _all_stores() -> list[pathlib.Path]:
    """Every store directory in the fixtures: clean ones and each crash variant's input/expected."""
    stores = [d / "store" for d in CLEAN_SCENARIOS.values()]
    for base in CRASH_BASES:
        for variant in sorted(p for p in base.iterdir() if p.is_dir()):
            stores += [s for s in (variant / "input" / "store", variant / "expected" / "store") if s.is_dir()]
    return stores


def _truth_for(store: pathlib.Path) -> dict:
    """A clean scenario's truth.json sits beside store/; a crash variant's two levels up."""
    path = store.parent / "truth.json"
    return load_truth(path if path.exists() else store.parents[1] / "truth.json")


STORES = _all_stores()
STORE_IDS = [str(s.relative_to(FIXTURES)) for s in STORES]


def _units(path: pathlib.Path, size: int):
    data = path.read_bytes()
    return [data[i:i + size] for i in range(0, len(data) - len(data) % size, size)]


def _check_struct_agrees(schema, chunk: bytes):
    parsed = schema.parse(chunk)
    assert struct_of(schema).unpack(chunk) == tuple(parsed[name] for name in field_names(schema))


# --- sizes and compilation ---------------------------------------------------------------

@pytest.mark.parametrize("schema,size", [
    (CqUnit, 20), (BatchCqUnit, 46), (IndexHeader, 40), (IndexSlot, 4), (IndexEntry, 20),
    (Checkpoint4, 24), (Checkpoint5, 40), (CheckpointFile, 4096), (LockFile, 4),
])
def test_fixed_sizes_and_compile(schema, size):
    assert schema.sizeof() == size
    compiled = schema.compile()
    sample = bytes(range(size)) if size < 256 else bytes(size)
    assert compiled.parse(sample) == schema.parse(sample)


def test_struct_formats_derived_from_schemas():
    assert struct_of(CqUnit).format == ">qlq"
    assert struct_of(BatchCqUnit).format == ">qlqqqhl4s"
    assert struct_of(IndexHeader).format == ">qqqqll"
    assert struct_of(IndexEntry).format == ">lqll"
    assert struct_of(Checkpoint5).format == ">qqqqq"


# --- consume queue ----------------------------------------------------------------------

@pytest.mark.parametrize("store", STORES, ids=STORE_IDS)
def test_every_cq_unit_roundtrips(store):
    files = sorted((store / "consumequeue").glob("*/*/*"))
    assert files
    written = 0
    for path in files:
        for chunk in _units(path, CQ_STORE_UNIT_SIZE):
            unit = roundtrip(CqUnit, chunk, CQ_STORE_UNIT_SIZE)
            _check_struct_agrees(CqUnit, chunk)
            if chunk == CQ_BLANK_UNIT_BYTES:
                assert not is_written_unit(unit.commit_log_offset, unit.size)
            else:
                written += 1
                assert is_written_unit(unit.commit_log_offset, unit.size)
    assert written > 0


def test_batch_cq_units_roundtrip_and_hold_broker_constants():
    truth = load_truth(V5 / "batchcq" / "truth.json")
    store = V5 / "batchcq" / "store"
    files = sorted((store / "batchconsumequeue").glob("*/*/*"))
    on_disk = {f["path"]: f["size"] for f in truth["onDiskAfterShutdown"]["files"]
               if f["path"].startswith("batchconsumequeue/")}
    assert {p.relative_to(store).as_posix(): p.stat().st_size for p in files} == on_disk
    mapped_file_size = truth["messageStoreConfig"]["changedFromDefault"]["mapperFileSizeBatchConsumeQueue"]
    assert set(on_disk.values()) == {mapped_file_size}
    seen = 0
    for path in files:
        for chunk in _units(path, BATCH_CQ_STORE_UNIT_SIZE):
            unit = roundtrip(BatchCqUnit, chunk, BATCH_CQ_STORE_UNIT_SIZE)
            _check_struct_agrees(BatchCqUnit, chunk)
            if unit.size == 0:
                assert chunk == bytes(BATCH_CQ_STORE_UNIT_SIZE)  # unwritten tail of the last file
                continue
            seen += 1
            assert unit.compacted_offset == COMPACTED_OFFSET_NONE
            assert unit.reserved == bytes(4)
            assert unit.batch_size >= 1
    assert seen == sum(len(tq["entries"]) for queues in truth["truth"]["consumeQueues"].values()
                       for tq in queues.values() if tq.get("cqType") == "BatchCQ")


def test_fill_unit_is_what_the_broker_wrote():
    assert CQ_FILL_UNIT_BYTES == bytes(8) + b"\x7f\xff\xff\xff" + bytes(8)
    assert is_fill_unit(0, FILL_SIZE, 0) and not is_fill_unit(0, FILL_SIZE, 1) and not is_fill_unit(1, 2, 0)
    # crash/c1: CrashTopic/1 was rebuilt from queue offset 136, inside file 2000 (offsets 100..149)
    data = (V4 / "crash" / "c1-delete-cq-queue-dir" / "expected" / "store" / "consumequeue" / "CrashTopic" / "1"
            / "00000000000000002000").read_bytes()
    assert data[:36 * 20] == CQ_FILL_UNIT_BYTES * 36
    assert data[36 * 20:37 * 20] != CQ_FILL_UNIT_BYTES


def test_cq_ext_unit_layout():
    # No fixture has consumequeue_ext (enableConsumeQueueExt is off); bytes as CqExtUnit.write lays them out.
    with_map = (struct.pack(">hqqh", CQ_EXT_MIN_UNIT_SIZE + 3, 0x1234, 1700000000000, 3) + b"\x01\x02\x03")
    unit = roundtrip(CqExtUnit, with_map)
    assert (unit.size, unit.tags_code, unit.msg_store_time, unit.bit_map_size) == (23, 0x1234, 1700000000000, 3)
    assert unit.filter_bit_map == b"\x01\x02\x03"
    without = struct.pack(">hqqh", CQ_EXT_MIN_UNIT_SIZE, -5, 7, 0)
    unit = roundtrip(CqExtUnit, without)
    assert unit.filter_bit_map is None and len(without) == CQ_EXT_MIN_UNIT_SIZE
    assert CqExtUnit.compile().parse(with_map) == CqExtUnit.parse(with_map)
    # addresses are offsets + Long.MIN_VALUE; ordinary tagsCodes (hash codes, timestamps) are not
    assert is_ext_addr(-(2**63) + 100) and ext_addr_to_offset(-(2**63) + 100) == 100
    assert not is_ext_addr(-(2**31)) and not is_ext_addr(1795315395241)


# --- index file -------------------------------------------------------------------------

@pytest.mark.parametrize("store", STORES, ids=STORE_IDS)
def test_index_header_slots_entries_roundtrip(store):
    files = sorted((store / "index").glob("*"))
    cfg = _truth_for(store)["messageStoreConfig"]["effectiveGetterValues"]
    slots, entries = cfg["maxHashSlotNum"], cfg["maxIndexNum"]
    for path in files:
        data = path.read_bytes()
        assert len(data) == index_file_size(slots, entries)
        header = roundtrip(IndexHeader, data[:INDEX_HEADER_SIZE], 40)
        _check_struct_agrees(IndexHeader, data[:INDEX_HEADER_SIZE])
        for slot in range(slots):
            chunk = data[INDEX_HEADER_SIZE + 4 * slot:INDEX_HEADER_SIZE + 4 * slot + 4]
            value = roundtrip(IndexSlot, chunk, 4).slot_value
            assert 0 <= value < max(header.index_count, 1)
        assert data[entry_position(slots, 0):entry_position(slots, 1)] == bytes(20)  # entry 0 is never used
        for number in range(1, header.index_count):
            chunk = data[entry_position(slots, number):entry_position(slots, number + 1)]
            entry = roundtrip(IndexEntry, chunk, 20)
            _check_struct_agrees(IndexEntry, chunk)
            assert 0 <= entry.prev_index < number and entry.key_hash >= 0
        assert not any(data[entry_position(slots, max(header.index_count, 1)):])


def test_java_string_hash_matches_truth_and_java():
    checked = 0
    for scenario in CLEAN_SCENARIOS.values():
        for query in load_truth(scenario / "truth.json").get("queryMessage", []):
            assert build_key(query["topic"], query["key"]) == query["indexKey"]
            assert java_string_hash(query["indexKey"]) == query["indexKeyHashCode"]
            checked += 1
    assert checked > 50
    assert java_string_hash("") == 0
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # two UTF-16 code units
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert index_key_hash("polygenelubricants") == 0  # Math.abs(MIN_VALUE) < 0 -> 0
    assert index_key_hash("OrderTopic#order-10") == 2087306080


# --- checkpoint -------------------------------------------------------------------------

@pytest.mark.parametrize("store", STORES, ids=STORE_IDS)
def test_checkpoint_roundtrips_whole_file(store):
    data = (store / "checkpoint").read_bytes()
    whole = roundtrip(CheckpointFile, data, CHECKPOINT_FILE_SIZE)
    v4 = roundtrip(Checkpoint4, data[:24], 24)
    v5 = roundtrip(Checkpoint5, data[:40], 40)
    assert whole.physic_msg_timestamp == v4.physic_msg_timestamp == v5.physic_msg_timestamp
    assert whole.confirm_phy_offset == v5.confirm_phy_offset
    assert not any(whole.padding)
    if "4.9.8" in str(store):
        assert data[24:40] == bytes(16)  # 4.9.8 never writes past the third timestamp


def test_checkpoint_min_timestamps_match_truth():
    for scenario in CLEAN_SCENARIOS.values():
        cp = load_truth(scenario / "truth.json")["onDiskAfterShutdown"]["checkpoint"]
        physic, logics, index = cp["physicMsgTimestamp"], cp["logicsMsgTimestamp"], cp["indexMsgTimestamp"]
        assert min_timestamp(physic, logics) == cp["minTimestamp"]
        assert min_timestamp_index(physic, logics, index) == cp["minTimestampIndex"]
    assert min_timestamp(0, 0) == 0  # never negative


# --- markers ----------------------------------------------------------------------------

@pytest.mark.parametrize("store", STORES, ids=STORE_IDS)
def test_marker_files_roundtrip(store):
    lock = (store / "lock").read_bytes()
    assert roundtrip(LockFile, lock, 4).content == LOCK_CONTENT
    for name in ("abort", "abort.bak"):
        path = store / name
        if path.exists():
            data = path.read_bytes()
            assert roundtrip(AbortFile, data).pid_text == data
            assert (parse_pid(data) is None) == (data == b"")


def test_abort_pid():
    assert parse_pid(b"9951") == 9951
    assert parse_pid(b"") is None and parse_pid(b"x12") is None
    assert parse_pid((V5 / "crash5" / "a-as-is" / "input" / "store" / "abort").read_bytes()) == 9951
    assert (V4 / "crash" / "a-as-is" / "input" / "store" / "abort").read_bytes() == b""


# --- fastjson -----------------------------------------------------------------------------

CONSUMER_OFFSET_JSON = (
    '{\n\t"offsetTable":{\n'
    '\t\t"TopicTest@please_rename_unique_group_name_4":{0:250,1:250,2:250,3:250\n\t\t},\n'
    '\t\t"%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4":{0:0\n\t\t}\n'
    '\t}\n}'
)

TOPICS_JSON = (
    '{\n\t"dataVersion":{\n\t\t"counter":3,\n\t\t"timestamp":1622907213314\n\t},\n'
    '\t"topicConfigTable":{\n\t\t"TopicTest":{\n\t\t\t"order":false,\n\t\t\t"perm":6,\n'
    '\t\t\t"readQueueNums":4,\n\t\t\t"topicFilterType":"SINGLE_TAG",\n\t\t\t"topicName":"TopicTest",\n'
    '\t\t\t"topicSysFlag":0,\n\t\t\t"writeQueueNums":4\n\t\t}\n\t}\n}'
)


def test_fastjson_unquoted_integer_keys_roundtrip():
    doc = loads_fastjson(CONSUMER_OFFSET_JSON)
    table = doc["offsetTable"]["TopicTest@please_rename_unique_group_name_4"]
    assert table == {0: 250, 1: 250, 2: 250, 3: 250} and all(type(k) is int for k in table)
    assert dumps_fastjson(doc) == CONSUMER_OFFSET_JSON
    assert consumer_offsets(doc)["TopicTest@please_rename_unique_group_name_4"][3] == 250


def test_fastjson_bean_format_roundtrip():
    doc = loads_fastjson(TOPICS_JSON)
    assert doc["topicConfigTable"]["TopicTest"]["order"] is False
    assert dumps_fastjson(doc) == TOPICS_JSON
    assert dumps_fastjson(doc, pretty=False) == (
        '{"dataVersion":{"counter":3,"timestamp":1622907213314},"topicConfigTable":{"TopicTest":{"order":false,'
        '"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,'
        '"writeQueueNums":4}}}')


def test_fastjson_strings_with_digits_colons_and_braces_are_not_keys():
    text = '{"offsetTable":{"a{1:2}@g,3:4":{1:2,-3:4},"0":"x:1,{2:3}"}}'
    doc = loads_fastjson(text)
    assert doc == {"offsetTable": {"a{1:2}@g,3:4": {1: 2, -3: 4}, "0": "x:1,{2:3}"}}
    assert "0" in doc["offsetTable"] and 0 not in doc["offsetTable"]  # a quoted key stays a string
    assert loads_fastjson(dumps_fastjson(doc)) == doc
    assert loads_fastjson(dumps_fastjson(doc, pretty=False)) == doc
    assert dumps_fastjson(doc, pretty=False) == text


def test_fastjson_delay_offset_and_lists():
    text = '{\n\t"offsetTable":{1:12,2:3,18:0\n\t}\n}'
    assert delay_offsets(loads_fastjson(text)) == {1: 12, 2: 3, 18: 0}
    assert dumps_fastjson(loads_fastjson(text)) == text
    # ListSerializer: one item per line only for two or more items
    assert dumps_fastjson({"a": [1, 2], "b": ["x"], "c": [], "d": {}}) == (
        '{\n\t"a":[\n\t\t1,\n\t\t2\n\t],\n\t"b":["x"],\n\t"c":[],\n\t"d":{}\n}')


def test_fastjson_leaves_out_null_map_values():
    assert dumps_fastjson({"a": None, "b": [None, 1]}) == '{\n\t"b":[\n\t\tnull,\n\t\t1\n\t]\n}'
    assert dumps_fastjson({"a": None}, pretty=False) == "{}"


def test_fastjson_escapes_and_lenient_input():
    doc = {"s": 'q"b\\n\nt\t\x01\U0001F600城市'}
    text = dumps_fastjson(doc, pretty=False)
    assert text == '{"s":"q\\"b\\\\n\\nt\\t\\u0001\U0001F600城市"}'
    assert loads_fastjson(text) == doc
    assert loads_fastjson('{"e":"\\ud83d\\ude00"}') == {"e": "\U0001F600"}  # a surrogate pair
    assert loads_fastjson("{'a':1,,b:[true,null,1.5,-2e3],}") == {"a": 1, "b": [True, None, 1.5, -2000.0]}


@pytest.mark.parametrize("text", ["", "{", '{"a" 1}', "[1 2]", "{1.5:2}", '{"a":tru}', '"abc', "\x00\xff",
                                  "[" * 500, '{"a":1}}'])
def test_fastjson_garbage_is_a_one_line_format_error(text):
    with pytest.raises(FormatError) as info:
        loads_fastjson(text)
    assert isinstance(info.value, RmqError)
    assert "\n" not in info.value.one_line() and "not fastjson" in info.value.one_line()


def test_known_config_files_and_keys():
    assert {"topics.json", "consumerOffset.json", "delayOffset.json", "subscriptionGroup.json"} <= set(
        KNOWN_CONFIG_FILES)
    assert KNOWN_CONFIG_FILES["consumerOffset.json"].tables == ("offsetTable",)
    assert topic_group("%RETRY%g@g") == ("%RETRY%g", "g")
    assert topic_group("no-separator") is None  # fastjson loads it; no lookup finds it
    with pytest.raises(FormatError):
        consumer_offsets({"offsetTable": {"t@g": 5}})


# What fastjson 1.2.69 (4.9.8's) did with each consumerOffset.json text, read back by
# JSON.parseObject into ConsumerOffsetManager's Map<String, Map<Integer, Long>>: the loaded
# {queueId: offset} of "t@g", or None where it threw (ConfigManager.load then reads the .bak).
FASTJSON_OFFSET_CASTS = [
    ("{0:100}", {0: 100}), ("{0:9223372036854775807}", {0: 9223372036854775807}),
    ("{0:99999999999999999999}", None), ("{0:-9223372036854775809}", None),
    ('{0:"123"}', {0: 123}), ('{0:"1,000"}', {0: 1000}), ('{0:"+5"}', {0: 5}), ('{0:"abc"}', None),
    ('{0:""}', None), ('{0:"1.5"}', None), ('{0:" 12"}', None), ('{0:"1e3"}', None),
    ("{0:1.5}", {0: 1}), ("{0:-1.7}", {0: -1}), ("{0:1e3}", {0: 1000}),
    ("{0:true}", None), ("{0:null}", None), ("{0:{}}", None), ("{0:[1]}", None),
    ('{"3":5}', {3: 5}), ('{"+3":5}', {3: 5}), ('{"-3":5}', {-3: 5}), ("{-2147483648:5}", {-2147483648: 5}),
    ("{2147483648:5}", None), ("{-2147483649:5}", None), ('{"x":5}', None), ('{"":5}', None),
    ('{"1.5":5}', None), ('{" 3":5}', None),
]


@pytest.mark.parametrize("queues, loaded", FASTJSON_OFFSET_CASTS)
def test_consumer_offsets_cast_as_fastjson_does(queues, loaded):
    doc = loads_fastjson('{"offsetTable":{"t@g":' + queues + "}}")
    assert (decode_refusal("consumerOffset.json", doc) is None) == (loaded is not None)
    if loaded is not None:
        assert consumer_offsets(doc) == {"t@g": loaded}


@pytest.mark.parametrize("text, loads", [
    ("[]", True), ("null", True), ("{}", True), ('{"offsetTable":null}', True), ("5", False), ('"x"', False),
    ("true", False), ('{"offsetTable":[]}', False), ('{"offsetTable":5}', False), ('{"offsetTable":{"t@g":null}}',
                                                                                   False),
    ('{"offsetTable":{"t@g":[]}}', False), ('{"offsetTable":{"t@g":"x"}}', False), ('{"offsetTable":{5:{0:1}}}', False),
    ('{"offsetTable":{"legacy":{0:3},"t@g":{0:1}}}', True), ('{"offsetTable":{abc:{0:1}}}', True),
])
def test_consumer_offset_documents_load_or_throw_as_fastjson_did(text, loads):
    assert (decode_refusal("consumerOffset.json", loads_fastjson(text)) is None) == loads


@pytest.mark.parametrize("text, loaded", [  # ScheduleMessageService.decode: putAll of the wrapper's table
    ('{"offsetTable":{1:5,"2":"7",3:1.5}}', {1: 5, 2: 7, 3: 1}), ("{}", {}), ("[]", {}),
    ('{"offsetTable":null}', None), ('{"offsetTable":{1:"x"}}', None), ("5", None),
])
def test_delay_offsets_load_or_throw_as_fastjson_did(text, loaded):
    doc = loads_fastjson(text)
    assert (decode_refusal("delayOffset.json", doc) is None) == (loaded is not None)
    if loaded is not None:
        assert delay_offsets(doc) == loaded
