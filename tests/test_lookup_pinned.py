"""The fast cost-mode lookups (issue 55 item 3) keep every answer: tests/data/lookup_answers.json holds, per committed
table of each structure (cost with K = 4 neighbours, with and without library steps, cost with K = 1, regions), 300
problems (random over each group's range and beyond, tuned points, problems made of different tuned points' sizes,
sizes at, next to and a few times a tuned point's; for the K = 4 tables also 32 and 40 problems where equally near
points decide the answer: found among 25,000 as those whose answer changes when the tie sizes are left out of the
walk's order) and the answers the generated Python module and C++ header gave before the changes that made them fast
(written by the branch's first commit; both agreed on all of them). The package, the generated module and the header
must still give them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autotune.dispatch.runtime import Lookup
from tests.test_lookup_rules import cpp_answers, variant
from tests.test_lookup_walk import module_of

ROOT = Path(__file__).resolve().parents[1]
PINNED = json.loads((ROOT / "tests/data/lookup_answers.json").read_text())


def asked(name: str) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(p, s, tuple(d)) for p, s, d in PINNED[name]["problems"]]


@pytest.mark.parametrize("name", list(PINNED))
def test_python_lookups_keep_their_answers(name: str, tmp_path: Path) -> None:
    table = variant(name)
    module = module_of(table, tmp_path, "dispatch_pinned")
    package = Lookup(table)
    want = PINNED[name]["answers"]
    assert [module._LOOKUP.index(*q) for q in asked(name)] == want
    assert [package.index(*q) for q in asked(name)] == want


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to compile the headers")
def test_cpp_lookups_keep_their_answers(tmp_path: Path) -> None:
    names = list(PINNED)
    problems = [(v, q) for v, name in enumerate(names) for q in asked(name)]
    got = cpp_answers([variant(name) for name in names], problems, tmp_path)
    assert got == [a for name in names for a in PINNED[name]["answers"]]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to compile the headers")
def test_cpp_walk_with_one_neighbour_keeps_the_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cost mode with K = 1 walks the index only in groups of more than WALK_POINTS points (the others price every
    point's distance): walked everywhere, the K = 1 tables' headers still give the pinned answers."""
    from autotune.dispatch import cpp_index

    monkeypatch.setattr(cpp_index, "WALK_POINTS", 0)
    names = [n for n in PINNED if "tc_final" in n or "tables6_h100/softmax" in n]
    assert len(names) == 2
    problems = [(v, q) for v, name in enumerate(names) for q in asked(name)]
    got = cpp_answers([variant(name) for name in names], problems, tmp_path)
    assert got == [a for name in names for a in PINNED[name]["answers"]]
