"""JSON Lines rows of a window's clean records, written by the native kernel (rows.c) straight
from the record kernel's clean records into one bytes object a run: no Message, no dict, no
orjson call a row.

:func:`message_record` encoded by orjson stays the definition: the kernel writes the same
bytes for the common record and declines every other one (compressed bodies, strings that are
not ASCII, properties that are not the common string, failed CRCs, ...); a declined record
comes back as a Message, in its place, and goes the Python way. Without the kernel (or with
``RMQTOOL_NATIVE=0``) every record is a Message, as before. The record layout, the spans and
the loop over a window are report/native_records.py's (shared with the table's lines); the
row's keys are message_record's (native_records.ROW_KEYS, held against a row it makes).
"""
from __future__ import annotations

import orjson

from rmqtool import native
from rmqtool.report import native_records
from rmqtool.report.sink import EncodedRows

BODIES = {"none": False, "base64": True}  # the body modes the kernel writes: base64 or not
_ready_for = None  # the kernel module set_row_keys was called on


def _kernel():
    """The kernel, its record layout and row keys set; None without it (or when message_record's keys changed)."""
    global _ready_for
    kernel = native_records.kernel()
    if kernel is None or _ready_for is kernel:
        return kernel
    kernel.set_row_keys(tuple((b"," if n else b"") + orjson.dumps(k) + b":" for n, k in enumerate(native_records.ROW_KEYS)),
                        orjson.dumps("message"))
    _ready_for = kernel
    return kernel


def wanted(body: str) -> bool:
    """The kernel is there and writes rows of this body mode."""
    return body in BODIES and native.kernel is not None


class RowRun:
    """A window's clean records as scan_segment's rows mode wants them: EncodedRows for the runs
    the kernel writes, Messages (with CRC verdicts as the scan gives them) for the records it declines."""

    def __init__(self, body: str, check_crc: bool):
        self.base64 = BODIES[body]
        self.check_crc = check_crc
        self._file_json: dict = {}
        _kernel()  # its layout set now: a dump's worker processes, forked after, inherit it

    def _file(self, path) -> bytes | None:
        text = self._file_json.get(path)
        if text is None:
            try:
                text = self._file_json[path] = orjson.dumps(path)
            except (TypeError, orjson.JSONEncodeError):  # a name that is not UTF-8: the Python rows
                return None
        return text

    def __call__(self, buf, i: int, stop: int, offset0: int, position0: int, path) -> tuple[int, list]:
        """(index of the first record not taken, the pieces in order): native_records.window_pieces'."""
        kernel = _kernel()
        file_json = self._file(path)
        if kernel is None or file_json is None:
            return native_records.window_pieces(buf, i, stop, offset0, position0, path, self.check_crc, None)
        base64 = self.base64

        def take(records, verdicts, spans, flags, k: int, pieces: list) -> int:
            data, taken = kernel.jsonl_rows(buf, spans, flags, k, offset0, position0, file_json, base64)
            if taken:
                pieces.append(EncodedRows(data, taken, position0 + int(records.position[k])))
            return taken
        return native_records.window_pieces(buf, i, stop, offset0, position0, path, self.check_crc, take)
