"""The packed lookup (autotune/dispatch/lanes.py, runtime.py) answers as the rules of runtime.py's docstring written
plainly: exact point, first valid region, nearest tuned point by (distance, tie distance, order), cost mode with one
or K neighbours (and library steps), selection model; on committed tables of every structure and variants of them, at random problems,
at tuned points and at problems made of the sizes of different tuned points (equal distances, the tie sizes decide)."""

from __future__ import annotations

import functools
import gzip
import json
import math
import random
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Sequence

import pytest

from autotune.dispatch import lanes
from autotune.dispatch.features import cost_log_margin, ilog2_fx, model_features, model_margin, model_time
from autotune.dispatch.emit_cpp import emit_cpp
from autotune.dispatch.runtime import FALLBACKS, LIBRARY, MAX_SIZE, Lookup, parse_steps, step_class
from autotune.dispatch.table_file import DispatchTable

ROOT = Path(__file__).resolve().parents[1]
_ilog2_fx = functools.cache(ilog2_fx)  # the same values, remembered: reference() reads every point's at every problem


def reference(table: dict, ok: Callable[[int, tuple[int, ...]], bool], precision: str, shape: str, dims: tuple) -> int:
    """Rules 2-5 of runtime.py, one point at a time (`ok`: whether an answer is valid, Lookup.valid)."""
    names, sizes = table["size_names"], table["table_sizes"]
    near = [names.index(n) for n in sizes]
    tie = [d for d in range(len(names)) if d not in near]
    s = table.get("structure") or {}
    mode, margin = s.get("mode", "regions"), float(s.get("library_margin", 0.0))
    fallback = FALLBACKS[table.get("fallback", "library")]
    pts = [p for p in table["points"] if (p["precision"], p["shape"]) == (precision, shape)]
    for p in pts:
        if tuple(p["sizes"][n] for n in names) == dims:
            return p["ranked"][0] if p["ranked"] else fallback
    for r in table["regions"]:
        inside = all(r["bounds"][n][0] <= dims[d] <= r["bounds"][n][1] for n, d in zip(sizes, near, strict=True))
        if (r["precision"], r["shape"]) == (precision, shape) and inside and ok(r["kernel"], dims):
            return r["kernel"]
    if mode == "model":
        model, best = table["model"], []
        if f"{precision}:{shape}" in model.get("library", {}):
            coef = model["library"][f"{precision}:{shape}"]
            best.append((model_time(coef, model_features(dims, near, [1] * len(near))), 0, LIBRARY))
        for i, (k, m) in enumerate(zip(table["kernels"], model["kernels"], strict=True)):
            if m and (k["precision"], k["shape"]) == (precision, shape) and ok(i, dims):
                t = model_time(m["coef"], model_features(dims, near, m["tiles"]))
                best.append((t + model_margin(margin), 1, i))
        return min(best)[2] if best else fallback
    if not pts:
        return fallback
    logs = [_ilog2_fx(x) for x in dims]
    dist = [sum(abs(logs[d] - _ilog2_fx(p["sizes"][names[d]])) for d in near) for p in pts]
    tied = [sum(abs(logs[d] - _ilog2_fx(p["sizes"][names[d]])) for d in tie) for p in pts]
    order = sorted(range(len(pts)), key=lambda i: (dist[i], tied[i], i))
    if mode != "cost":
        for i in order:
            for c in pts[i].get("near", pts[i]["ranked"]):
                if ok(c, dims):
                    return c
        return fallback
    costs = [{a: c for a, c in p["costs"] if a == LIBRARY or 0 <= a < len(table["kernels"])} for p in pts]
    within = [i for i in order if dist[i] <= dist[order[0]] + round(float(s.get("reach", 1.0)) * 65536)]
    k = int(s.get("neighbours", 1))
    steps = parse_steps(s.get("library_steps", []), names)
    if k <= 1 and not steps:
        nearest: dict[int, tuple[int, int]] = {}
        for i in within:
            for a, c in costs[i].items():
                nearest.setdefault(a, (c, dist[i]))
        permille = round(1000 * margin)
        ranked = [
            (c * (1000 if a == LIBRARY else 1000 + permille), d, a) for a, (c, d) in nearest.items() if ok(a, dims)
        ]
        return min(ranked)[2] if ranked else fallback
    competing = {a for i in within for a in costs[i] if ok(a, dims)}
    price = {}
    here = step_class(steps, dims)  # library steps: the library's measurements in the problem's class, where any
    lib = [i for i in order if LIBRARY in costs[i] and step_class(steps, [pts[i]["sizes"][n] for n in names]) == here]
    for a in competing:
        source = (lib or order) if a == LIBRARY else order
        lc = [_ilog2_fx(max(1, costs[i][a])) for i in source if a in costs[i]][:k]
        price[a] = sum(lc) // len(lc) + (0 if a == LIBRARY else cost_log_margin(margin))
    return min(competing, key=lambda a: (price[a], a)) if competing else fallback


def problems(table: dict, count: int, seed: int) -> list[tuple[str, str, tuple[int, ...]]]:
    """Random problems over each group's range and beyond, tuned points, and problems made of different tuned
    points' sizes (often as near to two points: the tie sizes decide)."""
    rng = random.Random(seed)
    names, groups = table["size_names"], {}
    for p in table["points"]:
        groups.setdefault((p["precision"], p["shape"]), []).append(p["sizes"])
    out = []
    for _ in range(count):
        (precision, shape), pts = rng.choice(sorted(groups.items()))
        kind = rng.random()
        if kind < 0.15:
            sizes = [rng.choice(pts)[n] for n in names] if kind < 0.1 else [pts[0][n] for n in names]
        else:
            lo = {n: min(s[n] for s in pts) for n in names}
            hi = {n: max(s[n] for s in pts) for n in names}
            sizes = [round(math.exp(rng.uniform(math.log(lo[n]) - 1, math.log(hi[n]) + 1))) for n in names]
        out.append((precision, shape, tuple(min(MAX_SIZE, max(1, x)) for x in sizes)))
    return out


def variant(path: str, **change: object) -> dict:
    text = gzip.decompress((ROOT / path).read_bytes()) if path.endswith(".gz") else (ROOT / path).read_bytes()
    table = json.loads(text)
    if change.pop("tuned_only", False):
        for i, k in enumerate(table["kernels"]):
            k["tuned_only"] = k.get("tuned_only", False) or i % 3 == 0
    if change.pop("no_regions", False):
        table["regions"] = []
    table["structure"] = {**(table.get("structure") or {}), **change}
    return table


def coarse(table: dict) -> dict:
    """The table with every kernel's cost 1 and the library's left out: equal prices everywhere, which the nearer
    measurement, then the smaller index settle."""
    for point in table["points"]:
        point["costs"] = [[a, 1] for a, _ in point["costs"] if a >= 0]
    return table


TABLES = {
    "regions": lambda: variant("results/small_tables_h100/dispatch.json"),
    "regions, tuned_only kernels": lambda: variant("results/fp16_tables_h100/dispatch.json", tuned_only=True),
    "nearest, points on a grid": lambda: variant("results/simt_h100/dispatch.json", no_regions=True),
    "nearest, two sizes": lambda: variant("results/tables5_h100/softmax/active/seed/dispatch.json"),
    "cost": lambda: variant("results/tc_final_h100/dispatch.json"),
    "cost, reach 2": lambda: variant("results/tc_final_h100/dispatch.json", reach=2.0),
    "cost, equal prices": lambda: coarse(variant("results/tc_final_h100/dispatch.json", library_margin=0.0, reach=4.0)),
    "cost, 3 neighbours": lambda: variant("results/tc_final_h100/dispatch.json", neighbours=3),
    "cost, library steps m,k%2, 4 neighbours": lambda: variant("results/tables7_h100/fp16/dispatch.json.gz"),
    "cost, library steps m,k%2, tuned_only kernels": lambda: variant(
        "results/tables7_h100/fp16/dispatch.json.gz", tuned_only=True
    ),
    "cost, library steps cols<=2048+rows<16000": lambda: variant("results/tables7_h100/softmax/dispatch.json.gz"),
    "cost, library steps, 3 neighbours, reach 2": lambda: variant(
        "results/tables7_h100/softmax/dispatch.json.gz", neighbours=3, reach=2.0
    ),
    "model": lambda: variant("results/small_tables_h100/model/dispatch.json"),
    "model, tuned_only kernels, margin": lambda: variant(
        "results/fp16_model_h100/dispatch.json", tuned_only=True, library_margin=0.3
    ),
}


@functools.cache
def built(name: str) -> DispatchTable:
    """TABLES[name] with its lookup (`_lookup`), built once per process: the tests that read them leave them as they
    are (those that change the lookup's module, or a table, build their own)."""
    return DispatchTable(TABLES[name]())


@pytest.mark.parametrize("name", TABLES)
def test_lookup_answers_as_the_rules_written_plainly(name: str) -> None:
    table, lookup = built(name).data, built(name)._lookup
    asked = problems(table, 400, seed=len(name))
    assert [lookup.index(*q) for q in asked] == [reference(table, lookup.valid, *q) for q in asked]


def cpp_answers(
    tables: Sequence[dict | DispatchTable], asked: list[tuple[int, tuple[str, str, tuple[int, ...]]]], tmp_path: Path
) -> list[int]:
    """The generated headers' answers (`lookup_sizes`) at `asked` ((table index, problem)): one program compiled with
    g++ holding every table's header, one namespace each."""
    read = [t if isinstance(t, DispatchTable) else DispatchTable(t) for t in tables]
    for v, table in enumerate(read):
        (tmp_path / f"t{v}.cuh").write_text(emit_cpp(table, namespace=f"t{v}"))
    cases = "".join(
        f"      case {v}: {{ long long d[t{v}::kNumSizes] = {{}}; for (int j = 0; j < t{v}::kNumSizes; ++j) d[j] = x[j];"
        f" a = t{v}::lookup_sizes(p, s, d); break; }}\n"
        for v in range(len(tables))
    )
    (tmp_path / "main.cpp").write_text(
        "".join(f'#include "t{v}.cuh"\n' for v in range(len(tables)))
        + "#include <cstdio>\nint main() {\n  int v, p, s, n;\n"
        + '  while (std::scanf("%d %d %d %d", &v, &p, &s, &n) == 4) {\n'
        + '    long long x[8] = {};\n    for (int j = 0; j < n; ++j) std::scanf("%lld", &x[j]);\n    int a = -99;\n'
        + "    switch (v) {\n"
        + cases
        + '    }\n    std::printf("%d\\n", a);\n  }\n  return 0;\n}\n'
    )
    exe = tmp_path / "lookup"
    build = ["g++", "-std=c++17", "-O1", "-Wall", "-Werror", "-o", str(exe), str(tmp_path / "main.cpp")]
    res = subprocess.run(build, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    lines = []
    for v, (precision, shape, dims) in asked:
        t = read[v].data
        lines.append(
            f"{v} {t['precisions'].index(precision)} {t['shapes'].index(shape)} {len(dims)} {' '.join(map(str, dims))}"
        )
    out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    return [int(x) for x in out.stdout.split()]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to compile the header")
def test_the_cpp_header_answers_as_the_rules(tmp_path: Path) -> None:
    """The generated header (its exact point by bisection, first region of the group, nearest point with the
    fallback to farther ones where the nearest has no valid entry, cost mode's distances kLanes points at a time)
    answers every table variant above as the Python lookup: one program holding every header, one namespace each."""
    names = [*TABLES, "nearest, every other point without a valid entry"]
    tables, asked = [built(n) for n in names[:-1]], []
    sparse = variant("results/simt_h100/dispatch.json", no_regions=True)  # odd kernels tuned_only, even points
    for i, k in enumerate(sparse["kernels"]):  # only them in their near list: the nearest often has no valid entry
        k["tuned_only"] = i % 2 == 1
    for j, point in enumerate(sparse["points"]):
        point["near"] = [a for a in point.get("near", point["ranked"]) if a >= 0 and (j % 2 or a % 2)]
    tables.append(DispatchTable(sparse))
    for v, table in enumerate(tables):
        asked += [(v, q) for q in problems(table.data, 300, seed=10 + v)]
    got = cpp_answers(tables, asked, tmp_path)
    want = [tables[v]._lookup.index(*q) for v, q in asked]
    wrong = [(names[v], q, g, w) for (v, q), g, w in zip(asked, got, want, strict=True) if g != w]
    assert not wrong, wrong[:5]


def test_points_beyond_the_key_budget_are_ranked_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where precomputing the distance lanes would take more than KEY_BUDGET, a loop gives the same keys."""
    table = variant("results/simt_h100/dispatch.json", no_regions=True)
    asked = problems(table, 400, seed=3)
    packed_lookup = Lookup(table)
    packed = [packed_lookup.index(*q) for q in asked]
    monkeypatch.setattr(lanes, "KEY_BUDGET", 0)
    looped = Lookup(table)
    assert all(g.keys is None or g.keys.axes is None for g in looped._groups.values())
    assert [looped.index(*q) for q in asked] == packed


@pytest.mark.parametrize("name", ["nearest, points on a grid", "cost", "model, tuned_only kernels, margin"])
def test_untabulated_sizes_are_answered_the_same(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Per-size tables (keys, validity, model terms up to TABLE_LIMIT) give the answers computed without them."""
    table = TABLES[name]()
    asked = problems(table, 400, seed=4)
    tabulated_lookup = Lookup(table)
    tabulated = [tabulated_lookup.index(*q) for q in asked]
    monkeypatch.setattr(lanes, "TABLE_LIMIT", 0)
    plain = Lookup(table)
    assert all(not any(a[1] for a in g.keys.axes or []) for g in plain._groups.values() if g.keys is not None)
    assert [plain.index(*q) for q in asked] == tabulated


@pytest.mark.parametrize("width", [32, 64, 128])
def test_unpack_reads_every_lane(width: int) -> None:
    rng = random.Random(width)
    values = [rng.randrange(1 << width) for _ in range(37)] + [0, (1 << width) - 1]
    packed = sum(v << (width * i) for i, v in enumerate(values))
    assert lanes.unpack(packed, len(values), width) == values


def two_points(mode: str) -> dict:
    """A table of two tuned points as near to (128, 64, 64, b) as each other over m, n, k (log2 ratios 1 and 1),
    told apart by batch: the first in table order (256, 64, 64, 1000), the second (64, 64, 64, 1)."""

    def point(m: int, batch: int, costs: list[list[int]]) -> dict:
        ranked = [a for a, _ in sorted(costs, key=lambda ac: ac[1])]
        sizes = {"m": m, "n": 64, "k": 64, "batch": batch}
        return {"precision": "fp32", "shape": "NN", "sizes": sizes, "ranked": ranked, "near": ranked, "costs": costs}

    kernels = [{"precision": "fp32", "shape": "NN", "valid": []} for _ in range(2)]
    return {
        "size_names": ["m", "n", "k", "batch"],
        "table_sizes": ["m", "n", "k"],
        "precisions": ["fp32"],
        "shapes": ["NN"],
        "kernels": kernels,
        "library": {"name": "cublas"},
        "fallback": "library",
        "regions": [],
        "structure": {"mode": mode, "reach": 0.5},
        "points": [point(256, 1000, [[0, 30], [1, 5]]), point(64, 1, [[0, 10], [1, 20]])],
    }


@pytest.mark.parametrize("mode", ["cost", "nearest"])
def test_equally_near_points_the_tie_sizes_decide(mode: str) -> None:
    """At batch 1 the second point is the nearer (kernel 0 cheapest there); at batch 1000 the first (kernel 1)."""
    table = two_points(mode)
    lookup = Lookup(table)
    for batch, answer in ((1, 0), (2, 0), (1000, 1), (999, 1)):
        assert lookup.index("fp32", "NN", (128, 64, 64, batch)) == answer
        assert reference(table, lookup.valid, "fp32", "NN", (128, 64, 64, batch)) == answer


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to compile the header")
def test_equally_near_points_the_tie_sizes_decide_in_the_header(tmp_path: Path) -> None:
    """The same in the generated header: cost mode's nearest point of a set (`cheapest`) and rule 4 (`nearest`)."""
    tables = []
    for mode in ("cost", "nearest"):
        base = variant("results/tc_final_h100/dispatch.json")  # format, provenance, kernel records
        table = {**base, **two_points(mode)}
        table["kernels"] = [{**base["kernels"][i], **k} for i, k in enumerate(table["kernels"])]
        for i, point in enumerate(table["points"]):
            point.update(point_key=f"p{i}", ms=1.0, best_ms=1.0, loss=0.0, kernel=point["ranked"][0])
        tables.append(table)
    asked = [(v, ("fp32", "NN", (128, 64, 64, batch))) for v in range(2) for batch in (1, 2, 1000, 999)]
    assert cpp_answers(tables, asked, tmp_path) == [0, 0, 1, 1] * 2


def test_predicted_times_are_the_model_over_its_features() -> None:
    """Model mode: the packed lanes give every valid answer's model_time over model_features, no margin."""
    table = variant("results/fp16_model_h100/dispatch.json", tuned_only=True)
    lookup, model = Lookup(table), table["model"]
    near = [table["size_names"].index(n) for n in table["table_sizes"]]
    for precision, shape, dims in problems(table, 200, seed=5):
        want = {LIBRARY: model_time(model["library"][f"{precision}:{shape}"], model_features(dims, near, [1] * 3))}
        for i, (k, m) in enumerate(zip(table["kernels"], model["kernels"], strict=True)):
            if m and (k["precision"], k["shape"]) == (precision, shape) and lookup.valid(i, dims):
                want[i] = model_time(m["coef"], model_features(dims, near, m["tiles"]))
        assert lookup.predicted_times(precision, shape, dims) == want


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to compile the header")
@pytest.mark.parametrize("cells, listed", [(2, 64), (1, 3), (8, 1)])
def test_the_cpp_index_answers_as_python(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cells: int, listed: int):
    """The header's grid (cheapest_walk) answers as Python where the cell lists are as emitted and where they are
    so short that the reading runs past their end (each unsettled set reads all its points, or cheapest_mean answers),
    also far outside the tuned range (the problem's logs are clamped to the group's) and at the extreme sizes."""
    from autotune.dispatch import cpp_index as emitter

    monkeypatch.setattr(emitter, "INDEX_CELLS", cells)
    monkeypatch.setattr(emitter, "INDEX_LIST", listed)
    monkeypatch.setattr(emitter, "WALK_POINTS", 0)  # K = 1 too ("cost", "cost, equal prices"): every group walked
    names = [n for n in TABLES if "library steps" in n] + ["cost, 3 neighbours", "cost", "cost, equal prices"]
    tables, asked = [built(n) for n in names], []  # (INDEX_CELLS and INDEX_LIST: read by emit_cpp only)
    rng = random.Random(cells * 100 + listed)
    for v, read in enumerate(tables):
        table = read.data
        asked += [(v, q) for q in problems(table, 200, seed=20 + v)]
        precision, shape = table["points"][0]["precision"], table["points"][0]["shape"]
        for _ in range(40):  # far beyond the tuned range, on either side, and at the extremes
            dims = tuple(
                rng.choice([1, 2, 3, rng.randrange(1, 1 << 20), MAX_SIZE - 1, MAX_SIZE]) for _ in table["size_names"]
            )
            asked.append((v, (precision, shape, dims)))
    got = cpp_answers(tables, asked, tmp_path)
    want = [tables[v]._lookup.index(*q) for v, q in asked]
    wrong = [(names[v], q, g, w) for (v, q), g, w in zip(asked, got, want, strict=True) if g != w]
    assert not wrong, wrong[:5]
