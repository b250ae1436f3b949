"""Issue 55 item 3: cost mode's walk in the rules' order (lanes.Keys.bands, runtime._cheapest_mean's lanes) answers
as the rules read plainly (tests/test_lookup_rules.py `reference`: every point's distance, sorted), in the generated
Python module and in the package, on the committed tables7 tables the project deploys (fp16 `cost:0.05:1:4:m,k%2`,
softmax `cost:0.1:1:1:cols<=2048+rows<16000`) and variants (K 2 and 3: the mean by division instead of a shift,
reach 2, no steps), at random problems (500 per deployed table, 250 per variant; tests/test_lookup_rules.py asks
400 more of each deployed table, tests/test_lookup_pinned.py 300 pinned ones), at problems on both sides of every
library step (300 and 150) and at problems made of different tuned points' sizes (equal distances)."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest

from autotune.dispatch import lanes
from autotune.dispatch.emit import emit_python
from autotune.dispatch.features import ilog2_fx
from autotune.dispatch.runtime import Lookup, parse_steps, step_class
from autotune.dispatch.table_file import DispatchTable
from tests.test_lookup_rules import problems, reference, variant

FP16 = "results/tables7_h100/fp16/dispatch.json.gz"
SOFTMAX = "results/tables7_h100/softmax/dispatch.json.gz"
TABLES = {
    "fp16 m,k%2 K4 (deployed)": lambda: variant(FP16),
    "softmax cols<=2048+rows<16000 K1 (deployed)": lambda: variant(SOFTMAX),
    "fp16 m,k%2 K3 reach 2": lambda: variant(FP16, neighbours=3, reach=2.0),
    "fp16 K2 no steps": lambda: variant(FP16, neighbours=2, library_steps=[]),
    "softmax K2 reach 0.5": lambda: variant(SOFTMAX, neighbours=2, reach=0.5),
}


def step_sides(table: dict, count: int, seed: int) -> list[tuple[str, str, tuple[int, ...]]]:
    """Problems on both sides of every library step: a tuned point's sizes (the others moved by one or not) with the
    step's sizes at its edge or next to it (`SIZE<=N`: N or N + 1; `SIZE<N`: N - 1 or N; `SIZE%N`: a multiple of N
    near the point's size, or one more)."""
    rng = random.Random(seed)
    names = table["size_names"]
    steps = parse_steps(table["structure"].get("library_steps", []), names)
    stepped = {d for _, where, _ in steps for d in where}
    out = []
    for _ in range(count):
        p = rng.choice(table["points"])
        sizes = [
            max(1, int(p["sizes"][n]) + (0 if d in stepped else rng.choice((-1, 0, 0, 1)))) for d, n in enumerate(names)
        ]
        for op, where, value in steps:
            for d in where:
                if op == "%":
                    sizes[d] = max(value, (sizes[d] // value + rng.randint(-2, 2)) * value) + rng.choice((0, 1))
                else:
                    sizes[d] = (value if op == "<=" else value - 1) + rng.choice((0, 1))
        out.append((p["precision"], p["shape"], tuple(sizes)))
    return out


def module_of(table: dict, tmp_path: Path, name: str):
    path = tmp_path / f"{name}.py"
    path.write_text(emit_python(DispatchTable(table)))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", list(TABLES))
def test_generated_module_answers_as_the_rules(name: str, tmp_path: Path) -> None:
    table = TABLES[name]()
    deployed = "deployed" in name
    asked = problems(table, 500 if deployed else 250, seed=55) + step_sides(table, 300 if deployed else 150, seed=56)
    module = module_of(table, tmp_path, "dispatch_walk")
    package = Lookup(table)
    ok = package.valid
    wrong = []
    for precision, shape, dims in asked:
        want = reference(table, ok, precision, shape, dims)
        got = (module._LOOKUP.index(precision, shape, dims), package.index(precision, shape, dims))
        if got != (want, want):
            wrong.append((dims, got, want))
    assert not wrong, wrong[:5]
    if package.steps:  # every step class was asked
        assert {step_class(package.steps, q[2]) for q in asked} == set(range(1 << len(package.steps)))


@pytest.mark.parametrize("sort_all", [0, 10_000])
def test_bands_give_the_points_in_the_rules_order(monkeypatch: pytest.MonkeyPatch, sort_all: int) -> None:
    """Keys.bands reads bands of the keys' top bytes, or sorts every key (SORT_ALL): the points in the rules' order
    (distance over the table sizes, then over the tie sizes, then table order), at random points and problems of 1-4
    sizes, many of them made of a few values per size (equally near points: the tie sizes decide)."""
    monkeypatch.setattr(lanes, "SORT_ALL", sort_all)
    rng = random.Random(sort_all)
    for _ in range(300):
        n, d = rng.randrange(1, 300), rng.randrange(1, 5)
        near = rng.randrange(0, d + 1)
        few = [[rng.randrange(1, 1 << rng.randrange(1, 20)) for _ in range(3)] for _ in range(d)]
        points, problem = [[_size(rng, few[j]) for j in range(d)] for _ in range(n)], [_size(rng, f) for f in few]
        keys = lanes.Keys(points, list(range(d)), ilog2_fx, near)
        logs = [ilog2_fx(x) for x in problem]
        far = [[abs(logs[j] - ilog2_fx(p[j])) for j in range(d)] for p in points]
        want = sorted(range(n), key=lambda i: (sum(far[i][:near]), sum(far[i][near:]), i))
        assert [k & keys.order_mask for band in keys.bands(problem) for k in band] == want


def _size(rng: random.Random, few: list[int]) -> int:
    """One of a few values mostly (equal distances), else any."""
    return rng.choice(few) if rng.random() < 0.7 else rng.randrange(1, 1 << rng.randrange(1, 24))


@pytest.mark.parametrize("kernels", [1, 7, 8, 9, 15, 104])
def test_valid_lanes_are_the_valid_answers_lanes(kernels: int) -> None:
    """`Means.valid_lanes` (a byte of `bad` at a time) gives every valid answer's lane, all ones, and no other: the
    library's lane always, kernel j's where bit j of `bad` is clear."""
    from autotune.dispatch.cost import MEAN_LANE, Means

    m, rng, lane = Means(kernels, 4, 100), random.Random(kernels), (1 << MEAN_LANE) - 1
    for bad in [0, (1 << kernels) - 1, *(rng.getrandbits(kernels) for _ in range(200))]:
        want = sum(lane << MEAN_LANE * j for j in range(kernels + 1) if not bad >> j & 1)
        assert m.valid_lanes(bad) == want
