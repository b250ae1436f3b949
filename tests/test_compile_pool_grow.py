"""A compile pool that starts with fewer processes than it may have starts the rest once a call waits in its queue
(autotune/sweep/compile/compile_pool.py, `initial`, GROW_AFTER_S), and never when its calls do not wait; calls go only to
processes that are ready, and processes that die while starting neither hold calls nor respawn forever."""

from __future__ import annotations

import multiprocessing as mp
import os
import time

import functools

import pytest

from autotune.sweep.compile.nvrtc import CompileFailed
from autotune.sweep.compile.compile_pool import GROW_AFTER_S, CompilePool
from tests.support.pool_calls import die_at_start_if, pid_after, slow_start_if


def _pid_after(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def _started(pool: CompilePool) -> None:
    """Wait until the pool's first processes are ready: on a loaded host a start can take longer than GROW_AFTER_S,
    and a first call that waited that long would grow the pool by itself."""
    deadline = time.monotonic() + 60
    while not all(w.ready for w in pool._workers) and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_pool_grows_when_calls_wait_and_its_new_processes_run_them():
    pool = CompilePool(4, mp.get_context("spawn"), initial=1)
    try:
        assert len(pool.pids()) == 1 and pool.size == 4
        futures = [pool.submit(_pid_after, 1.0) for _ in range(8)]  # 8 s on one process; ~2 s once grown
        t0 = time.monotonic()
        pids = {f.result(timeout=60) for f in futures}
        took = time.monotonic() - t0
        assert len(pool.pids()) == 4
        assert len(pids) >= 3, pids  # the calls ran in the processes started later
        assert took < 6.0, took
    finally:
        pool.shutdown()


def test_a_pool_whose_calls_never_wait_does_not_grow():
    pool = CompilePool(4, mp.get_context("spawn"), initial=2)
    try:
        _started(pool)
        for _ in range(3):
            assert pool.submit(_pid_after, 0.0).result(timeout=60) in pool.pids()
            time.sleep(GROW_AFTER_S)
        assert len(pool.pids()) == 2
        assert pool.grow() == 2 and len(pool.pids()) == 4  # asked: the rest start
        assert pool.grow() == 0
    finally:
        pool.shutdown()


def test_a_pool_shut_down_does_not_grow():
    pool = CompilePool(3, mp.get_context("spawn"), initial=1)
    pool.shutdown()
    assert pool.grow() == 0


def test_calls_wait_for_a_ready_process_rather_than_go_to_one_still_starting(tmp_path):
    marker = tmp_path / "slow"
    pool = CompilePool(
        4, mp.get_context("spawn"), initializer=functools.partial(slow_start_if, str(marker), 20.0), initial=1
    )
    try:
        _started(pool)
        first = pool.submit(pid_after, 0.0).result(timeout=60)  # the first process is ready
        marker.touch()
        assert pool.grow() == 3  # these three take 20 s to be ready
        t0 = time.monotonic()
        pids = {f.result(timeout=60) for f in [pool.submit(pid_after, 0.05) for _ in range(8)]}
        assert pids == {first}  # none waited for a process still starting
        assert time.monotonic() - t0 < 10
    finally:
        pool.shutdown()


def test_processes_that_die_while_starting_are_dropped_and_the_ready_ones_run_the_calls(tmp_path):
    marker = tmp_path / "die"
    pool = CompilePool(
        4, mp.get_context("spawn"), initializer=functools.partial(die_at_start_if, str(marker)), initial=1
    )
    try:
        first = pool.submit(pid_after, 0.0).result(timeout=60)
        marker.touch()
        pool.grow()
        assert {f.result(timeout=60) for f in [pool.submit(pid_after, 0.3) for _ in range(8)]} == {first}
        assert pool.start_deaths >= 3 and pool.pids() == [first]
    finally:
        pool.shutdown()


def test_a_pool_whose_processes_all_die_while_starting_fails_its_calls(tmp_path):
    marker = tmp_path / "die"
    marker.touch()
    pool = CompilePool(2, mp.get_context("spawn"), initializer=functools.partial(die_at_start_if, str(marker)))
    try:
        with pytest.raises(CompileFailed, match=r"compile processes die while starting \(exit code -9\)"):
            pool.submit(pid_after, 0.0).result(timeout=60)
        with pytest.raises(CompileFailed, match="die while starting"):  # a later call: new processes, same end
            pool.submit(pid_after, 0.0).result(timeout=60)
    finally:
        pool.shutdown()


def test_the_gpu_backend_starts_its_worker_and_4_compile_processes_and_the_rest_only_when_compiles_wait(
    tmp_path, monkeypatch
):
    """Not when the worker is ready: 11 processes starting beside the first 4 slowed their compiles 10-15x on an
    H100 host (Kernel Tuner's zeromean example); a space whose compiles never queue never needs them."""
    from autotune.sweep.backends import local
    from autotune.sweep.backends.local_compile import STARTING_COMPILE_WORKERS
    from tests.support.fake_gpu_worker import fake_gpu_main

    monkeypatch.setattr(local, "gpu_main", functools.partial(fake_gpu_main, faults={}, trace=str(tmp_path / "t.txt")))
    with local.GpuBackend(local.LocalOptions(cache_dir=tmp_path / "cache", compile_workers=7)) as backend:
        backend.start()
        assert backend._proc is not None
        pool = backend._pool
        assert isinstance(pool, CompilePool) and len(pool.pids()) == STARTING_COMPILE_WORKERS
        backend.ready()
        time.sleep(1.0)
        assert len(pool.pids()) == STARTING_COMPILE_WORKERS
        futures = [pool.submit(pid_after, 1.0) for _ in range(16)]  # they wait: the rest start
        assert len({f.result(timeout=60) for f in futures}) > STARTING_COMPILE_WORKERS
        assert len(pool.pids()) == 7
