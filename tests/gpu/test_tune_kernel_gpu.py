"""GPU tier (issue 31 item 1): Kernel Tuner scripts switched by one import run through `tune_kernel` on the real
GPU backend: the README's vector_add, and Kernel Tuner's own matmul example (tests/data/kerneltuner/matmul.cu,
copied from Kernel Tuner's examples/cuda with attribution) with its grid divisors, restriction and metric, verified
against numpy.dot. The best configuration must be a correct one and every result shaped as Kernel Tuner's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autotune.kernel_tuner import tune_kernel
from tests.support.switched_script import run_switched

pytestmark = pytest.mark.gpu
DATA = Path(__file__).resolve().parents[1] / "data" / "kerneltuner"
VECTOR_ADD = """
__global__ void vector_add(float *c, float *a, float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i<n) {
        c[i] = a[i] + b[i];
    }
}
"""
KT_KEYS = {
    "time",
    "times",
    "compile_time",
    "verification_time",
    "benchmark_time",
    "strategy_time",
    "framework_time",
    "timestamp",
}


def test_vector_add(tmp_path: Path) -> None:
    size = 10_000_000
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(size).astype(np.float32), rng.standard_normal(size).astype(np.float32)
    args = [np.zeros_like(b), a, b, np.int32(size)]
    tune_params = {"block_size_x": [128 + 64 * i for i in range(15)]}
    results, env = tune_kernel(
        "vector_add",
        VECTOR_ADD,
        size,
        args,
        tune_params,
        answer=[a + b, None, None, None],
        cache=str(tmp_path / "vector_add"),
        quiet=True,
    )
    assert sorted(r["block_size_x"] for r in results) == tune_params["block_size_x"]
    odd = [r for r in results if not (KT_KEYS <= set(r) and r["time"] > 0 and len(r["times"]) >= 5)]
    assert not odd, odd  # block sizes within 10% of each other: none stopped early on its unwarmed launches
    best = env["best_config"]
    assert best["time"] == min(r["time"] for r in results) and "__error__" not in best
    assert env["device_name"] and env["iterations"] == 7
    assert (tmp_path / "vector_add.json").is_file()  # cache= written as a Kernel Tuner cache


def test_kernel_tuners_matmul_example() -> None:
    problem_size = (4096, 4096)
    rng = np.random.default_rng(1)
    A = rng.standard_normal(problem_size).astype(np.float32)
    B = rng.standard_normal(problem_size).astype(np.float32)
    C = np.zeros_like(A)
    tune_params = {
        "block_size_x": [16 * 2**i for i in range(3)],
        "block_size_y": [2**i for i in range(6)],
        "tile_size_x": [2**i for i in range(4)],
        "tile_size_y": [2**i for i in range(4)],
    }
    metrics = {"GFLOP/s": lambda p: (2 * 4096**3 / 1e9) / (p["time"] / 1e3)}
    results, env = tune_kernel(
        "matmul_kernel",
        str(DATA / "matmul.cu"),
        problem_size,
        [C, A, B],
        tune_params,
        grid_div_y=["block_size_y", "tile_size_y"],
        grid_div_x=["block_size_x", "tile_size_x"],
        restrictions=["block_size_x==block_size_y*tile_size_y"],
        iterations=32,
        metrics=metrics,
        answer=[A @ B, None, None],
        atol=1e-2,
        quiet=True,
    )
    expected = [
        p
        for p in (
            {"block_size_x": bx, "block_size_y": by, "tile_size_x": tx, "tile_size_y": ty}
            for bx in tune_params["block_size_x"]
            for by in tune_params["block_size_y"]
            for tx in tune_params["tile_size_x"]
            for ty in tune_params["tile_size_y"]
        )
        if p["block_size_x"] == p["block_size_y"] * p["tile_size_y"] and p["block_size_x"] * p["block_size_y"] <= 1024
    ]
    assert len(results) == len(expected)
    ok = [r for r in results if "__error__" not in r]
    assert len(ok) >= len(expected) // 2, [r for r in results if "__error__" in r][:3]
    best = env["best_config"]
    assert best["time"] == min(r["time"] for r in ok) and best["GFLOP/s"] > 0
    assert best["block_size_x"] == best["block_size_y"] * best["tile_size_y"]


SWITCHED_SCRIPT = """
import json, sys
import numpy as np
import autotune.kernel_tuner as kernel_tuner
size = 1 << 20
rng = np.random.default_rng(0)
a, b = rng.standard_normal(size).astype(np.float32), rng.standard_normal(size).astype(np.float32)
results, env = kernel_tuner.tune_kernel("vector_add", sys.argv[1], size, [np.zeros_like(b), a, b, np.int32(size)],
                                        {"block_size_x": [128, 256]}, answer=[a + b, None, None, None], quiet=True)
print(json.dumps({"cupy": "cupy" in sys.modules, "ok": [r.get("time") is not None for r in results],
                  "startup": env["autotune"]["startup"]}))
"""


def test_the_scripts_process_never_imports_cupy(tmp_path: Path) -> None:
    """A switched script's own process plans with the limits the GPU worker read (`GpuBackend.device_limits`) and
    never imports CuPy (nor initializes CUDA); the worker's prepare reports its steps, the warm-up of the check
    included."""
    out = run_switched(SWITCHED_SCRIPT, VECTOR_ADD, tmp_path=tmp_path)
    assert out["ok"] == [True, True]
    assert out["cupy"] is False
    assert {"worker.prepare_data", "worker.prepare_warm"} <= set(out["startup"]), out["startup"]


# `sum_items`, not `items`: a tunable parameter is a #define before the includes (as in Kernel Tuner), and CUB
# names a variable `items` (warp_exchange_smem.cuh: "expected a ')'" under nvcc too; seen on an H100)
CUB_SUM = """
#include <cub/cub.cuh>

extern "C" __global__ void block_sum(const float *inp, float *out, int n) {
    typedef cub::BlockReduce<float, block_size_x> Reduce;
    __shared__ typename Reduce::TempStorage temp;
    float v = 0.0f;
    for (int i = 0; i < sum_items; i++) {
        int idx = (blockIdx.x * sum_items + i) * block_size_x + threadIdx.x;
        v += idx < n ? inp[idx] : 0.0f;
    }
    float total = Reduce(temp).Sum(v);
    if (threadIdx.x == 0) atomicAdd(out, total);
}
"""


def _cub_call(**kw: object) -> tuple[list[dict], dict]:
    n = 1 << 20
    x = (np.arange(n) % 3).astype(np.float32)  # small integers: the float sum is exact
    return tune_kernel(
        "block_sum",
        CUB_SUM,
        n,
        [x, np.zeros(1, np.float32), np.int32(n)],
        {"block_size_x": [64, 128, 256, 512, 1024], "sum_items": [1, 2, 4]},
        grid_div_x=["block_size_x", "sum_items"],
        answer=[None, np.array([x.sum()], np.float32), None],
        quiet=True,
        **kw,
    )


@pytest.mark.nvcc
def test_a_kernel_nvrtc_cannot_compile_is_retried_with_nvcc_and_said_at_quiet(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """issue 53: `#include <cub/cub.cuh>` under NVRTC stopped after 8 identical failures without a word at quiet=True;
    with nvcc there, the call says why on stderr and runs again with compiler='nvcc'."""
    results, env = _cub_call()
    err = capsys.readouterr().err
    assert "compiling with nvcc" in err and "block_sum" in err, err
    ok = [r for r in results if "__error__" not in r]
    assert len(results) == 15 and ok and env["autotune"]["space"].endswith("_nvcc"), results
    assert "__error__" not in env["best_config"] and env["best_config"]["time"] > 0


def test_a_systematic_failure_under_nvrtc_asked_by_name_is_raised_with_its_reason() -> None:
    from autotune.interop.kt_sweep import SystematicFailure

    with pytest.raises(SystematicFailure, match="the same compile error under NVRTC") as err:
        _cub_call(compiler="nvrtc")
    assert "compiler='nvcc'" in str(err.value.hint)
