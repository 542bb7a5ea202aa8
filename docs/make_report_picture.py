"""``make report-picture``: docs/report.png, the README's picture of ``rmqtool report --html``.

Builds the demo store (rmqtool/demo.py), crashed as a killed broker leaves it (half a record
after the last one, the abort file), with one body byte flipped in a record the next start's
recovery walks over (so the page shows damage and the cut) and a consumer group's committed
offsets (so the queues show lag); renders its report and screenshots it with headless
Chromium, as tests/test_report_html.py does. Run from the repository root:
``python docs/make_report_picture.py [OUT.png [PAGE.html]]`` (PAGE.html: keep the page too).
"""
from __future__ import annotations

import pathlib
import subprocess
import sys
import tempfile

from rmqtool.demo import TOPICS, build, crash_copy
from rmqtool.formats.config import dumps_fastjson
from rmqtool.report.chromium import png_size, render
from rmqtool.store.commitlog import scan_segment
from rmqtool.store.message import Message
from rmqtool.store.view import StoreView

WIDTH, HEIGHT = 1280, 1024  # a laptop's screen: the verdict, the summary, the strips and the queues


def flip_a_body_byte(store: pathlib.Path) -> int:
    """Flip a byte in the body of a record in the middle of the file before the last written
    one (abnormal recovery walks it); the record's commit log offset."""
    view = StoreView(store)
    seg = view.segments[view.commit_log_end.last_written - 1]
    records = [r for r in scan_segment(seg, is_last=False, check_crc=False) if isinstance(r, Message)]
    victim = records[len(records) // 2]
    with open(seg.path, "r+b") as f:
        f.seek(victim.position)
        raw = f.read(victim.store_size)
        at = victim.position + raw.find(victim.body) + len(victim.body) // 2
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0xFF]))
    return victim.commit_log_offset


def commit_offsets(store: pathlib.Path) -> None:
    """config/consumerOffset.json as a 4.9.8 broker persists it: one group a little behind on
    OrderTopic, another far behind on PaymentTopic."""
    table = {"OrderTopic@order_group": {q: 20 + 3 * q for q in range(TOPICS["OrderTopic"])},
             "PaymentTopic@billing_group": {q: 12 for q in range(TOPICS["PaymentTopic"])}}
    (store / "config").mkdir(exist_ok=True)
    (store / "config" / "consumerOffset.json").write_text(dumps_fastjson({"offsetTable": table}))


def main(argv: list[str]) -> int:
    out = pathlib.Path(argv[0] if argv else "docs/report.png")
    keep = pathlib.Path(argv[1]) if len(argv) > 1 else None  # also keep the page there
    with tempfile.TemporaryDirectory(prefix="rmqtool-report-picture-") as tmp:
        base = pathlib.Path(tmp)
        build(base / "built")
        store = crash_copy(base / "built", base / "store")
        flip_a_body_byte(store)
        commit_offsets(store)
        page = base / "report.html"
        done = subprocess.run([sys.executable, "-m", "rmqtool", "report", str(store), "--html", str(page)],
                              capture_output=True, text=True)
        if not page.exists():
            sys.stderr.write(done.stderr)
            return 1
        shown = render(page, out, width=WIDTH, height=HEIGHT)
        if keep is not None:
            keep.write_bytes(page.read_bytes())
    if shown.console:
        sys.stderr.write("\n".join(shown.console) + "\n")
        return 1
    print(f"{out}: {png_size(out)[0]}x{png_size(out)[1]}, {out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
