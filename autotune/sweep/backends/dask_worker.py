"""The worker side of the Dask executor: the plugin that builds each worker's executor once, and the tasks the
client submits (`precompile`, `run_chunk`, `worker_device`, `worker_baselines`).

Every task runs in the worker's thread pool (never on its event loop, so a GPU start-up of many seconds does not
stall the worker's heartbeats) and holds the executor's lock: an executor measures one chunk at a time even on a
worker started with several threads. Workers never touch the database: they return Measurements to the client.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from distributed import WorkerPlugin, get_worker

from autotune.problems.base import ProblemKind, Scalars
from autotune.sweep.backends.base import Job
from autotune.vocab import DeviceInfo, Measurement, TestPoint

PLUGIN_NAME = "autotune-executor"


class ExecutorPlugin(WorkerPlugin):
    """Builds `factory(worker name)` on each worker (those there now and those that join or replace a dead one),
    starts it, and closes it when the worker stops."""

    name = PLUGIN_NAME

    def __init__(self, factory: Any) -> None:
        self.factory = factory

    def setup(self, worker: Any) -> None:
        import multiprocessing

        me = multiprocessing.current_process()
        if me.daemon:  # a worker started with distributed.worker.daemon true (the default of `dask worker`): a GPU
            # executor (or a compile worker's pool) starts its own processes, which a daemonic process may not; the
            # plugin's teardown (the executor's close, the pool's) ends them
            me._config["daemon"] = False  # type: ignore[attr-defined]
        resources = worker_resources(worker)
        if is_compile_worker(resources):  # a CPU worker that only compiles ahead (`precompile`): no executor, no
            # GPU; its compiles run in a pool of spawned processes, never in this (multithreaded) one
            from autotune.sweep.backends.dask_compile import CompilePool, pool_size

            worker._autotune_compile_pool = CompilePool(pool_size(resources))
            return
        executor = self.factory(str(worker.name))
        executor.start()  # a GPU executor starts its compile pool and GPU process now
        worker._autotune_executor = executor
        worker._autotune_lock = threading.Lock()

    def teardown(self, worker: Any) -> None:
        pool = getattr(worker, "_autotune_compile_pool", None)
        if pool is not None:
            worker._autotune_compile_pool = None
            pool.close()
        executor = getattr(worker, "_autotune_executor", None)
        if executor is not None:
            worker._autotune_executor = None
            executor.close()


def worker_resources(worker: Any) -> dict[str, float]:
    state = getattr(worker, "state", None)
    return dict(getattr(state, "total_resources", None) or getattr(worker, "total_resources", None) or {})


def is_compile_worker(resources: dict[str, float]) -> bool:
    """A worker started with the resource `compile` and without `GPU` compiles ahead and never measures."""
    return "compile" in resources and "GPU" not in resources


@dataclass
class Precompiled:
    """What one compile worker did for one chunk: kernels compiled (or found) into the shared cache."""

    worker: str
    kernels: int
    seconds: float
    error: str | None = None  # the compile ahead itself failed (the pool broke, ...): the GPU worker compiles
    failed: int = 0  # kernels that did not compile (their errors are in the cache, as the GPU worker would find)
    worker_pid: int = 0  # the Dask worker's process
    processes: tuple[int, ...] = ()  # the pool processes that compiled (never the worker's own)
    threads: int = 0  # the most threads a compiling process had at its call (1: forking it is safe)


def precompile(jobs: Sequence[Job], archs: Sequence[int], cache_dir: str) -> Precompiled:
    """Compile every kernel the jobs need, for each compute capability in `archs`, into the content-addressed
    compile cache at `cache_dir` (shared with the GPU workers), exactly as their GpuBackend would request them; the
    GPU worker then finds each one in the cache. The compiles run in the compile worker's pool of spawned processes
    (`dask_compile.CompilePool`), never in the worker's own multithreaded process. Never raises: a failure leaves
    the compile to the GPU worker."""
    import os
    from pathlib import Path

    from autotune.sweep.backends.dask_compile import CompilePool, pool_size
    from autotune.sweep.backends.local import GpuBackend, LocalOptions, task_of

    start, n, failed, pids, threads = time.monotonic(), 0, 0, set(), 0
    try:
        worker = get_worker()
        name = str(worker.name)
    except ValueError:
        worker, name = None, "?"
    pool = getattr(worker, "_autotune_compile_pool", None)
    own = pool is None  # called outside a compile worker (a test, a worker without the plugin): a pool of its own
    if pool is None:
        pool = CompilePool(pool_size(worker_resources(worker) if worker is not None else {}))
    try:
        # never started: its request builder only
        builder = GpuBackend(LocalOptions(cache_dir=Path(cache_dir), compile_workers=1))
        tasks = [task_of(job) for job in jobs]
        requests = [r for arch in archs for r in builder._requests(tasks, arch)]
        results, pids, threads = pool.compile(requests, cache_dir)
        n = sum(len(r) for r in results)
        failed = sum(1 for r in results for ck in r if not ck.ok)
    except Exception as exc:  # noqa: BLE001 - the GPU worker compiles what is missing
        return Precompiled(name, n, time.monotonic() - start, f"{type(exc).__name__}: {exc}"[:300], failed, os.getpid())
    finally:
        if own:
            pool.close()
    return Precompiled(name, n, time.monotonic() - start, None, failed, os.getpid(), tuple(sorted(pids)), threads)


@dataclass
class ChunkResult:
    """What one worker sends back for one chunk of jobs."""

    worker: str  # the worker's name
    device: DeviceInfo
    seconds: float  # wall time the chunk took on the worker
    measurements: list[Measurement] = field(default_factory=list)
    precompiled: Precompiled | None = None  # the compile worker's part, when compiles ran ahead
    closing: bool = False  # the worker began to close mid-chunk: `measurements` lacks the pairs it never measured


def _executor() -> tuple[Any, threading.Lock, str]:
    worker = get_worker()
    executor = getattr(worker, "_autotune_executor", None)  # both set by ExecutorPlugin.setup, together
    lock = getattr(worker, "_autotune_lock", None)
    if executor is None or lock is None:
        raise RuntimeError(
            f"Dask worker {worker.name} has no autotune executor (the {PLUGIN_NAME} plugin did not run there)"
        )
    return executor, lock, str(worker.name)


def worker_device() -> tuple[str, DeviceInfo]:
    """(worker name, the DeviceInfo of its executor)."""
    executor, lock, name = _executor()
    with lock:
        return name, executor.device_info()


def run_chunk(
    jobs: Sequence[Job],
    seconds_left: float | None,
    seeds: Sequence[tuple[str, TestPoint, Scalars, float]] = (),
    precompiled: Precompiled | None = None,
) -> ChunkResult:
    """Measure every pair of `jobs` with this worker's executor; each Measurement names the worker's GPU
    (`Measurement.device`). `seconds_left`: the sweep's time budget left (the executor stops there). `seeds`:
    (GPU name, point, scalars, best ms) known so far on any worker; those of this worker's GPU model feed its
    early-stop rule (`Backend.seed_best`), as one GPU's own bests do. `precompiled`: the chunk's compile ahead
    (Dask passes its result: the chunk runs once its kernels are in the shared cache)."""
    executor, lock, name = _executor()
    with lock:
        if seconds_left is not None:
            executor.deadline = time.monotonic() + seconds_left
        info = executor.device_info()
        for model, point, scalars, ms in seeds:
            if model == info.name:
                executor.seed_best(point, scalars, ms)
        start = time.monotonic()
        out, closing = [], False
        measurements = executor.run(list(jobs))
        try:
            for m in measurements:
                m.device = info.uuid
                out.append(m)
                closing = _closing()
                if closing:  # the worker stops (a stopping client's cluster, a retired node): its close waits for no
                    break  # more; the client sends the pairs left elsewhere, or drops them when it stops itself
        finally:
            close = getattr(measurements, "close", None)
            if close is not None:  # (a GPU executor cancels its compiles for the pairs left)
                close()
        return ChunkResult(name, info, time.monotonic() - start, out, precompiled, closing)


def _closing() -> bool:
    """Whether this chunk's Dask worker is closing (its Nanny, the cluster or the scheduler stops it)."""
    from distributed.core import Status

    try:
        return get_worker().status in (Status.closing, Status.closing_gracefully, Status.closed)
    except ValueError:  # not in a worker (a test calls the task directly)
        return False


def worker_baselines(kind: ProblemKind, points: Sequence[TestPoint], scalars: Scalars, reps: int) -> list[Measurement]:
    """The kind's baseline at each point, in order, on this worker's GPU (one task for a batch's points)."""
    executor, lock, _ = _executor()
    with lock:
        uuid = executor.device_info().uuid
        out = []
        for point in points:
            m = executor.baseline(kind, point, scalars, reps)
            m.device = uuid
            out.append(m)
        return out


def executor_attribute(attr: str, dask_worker: Any = None) -> Any:
    """An attribute of this worker's executor (None where it has none): for tests and diagnostics
    (`client.run(executor_attribute, "restarts")`: GPU processes a worker's GpuBackend replaced)."""
    worker = dask_worker if dask_worker is not None else get_worker()
    return getattr(getattr(worker, "_autotune_executor", None), attr, None)
