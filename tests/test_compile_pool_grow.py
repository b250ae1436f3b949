"""A compile pool that starts with fewer processes than it may have starts the rest once a call waits in its queue
(autotune/sweep/compile_pool.py, `initial`, GROW_AFTER_S), and never when its calls do not wait."""

from __future__ import annotations

import multiprocessing as mp
import os
import time

from autotune.sweep.compile_pool import GROW_AFTER_S, CompilePool


def _pid_after(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


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


def test_the_gpu_backend_starts_its_worker_and_4_compile_processes_and_the_rest_once_the_worker_is_ready(
    tmp_path, monkeypatch
):
    import functools

    from autotune.sweep.backends import local
    from tests.support.fake_gpu_worker import fake_gpu_main

    monkeypatch.setattr(local, "gpu_main", functools.partial(fake_gpu_main, faults={}, trace=str(tmp_path / "t.txt")))
    with local.GpuBackend(cache_dir=tmp_path / "cache", compile_workers=7) as backend:
        backend.start()
        assert backend._proc is not None
        assert len(backend._pool.pids()) == local.STARTING_COMPILE_WORKERS  # type: ignore[union-attr]
        backend.ready()
        deadline = time.monotonic() + 30
        while len(backend._pool.pids()) < 7 and time.monotonic() < deadline:  # type: ignore[union-attr]
            time.sleep(0.05)
        assert len(backend._pool.pids()) == 7  # type: ignore[union-attr]
