"""GPU tier: a real sweep of gemm_naive instances through GpuBackend, and failures that must not stop it.

Skipped where CuPy sees no GPU (tests/conftest.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from autotune.problems.gemm import GEMM, gemm_point
from autotune import paths
from autotune.sweep.compile.nvrtc import CompileRequest, compile_batch
from autotune.space.instance import Instance
from autotune.vocab import Status, TestPoint
from autotune.sweep.timing import ALONE_MIN_MS, FAST_REPS
from autotune.sweep.backends.base import Job
from autotune.space.spec import load_space
from autotune.problems.gemm.verify import tolerance
from autotune.sweep.backends.local import GpuBackend, LocalOptions
from autotune.sweep.backends.tasks import KernelTask, Variant

pytestmark = pytest.mark.gpu

TEST_KERNELS = Path(__file__).resolve().parent.parent / "data" / "kernels"
FAULTY = TEST_KERNELS / "faulty.cuh"
CPP = {"fp64": ("double", "double"), "fp32": ("float", "float"), "fp16": ("__half", "float")}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def variant(template: str, point: TestPoint, block=(16, 8, 1), extra: str = "") -> Variant:
    t, s = CPP[point.precision]
    name = f"{template}<{t}, {s}, {int(point.shape[0] == 'T')}, {int(point.shape[1] == 'T')}{extra}>"
    grid = (cdiv(point.m, block[0]), cdiv(point.n, block[1]), min(point.batch, 65535))
    return Variant(point, name, grid, block)


def make_task(
    name: str,
    template: str,
    point: TestPoint,
    source: Path = FAULTY,
    convention: str = "strided",
    extra: str = "",
    beta: float = 0.0,
    block=(16, 8, 1),
) -> KernelTask:
    return KernelTask(
        name, source, convention, (variant(template, point, block, extra),), GEMM, GEMM.scalars({"beta": beta}), reps=10
    )


P32 = gemm_point("fp32", "NN", 37, 29, 16, 64)


def in_task_order(backend: GpuBackend, tasks: list[KernelTask]) -> list:
    """run_tasks yields in compile-completion order; one measurement per task here, returned in task order."""
    got = {m.instance_id: m for m in backend.run_tasks(tasks)}
    assert len(got) == len(tasks)
    return [got[t.instance_id] for t in tasks]


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    cache = tmp_path_factory.mktemp("compile-cache")
    with GpuBackend(
        LocalOptions(
            cache_dir=cache,
            compile_workers=4,
            compile_batch_size=4,
            timeout_s=20,
            include_dirs=(paths.KERNELS_DIR, TEST_KERNELS),
        )
    ) as b:
        yield b


def naive(point: TestPoint, bx: int = 16, by: int = 8, beta: float = 0.0, block=None) -> KernelTask:
    return make_task(
        f"naive{bx}x{by}",
        "autotune::gemm_naive",
        point,
        paths.KERNELS_DIR / "gemm_naive.cuh",
        extra=f", {bx}, {by}",
        beta=beta,
        block=block or (bx, by, 1),
    )


def test_device_info(backend):
    info = backend.device_info()
    assert info.sm_count > 0 and info.cc >= 50 and info.l2_bytes > 0
    assert info.copy_bandwidth > 1e11  # any datacenter GPU copies faster than 100 GB/s
    assert info.nvrtc and info.cupy and info.uuid


def test_naive_sweep_through_space_jobs(backend):
    space = load_space("gemm_naive")
    instances = [Instance.of("gemm_naive", {"BLOCK_X": x, "BLOCK_Y": y}) for x, y in ((16, 8), (32, 4), (8, 8))]
    points = (
        gemm_point("fp64", "TT", 33, 17, 9, 100),
        gemm_point("fp32", "NT", 64, 64, 32, 500),
        gemm_point("fp16", "TN", 8, 8, 8, 70_000),
    )  # batch > 65,535: the grid-stride loop
    jobs = [Job(space, inst, points, GEMM.scalars({"beta": 0.5}), 12) for inst in instances]
    got = list(backend.run(jobs))
    assert len(got) == len(instances) * len(points)
    for m in got:
        assert m.status == Status.OK, (m.error, m.log)
        assert m.max_rel_err <= tolerance(m.point.precision, m.point.k)
        assert m.reps == 12 and len(m.times_ms) == 12 and 0 < m.min_ms <= m.median_ms <= m.max_ms
        assert m.registers > 0 and m.local_bytes is not None and m.l2_protection.startswith("rotate:")


def test_fault_is_recorded_and_the_next_measurement_succeeds(backend):
    before = backend.restarts
    got = in_task_order(backend, [make_task("fault", "autotune_test::gemm_fault", P32), naive(P32)])
    assert got[0].status in (Status.LAUNCH_ERROR, Status.CRASHED), got[0]
    assert got[1].status == Status.OK, (got[1].error, got[1].log)
    assert backend.restarts == before + 1
    (after,) = backend.run_tasks([naive(P32, 8, 8)])  # the replaced worker measures what comes next
    assert after.status == Status.OK, (after.error, after.log)


def test_hang_is_recorded_as_timeout(backend):
    backend.timeout_s = 5
    try:
        got = in_task_order(backend, [make_task("hang", "autotune_test::gemm_hang", P32), naive(P32)])
    finally:
        backend.timeout_s = 20
    assert got[0].status == Status.TIMEOUT
    assert got[1].status == Status.OK, (got[1].error, got[1].log)
    (after,) = backend.run_tasks([naive(P32, 16, 16)])
    assert after.status == Status.OK, (after.error, after.log)


def test_wrong_kernel_is_caught(backend):
    got = list(backend.run_tasks([make_task("wrong", "autotune_test::gemm_wrong", P32)]))
    assert got[0].status == Status.WRONG and got[0].max_rel_err > tolerance("fp32", P32.k)
    assert got[0].median_ms is None  # a wrong instance never counts as a time


def test_compile_error_is_recorded_with_its_log(backend):
    got = in_task_order(backend, [make_task("broken", "autotune_test::gemm_broken", P32), naive(P32, 8, 4)])
    assert got[0].status == Status.COMPILE_ERROR and "never compiles" in got[0].log and "error" in got[0].error
    assert got[1].status == Status.OK, (got[1].error, got[1].log)


def test_block_beyond_launch_bounds_is_a_resource_failure_without_restart(backend):
    before = backend.restarts
    # __launch_bounds__(8 * 4) compiled in, launched with 16 x 8 threads: refused before the launch
    (m,) = backend.run_tasks([naive(P32, 8, 4, block=(16, 8, 1))])
    assert m.status == Status.LAUNCH_ERROR and "resource limit" in m.error and m.registers > 0
    assert backend.restarts == before
    (ok,) = backend.run_tasks([naive(P32, 8, 4)])
    assert ok.status == Status.OK


@pytest.mark.parametrize(
    "convention,template", [("ptr_array", "autotune_test::gemm_ptr"), ("vbatched", "autotune_test::gemm_vbatched")]
)
@pytest.mark.parametrize(
    "point", [gemm_point("fp16", "TT", 19, 23, 8, 300), gemm_point("fp64", "NT", 8, 8, 40, 70_000)]
)
def test_pointer_conventions(backend, convention, template, point):
    task = make_task(convention, template, point, TEST_KERNELS / "conventions.cuh", convention, beta=-1.5)
    (m,) = backend.run_tasks([task])
    assert m.status == Status.OK, (m.error, m.log)


def test_cublas_baseline(backend):
    m = backend.baseline(GEMM, gemm_point("fp32", "TN", 32, 32, 32, 2000), GEMM.scalars(), 20)
    assert m.status == Status.OK and m.reps == 20 and m.max_rel_err <= 1e-5


def test_early_stop_skips_a_hopeless_instance(backend):
    point = gemm_point("fp32", "NN", 64, 64, 64, 300)
    backend.tol = 0.05
    backend.seed_best(point, GEMM.scalars(), 1e-6)  # an impossible best: every instance is far slower
    try:
        (m,) = backend.run_tasks([naive(point)])
    finally:
        backend.tol = None
    # the verified launch alone is far above the bound: judged on timing.FAST_REPS repetitions, no warm-up
    assert m.status == Status.SKIPPED and m.reps == FAST_REPS and math.isfinite(m.median_ms)


def test_a_long_hopeless_launch_stops_on_the_verified_launch_alone(backend):
    point = gemm_point("fp32", "NN", 256, 256, 256, 2000)  # the naive kernel: tens of ms a launch on an H100
    backend.tol = 0.05
    backend.seed_best(point, GEMM.scalars(), 1e-3)
    try:
        (m,) = backend.run_tasks([naive(point)])
    finally:
        backend.tol = None
    assert m.status == Status.SKIPPED and m.reps == 1 and m.median_ms >= ALONE_MIN_MS, (m.median_ms, m.reps)
    assert m.times_ms == [m.median_ms]


def test_compile_cache_recompiles_nothing(tmp_path, backend):
    arch = backend.device_info().cc
    names = tuple(f"autotune::gemm_naive<float, float, 0, 0, {x}, 4>" for x in (4, 8, 16))
    req = CompileRequest(paths.KERNELS_DIR / "gemm_naive.cuh", names, arch, (paths.KERNELS_DIR,))
    first = compile_batch(req, tmp_path)
    assert all(k.ok and not k.cached for k in first) and len({k.blob for k in first}) == 1
    again = compile_batch(CompileRequest(req.source, names[1:], arch, req.include_dirs), tmp_path)
    assert all(k.cached for k in again) and [k.lowered_name for k in again] == [k.lowered_name for k in first[1:]]
