"""The compile worker's side of compiling ahead: a long-lived process pool (spawn) that runs `compile.compile_batch`.

A Dask worker is multithreaded (its event loop, its task threads, the comm threads), and compile_batch forks a
child per NVRTC call for its time limit (`compile.with_time_limit`). Forking a multithreaded process and then
loading NVRTC in the child crashed on a GPU host (every compile 'died (exit code -11)', and those failures went into
the shared cache, so the GPU workers found only failures). So a compile worker never compiles in its own process:
its `CompilePool` hands each request to a process started with `spawn` (single-threaded, NVRTC loaded once by
`compile.warm_compile_process`), exactly as a one-GPU sweep's `GpuBackend` does. The pool is made on first use and
lives as long as the worker (the plugin's teardown ends it).

A failure of the pool itself (a compile process killed, out of memory) is not a compile result: nothing is written
to the cache for it, the chunk's `Precompiled.error` names it, the pool is replaced for the next chunk, and the GPU
worker compiles whatever is missing itself.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Sequence

from autotune.sweep.compile_pool import kill_executor

POOL_ENV = "AUTOTUNE_COMPILE_WORKERS"  # compile processes of one compile worker (else: its `compile` resource when
# above 1, else the host's cores)


class PoolFailed(RuntimeError):
    """The compile pool broke (a compile process died outside any compile result): nothing was cached for it."""


def compile_in_pool(request: Any, cache_dir: str) -> tuple[list[Any], int, int]:
    """Runs in a pool process: `compile_batch(request, cache_dir)`, with this process's pid and its thread count at
    the call (1: forking it for a compile's time limit is safe)."""
    from autotune.sweep.compile import compile_batch

    threads = threading.active_count()
    return compile_batch(request, Path(cache_dir)), os.getpid(), threads


def pool_size(resources: dict[str, float], env: dict[str, str] | None = None) -> int:
    """Compile processes for a compile worker: $AUTOTUNE_COMPILE_WORKERS, else its `compile` resource when above 1
    (`--resources compile=16`), else the host's cores."""
    text = (env if env is not None else os.environ).get(POOL_ENV, "").strip()
    if text:
        try:
            return max(1, int(text))
        except ValueError:
            raise ValueError(f"{POOL_ENV}={text!r} is not a number of compile processes") from None
    declared = int(resources.get("compile", 0) or 0)
    return declared if declared > 1 else max(1, os.cpu_count() or 1)


class CompilePool:
    """A compile worker's pool of `processes` spawn-context compile processes, made on first use."""

    def __init__(self, processes: int) -> None:
        self.processes = max(1, processes)
        self.replaced = 0  # pools that broke and were replaced
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def _get(self) -> ProcessPoolExecutor:
        import multiprocessing as mp

        from autotune.sweep.compile import warm_compile_process

        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    self.processes, mp_context=mp.get_context("spawn"), initializer=warm_compile_process
                )
            return self._pool

    def compile(self, requests: Sequence[Any], cache_dir: str) -> tuple[list[Any], set[int], int]:
        """Every request compiled (or found) into the cache at `cache_dir`, all at once over the pool: (each
        request's CompiledKernels, in order; pids of the processes that compiled; the most threads one of them
        had). Raises PoolFailed when the pool broke (it is replaced for the next call)."""
        pool = self._get()
        try:
            futures: list[Future] = [pool.submit(compile_in_pool, r, cache_dir) for r in requests]
            outs = [f.result() for f in futures]
        except BrokenProcessPool as exc:
            self._replace(pool)
            raise PoolFailed(f"the compile pool broke ({exc}); nothing was cached for it") from None
        return [o[0] for o in outs], {o[1] for o in outs}, max((o[2] for o in outs), default=0)

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is broken:
                self._pool = None
                self.replaced += 1
        kill_executor(broken)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            kill_executor(pool)
