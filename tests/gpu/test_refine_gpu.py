"""GPU tier: the first-call cost of runtime refinement (issue 32 item 3). The committed fp32/fp64 selection-model
table refines its answer at 3 held-out problems of its committed validation, timing its answer, its next 2 best
predicted kernels and cuBLAS on this GPU with the GPU backend (compile, verify, 10 timed repetitions each): the
first call at a problem costs those measurements; a second call answers from the cache. Prints the costs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest

from autotune.dispatch.refine import Refiner
from autotune.dispatch.refine_timer import backend_timer
from autotune.dispatch.runtime import LIBRARY
from autotune.problems.gemm import GEMM

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "results" / "small_tables_h100" / "model"
TUNING = ROOT / "results" / "small_tables_h100" / "small_tables_h100.sqlite.xz"


def test_first_call_cost_of_refinement_on_the_gpu(tmp_path: Path) -> None:
    pytest.importorskip("cupy")
    from autotune.sweep.backends.local import gpu_backend

    table = json.loads((MODEL / "dispatch.json").read_text())
    frame = pd.read_csv(MODEL / "validation" / "validation.csv").head(3)
    backend = gpu_backend()
    try:
        refine = Refiner(
            table,
            backend_timer(backend, table, GEMM, str(TUNING), reps=10),
            top=3,
            cache_file=tmp_path / "choices.json",
        )
        for row in frame.to_dict("records"):
            sizes = {n: int(row[n]) for n in GEMM.size_names}
            t0 = time.perf_counter()
            refine.lookup.index(row["precision"], row["shape"], sizes)
            lookup_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            first = refine.index(row["precision"], row["shape"], sizes)
            first_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            again = refine.index(row["precision"], row["shape"], sizes)
            cached_s = time.perf_counter() - t0
            choice = refine.choices[
                refine.key(row["precision"], row["shape"], refine.lookup.check(row["precision"], row["shape"], sizes))
            ]
            timed = {a: t for a, t in choice["times"].items() if t is not None}
            print(
                f"REFINE {row['precision']} {sizes}: table {choice['table']} -> {first}; timed {choice['times']} ms; "
                f"first call {first_s:.3f} s, cached {1e6 * cached_s:.1f} us, lookup {1e6 * lookup_s:.1f} us"
            )
            assert again == first and str(LIBRARY) in choice["times"] and timed
            assert first_s > cached_s and cached_s < 0.01
        print(f"REFINE stats: {refine.stats}")
        assert refine.stats.refined == 3 and (tmp_path / "choices.json").is_file()
    finally:
        backend.close()
