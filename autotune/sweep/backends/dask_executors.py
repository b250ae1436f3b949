"""What each Dask worker measures with: a long-lived executor built once per worker process.

A factory here is a small picklable object the client sends to every worker (`dask_worker.ExecutorPlugin`); the
worker calls it once with its name and keeps the executor (a `Backend`) for the whole sweep:
- `GpuExecutor`: a `local.GpuBackend` on the worker's one visible GPU (its compile pool and its GPU worker process
  with crash and hang isolation, exactly as on one GPU);
- `ReplayExecutor`: a `replay.ReplayBackend` over a recorded database (no GPU: tests, demos, CI); `relabel` gives
  each worker its own GPU uuid (and, with `models`, its own GPU name), so the per-GPU bookkeeping is testable
  without GPUs.
`dask_backend` (the registered backend `dask`) chooses the factory and builds the client-side `DaskBackend`.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from autotune.problems.base import ProblemKind, Scalars
from autotune.sweep.backends.base import Backend, Job
from autotune.vocab import DeviceInfo, Measurement, TestPoint

ExecutorFactory = Callable[[str], Backend]
"""Called once in each worker process with the worker's name; returns the executor that worker measures with."""


@dataclass(frozen=True)
class GpuExecutor:
    """A `GpuBackend` on device 0 of the worker, which sees one GPU (CUDA_VISIBLE_DEVICES is set per worker).
    `compile_workers`: compile processes of this worker (default: AUTOTUNE_COMPILE_WORKERS, else the cores
    divided among the GPUs of the host, `per_host` of them)."""

    tol: float | None = None
    compile_workers: int | None = None
    per_host: int = 1
    cache_dir: str | None = None  # the compile cache (default: local.DEFAULT_CACHE_DIR); shared with compile workers

    def __call__(self, worker_name: str) -> Backend:
        from pathlib import Path

        from autotune.sweep.backends.local import DEFAULT_CACHE_DIR, GpuBackend, LocalOptions

        from autotune.sweep.compile.compile_pool import env_workers

        n = self.compile_workers or env_workers() or max(1, (os.cpu_count() or 2) // max(1, self.per_host) - 1)
        return GpuBackend(
            LocalOptions(
                device=0,
                tol=self.tol,
                compile_workers=n,
                cache_dir=Path(self.cache_dir) if self.cache_dir else DEFAULT_CACHE_DIR,
            )
        )


@dataclass(frozen=True)
class ReplayExecutor:
    """A `ReplayBackend` over `url` (device: a name or uuid recorded there; None: the only one). `delay_s`: seconds
    per measurement (a GPU's pace). `relabel`: the worker's measurements carry the uuid `<recorded uuid>-<worker
    name>`, as if each worker had its own GPU; `models` then names the GPU model of each worker, by worker name."""

    url: str
    device: str | None = None
    delay_s: float | None = None
    relabel: bool = False
    models: tuple[tuple[str, str], ...] = ()  # (worker name, GPU name) pairs

    def __call__(self, worker_name: str) -> Backend:
        from autotune.sweep.backends.replay import ReplayBackend

        backend = ReplayBackend(self.url, self.device, self.delay_s)
        if not self.relabel:
            return backend
        info = backend.device_info()
        name = dict(self.models).get(worker_name, info.name)
        return Relabelled(backend, dataclasses.replace(info, name=name, uuid=f"{info.uuid}-{worker_name}"))

    def recorded_pairs(self) -> set[tuple[str, TestPoint]]:
        """The pairs the recording holds (`Backend.recorded_pairs`), read by the client."""
        from autotune.sweep.backends.replay import ReplayBackend

        backend = ReplayBackend(self.url, self.device, 0.0)
        try:
            return backend.recorded_pairs()
        finally:
            backend.close()


class Relabelled(Backend):
    """An executor that reports another DeviceInfo than its inner one (tests of several GPUs without GPUs)."""

    def __init__(self, inner: Any, info: DeviceInfo) -> None:
        self.inner, self.info = inner, info
        self.seeds: list[tuple[str, float]] = []  # (point key, best ms) told by `seed_best`, for tests

    def seed_best(self, point: TestPoint, scalars: Scalars, best_ms: float) -> None:
        self.seeds.append((point.key, best_ms))

    def device_info(self) -> DeviceInfo:
        return self.info

    def run(self, jobs: Sequence[Job]) -> Iterator[Measurement]:
        return self.inner.run(jobs)

    def baseline(self, kind: ProblemKind, point: TestPoint, scalars: Scalars, reps: int) -> Measurement:
        return self.inner.baseline(kind, point, scalars, reps)

    def close(self) -> None:
        self.inner.close()


def dask_backend(
    *, replay: str | None = None, tol: float | None = None, gpus: str | None = None, scheduler: str | None = None
) -> Backend:
    """The Dask executor (registered as `dask`): a local cluster of one worker per GPU (`gpus`: a count or a list of
    CUDA_VISIBLE_DEVICES values) or the cluster at `scheduler`; each worker measures with a GPU backend (`tol`: its
    early stop), or with `replay` a replay of that database."""
    from autotune.sweep.backends.dask_backend import CompileAhead, DaskBackend, gpu_list, require_distributed
    from autotune.sweep.backends.replay import replay_delay_s

    require_distributed()
    devices = gpu_list(gpus, replay=replay is not None) if gpus is not None else None
    delay = replay_delay_s()  # read here: a remote worker has its own environment
    executor: ExecutorFactory = (
        ReplayExecutor(replay, delay_s=delay)
        if replay
        else GpuExecutor(tol=tol, per_host=len(devices) if devices else 1)
    )
    # on a cluster with compile workers (`dask worker --resources compile=1`), chunks compile ahead on them
    return DaskBackend(
        executor,
        devices=devices,
        scheduler=scheduler,
        compiles=CompileAhead(compile_ahead=None if scheduler and not replay else False),
    )
