"""append() one message a call through the native kernel's appender (rmqtool/native/append.c), which
keeps the commit log file, consume queues and index file it last wrote between calls and takes them
again only while the objects it stored are still there: every other put path (append_many in C and
in Python, a batch, a selector's queue, a delayed message, a new queue, files rolling) run in
between on the same queues must make it read them again. The store written so, with the kernel and
with ``native.kernel`` set to None, holds the same bytes and gives the same PutResults, and the
appender put most of the messages itself."""
from __future__ import annotations

import itertools

import pytest

from helpers import KernelSpy
from rmqtool import native
from rmqtool.engine.batch_body import encode_batch_body
from rmqtool.engine.message_inner import BatchItem, MessageBatch
from rmqtool.engine.producer import producer_message
from rmqtool.engine.store import Store
from rmqtool.engine.uniq_key import UniqIdGenerator

pytestmark = pytest.mark.usefixtures("native_built")

SIZES = dict(commitlog_size=16 * 1024, cq_size=12 * 20, index_slots=16, index_entries=40)
STAMP = 1_700_000_000_000


def _messages(n: int, seed: int) -> list:
    uniq = UniqIdGenerator(ip=bytes([198, 51, 100, 7]), pid=seed, loader_hash=0x1234567, clock=lambda: STAMP)
    out = []
    for i in range(n):
        kw = {"keys": f"k{i} k{i % 5}"} if i % 3 == 0 else {}
        if i % 4 == 1:
            kw["tags"] = f"t{i % 2}"
        out.append(producer_message("One" if i % 5 else "Two", bytes([i % 251]) * (40 + 13 * i % 300),
                                    queue_id=i % 3, born_timestamp=STAMP + i, born_host="198.51.100.7:40000",
                                    uniq_ids=uniq, compress=None, **kw))
    return out


def _batch(i: int) -> MessageBatch:
    body = encode_batch_body([BatchItem(body=b"batched %d" % k, properties={"KEYS": f"b{i}.{k}"}) for k in range(3)])
    return MessageBatch("One", body, queue_id=i % 3, born_timestamp=STAMP + i)


def _write(root) -> list:
    """Every put path in turn on the same queues: the appender's calls between the others."""
    clock = itertools.count(STAMP + 1000, 7).__next__
    one, other = _messages(160, 1), _messages(60, 2)
    out = []
    with Store.open(root, writable=True, store_host="192.0.2.10:10911", clock=clock, **SIZES) as store:
        for i in range(20):
            out += [store.append(m) for m in one[8 * i:8 * i + 5]]
            step = i % 5
            if step == 0:
                out += store.append_many(other[3 * i:3 * i + 3])
            elif step == 1:
                out.append(store.put_messages(_batch(i)))
            elif step == 2:
                out.append(store.append(other[3 * i], selector=lambda m: 2))
            elif step == 3:
                delayed = other[3 * i]
                delayed.properties["DELAY"] = "2"
                delayed.properties_string = None
                out.append(store.append(delayed))
            else:
                new_queue = other[3 * i]
                new_queue.queue_id = 3 + i // 5  # a queue not there yet: made by the Python path
                out.append(store.append(new_queue))
            out += [store.append(m) for m in one[8 * i + 5:8 * i + 8]]
    return [r.to_json() for r in out]


def _tree(root) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    base = tmp_path_factory.mktemp("append-one")
    kernel = native.kernel
    took = []

    def appender(*args):
        return _Counted(kernel.appender(*args), took)

    out = {}
    for use in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(native, "kernel", KernelSpy(kernel, appender=appender) if use else None)
            results = _write(base / str(use))
        out[use] = dict(tree=_tree(base / str(use)), results=results)
    out["took"] = took
    return out


class _Counted:
    """An appender whose one-message puts are counted in ``took`` (put: True, declined: False)."""

    def __init__(self, appender, took):
        self._appender, self._took = appender, took
        self.put_many = appender.put_many

    def __call__(self, msg):
        r = self._appender(msg)
        self._took.append(r is not None)
        return r




def test_the_appender_between_the_other_puts_writes_the_python_paths_bytes(written):
    fast, pure = written[True], written[False]
    for part in ("commitlog/", "index/", "consumequeue/One/0/"):
        assert sum(k.startswith(part) for k in fast["tree"]) > 2, part  # each rolled
    assert fast["tree"].keys() == pure["tree"].keys()
    for path in fast["tree"]:
        assert fast["tree"][path] == pure["tree"][path], path
    assert fast["results"] == pure["results"]
    assert len(fast["results"]) == 8 * 20 + 3 * 4 + 4 * 4


def test_the_appender_puts_most_messages_and_leaves_the_rest_to_python(written):
    took = written["took"]
    assert len(took) == 8 * 20 + 2 * 4  # append() without a selector
    assert sum(took) > len(took) * 3 // 4 and not all(took)  # rolls, new queues, the delayed: Python
