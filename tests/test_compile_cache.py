"""Unit tests of the GPU runner's pure parts: compile-cache keys and store, data layout, rotation,
tolerances, statistics and the early-stop rule. No GPU needed (an nvcc check runs where nvcc is)."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import pytest

from autotune.problems.gemm import gemm_point
from autotune import paths
from autotune.sweep.timing import (
    ALONE_FACTOR,
    ALONE_MIN_MS,
    Timer,
    TimingPlan,
    chunk_sizes,
    alone_stop,
    fast_stop,
    should_stop,
    stop_bound,
    summarize,
    warmup_count,
)
from autotune.sweep.compile.nvrtc import (
    CompileCache,
    CompiledKernel,
    arch_option,
    batches,
    cache_key,
    local_headers,
    source_digest,
)
from autotune.problems.gemm.data import layout, rotation_copies
from autotune.problems.gemm.verify import judge, tolerance

TEST_KERNELS = Path(__file__).parent / "data" / "kernels"


def key(**changes):
    base = dict(
        digest="d" * 64,
        options=("-std=c++17", "-arch=sm_90"),
        arch=90,
        nvrtc_version=(13, 0),
        cuda_include="/usr/local/cuda/include",
        name_expression="autotune::k<double, 1>",
    )
    base.update(changes)
    return cache_key(**base)


def test_cache_key_changes_with_every_component():
    k0 = key()
    variants = [
        key(digest="e" * 64),
        key(options=("-std=c++20", "-arch=sm_90")),
        key(arch=80),
        key(nvrtc_version=(12, 8)),
        key(cuda_include="/opt/cuda/include"),
        key(name_expression="autotune::k<double, 2>"),
    ]
    assert len({k0, *variants}) == 1 + len(variants)
    assert key() == k0  # deterministic


def test_cache_key_ignores_where_the_files_are():
    assert key(options=("-std=c++17", "--include-path=/a/kernels_src", "-arch=sm_90")) == key(
        options=("-std=c++17", "--include-path=/elsewhere/kernels_src", "-arch=sm_90")
    )


def test_local_headers_follow_includes_recursively(tmp_path):
    (tmp_path / "a.cuh").write_text('#include "b.cuh"\nint a;')
    (tmp_path / "b.cuh").write_text("#include <cuda_fp16.h>\n#  include <c.cuh>\nint b;")
    (tmp_path / "c.cuh").write_text("int c;")
    found = local_headers('#include "a.cuh"\n', (tmp_path,))
    assert set(found) == {"a.cuh", "b.cuh", "c.cuh"}  # cuda_fp16.h is not in the folder: left out


def test_source_digest_sees_header_edits(tmp_path):
    (tmp_path / "h.cuh").write_text("int x;")
    text = '#include "h.cuh"\n'
    d0 = source_digest(text, local_headers(text, (tmp_path,)))
    (tmp_path / "h.cuh").write_text("int y;")
    assert source_digest(text, local_headers(text, (tmp_path,))) != d0
    assert source_digest(text + " ", {}) != source_digest(text, {})


def test_kernel_files_digest_their_includes():
    text = (paths.KERNELS_DIR / "gemm_naive.cuh").read_text()
    assert "cuda_fp16.h" not in local_headers(text, (paths.KERNELS_DIR,))


def test_arch_option_prefers_cubin_and_falls_back_to_ptx():
    assert arch_option(90, (75, 80, 86, 89, 90)) == ("-arch=sm_90", "cubin")
    assert arch_option(100, (75, 80, 90)) == ("-arch=compute_90", "ptx")
    with pytest.raises(ValueError):
        arch_option(70, (75, 80))


def test_batches_cover_everything_in_order():
    items = list(range(37))
    out = batches(items, 16)
    assert [len(b) for b in out] == [16, 16, 5] and sum(out, []) == items
    assert batches(items, 0) == [[i] for i in items]


def test_cache_roundtrip_and_shared_blob(tmp_path):
    cache = CompileCache(tmp_path)
    blob = cache.put_blob(b"\x7fELF fake cubin", "cubin")
    assert cache.put_blob(b"\x7fELF fake cubin", "cubin") == blob  # content-addressed: one file
    a = CompiledKernel("k<1>", True, "a" * 64, "_Z1kILi1EEvv", blob, "cubin", "", 0.25)
    b = CompiledKernel("k<2>", True, "b" * 64, "_Z1kILi2EEvv", blob, "cubin", "", 0.25)
    bad = CompiledKernel("k<3>", False, "c" * 64, None, None, None, "error: static assertion failed", 0.5)
    for k in (a, b, bad):
        cache.store(k)
    got = cache.lookup("a" * 64)
    assert got is not None and got.cached and got.lowered_name == "_Z1kILi1EEvv" and got.blob == blob
    assert cache.lookup("b" * 64).blob == blob
    failed = cache.lookup("c" * 64)
    assert failed is not None and not failed.ok and "static assertion" in failed.log
    assert cache.lookup("d" * 64) is None
    assert not list(tmp_path.rglob(".tmp-*"))  # no temporary left behind


def test_cache_entry_without_its_blob_is_a_miss(tmp_path):
    cache = CompileCache(tmp_path)
    blob = cache.put_blob(b"bytes", "cubin")
    cache.store(CompiledKernel("k", True, "e" * 64, "_Z1kv", blob, "cubin", "", 0.1))
    blob.unlink()
    assert cache.lookup("e" * 64) is None
    (tmp_path / "index" / "ff").mkdir(parents=True)
    (tmp_path / "index" / "ff" / ("f" * 64 + ".json")).write_text("{truncated")
    assert cache.lookup("f" * 64) is None


@pytest.mark.parametrize(
    "shape,a,b", [("NN", (5, 7), (7, 3)), ("NT", (5, 7), (3, 7)), ("TN", (7, 5), (7, 3)), ("TT", (7, 5), (3, 7))]
)
def test_layout_follows_blas_storage(shape, a, b):
    lay = layout(gemm_point("fp32", shape, 5, 3, 7, 4))
    assert (lay.a_rows, lay.a_cols) == a and (lay.b_rows, lay.b_cols) == b
    assert (lay.lda, lay.ldb, lay.ldc) == (a[0], b[0], 5)
    assert lay.elements() == (4 * 35, 4 * 21, 4 * 15)
    assert lay.working_set("strided") == 4 * (35 + 21 + 15) * 4
    assert lay.working_set("ptr_array") == lay.working_set("strided") + 3 * 8 * 4


def test_rotation_covers_three_l2_or_none():
    l2 = 50 << 20
    assert rotation_copies(2 * l2, l2) == 1
    assert rotation_copies(10 << 20, l2) == 15  # 15 x 10 MB = 150 MB = 3 x L2
    assert rotation_copies(2 * l2 - 1, l2) == 2
    assert rotation_copies(100, l2) == 4096  # capped
    for ws in (1 << 10, 1 << 20, 7 << 20, 40 << 20):
        c = rotation_copies(ws, l2, max_copies=10**9)
        assert c * ws >= 3 * l2 and c >= 2


def test_tolerances_per_precision_and_k():
    assert tolerance("fp64", 32) == 1e-12 and tolerance("fp32", 1024) == 1e-5 and tolerance("fp16", 8) == 1e-2
    assert tolerance("fp32", 4096) == pytest.approx(2e-5)
    assert judge(5e-6, 0, "fp32", 64).ok
    assert not judge(5e-5, 0, "fp32", 64).ok
    nan = judge(float("nan"), 0, "fp64", 8)
    assert not nan.ok and nan.max_rel_err == math.inf
    unwritten = judge(0.0, 3, "fp16", 8)
    assert not unwritten.ok and "3 output elements" in unwritten.message


def test_summarize_percentiles():
    s = summarize([5.0, 1.0, 2.0, 4.0, 3.0])
    assert (s.median_ms, s.min_ms, s.max_ms, s.reps) == (3.0, 1.0, 5.0, 5)
    assert s.p20_ms == pytest.approx(1.8) and s.p80_ms == pytest.approx(4.2)


def test_early_stop_needs_every_first_rep_beyond_the_bound():
    plan = TimingPlan(reps=50, best_ms=1.0, tol=0.1)
    bound = stop_bound(1.0, 0.1)
    assert bound == pytest.approx(1.0 / 0.9 * 1.2)
    assert should_stop([bound * 1.01] * 5, plan)
    assert not should_stop([bound * 2] * 4 + [bound * 0.99], plan)  # one fast rep keeps it
    assert not should_stop([bound * 2] * 4, plan)  # too few reps to judge
    assert not should_stop([10.0] * 5, TimingPlan(reps=50))  # no best yet: never stops
    assert not should_stop([10.0] * 5, TimingPlan(reps=50, best_ms=1.0))  # no TOL: never stops


def test_early_stop_never_drops_an_instance_within_tol():
    # an instance whose reps never exceed best/(1-TOL) (so its median is within TOL) is never stopped
    for tol in (0.0, 0.05, 0.15, 0.5):
        plan = TimingPlan(reps=20, best_ms=2.0, tol=tol)
        limit = 2.0 / (1 - tol)
        for scale in (0.5, 0.9, 1.0):
            assert not should_stop([limit * scale] * 5, plan)


def test_chunks_and_warmup():
    assert chunk_sizes(TimingPlan(reps=30)) == [30]
    assert chunk_sizes(TimingPlan(reps=30, best_ms=1.0, tol=0.05)) == [5, 25]
    assert chunk_sizes(TimingPlan(reps=3, best_ms=1.0, tol=0.05)) == [3]
    assert warmup_count(0.001) == 50 and warmup_count(1.0) == 5 and warmup_count(100.0) == 2


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_kernels_compile_with_nvcc(tmp_path):
    cu = tmp_path / "check.cu"
    sig = "(int, int, int, {s}, const {t}*, int, long long, const {t}*, int, long long, {s}, {t}*, int, long long, int)"
    lines = ['#include "gemm_naive.cuh"', '#include "faulty.cuh"']
    for t, s in (("double", "double"), ("float", "float"), ("__half", "float")):
        lines.append(f"template __global__ void autotune::gemm_naive<{t}, {s}, 0, 1, 16, 8>{sig.format(t=t, s=s)};")
        lines.append(f"template __global__ void autotune_test::gemm_wrong<{t}, {s}, 1, 0>{sig.format(t=t, s=s)};")
    cu.write_text("\n".join(lines) + "\n")
    out = subprocess.run(
        [
            "nvcc",
            "-std=c++17",
            "-arch=sm_90",
            f"-I{paths.KERNELS_DIR}",
            f"-I{TEST_KERNELS}",
            "-c",
            str(cu),
            "-o",
            str(tmp_path / "check.o"),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


def _sleep_and_report(seconds: float) -> str:
    import time

    time.sleep(seconds)
    return "finished"


def _pid() -> int:
    import os

    return os.getpid()


def test_pool_processes_ignore_ctrl_c():
    """The terminal's SIGINT reaches the whole process group; compile processes must survive it."""
    import multiprocessing as mp
    import os
    import signal
    import time
    from concurrent.futures import ProcessPoolExecutor

    from autotune.sweep.compile.nvrtc import ignore_sigint

    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"), initializer=ignore_sigint) as pool:
        pid = pool.submit(_pid).result(timeout=60)  # the initializer has run in this process
        fut = pool.submit(_sleep_and_report, 1.0)
        time.sleep(0.3)
        os.kill(pid, signal.SIGINT)
        assert fut.result(timeout=30) == "finished"


class _CountingTimer(Timer):
    """Timer.measure's protocol over launches whose times are given (the GPU's events are not needed for it)."""

    def __init__(self, rep_ms: float) -> None:
        self.rep_ms, self.launches, self.timed = rep_ms, 0, 0

    def run_chunk(self, launch, first, n, est_ms):  # type: ignore[no-untyped-def]
        for i in range(n):
            launch(first + i)
        self.timed += n
        return [self.rep_ms] * n


def _measure(rep_ms: float, est_ms: float, plan: TimingPlan) -> tuple[_CountingTimer, list[float], bool]:
    t = _CountingTimer(rep_ms)

    def launch(r: int) -> None:
        t.launches += 1

    times, stopped = t.measure(launch, est_ms, plan)
    return t, times, stopped


def test_a_clearly_slow_instance_stops_after_two_launches():
    plan = TimingPlan(reps=7, best_ms=80.0, tol=0.05)  # 291 ms: 2.9x the bound, below the verified-launch stop
    bound = stop_bound(80.0, 0.05)
    assert not alone_stop(291.0, plan)
    assert fast_stop(291.0, plan) and not fast_stop(1.4 * bound, plan)
    t, times, stopped = _measure(291.0, 291.0, plan)
    assert stopped and t.launches == 2 and len(times) == 2  # no warm-up, two repetitions (was 2 + 5)
    # the same verified launch, but the repetitions are within the bound: the two count as warm-up, then timed fully
    t, times, stopped = _measure(bound * 0.99, 291.0, plan)
    assert not stopped and len(times) == 7 and t.launches == 2 + 7
    # unwarmed repetitions above the bound but not 1.5x above it never decide alone: the usual rule on 5 decides
    t, times, stopped = _measure(1.3 * bound, 291.0, plan)
    assert stopped and len(times) == 5 and t.launches == 2 + 5
    # below the fast factor: the usual protocol (2 warm-ups, 5 repetitions, then the rule)
    t, times, stopped = _measure(1.3 * bound, 1.3 * bound, plan)
    assert stopped and t.launches == 2 + 5 and len(times) == 5
    assert not fast_stop(291.0, TimingPlan(reps=7, best_ms=26.0))  # no TOL: never
    assert not fast_stop(291.0, TimingPlan(reps=2, best_ms=26.0, tol=0.05))  # too few repetitions asked


def test_a_long_launch_far_above_the_bound_stops_on_the_verified_launch_alone():
    plan = TimingPlan(reps=7, best_ms=26.0, tol=0.05)  # a reduction's 291-ms configuration where the best took 26
    bound = stop_bound(26.0, 0.05)
    assert alone_stop(291.0, plan)
    t, times, stopped = _measure(291.0, 291.0, plan)
    assert stopped and times == [291.0] and t.launches == 0  # the verified launch's time is the record
    # just below ALONE_FACTOR times the bound: two repetitions decide (the rule above)
    t, times, stopped = _measure(0.99 * ALONE_FACTOR * bound, 0.99 * ALONE_FACTOR * bound, plan)
    assert stopped and t.launches == 2
    # a short kernel never stops on one launch, however far above the bound (a lazy module load, an idle GPU's
    # clocks: fractions of a millisecond that a short launch cannot absorb)
    small = TimingPlan(reps=7, best_ms=0.1, tol=0.05)
    assert not alone_stop(0.99 * ALONE_MIN_MS, small) and alone_stop(ALONE_MIN_MS, small)
    t, times, stopped = _measure(0.1, 4.0, small)  # 4 ms verified, then repetitions at the best: timed fully
    assert not stopped and len(times) == 7
    assert not alone_stop(291.0, TimingPlan(reps=7, best_ms=26.0))  # no TOL: never
    assert not alone_stop(291.0, TimingPlan(reps=2, best_ms=26.0, tol=0.05))  # too few repetitions asked
