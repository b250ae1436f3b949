"""GPU tier: refinement where the application runs (issue 55 item 2), both refiners on the committed fp32/fp64
selection-model table (results/small_tables_h100/model) at 3 fp64 NN problems of its validation (never tuned):
- Python: the generated module's `refiner()` (the module and CuPy only; CUDA events in CuPy's current stream)
  times the candidates with the table's kernels (compiled by CuPy from kernels_src) and cuBLAS (cupy.matmul);
- C++: the generated header's `Refiner` (AUTOTUNE_DISPATCH_REFINE) in an nvcc-built application
  (tests/support/onsite.py) with the same kernels and cublasDgemmStridedBatched.
Each checks: the choice is one of the candidates, the second call times nothing (the cache), and C computed by the
choice matches a float64 reference. Launch geometry comes from the kernels' spaces (the application knows how to
launch its kernels; the table does not say)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.support.harness import cupy_with_a_device

from autotune.dispatch.emit import emit_cpp, emit_python
from autotune.dispatch.refine_timer import recorded_instances
from autotune.dispatch.table import load_table
from autotune.paths import KERNELS_DIR
from autotune.problems.gemm import GEMM
from tests.support.onsite import driver, fp64_nn_kernels, write_app

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "results" / "small_tables_h100" / "model"
TUNING = ROOT / "results" / "small_tables_h100" / "small_tables_h100.sqlite.xz"


def problems() -> list[tuple[int, int, int, int]]:
    frame = pd.read_csv(MODEL / "validation" / "validation.csv")
    rows = frame[(frame.precision == "fp64") & (frame["shape"] == "NN")].head(3)
    return [(int(r.m), int(r.n), int(r.k), int(r.batch)) for r in rows.itertuples()]


def geometry(table: dict, asked: list[tuple[int, int, int, int]]) -> list[dict[int, tuple]]:
    """Per problem, every fp64 NN kernel's launch geometry there, from its space."""
    kernels = fp64_nn_kernels(table)
    found = recorded_instances(str(TUNING), [table["kernels"][i]["instance_id"] for i in kernels])
    out = []
    for m, n, k, batch in asked:
        point = GEMM.point("fp64", "NN", {"m": m, "n": n, "k": k, "batch": batch})
        per = {}
        for i in kernels:
            space, instance = found[table["kernels"][i]["instance_id"]]
            g = space.geometry(instance.param_dict, point)
            per[i] = (tuple(g.grid), tuple(g.block), int(g.shared_bytes))
        out.append(per)
    return out


@pytest.fixture(scope="module")
def cp():
    return cupy_with_a_device()


def launcher(d, module, kernels: list, geo: dict, sizes: tuple, arrays: tuple, calls: list):
    """run(answer): the answer on this problem's arrays in CuPy's current stream (LIBRARY: cupy.matmul)."""
    import cupy as cp

    m, n, k, batch = sizes
    a, b, c = arrays

    def run(answer: int) -> None:
        calls.append(answer)
        if answer == d.LIBRARY:
            cp.matmul(b, a, out=c)  # C^T = B^T A^T, row-major views of the column-major matrices
            return
        grid, block, smem = geo[answer]
        f = module.get_function(kernels[answer]["template"])
        i32, i64, f64 = np.int32, np.int64, np.float64
        args = (i32(m), i32(n), i32(k), f64(1.0), a, i32(m), i64(m * k), b, i32(k), i64(k * n), f64(0.0), c, i32(m))
        f(grid, block, (*args, i64(m * n), i32(batch)), shared_mem=smem)

    return run


def test_python_refiner_with_cupy(cp, tmp_path: Path) -> None:
    table = load_table(MODEL / "dispatch.json")
    (tmp_path / "dispatch_gpu.py").write_text(emit_python(table))
    sys.path.insert(0, str(tmp_path))
    try:
        import dispatch_gpu as d  # the generated module: standard library only
    finally:
        sys.path.remove(str(tmp_path))
    kernels = table.data["kernels"]
    sources = sorted({kernels[i]["source"] for i in fp64_nn_kernels(table.data)})
    templates = [kernels[i]["template"] for i in fp64_nn_kernels(table.data)]
    module = cp.RawModule(
        code="".join(f'#include "{s}"\n' for s in sources),
        options=("-std=c++17", f"-I{KERNELS_DIR}"),
        name_expressions=templates,
    )
    refiner = d.refiner(top=3, reps=3)
    asked = problems()
    for (m, n, k, batch), geo in zip(asked, geometry(table.data, asked), strict=True):
        rng = np.random.default_rng(m * n * k)
        a = cp.asarray(rng.uniform(-1, 1, (batch, k, m)))  # column-major m x k per problem
        b = cp.asarray(rng.uniform(-1, 1, (batch, n, k)))
        c = cp.empty((batch, n, m))
        calls: list[int] = []
        run = launcher(d, module, kernels, geo, (m, n, k, batch), (a, b, c), calls)
        sizes = (m, n, k, batch)
        t0 = time.perf_counter()
        first = refiner.index("fp64", "NN", sizes, run)
        first_s = time.perf_counter() - t0
        ran = len(calls)
        t0 = time.perf_counter()
        again = refiner.index("fp64", "NN", sizes, run)
        cached_s = time.perf_counter() - t0
        cands = d.candidates(d._LOOKUP, "fp64", "NN", sizes, 3, True)
        times = refiner.times[("fp64", "NN", sizes)]
        print(
            f"ONSITE-PY {sizes}: candidates {cands}, ms {times}, chosen {first}; first call {first_s:.3f} s, "
            f"cached {1e6 * cached_s:.1f} us"
        )
        assert first in cands and set(times) == set(cands) and times[first] is not None
        assert again == first and len(calls) == ran == 4 * len(cands)  # 1 untimed + 3 timed each, then nothing
        c.fill(cp.nan)
        run(first)
        ref = np.matmul(cp.asnumpy(b).astype(np.float64), cp.asnumpy(a).astype(np.float64))
        got = cp.asnumpy(c)
        assert np.isfinite(got).all()
        assert np.abs(got - ref).max() <= 1e-12 * np.abs(ref).max()
    assert refiner.timed == len(asked)


def test_cpp_refiner_with_cuda_events(cp, tmp_path: Path) -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not found")
    table = load_table(MODEL / "dispatch.json")
    asked = problems()
    kernels = fp64_nn_kernels(table.data)
    sources = sorted({table.data["kernels"][i]["source"] for i in kernels})
    cu = write_app(tmp_path, emit_cpp(table), driver(table.data, asked, geometry(table.data, asked), sources))
    major, minor = cp.cuda.Device().compute_capability[:1], cp.cuda.Device().compute_capability[1:]
    arch = f"-arch=sm_{major}{minor}"
    cmd = [
        "nvcc",
        "-std=c++17",
        arch,
        f"-I{KERNELS_DIR}",
        f"-I{tmp_path}",
        str(cu),
        "-o",
        str(tmp_path / "app"),
        "-lcublas",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    run = subprocess.run([str(tmp_path / "app")], capture_output=True, text=True, timeout=600)
    print(run.stdout)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "ONSITE OK" in run.stdout and run.stdout.count(" ok\n") == len(asked)
