"""Refinement where the application runs (issue 55 item 2), on a CPU: the generated Python module's refiner runs
with the standard library only (a CPU timer stands in for CUDA events), times the candidates once per problem and
answers from its cache after; the C++ header's `candidates` lists what the Python refiner times, on random problems
of every structure (g++); the header's Refiner (AUTOTUNE_DISPATCH_REFINE) compiles and links with nvcc in an
application that launches the table's kernels (tests/support/onsite.py; tests/gpu/test_onsite_refine_gpu.py runs it)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.dispatch.emit import emit_cpp, emit_python
from autotune.dispatch.onsite import candidates
from autotune.dispatch.runtime import LIBRARY, Lookup
from autotune.dispatch.table import load_table
from autotune.paths import KERNELS_DIR
from tests.support.harness import load_script
from tests.support.onsite import driver, fp64_nn_kernels, write_app

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "results/small_tables_h100/model/dispatch.json"
bench = load_script("bench_lookup")

PROBE = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import dispatch_app as d
runs = []
def timer(run, answer, stream, reps):  # a CPU stand-in for CUDA events: each answer costs its own time
    for _ in range(reps + 1):
        run(answer)
    return {-2: 1.0}.get(answer, 0.5 + ((answer * 7) % 5) / 10)
refiner = d.refiner(top=3, reps=2, timer=timer)
out = []
for p, s, sizes in json.loads(sys.stdin.read()):
    before = len(runs)
    first = refiner.index(p, s, tuple(sizes), run=runs.append)
    middle = len(runs)
    again = refiner.index(p, s, tuple(sizes), run=runs.append)
    out.append({"first": first, "again": again, "ran": sorted(set(runs[before:middle])), "runs": middle - before,
                "after": len(runs) - middle})
foreign = sorted(m for m in sys.modules if m.split(".")[0] in ("autotune", "numpy", "cupy"))
print(json.dumps({"out": out, "timed": refiner.timed, "foreign": foreign}))
"""


def test_the_generated_module_refines_once_per_problem_with_the_standard_library_only(tmp_path: Path) -> None:
    table = load_table(MODEL)
    (tmp_path / "dispatch_app.py").write_text(emit_python(table))
    asked = [(p, s, list(sizes)) for p, s, sizes in bench.queries(table.data, 40, 3)]
    tuned = table.data["points"][0]
    asked.append((tuned["precision"], tuned["shape"], [tuned["sizes"][n] for n in table.size_names]))
    r = subprocess.run(
        [sys.executable, "-I", "-S", "-c", PROBE, str(tmp_path)],
        input=json.dumps(asked),
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout)
    assert got["foreign"] == []
    lookup = Lookup(table.data)
    timed = 0
    for (p, s, sizes), o in zip(asked, got["out"], strict=True):
        dims = tuple(sizes)
        assert o["again"] == o["first"] and o["after"] == 0  # the second call answers from the cache
        if dims in lookup.exact.get((p, s), {}):
            assert o["runs"] == 0 and o["first"] == lookup.index(p, s, dims)  # a tuned point keeps its answer
            continue
        cands = candidates(lookup, p, s, dims, 3, True)
        assert o["ran"] == sorted(cands) and o["runs"] == 3 * len(cands)  # each candidate: 1 untimed + 2 timed
        costs = {a: ({-2: 1.0}.get(a, 0.5 + ((a * 7) % 5) / 10)) for a in cands}
        assert o["first"] == min(cands, key=lambda a: (costs[a], a != lookup.index(p, s, dims), a))
        timed += 1
    assert got["timed"] == timed > 30


CANDIDATES = r"""
#include "dispatch.cuh"
#include <cstdio>
namespace ad = autotune_dispatch;
int main() {
  long long q[2 + ad::kNumSizes];
  while (true) {
    for (auto& v : q)
      if (std::scanf("%lld", &v) != 1) return 0;
    long long d[ad::kNumSizes];
    for (int j = 0; j < ad::kNumSizes; ++j) d[j] = q[2 + j];
    int out[ad::kNumKernels + 2];
    const int n = ad::candidates(int(q[0]), int(q[1]), d, 3, true, out);
    for (int i = 0; i < n; ++i) std::printf("%d ", out[i]);
    std::printf("\n");
  }
}
"""


@pytest.mark.parametrize(
    "name",
    [
        "results/small_tables_h100/model/dispatch.json",
        "results/tc_final_h100/dispatch.json",
        "results/tables5_h100/softmax/active/seed/dispatch.json",
        "results/fp16_tables_h100/dispatch.json",
    ],
)
def test_cpp_candidates_are_the_python_refiners(tmp_path: Path, name: str) -> None:
    if shutil.which("g++") is None:
        pytest.skip("g++ not found")
    table = load_table(ROOT / name)
    (tmp_path / "dispatch.cuh").write_text(emit_cpp(table))
    (tmp_path / "main.cpp").write_text(CANDIDATES)
    exe = tmp_path / "candidates"
    subprocess.run(["g++", "-std=c++17", "-O2", "-o", str(exe), str(tmp_path / "main.cpp")], check=True, timeout=300)
    asked = bench.queries(table.data, 1500, 11)
    precisions, shapes = list(table.precisions), list(table.shapes)
    text = "\n".join(f"{precisions.index(p)} {shapes.index(s)} {' '.join(map(str, z))}" for p, s, z in asked)
    r = subprocess.run([str(exe)], input=text + "\n", capture_output=True, text=True, check=True, timeout=300)
    got = [[int(x) for x in line.split()] for line in r.stdout.splitlines()]
    lookup = Lookup(table.data)
    want = [candidates(lookup, p, s, tuple(z), 3, True) for p, s, z in asked]
    assert got == want
    assert any(len(w) > 2 for w in want) and (not table.library or all(w[-1] == LIBRARY for w in want))


@pytest.mark.nvcc
def test_the_header_refiner_compiles_and_links_in_an_application(tmp_path: Path) -> None:
    table = load_table(MODEL)
    kernels = fp64_nn_kernels(table.data)[:2]
    geometry = [{i: ((8, 1, 1), (64, 1, 1), 0) for i in kernels}] * 2
    sources = sorted({table.data["kernels"][i]["source"] for i in kernels})
    cu = write_app(
        tmp_path, emit_cpp(table), driver(table.data, [(13, 27, 7, 99), (15, 12, 21, 50)], geometry, sources)
    )
    cmd = [
        "nvcc",
        "-std=c++17",
        "-arch=sm_90",
        f"-I{KERNELS_DIR}",
        f"-I{tmp_path}",
        str(cu),
        "-o",
        str(tmp_path / "app"),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    assert (tmp_path / "app").stat().st_size > 0
