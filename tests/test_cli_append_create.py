"""append makes a new store only when told (--create), and an empty body only when said."""
from __future__ import annotations

from typer.testing import CliRunner

from helpers import file_fingerprint

from rmqtool.cli.app import app
from rmqtool.errors import ExitCode


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_a_path_with_no_store_is_refused_without_create(tmp_path):
    typo = tmp_path / "stroe"
    r = invoke("append", typo, "--topic", "T", "--body", "x")
    assert r.exit_code == int(ExitCode.OPERATIONAL)
    assert "--create" in r.stderr and str(typo) in r.stderr
    assert not typo.exists()  # nothing made
    r = invoke("append", typo, "--create", "--topic", "T", "--body", "x", "--commitlog-size", 65536)
    assert r.exit_code == 0, r.stderr
    assert (typo / "commitlog").is_dir()
    assert invoke("append", typo, "--topic", "T", "--body", "y").exit_code == 0  # an existing store needs no flag


def test_an_empty_body_is_said_on_purpose(tmp_path):
    store = tmp_path / "s"
    r = invoke("append", store, "--create", "--topic", "T")
    assert r.exit_code == int(ExitCode.USAGE) and "--body ''" in r.stderr
    assert not store.exists()
    r = invoke("append", store, "--create", "--topic", "T", "--body", "", "--commitlog-size", 65536)
    assert r.exit_code == 0, r.stderr


def test_a_topic_that_is_no_directory_name_is_refused(tmp_path):
    """consumequeue/TOPIC/QUEUE: a topic '../x' would put its queue outside consumequeue/."""
    store = tmp_path / "s"
    assert invoke("append", store, "--create", "--topic", "T", "--body", "x", "--commitlog-size", 65536).exit_code == 0
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    r = invoke("append", store, "--topic", "../x", "--body", "y")
    assert r.exit_code == int(ExitCode.USAGE) and "cannot name a consume queue directory" in r.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_a_topic_no_store_can_take_is_refused_before_a_store_is_made(tmp_path):
    """A topic whose directory name is longer than a file system takes: the record would be
    written and never dispatched. A lone surrogate (a byte that is not UTF-8 in the shell's
    argument): Java writes it as '?', so the record would name another topic than its directory."""
    from rmqtool.store.paths import NAME_MAX

    store = tmp_path / "s"
    long_topic = "订" * (NAME_MAX // 3 + 1)  # fewer characters than a 5.x record takes, more bytes than a name
    for topic, said in ((long_topic, f"{NAME_MAX} bytes"), ("a\udced", "not Unicode text")):
        r = invoke("append", store, "--create", "--semantics", "5.3", "--topic", topic, "--body", "x")
        assert r.exit_code == int(ExitCode.USAGE) and said in r.stderr, r.stderr
        assert not store.exists()
    fits = "订" * (NAME_MAX // 3)
    r = invoke("append", store, "--create", "--semantics", "5.3", "--topic", fits, "--body", "x",
               "--commitlog-size", 65536)
    assert r.exit_code == 0, r.stderr
    assert (store / "consumequeue" / fits / "0").is_dir()
    r = CliRunner().invoke(app, ["append", str(store), "--from-jsonl", "-"],
                           input='{"topic":"%s","body":"eA=="}\n' % long_topic)
    assert r.exit_code == int(ExitCode.USAGE) and f"{NAME_MAX} bytes" in r.stderr


def test_json_output_is_one_document(tmp_path):
    """-f json: one object for one message, an array for --from-jsonl (empty too), each one JSON
    document (the sink was closed twice: the object printed twice, a second ']')."""
    import json
    store = tmp_path / "s"
    r = invoke("append", store, "--create", "--topic", "T", "--body", "x", "--commitlog-size", 65536, "-f", "json")
    assert r.exit_code == 0, r.stderr
    one = json.loads(r.stdout)
    assert (one["topic"], one["queue_offset"]) == ("T", 0)
    lines = '{"topic":"T","body":"eA=="}\n{"topic":"T","body":"eQ=="}\n'
    many = CliRunner().invoke(app, ["append", str(store), "--from-jsonl", "-", "-f", "json"], input=lines)
    assert many.exit_code == 0, many.stderr
    assert [m["queue_offset"] for m in json.loads(many.stdout)] == [1, 2]
    none = CliRunner().invoke(app, ["append", str(store), "--from-jsonl", "-", "-f", "json"], input="")
    assert none.exit_code == 0 and json.loads(none.stdout) == []


def test_a_store_made_with_nothing_appended_is_a_store(tmp_path):
    """``dump -t X | append --create`` where X matched nothing: the store made is one every
    command opens (it had a checkpoint and a lock and no commitlog/: "not a store")."""
    store, empty = tmp_path / "s", tmp_path / "empty.jsonl"
    empty.write_text("")
    r = invoke("append", store, "--create", "--from-jsonl", empty, "--commitlog-size", 65536)
    assert r.exit_code == 0, r.stderr
    assert invoke("info", store).exit_code == 0
    # no file of it shows its sizes yet: an append must be told them again, as into a store a
    # broker made and never wrote (rmqtool once wrote 1 GiB segments into either)
    refused = invoke("append", store, "--topic", "T", "--body", "x")
    assert refused.exit_code == 2 and "--commitlog-size" in refused.stderr and not any((store / "commitlog").iterdir())
    r = invoke("append", store, "--topic", "T", "--body", "x", "--commitlog-size", 65536, "--assume-defaults")
    assert r.exit_code == 0, r.stderr
    assert [p.stat().st_size for p in (store / "commitlog").iterdir()] == [65536]


def test_a_topic_a_4_9_broker_refuses_is_refused_unless_the_store_is_a_5x_one(tmp_path):
    """More than 127 characters: 4.9.8's checkMessage refuses it (MESSAGE_ILLEGAL), and the V2
    record a 5.x store writes for it would end a 4.9 log at its next start."""
    from rmqtool.formats.commitlog import MAX_TOPIC_LENGTH_V1, MESSAGE_MAGIC_CODE_V2
    from rmqtool.store.commitlog_end import CommitLog
    from rmqtool.store.message import Message

    long_topic = "T" * (MAX_TOPIC_LENGTH_V1 + 1)
    store = tmp_path / "s"
    assert invoke("append", store, "--create", "--topic", "T", "--body", "x", "--commitlog-size", 65536).exit_code == 0
    before = {p: file_fingerprint(p) for p in store.rglob("*") if p.is_file() and p.name != "lock"}
    r = invoke("append", store, "--topic", long_topic, "--body", "y")
    assert r.exit_code == int(ExitCode.USAGE) and "MESSAGE_ILLEGAL" in r.stderr and "--semantics 5.3" in r.stderr
    assert {p: file_fingerprint(p) for p in store.rglob("*") if p.is_file() and p.name != "lock"} == before
    assert invoke("append", store, "--topic", long_topic, "--body", "y", "--semantics", "5.3").exit_code == 0
    last = [m for m in CommitLog(store / "commitlog").scan() if type(m) is Message][-1]
    assert (last.topic, last.magic_code) == (long_topic, MESSAGE_MAGIC_CODE_V2)


def test_a_store_a_broker_made_and_never_wrote_asks_for_its_sizes(tmp_path):
    """What a broker leaves when it starts once with no message (DefaultMessageStore makes
    commitlog/ and consumequeue/; the lock and checkpoint files): nothing shows its sizes, so
    append without --create is refused (exit 2, nothing written), where it wrote 1 GiB
    segments that a broker configured otherwise refuses; with the broker's config it writes
    files of its sizes."""
    from helpers import tree_fingerprint
    store = tmp_path / "s"
    for d in ("commitlog", "consumequeue", "config"):
        (store / d).mkdir(parents=True)
    (store / "lock").touch()
    (store / "checkpoint").write_bytes(bytes(4096))
    before = tree_fingerprint(store)
    r = invoke("append", store, "-t", "OrderTopic", "--body", "hello")
    assert r.exit_code == 2 and "mapped_file_size_commit_log" in r.stderr, r.output
    assert tree_fingerprint(store) == before
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=200\nmaxHashSlotNum=10\nmaxIndexNum=40\n")
    r = invoke("append", store, "-t", "OrderTopic", "--body", "hello", "--broker-config", conf)
    assert r.exit_code == 0, r.stderr
    assert [p.stat().st_size for p in (store / "commitlog").iterdir()] == [65536]
    assert invoke("recover", store, "--broker-config", conf).exit_code == 0


def test_a_create_that_fails_before_its_first_message_leaves_no_store(tmp_path):
    """A row that is no message (its body not base64): refused (exit 2) before anything is
    appended; the store --create made for it is taken away again (a missing path) or emptied
    (an empty directory given), so a later run without --create is still refused. A store
    that holds messages is kept whatever stops the run."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"topic":"T","body":"!!"}\n')
    made, empty = tmp_path / "new", tmp_path / "empty"
    empty.mkdir()
    for store in (made, empty):
        r = invoke("append", store, "--create", "--from-jsonl", bad, "--assume-defaults")
        assert r.exit_code == int(ExitCode.USAGE) and "base64" in r.stderr, r.output
        assert invoke("append", store, "--topic", "T", "--body", "x").exit_code in (ExitCode.OPERATIONAL,
                                                                                   ExitCode.BAD_INPUT)
    assert not made.exists() and empty.is_dir() and not any(empty.iterdir())
    kept = tmp_path / "kept"
    assert invoke("append", kept, "--create", "--topic", "T", "--body", "x", "--commitlog-size", 65536).exit_code == 0
    before = {p.name: file_fingerprint(p) for p in (kept / "commitlog").iterdir()}
    assert invoke("append", kept, "--from-jsonl", bad).exit_code == int(ExitCode.USAGE)
    assert {p.name: file_fingerprint(p) for p in (kept / "commitlog").iterdir()} == before


def test_a_create_whose_commit_log_lies_elsewhere_keeps_the_store_once_a_message_is_in(tmp_path):
    """--commitlog-path: the messages lie outside STORE/commitlog; a failure after the first
    chunk (1,000 appended, then a row that is no message) keeps the store around them."""
    source = tmp_path / "m.jsonl"
    good = '{"topic":"T","body":"aGk="}\n'
    source.write_text(good * 1000 + '{"topic":"T","body":"!!"}\n')
    store, log = tmp_path / "store", tmp_path / "disk2" / "commitlog"
    r = invoke("append", store, "--create", "--commitlog-path", log, "--from-jsonl", source,
               "--commitlog-size", 1 << 20, "--assume-defaults")
    assert r.exit_code == int(ExitCode.USAGE) and len(r.stdout.splitlines()) == 1000, r.output
    assert store.is_dir() and any(p.stat().st_size for p in log.iterdir())
    again = invoke("append", store, "--commitlog-path", log, "--topic", "T", "--body", "x")
    assert again.exit_code == 0, again.output
