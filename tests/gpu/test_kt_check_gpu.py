"""GPU tier (issue 31): the check generated for Kernel Tuner's `answer` compares on the GPU (numpy.allclose's rule,
cupy.allclose) when the worker hands it device arrays, the answer uploaded once; a wrong output still gets the
host's message naming how many elements differ."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autotune.interop.kt_space import write_space_folder
from autotune.problems.declared_data import HostArrays
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
    is on the device and CuPy's comparison kernels compiled before any configuration is checked."""
    import cupy

    from autotune.problems.loading import load_attribute
    from autotune.space.spec import load_space
    from autotune.sweep.backends.gpu_worker import _GpuState
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
    state = _GpuState(cupy, 0)
    stamps, fatal = state.prepare(kind, point, kind.conventions[0], {})
    assert fatal is False and isinstance(stamps, dict), stamps  # a ProblemFault would say what failed
    assert stamps["prepare_data"] <= stamps["prepare_reference"] <= stamps["prepare_warm"]
    check = load_attribute(f"{kind.check_fn.rsplit(':', 1)[0]}:check")
    cache = check.__globals__["_CACHE"]
    assert isinstance(cache.get(("dev", "c")), cupy.ndarray)  # uploaded by warm, before any check ran
    assert np.array_equal(cache[("dev", "c")].get(), answer[0])


def test_the_idle_worker_compiles_cupys_comparison_kernels_into_a_fresh_cache(tmp_path: Path) -> None:
    """`warm_comparisons` (the GPU worker's thread when tune_kernel starts it) leaves CuPy's kernels for the
    generated check in the kernel cache: a fresh cache is no longer empty after it."""
    import os
    import subprocess
    import sys

    cache = tmp_path / "cupy"
    code = "import cupy\nfrom autotune.sweep.backends.gpu_worker import warm_comparisons\nwarm_comparisons(cupy)\n"
    root = Path(__file__).resolve().parents[2]
    env = dict(
        os.environ, CUPY_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert cache.is_dir() and any(cache.iterdir()), "no CuPy kernel compiled"


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
