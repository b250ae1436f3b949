"""GPU tier (issue 31): the check generated for Kernel Tuner's `answer` compares on the GPU (numpy.allclose's rule,
autotune.sweep.backends.device_compare, no CuPy JIT kernel) when the worker hands it device arrays, the answer
uploaded once; a wrong output still gets the host's message naming how many elements differ."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autotune.interop.kt_space import write_space_folder
from autotune.problems.declared_data import HostArrays
from autotune.paths import ROOT
from tests.support.harness import checkout_env
from tests.test_tune_kernel import VECTOR_ADD, _module, _problem, _vector_add

pytestmark = pytest.mark.gpu


def test_the_generated_check_compares_on_the_device(tmp_path: Path) -> None:
    import cupy

    args, answer = _vector_add(1 << 20)
    write_space_folder(
        _problem(
            kernel_name="vector_add",
            source_text=VECTOR_ADD,
            source_file=None,
            problem_size=(1 << 20,),
            arguments=args,
            tune_params={"block_size_x": [32]},
            answer=answer,
            atol=1e-3,
        ),
        tmp_path,
    )
    module = _module(tmp_path / "kt_check.py")
    right = cupy.asarray(answer[0] + 5e-4)  # within atol
    outputs = HostArrays({"c": right})
    assert module.check(outputs, None, {}, {}) is True
    assert "c" not in outputs._host  # nothing copied to the host
    assert isinstance(module._CACHE[("dev", "c")], cupy.ndarray)  # the answer, uploaded once
    wrong = right.copy()
    wrong[7] += 0.01
    assert "1 of 1048576 elements differ" in module.check(HostArrays({"c": wrong}), None, {}, {})
    assert np.array_equal(module._CACHE[("dev", "c")].get(), answer[0])


def test_the_workers_prepare_warms_the_check_before_the_first_measurement(tmp_path: Path) -> None:
    """The GPU worker's `prepare` (while the first instances compile) runs the generated check's `warm`: the answer
    is on the device and the comparison kernel loaded before any configuration is checked."""
    import cupy

    from autotune.problems.loading import load_attribute
    from autotune.space.spec import load_space
    from autotune.sweep.backends.gpu_worker import GpuState
    from autotune.vocab import TestPoint

    n = 1 << 20
    args, answer = _vector_add(n)
    space_file, sizes = write_space_folder(
        _problem(
            kernel_name="vector_add",
            source_text=VECTOR_ADD,
            source_file=None,
            problem_size=(n,),
            arguments=args,
            tune_params={"block_size_x": [32]},
            answer=answer,
            atol=1e-3,
        ),
        tmp_path,
    )
    kind = load_space(space_file).kind
    point = TestPoint(kind.name, "fp32", "", tuple(sizes.items()))
    state = GpuState(cupy, 0)
    stamps, fatal = state.prepare(kind, point, kind.conventions[0], {})
    assert fatal is False and isinstance(stamps, dict), stamps  # a ProblemFault would say what failed
    assert stamps["prepare_data"] <= stamps["prepare_reference"] <= stamps["prepare_warm"]
    check = load_attribute(f"{kind.check_fn.rsplit(':', 1)[0]}:check")
    cache = check.__globals__["_CACHE"]
    assert isinstance(cache.get(("dev", "c")), cupy.ndarray)  # uploaded by warm, before any check ran
    assert np.array_equal(cache[("dev", "c")].get(), answer[0])


FRESH_CACHE_CHECK = """
import sys
from pathlib import Path

import cupy
import numpy as np

from autotune.interop.kt_space import write_space_folder
from autotune.problems.declared_data import HostArrays
from autotune.problems.loading import load_attribute
from autotune.space.spec import load_space
from autotune.sweep.backends.gpu_worker import GpuState, warm_comparisons
from autotune.vocab import TestPoint
from tests.test_tune_kernel import VECTOR_ADD, _problem, _vector_add

warm_comparisons(cupy)  # as the worker tune_kernel starts does
folder = Path(sys.argv[1])
n = 1 << 20
args, answer = _vector_add(n)
space_file, sizes = write_space_folder(
    _problem(kernel_name="vector_add", source_text=VECTOR_ADD, source_file=None, problem_size=(n,), arguments=args,
             tune_params={"block_size_x": [32]}, answer=answer, atol=1e-3),
    folder,
)
kind = load_space(space_file).kind
point = TestPoint(kind.name, "fp32", "", tuple(sizes.items()))
state = GpuState(cupy, 0)
stamps, fatal = state.prepare(kind, point, kind.conventions[0], {})
assert fatal is False and isinstance(stamps, dict), stamps
data = state.data[next(iter(state.data))][0]
out = data.sets[0]["c"]
if "c" in data.initial:  # an output with data (Kernel Tuner's arrays): reset to its values, by a memcpy
    assert np.array_equal(out.get(), data.initial["c"].get())
    del data.initial["c"]
    data.prepare_verify()
assert bool(np.isnan(out.get()).all())  # an output alone: NaN everywhere, by a memset
check = load_attribute(f"{kind.check_fn.rsplit(':', 1)[0]}:check")
assert check(HostArrays({"c": cupy.asarray(answer[0] + 5e-4)}), None, {}, {}) is True
wrong = answer[0].copy()
wrong[7] += 0.01  # on the host: CuPy's add would be a JIT kernel of its own
assert "1 of 1048576 elements differ" in check(HostArrays({"c": cupy.asarray(wrong)}), None, {}, {})
print("prepare_warm_s", stamps["prepare_warm"] - stamps["prepare_reference"])
"""


def test_the_check_compiles_no_cupy_kernel_into_a_fresh_cache(tmp_path: Path) -> None:
    """The generated check and the verified launch's preparation (prepare, the outputs' NaN fill, the comparison on
    the device, right and wrong outputs) leave a fresh CuPy kernel cache empty: no CuPy JIT kernel at the start of a
    call (from a fresh cache CuPy's allclose and fill kernels took 4.4 s while the compile pool held every core)."""
    import subprocess
    import sys

    cache = tmp_path / "cupy"
    env = checkout_env(
        CUPY_CACHE_DIR=str(cache),
        CUPY_CACHE_SAVE_CUDA_SOURCE="1",  # a failure names the kernel CuPy compiled
    )
    (tmp_path / "space").mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", FRESH_CACHE_CHECK, str(tmp_path / "space")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    compiled = sorted(p.name for p in cache.rglob("*") if p.is_file()) if cache.is_dir() else []
    sources = [p.read_text(errors="replace")[:400] for p in cache.rglob("*.cu")] if cache.is_dir() else []
    assert not compiled, (compiled[:10], sources[:3])
    print(proc.stdout.strip())


@pytest.mark.parametrize(
    ("te", "tg"), [("float32", "float32"), ("float64", "float64"), ("float64", "float32"), ("int32", "int32")]
)
def test_the_device_comparison_is_numpys_allclose(te: str, tg: str) -> None:
    """device_compare.allclose agrees with numpy.allclose element by element: within and beyond atol + rtol*|got|,
    infinities, NaNs with and without equal_nan."""
    import cupy

    from autotune.sweep.backends.device_compare import allclose

    rng = np.random.default_rng(5)
    e = (rng.standard_normal(4096) * 100).astype(te)
    noise = rng.standard_normal(4096) * (1e-3 if te.startswith("float") else 2)
    g = (e.astype(np.float64) + noise).astype(tg)
    if te.startswith("float") and tg.startswith("float"):
        e[:6] = [np.nan, np.inf, -np.inf, np.nan, 1.0, np.inf]
        g[:6] = [np.nan, np.inf, np.inf, 1.0, np.inf, np.inf]
    for atol in (1e-4, 1e-3, 5e-3, 1.0, 3.0):
        for equal_nan in (False, True):
            for i in range(0, 4096, 97):  # single elements: every case decided alone
                want = bool(np.allclose(e[i : i + 1], g[i : i + 1], atol=atol, equal_nan=equal_nan))
                got = allclose(cupy.asarray(e[i : i + 1]), cupy.asarray(g[i : i + 1]), atol, equal_nan=equal_nan)
                assert got is want, (te, tg, i, e[i], g[i], atol, equal_nan)
            want = bool(np.allclose(e[6:], g[6:], atol=atol))
            assert allclose(cupy.asarray(e[6:]), cupy.asarray(g[6:]), atol) is want
    assert allclose(cupy.zeros(3, cupy.float16), cupy.zeros(3, cupy.float16), 1e-3) is None  # left to the host


CONSTANT_SCALE = """
__constant__ float scale[4];
__global__ void scaled_add(float *c, const float *a, const float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = scale[i % 4] * (a[i] + b[i]);
}
"""


def test_run_kernel_with_cupy_runs_here_and_matches_kernel_tuners(tmp_path: Path) -> None:
    """`autotune.kernel_tuner.run_kernel(..., lang="cupy")` runs the kernel once in this process (constant memory
    set, every argument returned, inputs unchanged) without importing Kernel Tuner; where Kernel Tuner is
    installed, its own run_kernel returns the same arrays."""
    import importlib.util
    import sys

    from autotune.kernel_tuner import run_kernel

    n = 10_000
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    scale = np.array([1, 2, 3, 4], np.float32)
    args = [np.zeros(n, np.float32), a, b, np.int32(n)]
    had = "kernel_tuner" in sys.modules
    got = run_kernel(
        "scaled_add", CONSTANT_SCALE, n, args, {"block_size_x": 128}, cmem_args={"scale": scale}, lang="cupy"
    )
    assert ("kernel_tuner" in sys.modules) == had  # not imported by the call
    assert np.allclose(got[0], scale[np.arange(n) % 4] * (a + b)) and got[3] == np.int32(n)
    assert np.array_equal(got[1], a) and np.array_equal(args[0], np.zeros(n, np.float32))  # the inputs as given
    if importlib.util.find_spec("kernel_tuner") is not None:
        from kernel_tuner import run_kernel as kt_run_kernel

        theirs = kt_run_kernel(
            "scaled_add", CONSTANT_SCALE, n, args, {"block_size_x": 128}, cmem_args={"scale": scale}, lang="cupy"
        )
        assert all(np.array_equal(x, y) for x, y in zip(got[:3], theirs[:3], strict=True))
