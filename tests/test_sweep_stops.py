"""A space whose first instances all fail alike stops early (once, said once, and said again
on resume), and a budget ends the sweep on time, killing the compiles in flight (their pairs are measured on
resume). The real GpuBackend against the fake GPU worker (tests/support/fake_gpu_worker.py); compiles are stubs."""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from autotune.store.store import Store
from autotune.sweep.compile import failstop
from autotune.sweep.backends import local
from autotune.sweep.compile.nvrtc import CompiledKernel, CompileRequest
from autotune.sweep.runner import run_sweep
from tests.support.fake_gpu_worker import fake_gpu_main
from tests.support.slow_compile import slow_compile
from tests.test_faults import PAIRS, StubCompiles, gpu_config, gone, measured_rows, stub_compile, use_compiles

HOST_ERROR = (
    "{path}(1): catastrophic error: A function explicitly marked as a __host__ function is not allowed in "
    "JIT mode ({name})"
)


class Notes:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def start(self, total: int, done: int) -> None: ...
    def measured(self, m, best) -> None: ...  # noqa: ANN001
    def note(self, text: str) -> None:
        self.notes.append(text)


def failing_compile(req: CompileRequest, cache_dir: Path) -> list[CompiledKernel]:
    """Every instance fails as a CUB kernel under NVRTC does (the message names the instance and a temp path)."""
    return [
        CompiledKernel(
            n,
            False,
            f"k{i}",
            None,
            None,
            None,
            HOST_ERROR.format(path=f"/tmp/x{abs(hash(n)) % 1000}/cub/util.cuh", name=n),
            0.5,
        )
        for i, n in enumerate(req.name_expressions)
    ]


# ---- the error signature ------------------------------------------------------------------------------------


def test_the_same_error_of_different_instances_has_one_signature() -> None:
    a = failstop.signature("compile_error", HOST_ERROR.format(path="/tmp/a1/cub/util.cuh(77)", name="k<float, 128>"))
    b = failstop.signature("compile_error", HOST_ERROR.format(path="/tmp/b22/cub/util.cuh(77)", name="k<double, 64>"))
    assert a is not None and a == b
    c = failstop.signature("compile_error", 'kernel.cu(9): error: identifier "TILE" is undefined')
    assert c is not None and c != a
    assert failstop.signature("launch_error", HOST_ERROR) != failstop.signature("compile_error", HOST_ERROR)


@pytest.mark.parametrize(
    "status, error",
    [
        ("ok", None),
        ("wrong", "max rel err 1.0"),
        ("timeout", "no answer"),
        (
            "compile_error",
            "ptxas error   : Entry function '_Z1kILi9EEvv' uses too much shared data (0x10400 bytes, 0xc000 max)",
        ),
        ("launch_error", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many resources requested for launch"),
        ("launch_error", "out of memory: Out of memory allocating 1,073,741,824 bytes"),
    ],
)
def test_what_depends_on_the_instance_never_counts_as_systematic(status: str, error: str | None) -> None:
    assert failstop.signature(status, error) is None
    streak = failstop.FailureStreak(2)
    sig = failstop.signature("compile_error", HOST_ERROR)
    assert not streak.add(sig) and not streak.add(failstop.signature(status, error)) and not streak.add(sig)
    assert not streak.stopped  # the streak is over for good: the space runs to the end


def test_a_streak_stops_at_its_limit_and_zero_never_stops() -> None:
    sig = failstop.signature("compile_error", HOST_ERROR)
    streak = failstop.FailureStreak(3)
    assert [streak.add(sig, "e", "compile_error") for _ in range(3)] == [False, False, True] and streak.stopped
    never = failstop.FailureStreak(0)
    assert not any(never.add(sig) for _ in range(50))


# ---- a systematically failing space stops --------------------------------------------------------------------


def stop_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compile_fn, limit: int):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(local, "gpu_main", functools.partial(fake_gpu_main, faults={}, trace=str(tmp_path / "t.txt")))
    use_compiles(monkeypatch, compile_fn)
    cfg = dataclasses.replace(gpu_config(tmp_path), stop_after_failures=limit)
    notes = Notes()
    with StubCompiles(local.LocalOptions(compile_workers=2, timeout_s=5, cache_dir=tmp_path / "cache")) as backend:
        with Store.open(cfg.database) as store:
            summary = run_sweep(cfg, store, backend, notes)
    return summary, notes.notes


def test_a_space_whose_first_instances_fail_alike_stops_and_says_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary, notes = stop_sweep(tmp_path, monkeypatch, failing_compile, limit=2)
    stops = [n for n in notes if "stopped" in n]
    assert len(stops) == 1, notes
    assert "fault_test" in stops[0] and "first 2 instances" in stops[0] and "compile error" in stops[0]
    assert "not allowed in JIT mode" in stops[0] and "earlier run" not in stops[0]
    assert summary.status == "done"  # the sweep went on (with the next space; here there is none)
    recorded = measured_rows(tmp_path)
    assert 2 * 4 <= len(recorded) < PAIRS and {st for st, _ in recorded.values()} == {"compile_error"}
    # resumed: stops again at once, says so again, measures nothing new
    again, notes2 = stop_sweep(tmp_path, monkeypatch, failing_compile, limit=2)
    assert [n for n in notes2 if "stopped" in n and "as in an earlier run" in n] and again.measured == 0
    assert len(measured_rows(tmp_path)) == len(recorded)


def test_without_the_stop_every_failing_pair_is_measured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary, notes = stop_sweep(tmp_path, monkeypatch, failing_compile, limit=0)
    assert not [n for n in notes if "stopped" in n]
    assert summary.counts == Counter({"compile_error": PAIRS})


def test_a_space_that_works_is_never_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blob = tmp_path / "kernel.cubin"
    blob.write_bytes(b"\0" * 16)
    summary, notes = stop_sweep(tmp_path, monkeypatch, functools.partial(stub_compile, blob), limit=1)
    assert not [n for n in notes if "stopped" in n] and summary.counts == Counter({"ok": PAIRS})


def dead(pid: int) -> bool:
    """Gone, or a zombie waiting for init (its parent, the killed compile process, cannot reap it)."""
    try:
        return gone(pid) or Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


# ---- a budget ends the sweep on time -------------------------------------------------------------------------


def test_a_budget_ends_the_sweep_on_time_and_kills_the_compiles_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Instances with BLOCK_X = 16 compile for 60 s (a `sleep` child, as nvcc's); the budget is 8 s. The sweep ends
    within 5% of it, the compile processes and their children are killed, no thread is left waiting on them, and
    a resumed sweep measures exactly the pairs left unmeasured."""
    blob, pids = tmp_path / "kernel.cubin", tmp_path / "pids"
    blob.write_bytes(b"\0" * 16)
    pids.mkdir()
    monkeypatch.setattr(local, "gpu_main", functools.partial(fake_gpu_main, faults={}, trace=str(tmp_path / "t.txt")))
    use_compiles(monkeypatch, functools.partial(slow_compile, str(blob), str(pids)))
    budget = 8.0
    cfg = dataclasses.replace(gpu_config(tmp_path), budget_s=budget)
    backend = local.GpuBackend(local.LocalOptions(compile_workers=2, timeout_s=5, cache_dir=tmp_path / "cache"))
    with Store.open(cfg.database) as store:
        t0 = time.monotonic()  # the budget counts from the sweep's start (not the backend's or the store's set-up)
        summary = run_sweep(cfg, store, backend, Notes())
    backend.close()
    took = time.monotonic() - t0
    assert summary.status == "budget"
    assert took <= budget * 1.05, took
    slow = [int(p.name) for p in pids.iterdir()]
    assert slow and all(dead(pid) for pid in slow)  # the compiles' own children are killed too
    time.sleep(0.5)
    assert not [t for t in threading.enumerate() if "ExecutorManager" in type(t).__name__ or "QueueManager" in t.name]
    recorded = measured_rows(tmp_path)
    assert 0 < len(recorded) < PAIRS and {st for st, _ in recorded.values()} == {"ok"}
    # resumed with fast compiles: the pairs whose compiles were killed are measured now, nothing twice
    use_compiles(monkeypatch, functools.partial(stub_compile, blob))
    with local.GpuBackend(local.LocalOptions(compile_workers=2, timeout_s=5, cache_dir=tmp_path / "cache")) as backend:
        with Store.open(cfg.database) as store:
            resumed = run_sweep(dataclasses.replace(cfg, budget_s=None), store, backend, Notes())
    assert resumed.status == "done" and resumed.measured == PAIRS - len(recorded)
    assert len(measured_rows(tmp_path)) == PAIRS
