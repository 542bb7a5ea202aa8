"""rmqtool report --html in a real browser (issue 24): the fixture reports rendered by headless
Chromium (Debian's ``chromium``; ``make venv`` installs it) to PNG, and the DOM it built checked:
every commit log file a strip, the damaged range and the cut where the store's truth puts
them, every queue, every finding, and nothing from a script (the page has none, and the
console stays silent).

Three browser launches in all (about 1-2 s each), one a store, each for a screenshot and
the DOM together. No chromium is a failure, not a skip: the issue asks for this test.
"""
from __future__ import annotations

import html.parser
import pytest

from conftest import FIXTURES, V4, load_truth
from rmqtool.errors import ExitCode
from rmqtool.families import tools_at
from rmqtool.report.chromium import PNG_SIGNATURE, png_size, render
from rmqtool.report.sink import report_findings

NOW = 1795315400000  # the clock the reports are made at (tests never read today's date)
CLEAN = V4 / "basic"  # a clean 4.9.8 store
TORN = FIXTURES / "crash-made" / "torn-middle-normal"  # no abort, a body byte flipped in the fourth of six files
CONSUMERS = FIXTURES / "config" / "consumers"  # committed offsets beside a recovered 4.9.8 store
PAGES = {"clean": (CLEAN / "store", 1280, 900), "torn": (TORN / "input" / "store", 800, 1400),
         "consumers": (CONSUMERS / "store", 1280, 900)}


class Dom(html.parser.HTMLParser):
    """The elements of the dumped DOM as (tag, attributes, text inside up to the next tag)."""

    def __init__(self, text: str):
        super().__init__()
        self.elements: list[list] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.elements.append([tag, dict(attrs), ""])

    def handle_data(self, data):
        if self.elements:
            self.elements[-1][2] += data

    def having(self, tag: str | None = None, **attrs) -> list[list]:
        """Elements of ``tag`` whose attributes hold ``attrs`` (a value None: present at all)."""
        out = []
        for t, a, text in self.elements:
            if tag is not None and t != tag:
                continue
            if all(k in a and (v is None or v in (a[k] or "").split() or a[k] == v) for k, v in attrs.items()):
                out.append([t, a, text])
        return out


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """name -> (exit code, the report's JSON document, the rendered page, the page's path):
    the report made once a store, as the command makes it (its verify, its exit code)."""
    tmp = tmp_path_factory.mktemp("report-html")
    out = {}
    for name, (store, width, height) in PAGES.items():
        page = tmp / f"{name}.html"
        tools = tools_at(store)  # as the command makes it: the family's report, verify run once
        made = tools.report(tools.open_view(store, purpose="report"), now=NOW, html=page)
        code = report_findings(made.findings, echo=False)
        out[name] = (code, made.document, render(page, tmp / f"{name}.png", width=width, height=height), page)
    return out


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_browser_shows_a_page_without_script_or_errors(pages, name):
    _code, doc, shown, page = pages[name]
    width, height = PAGES[name][1:]
    assert shown.png.read_bytes()[:8] == PNG_SIGNATURE
    assert png_size(shown.png) == (width, height)
    assert not shown.console, shown.console  # no console message, no uncaught error
    dom = Dom(shown.dom)
    assert not dom.having("script") and "<script" not in page.read_text().lower()  # the page has no script
    assert not any(a.get(k, "").startswith(("http:", "https:", "//")) for _t, a, _x in dom.elements
                   for k in ("src", "href"))  # nothing from the network
    # every commit log file a strip, in order, and every finding verify reported
    files = sorted(p.name for p in (PAGES[name][0] / "commitlog").iterdir())
    assert [a["data-file"] for _t, a, _x in dom.having("div", **{"class": "segment"})] == files
    assert dom.having("svg", **{"class": "strip"}) and len(dom.having("svg", **{"class": "strip"})) == len(files)
    ids = {r["finding"] for r in doc["findings"]}
    assert {a["data-finding"] for _t, a, _x in dom.having("article", **{"class": "finding"})} == ids
    assert (not ids) == bool(dom.having(id="no-findings"))


def test_a_clean_store_has_no_damage_and_every_queue(pages):
    code, doc, shown, _page = pages["clean"]
    assert code == ExitCode.OK
    dom = Dom(shown.dom)
    assert not dom.having("rect", **{"class": "damaged"}) and not dom.having("line", **{"class": "cut"})
    truth = load_truth(CLEAN / "truth.json")["truth"]
    queues = {f"{t}/{q}": v["maxOffset"] for t, qs in truth["consumeQueues"].items() for q, v in qs.items()
              if v["maxOffset"] > 0}  # the truth lists the delay topic's queues too, which hold nothing
    rows = {a["data-queue"]: a for _t, a, _x in dom.having("tr", **{"class": "queue"})}
    assert set(rows) == set(queues)
    assert {f'{r["topic"]}/{r["queue_id"]}': r["max_queue_offset"] for r in doc["consume_queues"]} == queues
    assert doc["store"]["written_end"] == doc["store"]["recovered_end"] == truth["commitlog"]["maxPhyOffset"]
    # 4.9.8 normal recovery starts from the third-last file
    starts = [a["data-file"] for _t, a, _x in dom.having("div", **{"data-recovery-start": None})]
    assert starts == [sorted(p.name for p in (CLEAN / "store" / "commitlog").iterdir())[-3]]
    assert len(dom.having("tr", **{"class": "index-file"})) == len(list((CLEAN / "store" / "index").iterdir()))


def test_a_damaged_store_shows_the_damage_and_the_cut(pages):
    code, doc, shown, _page = pages["torn"]
    assert code == ExitCode.CORRUPT
    dom = Dom(shown.dom)
    cut = load_truth(TORN / "truth.json")["engines"]["4.9.8"]["maxPhyOffset"]  # where the real broker's start ended the log
    assert doc["store"]["recovered_end"] == cut < doc["store"]["written_end"]
    damaged = dom.having("rect", **{"class": "damaged"})
    assert [a.get("data-offset") for _t, a, _x in damaged] == [str(cut)]  # the flipped record is where recovery stops
    assert [a["data-finding"] for _t, a, _x in damaged] == ["bodyCrcMismatch"]
    assert len(dom.having("line", **{"class": "cut"})) == 1
    assert dom.having("rect", **{"class": "dropped"})
    segment = next(s for s in doc["segments"] if "cut_at" in s)
    assert segment["base_offset"] <= cut < segment["end_offset"] and segment["cut_at"] == cut
    verdict = dom.having(id="verdict")[0]
    assert str(cut) in verdict[2] and "bad" in verdict[1]["class"]
    groups = [a["data-consequence"] for _t, a, _x in dom.having("section", **{"class": "consequence"})]
    assert groups[0] == "dropsMessages"  # the most pressing first


def test_consumers_lag_is_drawn_per_group(pages):
    _code, doc, shown, _page = pages["consumers"]
    dom = Dom(shown.dom)
    committed = {(r["group"], r["topic"], r["queue_id"]): r for r in doc["consumer_offsets"]}
    assert ("order_group", "CrashTopic", 0) in committed
    marks = dom.having("line", **{"class": "consumed"})
    assert len(marks) == sum(r["committed_offset"] >= 0 for r in doc["consumer_offsets"]
                             if any((q["topic"], q["queue_id"]) == (r["topic"], r["queue_id"])
                                    for q in doc["consume_queues"]))
    lagging = [r for r in doc["consumer_offsets"] if r["lag_messages"]]
    assert lagging and len(dom.having("rect", **{"class": "lag"})) == len(lagging)
