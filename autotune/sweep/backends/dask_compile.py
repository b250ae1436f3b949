"""The compile worker's side of compiling ahead: the same supervised pool of spawned compile processes as a one-GPU
sweep's `GpuBackend` (`compile_pool.CompilePool`), running `compile.compile_batch`.

A Dask worker is multithreaded (its event loop, its task threads, the comm threads). Forking a multithreaded process
and then loading NVRTC in the child crashed on a GPU host (every compile 'died (exit code -11)', and those failures
went into the shared cache, so the GPU workers found only failures). So a compile worker never compiles in its own
process: each request goes to a process started with `spawn` (single-threaded, NVRTC loaded once by
`compile.warm_compile_process`), where NVRTC runs in the process itself under the pool's time limit (no fork per
compile). The pool is made on first use and lives as long as the worker (the plugin's teardown ends it).

A compile process that dies or runs past its limit is not a compile result: nothing is written to the cache for
it, the process is replaced, the chunk's `Precompiled.error` names it, and the GPU worker compiles whatever is
missing itself (under its own time limit, where a timeout is recorded).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Sequence

from autotune.sweep.compile.nvrtc import CompileFailed, CompileTimeout
from autotune.sweep.compile.compile_pool import CompilePool as SupervisedPool
from autotune.sweep.compile.compile_pool import env_workers, request_limit, request_what


class PoolFailed(RuntimeError):
    """A compile process died or was killed outside any compile result: nothing was cached for its request."""


def compile_in_pool(request: Any, cache_dir: str) -> tuple[list[Any], int, int]:
    """Runs in a pool process: `compile_batch(request, cache_dir)`, with this process's pid and its thread count at
    the call (1: a single-threaded process, where NVRTC loads safely)."""
    from autotune.sweep.compile.nvrtc import compile_batch

    threads = threading.active_count()
    return compile_batch(request, Path(cache_dir)), os.getpid(), threads


def pool_size(resources: dict[str, float], env: dict[str, str] | None = None) -> int:
    """Compile processes for a compile worker: $AUTOTUNE_COMPILE_WORKERS, else its `compile` resource when above 1
    (`--resources compile=16`), else the host's cores."""
    given = env_workers(env)
    if given is not None:
        return given
    declared = int(resources.get("compile", 0) or 0)
    return declared if declared > 1 else max(1, os.cpu_count() or 1)


class CompilePool:
    """A compile worker's pool of `processes` spawned, supervised compile processes, made on first use."""

    def __init__(self, processes: int) -> None:
        self.processes = max(1, processes)
        self.replaced = 0  # compile processes that died or were killed (each was replaced)
        self._pool: SupervisedPool | None = None
        self._lock = threading.Lock()

    def _get(self) -> SupervisedPool:
        import multiprocessing as mp

        from autotune.sweep.compile.nvrtc import warm_compile_process

        with self._lock:
            if self._pool is None:
                self._pool = SupervisedPool(self.processes, mp.get_context("spawn"), initializer=warm_compile_process)
            return self._pool

    def compile(self, requests: Sequence[Any], cache_dir: str) -> tuple[list[Any], set[int], int]:
        """Every request compiled (or found) into the cache at `cache_dir`, all at once over the pool: (each
        request's CompiledKernels, in order; pids of the processes that compiled; the most threads one of them
        had). Raises PoolFailed, after the other requests finished, when a compile process died or ran past its
        time limit (`compile_pool.request_limit`)."""
        pool = self._get()
        futures: list[Future] = [
            pool.submit(compile_in_pool, r, cache_dir, timeout_s=request_limit(r), what=request_what(r))
            for r in requests
        ]
        outs, lost = [], []
        for fut in futures:
            try:
                outs.append(fut.result())
            except (CompileFailed, CompileTimeout) as exc:
                lost.append(str(exc).splitlines()[0])
        if lost:
            self.replaced += len(lost)
            raise PoolFailed(
                f"{len(lost)} of {len(futures)} compile calls failed ({lost[0]}); nothing was cached for them"
            )
        return [o[0] for o in outs], {o[1] for o in outs}, max((o[2] for o in outs), default=0)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(kill=True)
