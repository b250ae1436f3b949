"""The compile side of `GpuBackend` (`autotune.sweep.backends.local`): a runner Job bound to the name expressions,
geometry and defines of its points (`task_of`), the compile requests of a chunk of tasks (instances that differ only
in template arguments share one), the compile pool they go to, collecting what compiled, and stopping the pool.
"""

from __future__ import annotations

import json
import os
import traceback
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

from autotune.errors import UserError
from autotune.space.kt_semantics import split_unroll
from autotune.sweep.backends.base import Job
from autotune.sweep.backends.tasks import KernelTask, Variant
from autotune.sweep.compile.compile_pool import PROFILE_ENV, CompilePool, kill_executor, request_limit, request_what
from autotune.sweep.compile.nvcc import find_nvcc
from autotune.sweep.compile.nvrtc import (
    CompiledKernel,
    CompileFailed,
    CompileRequest,
    compile_batch,
    compile_batch_deferring,
    resource_failure,
    warm_compile_process,
)

# compile processes started with the GPU worker; the pool grows to `compile_workers` once a compile has waited in its
# queue (compile_pool.GROW_AFTER_S). All 15 started at once on a 16-core H100 host slowed the worker's start (ready
# 2.1 s after the process start with 15, 1.5 s with 4: results/bench/PROVENANCE.md, kt_switch_h100_kt5), where a small
# space's light compiles kept 2 to 4 of them busy. Growing when the worker was ready slowed the 4 compile processes'
# compiles while the 11 new ones started (Kernel Tuner's zeromean example: 240-340 ms each, against 13-26 ms; its
# whole process 2.33-3.04 s against 1.78-1.93 s without: 3 runs each, H100, kt7 in results/bench/PROVENANCE.md).
STARTING_COMPILE_WORKERS = 4


def task_of(job: Job) -> KernelTask:
    """Bind a runner Job (space + instance + points) to name expressions and geometry."""
    space, params = job.space, job.instance.param_dict
    kernel = space.kernel
    if kernel is None:
        raise UserError(f"space {space.name!r} has no kernel to compile", hint="give the space a `kernel:` section")
    variants = []
    for p in job.points:
        g = space.geometry(params, p)
        gx, gy, gz = g.grid
        bx, by, bz = g.block
        variants.append(
            Variant(
                p,
                space.template_name(params, p.precision, p.shape),
                (int(gx), int(gy), int(gz)),
                (int(bx), int(by), int(bz)),
                int(g.shared_bytes),
                space.defines(params, p),
            )
        )
    return KernelTask(
        job.instance.id,
        kernel.source_path,
        kernel.convention,
        tuple(variants),
        space.kind,
        dict(job.scalars),
        job.reps,
        kernel.compiler,
        kernel.compiler_options,
        dict(params),
        kernel.semantics,
        kernel.arch_specific,
    )


class LocalCompiles:
    """`GpuBackend`'s compile pool and requests (its constructor sets the fields read here)."""

    compile_workers: int
    cache_dir: Path
    include_dirs: tuple[Path, ...]
    options: tuple[str, ...]
    compile_timeout_s: float | None | str
    precheck: bool
    precheck_sources: set[Path]
    cancelled: int
    _ctx: Any
    _pool: CompilePool | Executor | None
    _t0: float | None

    def cancel_compiles(self) -> None:
        """Stop the compile pool now, killing the compiles it runs (each compile process leads its own process
        group: nvcc, cicc and ptxas go with it); a later `run` starts a new pool. Their pairs are not recorded,
        so a resumed sweep compiles and measures them. Without this, Python's exit waits for running compiles
        (a `budget: 150` sweep ran 183 s)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if isinstance(pool, CompilePool):
            self.cancelled += pool.shutdown(kill=True)
            self._write_profile(pool)
            return
        self.cancelled += kill_executor(pool)  # a test's stand-in executor

    def _write_profile(self, pool: CompilePool) -> None:
        """$AUTOTUNE_COMPILE_PROFILE names a file: append the pool's `profile` to it (one JSON line per pool, seconds
        after this backend's start; scripts/bench_kt_switch.py --profile reads it). Never fails the sweep."""
        path = os.environ.get(PROFILE_ENV, "").strip()
        if not path or not pool.recording or self._t0 is None:
            return
        try:
            with open(path, "a") as f:
                f.write(json.dumps(pool.profile(self._t0)) + "\n")
        except OSError:
            pass

    def _compile_pool(self) -> CompilePool | Executor:
        if self._pool is None:
            self._pool = CompilePool(
                self.compile_workers, self._ctx, initializer=warm_compile_process, initial=STARTING_COMPILE_WORKERS
            )
        return self._pool

    def _submit(self, request: CompileRequest) -> Future:
        """`compile_batch(request)` in the pool; in a CompilePool under the request's time limit
        (`compile_pool.request_limit`)."""
        pool = self._compile_pool()
        if not isinstance(pool, CompilePool):  # a test's stand-in executor
            return pool.submit(compile_batch, request, self.cache_dir)
        return pool.submit(  # a twin of a program compiling elsewhere is asked again later (`twins.Later`)
            compile_batch_deferring,
            request,
            self.cache_dir,
            timeout_s=request_limit(request),
            what=request_what(request),
        )

    def _requests(self, chunk: list[KernelTask], arch: int) -> list[CompileRequest]:
        """One request per (kernel file, defines, compiler, its options): instances that differ only in template
        arguments share one."""
        names: dict[tuple, dict[str, None]] = {}
        for task in chunk:
            if task.compiler == "nvcc" and find_nvcc() is None:
                raise UserError(
                    f"{task.source}: the space asks for `compiler: nvcc`, and nvcc is not found",
                    hint="install the CUDA toolkit (or set CUDA_PATH to it), or use `compiler: nvrtc`; "
                    "nothing was recorded",
                )
            for v in task.variants:
                names.setdefault(self._request_key(task, v), {})[v.name_expression] = None
        return [
            CompileRequest(
                src,
                tuple(n),
                arch,
                self.include_dirs,
                options,
                defines,
                compiler,
                unroll,
                self.compile_timeout_s,  # type: ignore[arg-type]
                src in self.precheck_sources,
                arch_specific,
            )
            for (src, defines, compiler, options, unroll, arch_specific), n in names.items()
        ]

    def _request_key(self, task: KernelTask, v: Variant) -> tuple:
        """What instances compiled together share: kernel file, defines, compiler and all its options (the
        backend's, the space's `compiler_options:`, then one -D per define) and, under `semantics: kerneltuner`, the
        loop-unroll factors applied to the source instead (`autotune.space.kt_semantics`), and the target
        (`kernel: arch_specific:`)."""
        plain, unroll = split_unroll(v.defines) if task.semantics == "kerneltuner" else (v.defines, ())
        options = (*self.options, *task.compiler_options, *(f"-D{k}={val}" for k, val in plain))
        return (task.source, v.defines, task.compiler, options, unroll, task.arch_specific)

    def _collect(self, pending: list[tuple[CompileRequest, Future]]) -> dict[tuple, CompiledKernel]:
        out = {}
        for req, fut in pending:
            try:
                results = fut.result()
            except CompileFailed as exc:  # killed past its time limit, or its process died: recorded, not cached
                results = [CompiledKernel(n, False, "", None, None, None, exc.log, 0.0) for n in req.name_expressions]
            except Exception:  # noqa: BLE001 - a broken pool or NVRTC crash becomes a recorded failure
                log = traceback.format_exc()
                results = [CompiledKernel(n, False, "", None, None, None, log, 0.0) for n in req.name_expressions]
                if self._pool is not None and not isinstance(self._pool, CompilePool):
                    self._pool.shutdown(wait=False, cancel_futures=True)
                    self._pool = None
            out.update(
                {
                    (
                        req.source,
                        req.defines,
                        req.compiler,
                        req.options,
                        req.unroll,
                        req.arch_specific,
                        ck.name_expression,
                    ): ck
                    for ck in results
                }
            )
            if self.precheck and any(not ck.ok and resource_failure(ck.log) for ck in results):
                self.precheck_sources.add(req.source)
        return out
