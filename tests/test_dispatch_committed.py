"""Dispatch tables built from the committed results databases (no GPU): validity, the library, input checks.

- no lookup on a dense grid (rectangular sizes included) returns a kernel whose space `serves`/`where`
  expression is false there, in the package lookup, the generated Python module and the generated C++
  header compiled with g++ (a kernel measured at that very tuned point excepted: the measurement stands);
- every kernel's predicates reproduce its expression exactly on the grid;
- at the tuned points the table's answer is never slower than the library (cuBLAS) where it was measured;
- invalid input: ValueError in Python, INVALID (-3) in C++, on the same inputs;
- leave-one-out reports a loss only where the answer was measured at the held-out point.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import shutil
import subprocess
import warnings

import numpy as np
import pytest

from autotune import paths
from autotune.analysis.winners import Criteria
from autotune.dispatch.emit import emit_cpp, emit_python
from autotune.dispatch.runtime import INVALID, LIBRARY
from autotune.dispatch.validity import predicates_hold, space_predicate, _load

RESULTS = paths.RESULTS_DIR
# (tc_all_h100 was here until its database was retired, superseded by tc_final_h100: docs/results.md)
DATABASES = ["tc_final_h100", "square_h100", "simt_h100", "tc_small_h100", "tsm2_h100"]


def _db(name: str):
    return RESULTS / name / f"{name}.sqlite.xz"  # read through its decompressed copy


@pytest.fixture(scope="module", params=DATABASES)
def built(request):
    from autotune import load_results
    from autotune.dispatch.build import Recipe, build

    path = _db(request.param)
    if not path.exists():
        pytest.skip(f"{path} not committed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = load_results(str(path), None, None)
        b = build(loaded, Recipe(Criteria(bk=10, tol=0.05), generic_params="BLOCK_X=32,BLOCK_Y=4"))
    return request.param, loaded, b


def _dims(p: dict) -> tuple[int, ...]:
    return tuple(p["sizes"].values())


def _grid(table) -> list[tuple[str, str, int, int, int, int]]:
    rng = np.random.default_rng(3)
    out = []
    for precision, shape in sorted({(p["precision"], p["shape"]) for p in table.data["points"]}):
        batches = sorted({p["sizes"]["batch"] for p in table.data["points"] if p["precision"] == precision})
        if precision == "fp16":
            vals = [8, 9, 15, 16, 17, 24, 31, 32, 33, 40, 47, 48, 49, 56, 57, 63, 64, 65, 72, 80, 96, 113, 127, 128]
            sizes = list(itertools.product(vals[::2], vals[1::2], vals[::3])) + [
                tuple(x) for x in rng.integers(8, 129, (400, 3))
            ]
        else:
            vals = list(range(2, 33))
            sizes = list(itertools.product(vals[::3], vals[1::3], vals[::4])) + [
                tuple(x) for x in rng.integers(2, 33, (300, 3))
            ]
        for i, (m, n, k) in enumerate(sizes):
            out.append((precision, shape, int(m), int(n), int(k), [1, batches[len(batches) // 2]][i % 2]))
        out += [
            (precision, shape, *_dims(p))
            for p in table.data["points"]
            if (p["precision"], p["shape"]) == (precision, shape)
        ]
    return out


def _params(loaded, kern: dict) -> dict:
    space = _load(kern["space"])
    row = loaded.frame[loaded.frame["instance_id"] == kern["instance_id"]].iloc[0]
    return {p: int(row[p]) for p in space.param_names if p in row.index and row[p] == row[p]}


def _serving(loaded, table, queries, answers) -> list[tuple]:
    """(query, instance) pairs where the answer is a kernel whose space expression is false."""
    tuned = {(p["precision"], p["shape"], *_dims(p)): p["ranked"] for p in table.data["points"]}
    preds: dict[int, object] = {}
    bad = []
    for q, a in zip(queries, answers, strict=True):
        if a < 0 or a in tuned.get(q, ()):
            continue
        kern = table.data["kernels"][a]
        if a not in preds:
            preds[a] = space_predicate(_load(kern["space"]), _params(loaded, kern), kern["precision"])
        arr = [np.array([x], dtype=np.int64) for x in q[2:]]
        if not preds[a](*arr)[0]:
            bad.append((q, kern["instance_id"]))
    return bad


def _module(table, tmp_path):
    path = tmp_path / "dispatch_gen.py"
    path.write_text(emit_python(table))
    spec = importlib.util.spec_from_file_location(f"dispatch_gen_{id(table)}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cpp(table, tmp_path) -> str | None:
    if shutil.which("g++") is None:
        return None
    (tmp_path / "dispatch.cuh").write_text(emit_cpp(table))
    (tmp_path / "main.cpp").write_text(
        '#include "dispatch.cuh"\n#include <cstdio>\nint main() {\n  int p, s; long long m, n, k, b;\n'
        '  while (std::scanf("%d %d %lld %lld %lld %lld", &p, &s, &m, &n, &k, &b) == 6)\n'
        '    std::printf("%d\\n", autotune_dispatch::lookup(p, s, m, n, k, b));\n  return 0;\n}\n'
    )
    exe = str(tmp_path / "lookup")
    res = subprocess.run(
        ["g++", "-std=c++17", "-O1", "-Wall", "-Werror", "-o", exe, str(tmp_path / "main.cpp")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    return exe


def _code(value, names) -> int:
    return names.index(value) if value in names else 7


def _run_cpp(exe: str, queries, table) -> list[int]:
    stdin = "\n".join(
        f"{_code(p, table.precisions)} {_code(s, table.shapes)} {m} {n} {k} {b}" for p, s, m, n, k, b in queries
    )
    res = subprocess.run([exe], input=stdin, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return [int(x) for x in res.stdout.split()]


def test_every_kernel_carries_its_full_predicate(built):
    name, loaded, b = built
    queries = _grid(b.table)
    dims = np.array([q[2:] for q in queries], dtype=np.int64)
    for kern in b.table.data["kernels"]:
        assert not kern["tuned_only"], kern
        valid = [next(iter(p.items())) for p in kern["valid"]]
        expr = space_predicate(_load(kern["space"]), _params(loaded, kern), kern["precision"])
        got = expr(dims[:, 0], dims[:, 1], dims[:, 2], dims[:, 3])
        assert (predicates_hold(valid, dims, b.table.size_names) == got).all(), (
            name,
            kern["instance_id"],
            kern["valid"],
        )


def test_no_consumer_returns_a_kernel_off_its_serves(built, tmp_path):
    name, loaded, b = built
    table = b.table
    queries = _grid(table)
    package = [table.lookup_index(*q) for q in queries]
    assert _serving(loaded, table, queries, package) == []
    mod = _module(table, tmp_path)
    assert [mod.lookup_index(*q) for q in queries] == package
    exe = _cpp(table, tmp_path)
    if exe is not None:
        assert _run_cpp(exe, queries, table) == package
    assert LIBRARY in package  # where no kernel serves, the library answers


def test_tuned_points_are_never_slower_than_the_library(built):
    name, loaded, b = built
    table = b.table
    kernels = table.data["kernels"]
    col = {iid: c for c, iid in enumerate(b.winners.matrix.instances)}
    row = {k: r for r, k in enumerate(b.winners.matrix.points["point_key"])}
    checked = 0
    for p in table.data["points"]:
        a = table.lookup(p["precision"], p["shape"], p["sizes"])
        if p["library_ms"] is None:
            continue
        ms = (
            p["library_ms"]
            if a == LIBRARY
            else b.winners.matrix.median[row[p["point_key"]], col[kernels[a]["instance_id"]]]
        )
        assert ms <= p["library_ms"] * (1 + 1e-12), (name, p["point_key"])
        checked += 1
    assert checked == len(table.data["points"]) or checked > 0


def test_invalid_input_is_refused_identically(built, tmp_path):
    name, loaded, b = built
    table = b.table
    p0 = table.data["points"][0]
    good = (p0["precision"], p0["shape"], *_dims(p0))
    bad_numbers = [0, -1, -(2**40), 2**31, 2**40]
    queries = [good, (good[0], good[1], 1, 1, 1, 1), (good[0], good[1], 2**31 - 1, 5, 7, 2**31 - 1)]
    for i in range(2, 6):
        for v in bad_numbers:
            queries.append(good[:i] + (v,) + good[i + 1 :])
    queries += [("bf16",) + good[1:], (good[0], "NX") + good[2:], ("fp8",) + good[1:]]
    mod = _module(table, tmp_path)

    def ask(fn, q):
        try:
            return fn(*q)
        except ValueError:
            return INVALID

    package = [ask(table.lookup_index, q) for q in queries]
    assert package[:3] == [ask(mod.lookup_index, q) for q in queries[:3]] and INVALID not in package[:3]
    assert package[3:] == [INVALID] * (len(queries) - 3)
    assert [ask(mod.lookup_index, q) for q in queries] == package
    exe = _cpp(table, tmp_path)
    if exe is not None:
        assert _run_cpp(exe, queries, table) == package
    for q in [
        good[:2] + (8.0,) + good[3:],
        good[:3] + (True,) + good[4:],
        good[:4] + ("8",) + good[5:],
        good[:5] + (1.5,),
        (None,) + good[1:],
        good[:1] + (3,) + good[2:],
    ]:
        with pytest.raises(ValueError):
            table.lookup_index(*q)
        with pytest.raises(ValueError):
            mod.lookup_index(*q)


def test_leave_one_out_reports_only_measured_losses(built):
    from autotune.dispatch.loo import leave_one_out
    from autotune.dispatch.table import Answers

    name, loaded, b = built
    if name not in ("tc_small_h100", "square_h100"):
        # one fp16 and one mixed database are enough; the fp16 one is tc_small_h100 (46 points, most measurements
        # early-stopped: its leave-one-out takes a quarter of tc_final_h100's 127 points')
        pytest.skip("one fp16 and one mixed database are enough")
    w = b.winners
    held = leave_one_out(w.matrix, w.criteria, "exact", answers=Answers(b.info, b.library_ms))
    f = held.frame
    assert held.total == (f["interior"].sum() if f["interior"].any() else len(f))
    assert f.loc[~f["measured"], "loss"].isna().all()
    assert f.loc[f["measured"], "loss"].between(0, 1).all()
    row = {k: r for r, k in enumerate(w.matrix.points["point_key"])}
    col = {iid: c for c, iid in enumerate(w.matrix.instances)}
    for r in f[f["measured"]].itertuples():
        p = row[r.point_key]
        t = b.library_ms[p] if r.answer == "library" else w.matrix.median[p, col[r.instance_id]]
        best = min(w.best_ms[p], b.library_ms[p]) if np.isfinite(b.library_ms[p]) else w.best_ms[p]
        assert r.loss == pytest.approx(max(0.0, 1.0 - best / t))  # the library counts as an answer
    pick = f[f["interior"]] if f["interior"].any() else f
    known = pick.loc[pick["measured"], "loss"]
    assert held.measured == len(known) and held.measured > 0
    assert held.worst_loss == pytest.approx(known.max()) and not math.isclose(held.worst_loss, 1.0)
