"""The sweep's compile pool (issue 31): compiles run in the pool's processes (no process per compile), and the
parent enforces the compile time limit by killing the process of a call past it and starting another; a killed or
dead call fails its future (recorded as a compile error), the other calls go on, and nothing of it is cached."""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
import time
from pathlib import Path

import pytest

from autotune.sweep.compile.nvrtc import SUPERVISED_ENV, TIMEOUT_ERROR, CompileFailed, CompileTimeout, supervised
from autotune.sweep.compile.compile_pool import CompilePool
from tests.support.pool_calls import die, env_of, fail, pid_after, sleep_then


def wait_busy(pool: CompilePool, calls: int = 1) -> None:
    """Until `calls` calls run in the pool's processes (polled; at most 60 s)."""
    end = time.monotonic() + 60
    while pool.busy() < calls and time.monotonic() < end:
        time.sleep(0.02)


@pytest.fixture
def pool():
    p = CompilePool(2, mp.get_context("spawn"))
    yield p
    p.shutdown()


def test_calls_run_in_the_pools_processes_which_say_they_are_supervised(pool: CompilePool) -> None:
    pids = {pool.submit(pid_after, 0.2).result(timeout=60) for _ in range(4)}
    assert pids <= set(pool.pids()) and os.getpid() not in pids
    assert pool.submit(env_of, SUPERVISED_ENV).result(timeout=60) == "1" and not supervised()
    with pytest.raises(CompileFailed, match="identifier x is undefined"):
        pool.submit(fail, "kernel.cu(3): error: identifier x is undefined").result(timeout=60)


def test_a_call_past_its_limit_has_its_process_killed_and_replaced(pool: CompilePool) -> None:
    before = set(pool.pids())
    t0 = time.monotonic()
    slow = pool.submit(sleep_then, 60, "late", timeout_s=1.0, what="compiling 1 instance(s) of k.cu")
    quick = [pool.submit(sleep_then, 0.1, i, timeout_s=30) for i in range(6)]
    with pytest.raises(CompileTimeout) as err:
        slow.result(timeout=30)
    assert time.monotonic() - t0 < 10
    assert err.value.log.startswith(TIMEOUT_ERROR) and "compiling 1 instance(s) of k.cu ran past 1 s" in err.value.log
    assert [f.result(timeout=60) for f in quick] == list(range(6))  # the other calls went on
    assert pool.killed == 1 and len(set(pool.pids()) - before) == 1  # one process replaced
    assert pool.submit(sleep_then, 0, "again", timeout_s=30).result(timeout=60) == "again"


def test_a_call_whose_process_dies_fails_and_the_pool_goes_on(pool: CompilePool) -> None:
    with pytest.raises(CompileFailed, match=r"compiling 3 instance\(s\) of k.cu died \(exit code -9\)"):
        pool.submit(die, what="compiling 3 instance(s) of k.cu").result(timeout=60)
    assert pool.submit(sleep_then, 0, 5).result(timeout=60) == 5


def test_shutdown_kills_running_calls_and_cancels_queued_ones() -> None:
    p = CompilePool(1, mp.get_context("spawn"))
    running = p.submit(sleep_then, 60, 0)
    queued = p.submit(sleep_then, 0, 1)
    wait_busy(p)  # the first call started
    assert p.busy() == 1 and p.shutdown() == 1
    assert queued.cancelled() and running.done() and not running.cancelled()
    with pytest.raises(CompileFailed, match="cancelled"):
        running.result()
    with pytest.raises(RuntimeError, match="shut down"):
        p.submit(sleep_then, 0, 2)


def test_the_backend_records_a_compile_past_its_limit_and_caches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep through the real GpuBackend (fake GPU worker, stub compiles: those of BLOCK_X 8 are instant, the
    others hang in a child process): with a 0.5 s limit the hung calls are compile timeouts, the sweep is done."""
    from autotune.store.store import Store
    from autotune.sweep.backends import local
    from autotune.sweep.runner import run_sweep
    from tests.support.fake_gpu_worker import fake_gpu_main
    from tests.support.slow_compile import slow_compile
    from tests.test_faults import PAIRS, gpu_config, measured_rows, use_compiles
    from tests.test_sweep_stops import Notes, dead

    blob, pids = tmp_path / "kernel.cubin", tmp_path / "pids"
    blob.write_bytes(b"\0" * 16)
    pids.mkdir()
    monkeypatch.setattr(local, "gpu_main", functools.partial(fake_gpu_main, faults={}, trace=str(tmp_path / "t.txt")))
    use_compiles(monkeypatch, functools.partial(slow_compile, str(blob), str(pids)))
    monkeypatch.setenv("AUTOTUNE_COMPILE_PROFILE", str(tmp_path / "profile.jsonl"))
    cfg = gpu_config(tmp_path)
    t0 = time.monotonic()
    with local.GpuBackend(
        local.LocalOptions(compile_workers=2, timeout_s=5, cache_dir=tmp_path / "cache", compile_timeout_s=0.5)
    ) as b:
        with Store.open(cfg.database) as store:
            summary = run_sweep(cfg, store, b, Notes())
        killed = b._pool.killed  # type: ignore[union-attr]
    assert summary.status == "done" and time.monotonic() - t0 < 60
    rows = measured_rows(tmp_path)
    assert len(rows) == PAIRS and killed > 0
    statuses = {st for st, _ in rows.values()}
    assert statuses == {"ok", "compile_error"}, rows
    assert all(dead(int(p.name)) for p in pids.iterdir())  # the hung compiles' children went with them
    errors = {err for st, err in rows.values() if st == "compile_error"}
    assert errors and all(e.startswith(TIMEOUT_ERROR) and "ran past 3.5 s" in e for e in errors), errors
    import json

    (profile,) = [json.loads(line) for line in (tmp_path / "profile.jsonl").read_text().splitlines()]
    outcomes = [what for *_, what in profile["calls"]]
    assert outcomes.count("killed") == killed and "ok" in outcomes  # what the backend's pool did, written at close
    assert all(0 <= a <= b for a, b, *_ in profile["calls"]) and len(profile["starts"]) == 2 + killed  # replaced


def test_only_an_unsupervised_process_forks_a_compile_for_its_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune.sweep.compile.nvrtc import with_time_limit

    monkeypatch.delenv(SUPERVISED_ENV, raising=False)
    assert with_time_limit(os.getpid, 30, "x") != os.getpid()  # a forked child (another pool, a script)
    monkeypatch.setenv(SUPERVISED_ENV, "1")
    assert with_time_limit(os.getpid, 30, "x") == os.getpid()  # in a pool worker: here, the parent keeps the time


def test_the_pools_processes_do_not_rerun_the_users_script(tmp_path: Path) -> None:
    """A script (here without a main guard, as some Kernel Tuner scripts are) that starts the pool: its top-level
    code runs once, not once more in every spawned process (multiprocessing's spawn would re-import __main__)."""
    import subprocess
    import sys

    from autotune.paths import ROOT

    marks = tmp_path / "marks"
    marks.mkdir()
    script = tmp_path / "user_script.py"
    script.write_text(
        "import os, pathlib, multiprocessing as mp\n"
        f"pathlib.Path({str(marks)!r}, str(os.getpid())).touch()\n"
        "from autotune.sweep.compile.compile_pool import CompilePool\n"
        "pool = CompilePool(2, mp.get_context('spawn'))\n"
        "print(sorted(pool.submit(os.getpid).result(timeout=120) for _ in range(2)))\n"
        "pool.shutdown()\n"
    )
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    assert len(list(marks.iterdir())) == 1, out  # the script's own process only


def test_the_profile_says_what_each_process_did(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.pool_calls import later_then

    monkeypatch.delenv("AUTOTUNE_COMPILE_PROFILE", raising=False)
    quiet = CompilePool(1, mp.get_context("spawn"))
    try:
        assert quiet.submit(sleep_then, 0, 1).result(timeout=60) == 1
        assert quiet.profile(0.0) == {"calls": [], "starts": []}  # nothing kept unless asked
    finally:
        quiet.shutdown()
    monkeypatch.setenv("AUTOTUNE_COMPILE_PROFILE", str(tmp_path / "p.jsonl"))
    t0 = time.monotonic()
    p = CompilePool(2, mp.get_context("spawn"))
    try:
        assert p.submit(sleep_then, 0.2, 1, timeout_s=30).result(timeout=60) == 1
        with pytest.raises(CompileFailed):
            p.submit(fail, "error: x").result(timeout=60)
        assert p.submit(later_then, str(tmp_path / "n"), 1, "v", timeout_s=30).result(timeout=60) == ("v", 2)
        with pytest.raises(CompileTimeout):
            p.submit(sleep_then, 60, 0, timeout_s=0.5).result(timeout=60)
        running = p.submit(sleep_then, 60, 0)
        wait_busy(p)  # it runs
    finally:
        p.shutdown()
    assert running.done()
    prof = p.profile(t0)
    outcomes = [what for *_, what in prof["calls"]]
    assert outcomes == ["ok", "error", "later", "ok", "killed", "cancelled"], outcomes
    assert all(0 <= a <= b for a, b, *_ in prof["calls"])
    assert prof["calls"][0][1] - prof["calls"][0][0] >= 0.2  # the first call's 0.2 s
    assert len(prof["starts"]) == 3 and all(0 <= s <= r for _, s, r in prof["starts"][:2])  # two, one replaced
