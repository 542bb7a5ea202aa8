"""Fixture locations: fixtures/ in the repo holds copies of stores written by the real broker."""
from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest
import typer.testing
from hypothesis import settings

# Hypothesis depth by profile: "quick" for `make test` (the suite stays within minutes on two
# cores), "deep" for `make fuzz` (RMQTOOL_HYPOTHESIS=deep). Tests that name a count scale it
# with helpers.examples(n), so the deep profile multiplies every property test alike.
QUICK_EXAMPLES = 100
settings.register_profile("quick", max_examples=QUICK_EXAMPLES, deadline=None)
settings.register_profile("deep", max_examples=20 * QUICK_EXAMPLES, deadline=None)
settings.load_profile(os.environ.get("RMQTOOL_HYPOTHESIS", "quick"))

# typer's CliRunner builds the click command from the app at every invoke: 50-90 ms, most of a
# small CLI test's time. A process running rmqtool builds it once; so does a test worker (no
# test changes the app).
_click_commands: dict = {}


def _click_command_once(app):
    if id(app) not in _click_commands:
        _click_commands[id(app)] = (app, _build_click_command(app))  # the app held: its id stays its own
    return _click_commands[id(app)][1]


_build_click_command, typer.testing._get_command = typer.testing._get_command, _click_command_once

REPO = pathlib.Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # benchmarks/ is not an installed package; tests import its generator
    sys.path.insert(0, str(REPO))
FIXTURES = REPO / "fixtures"
V4 = FIXTURES / "rocketmq-4.9.8"
V5 = FIXTURES / "rocketmq-5.3.3"

# Clean-shutdown scenarios: name -> directory holding store/ and truth.json
CLEAN_SCENARIOS = {
    "4.9.8/basic": V4 / "basic",
    "4.9.8/batch": V4 / "batch",
    "4.9.8/txdelay": V4 / "txdelay",
    "4.9.8/timekey": V4 / "timekey",
    "5.3.3/v2-and-crc": V5 / "v2-and-crc",
    "5.3.3/batchcq": V5 / "batchcq",
}

# Run first, in this order: the modules whose tests take longest. Under `make test` (xdist's
# worksteal) the first worker starts at the top of the list and the other steals from its end:
# the long tests are under way early instead of holding one worker at the end, and test_spark's
# tests run one after the other in one worker, which starts one JVM for them all.
RUN_FIRST = ("test_spark.py", "test_bench_spark.py", "test_trust_exits.py", "test_bench_verify.py",
             "test_recover_random.py", "test_qmq_fuzz.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(RUN_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(RUN_FIRST)))  # stable: the rest keep their order


_truth_cache: dict = {}


def load_truth(path: pathlib.Path) -> dict:
    key = str(path)
    if key not in _truth_cache:
        _truth_cache[key] = json.loads(path.read_text(encoding="utf-8"))
    return _truth_cache[key]


# The fixture stores are small: one shuffle partition and no adaptive re-planning keep a Spark
# query of them from paying for eight reduce tasks and a second plan (about 2 s a query in local[1])
SPARK_TEST_SQL_CONF = {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false"}


@pytest.fixture(scope="session")
def spark():
    """One local[1] SparkSession a test worker (its JVM start costs seconds); the spark commands
    run in-process find it through getOrCreate."""
    from rmqtool.spark.session import spark_session
    yield spark_session("local[1]", {"spark.driver.memory": "512m", **SPARK_TEST_SQL_CONF})


@pytest.fixture(scope="session")
def recovery_scan_classes(tmp_path_factory):
    """benchmarks' Java anchor loop (RecoveryScan.java) compiled once a worker: javac takes 2-3 s
    of CPU. A bench given a copy in its workdir's java/ finds the class newer than its source."""
    from benchmarks import java_loop
    return java_loop.compile_loop(tmp_path_factory.mktemp("java"))


@pytest.fixture
def store_copy(tmp_path):
    """Copy a fixture store into tmp_path so a test may damage it."""
    def _copy(src: pathlib.Path) -> pathlib.Path:
        from helpers import copy_tree
        dst = tmp_path / "store"
        copy_tree(src, dst)
        for p in [dst, *dst.rglob("*")]:  # fixture files may be read-only on disk
            p.chmod(p.stat().st_mode | 0o200)
        return dst
    return _copy


@pytest.fixture
def native_built():
    """tests/test_native_*.py hold the native kernel against the pure path: a missing build fails
    them, it does not skip them (test_native_properties says whether a compiler was there)."""
    from rmqtool import native
    assert native.kernel is not None, "the native kernel is not built (make native; RMQTOOL_NATIVE=0 turns it off)"
