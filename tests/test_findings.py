"""Every registered finding has a producer: a store with that damage, and a real run of the
command that reports it (verify, recover's plan, dump) reporting it where the damage lies.

The recipes and their one table, finding ID -> producer, are in tests/finding_producers.py.
Recipes that do not mask each other share a store copy, so each scenario runs once (per
worker) and each ID's case only reads its result.
"""
from __future__ import annotations

import io
import pathlib
import re
import tokenize

import pytest

from finding_producers import PRODUCERS, SCENARIOS, run_scenario
from rmqtool import findings as registry
from rmqtool.findings import REGISTRY

# The cases in scenario order: a worker that takes cases from another takes whole scenarios' tails.
_ORDER = list(SCENARIOS)
CASES = sorted(REGISTRY, key=lambda i: (_ORDER.index(PRODUCERS[i].scenario) if i in PRODUCERS else -1, i))


@pytest.fixture(scope="module")
def scenario_run(tmp_path_factory):
    """Each scenario's run, made at its first use in this module."""
    done = {}

    def get(name: str):
        if name not in done:
            done[name] = run_scenario(name, tmp_path_factory.mktemp(name))
        return done[name]
    return get


def test_every_registered_id_has_a_producer_and_every_producer_a_registered_id():
    assert set(REGISTRY) - set(PRODUCERS) == set(), "findings with no producer"
    assert set(PRODUCERS) - set(REGISTRY) == set(), "producers of unregistered findings"
    assert {p.scenario for p in PRODUCERS.values()} == set(SCENARIOS)


@pytest.mark.parametrize("finding_id", CASES)
def test_the_producer_run_reports_the_finding_where_the_damage_lies(finding_id, scenario_run):
    producer = PRODUCERS[finding_id]
    run = scenario_run(producer.scenario)
    want = run.expected[finding_id]
    reported = run.where(finding_id)
    assert (str(want.path), want.offset) in reported, (
        f"{finding_id} ({producer.scenario}, {producer.recipe.__name__}): expected at "
        f"{want.path} offset {want.offset}; reported at {reported or 'no place'}")
    # and because of the damage: the undamaged fixture does not report it there (unless the
    # fixture as made already has what the finding describes)
    clean = (str(want.path), want.offset) in run.clean_where(finding_id)
    assert clean == producer.as_made, (
        f"{finding_id}: the undamaged fixture {'does not report' if producer.as_made else 'reports'} it there too")


def _constant_names() -> dict[str, str]:
    return {name: value for name, value in vars(registry).items()
            if name.isupper() and isinstance(value, str) and not name.startswith("_")}


def test_every_registered_id_has_a_name_and_every_name_is_registered():
    names = _constant_names()
    assert set(names.values()) <= set(REGISTRY), sorted(set(names.values()) - set(REGISTRY))
    assert set(REGISTRY) <= set(names.values()), sorted(set(REGISTRY) - set(names.values()))


def test_library_code_names_ids_by_constant_never_by_string():
    """A typo in a string ID would only fail when that finding is raised; a constant fails at import."""
    root = pathlib.Path(registry.__file__).resolve().parent
    # files worth tokenizing: a quoted word that is an ID (one pattern for every word, then a set
    # lookup: an alternation of every ID made the search the test's whole cost)
    quoted = re.compile(r"[\"']([A-Za-z][A-Za-z0-9]*)[\"']")
    assert all(quoted.fullmatch(f"'{i}'") for i in REGISTRY)
    spelled = []
    for path in sorted(root.rglob("*.py")):
        if path == pathlib.Path(registry.__file__).resolve():
            continue
        text = path.read_text()
        if REGISTRY.keys().isdisjoint(quoted.findall(text)):
            continue
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and tok.string[0] in "\"'" and tok.string[1:-1] in REGISTRY:
                spelled.append(f"{path.relative_to(root)}:{tok.start[0]} {tok.string}")
    assert not spelled, spelled
