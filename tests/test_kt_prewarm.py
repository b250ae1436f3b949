"""kt_prewarm (issue 31 item 6): the GPU backend started at `import autotune.kernel_tuner`, handed to the first
tune_kernel call on its device; never in a spawned child, never with AUTOTUNE_PREWARM=0 (no GPU needed here)."""

import multiprocessing as mp
import time

from autotune.interop import kt_prewarm
from autotune.sweep.backends.local import GpuBackend, LocalOptions


def _start_in_child(q) -> None:  # runs in a spawned child: a script's re-import there must not start processes
    q.put(kt_prewarm.start())


def test_no_prewarm_when_switched_off_or_in_a_spawned_child(monkeypatch) -> None:
    monkeypatch.setenv(kt_prewarm.ENV, "0")
    assert kt_prewarm.start() is False and kt_prewarm.take(0) == (None, None)
    monkeypatch.setenv(kt_prewarm.ENV, "1")  # (tests/conftest.py sets 0 for the test process)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_start_in_child, args=(q,))
    p.start()
    assert q.get(timeout=120) is False
    p.join(30)


def test_take_hands_the_started_backend_to_its_device_once(monkeypatch) -> None:
    backend = GpuBackend(LocalOptions(device=0))  # not started: nothing to stop
    monkeypatch.setattr(kt_prewarm, "_backend", backend)
    monkeypatch.setattr(kt_prewarm, "_started_at", time.perf_counter() - 2.0)
    got, since = kt_prewarm.take(0)
    assert got is backend and since is not None and since >= 2.0
    assert kt_prewarm.take(0) == (None, None)  # once
    monkeypatch.setattr(kt_prewarm, "_backend", GpuBackend(LocalOptions(device=1)))
    monkeypatch.setattr(kt_prewarm, "_started_at", time.perf_counter())
    assert kt_prewarm.take(0) == (None, None)  # another device's is closed, not handed over
    assert kt_prewarm._backend is None


def test_the_prewarm_thread_imports_what_the_call_imports() -> None:
    """CALL_MODULES (imported by a thread of `start`, beside the backend) holds every module tune_kernel's sweep call
    imports in its body, so the call finds them loaded; and importing them all works."""
    import ast
    import importlib
    import inspect

    from autotune.interop import kt_sweep, tune_kernel

    imported: set[str] = set()
    # every function of kt_sweep (the attempt and its steps), whatever they are split into
    steps = [f for _, f in inspect.getmembers(kt_sweep, inspect.isfunction) if f.__module__ == kt_sweep.__name__]
    assert {"run_attempt", "_sweep", "_planned", "stopped"} <= {f.__name__ for f in steps}
    for fn in (tune_kernel._attempts, *steps):
        tree = ast.parse(inspect.getsource(fn))
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    started = {"autotune.interop", "autotune.sweep.backends.local", "importlib"}  # loaded by `start` itself
    started.add("autotune.sweep.backends.replay")  # simulation mode only: no backend is prewarmed then
    missing = imported - set(kt_prewarm.CALL_MODULES) - started
    assert "autotune.sweep.runner" in imported and not missing, missing
    for name in kt_prewarm.CALL_MODULES:
        importlib.import_module(name)
