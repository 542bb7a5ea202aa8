"""store/segments.one_listing: within a pass that writes nothing, each directory is listed
once and each file's data end found once; outside one, every call looks again."""
import threading

import pytest

from rmqtool.errors import StoreAccessError
from rmqtool.store.commitlog_end import last_nonzero_from
from rmqtool.store.segments import discover, list_dir, one_listing


def _segment(directory, base: int, data: bytes = b"\x01") -> None:
    (directory / f"{base:020d}").write_bytes(data.ljust(1024, b"\0"))


def test_a_directory_is_listed_once_within_a_block_and_again_after_it(tmp_path):
    _segment(tmp_path, 0)
    with one_listing():
        first = discover(tmp_path)
        _segment(tmp_path, 1024)  # what a writer made meanwhile is not in the pass's listing
        assert [s.base_offset for s in discover(tmp_path).segments] == [s.base_offset for s in first.segments] == [0]
        assert [e.name for e in list_dir(tmp_path)] == [f"{0:020d}"]
    assert [s.base_offset for s in discover(tmp_path).segments] == [0, 1024]


def test_blocks_nest_and_the_outermost_ends_what_was_kept(tmp_path):
    _segment(tmp_path, 0)
    with one_listing():
        with one_listing():
            discover(tmp_path)
        _segment(tmp_path, 1024)
        assert len(discover(tmp_path).segments) == 1  # the inner block's end keeps the outer's listing
    assert len(discover(tmp_path).segments) == 2


def test_a_files_data_end_is_found_once_within_a_block(tmp_path):
    path = tmp_path / f"{0:020d}"
    path.write_bytes(b"\x01" * 10 + bytes(100))
    with one_listing():
        assert last_nonzero_from(path) == 10
        path.write_bytes(b"\x01" * 50 + bytes(100))
        assert last_nonzero_from(path) == 10
    assert last_nonzero_from(path) == 50


def test_findings_come_with_every_listing_and_a_refusal_is_not_kept(tmp_path):
    _segment(tmp_path, 0)
    (tmp_path / "notes.txt").write_text("x")
    missing = tmp_path / "later"
    with one_listing():
        assert [f.id for f in discover(tmp_path).findings] == [f.id for f in discover(tmp_path).findings] != []
        with pytest.raises(StoreAccessError):
            list_dir(missing)
        missing.mkdir()  # a listing the OS refused is asked again
        assert list_dir(missing) == []


def test_another_thread_does_not_see_a_blocks_listing(tmp_path):
    _segment(tmp_path, 0)
    seen = []
    with one_listing():
        discover(tmp_path)
        _segment(tmp_path, 1024)
        thread = threading.Thread(target=lambda: seen.append(len(discover(tmp_path).segments)))
        thread.start()
        thread.join()
    assert seen == [2]
