"""Kernel Tuner's `tune_kernel` on autotune's engine: `from autotune.kernel_tuner import tune_kernel`.

The same signature and return value as Kernel Tuner 1.5's (`kernel_tuner/interface.py`): a list of result dicts
(the parameters, `time` in ms, `times`, `compile_time`, `verification_time`, `benchmark_time`, `strategy_time`,
`framework_time`, `timestamp`; a failure has `__error__`: Kernel Tuner's `CompilationFailedConfig`,
`RuntimeFailedConfig` or `InvalidConfig`, its own classes where the script imported
`kernel_tuner.util`) and an env dict
(`device_name`, `iterations`, `compiler_options`, `uuid`, `compute_capability`, `best_config`, the `total_*_time`s,
and `autotune`: where the space folder and the results database are).

Every argument is checked first (`autotune.interop.kt_args`: a wrong one is one error, before anything is written or
started). The call is written as a space folder (`autotune.interop.kt_space`, in the folder `claim`
readies) and run as a sweep (`autotune.interop.kt_sweep`: `autotune.workflows.sweeps.sweep_into`, the GPU backend, or in `simulation_mode` a
replay of the `cache` file). Differences from Kernel Tuner, argument by argument, are in
docs/kerneltuner.md; in short:

* `time` is the median of the repetitions (Kernel Tuner: their mean; a replayed cache's own `time` in simulation
  mode); `iterations` is the repetitions. An instance
  clearly slower than the best so far stops after 5 repetitions (`early_stop=False` times every one fully).
* `strategy`: None/"brute_force" -> brute; "random_sample" -> random; any other Kernel Tuner strategy -> our `auto`
  (Optuna TPE where the space is large). `strategy_options`: `max_fevals` -> the evaluations per point (budget),
  `time_limit` -> the sweep's time budget, `fraction` (random_sample, 0.1 when absent) -> max_fevals = ceil(fraction * space size).
* A configuration that fails verification is recorded as `RuntimeFailedConfig` with the tuning going on (Kernel
  Tuner raises and stops). When the first configurations all fail alike, the sweep stops, and the call retries
  with nvcc (NVRTC's compile errors, nvcc found) or raises with the reason (`autotune.interop.kt_sweep`).
* `cache`: the results are written as a Kernel Tuner cache file when the run ends; an existing file is replayed with
  `simulation_mode=True` (checked against the call first, as Kernel Tuner checks it: `kt_store.check_call`; only
  the configurations of the call's space) and refused otherwise (continuing a Kernel Tuner cache is not supported).
* Refused (UserError): a callable kernel source, problem_size, grid divisor or restriction; a list of source files;
  languages other than CUDA/CuPy/nvcuda; `texmem_args`; `observers`; `smem_args` other than `size`; objectives other
  than `time` or a metric; `verify=` without cloudpickle.

Extra keywords (after Kernel Tuner's): `space_dir` keeps the generated folder there, the call's alone (so does the
environment variable AUTOTUNE_KEEP_SPACE=DIR), `database` a results database URL to record into (default: one inside the folder),
`early_stop`.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.errors import UserError
from autotune.paths import sqlite_files
from autotune.interop.kt_args import (
    LANGS,
    check_tune_call,
    read_grid_div,
    read_problem_size,
    read_restrictions,
    read_source,
    read_strategy,
)
from autotune.interop.kt_args import refuse as _refuse

if TYPE_CHECKING:  # pragma: no cover
    from autotune.interop.kerneltuner import KTCache
    from autotune.interop.kt_sweep import Attempt
    from autotune.interop.kt_space import KTProblem

# The rest is imported by the call, not by `import autotune.kernel_tuner`: a script's own set-up (and a spawned process
# that re-imports the script) does not load the results database's SQLAlchemy, YAML or the space machinery; guarded
# by tests/test_kt_import.py.

KEEP_ENV = "AUTOTUNE_KEEP_SPACE"
# Where a call writes its space folder: a new temporary folder named after the kernel (its name reduced to letters,
# digits and _: never a path), or `space_dir=` / AUTOTUNE_KEEP_SPACE, claimed for this call. A kept folder is this
# call's alone: an empty or new folder is marked as tune_kernel's (`MARK`); one an earlier call marked has that call's
# files removed first (`GENERATED`: its answers `expected.npz`, `verify.pkl`, its check module and its compiled
# `__pycache__`, its arrays, its results database): nothing of an earlier call is checked against or returned. A
# folder holding anything else is refused (nothing of the user's is removed).
MARK = ".autotune-tune_kernel"
GENERATED = (
    "kernel.cu",
    "args",
    "expected.npz",
    "verify.pkl",
    "kt_check.py",
    "__pycache__",
    "space.yaml",
    "sweep.yaml",
    "nvcc",  # the folder of a retry with nvcc (autotune.interop.kt_sweep)
    *(p.name for p in sqlite_files("replayed.sqlite")),  # simulation mode's cache (kt_sweep)
)
DATABASE = tuple(p.name for p in sqlite_files("results.sqlite"))


def safe_name(kernel_name: str) -> str:
    """The kernel's name as a file-name part: letters, digits and _ only, at most 40 characters."""
    return re.sub(r"\W", "_", kernel_name)[:40] or "kernel"


def claim(folder: Path, own_database: bool) -> Path:
    """`folder` ready for this call (see the module docstring); `own_database`: the results database is the
    folder's (no `database=`), so an earlier call's is removed too."""
    folder = folder.resolve()
    if folder.exists() and not folder.is_dir():
        raise UserError(f"tune_kernel: space_dir {folder} is a file", hint="give a folder name (new or empty)")
    if folder.is_dir() and not (folder / MARK).is_file() and any(folder.iterdir()):
        raise UserError(
            f"tune_kernel: space_dir {folder} holds files that are not an earlier tune_kernel call's",
            hint="give a new or empty folder (a folder an earlier call kept is reused: its files are replaced)",
        )
    for name in GENERATED + (DATABASE if own_database else ()):
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARK).write_text("a space folder written by autotune.kernel_tuner.tune_kernel (space_dir=)\n")
    return folder


def tune_kernel(
    kernel_name: str,
    kernel_source: Any,
    problem_size: Any,
    arguments: list[Any],
    tune_params: Mapping[str, list[Any]],
    grid_div_x: Any = None,
    grid_div_y: Any = None,
    grid_div_z: Any = None,
    restrictions: Any = None,
    answer: list[Any] | None = None,
    atol: float = 1e-6,
    verify: Callable[..., Any] | None = None,
    verbose: bool = False,
    lang: str | None = None,
    device: int = 0,
    platform: int = 0,
    smem_args: dict[str, Any] | None = None,
    cmem_args: dict[str, Any] | None = None,
    texmem_args: dict[str, Any] | None = None,
    compiler: str | None = None,
    compiler_options: list[str] | None = None,
    defines: dict[str, Any] | None = None,
    log: int | None = None,
    iterations: int = 7,
    block_size_names: list[str] | None = None,
    quiet: bool = False,
    strategy: str | None = None,
    strategy_options: dict[str, Any] | None = None,
    cache: str | os.PathLike[str] | None = None,
    metrics: dict[str, Any] | None = None,
    simulation_mode: bool | None = False,
    parallel: bool | int | None = None,
    observers: list[Any] | None = None,
    objective: str | None = None,
    objective_higher_is_better: bool | None = None,
    objectives: dict[str, bool] | None = None,
    seed: int | None = None,
    *,
    space_dir: str | os.PathLike[str] | None = None,
    database: str | None = None,
    early_stop: bool = True,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Tune `kernel_name` like Kernel Tuner 1.5's tune_kernel; see the module docstring and docs/kerneltuner.md.

    `parallel` is accepted and has no effect (compiles always run in parallel); `platform` too (OpenCL only in
    Kernel Tuner). Returns (results, env) shaped as Kernel Tuner's."""
    call = dict(locals())  # every argument, as given: checked before anything is written or started
    start = time.perf_counter()
    check_tune_call(call)
    if log:
        logging.basicConfig(filename=kernel_name + datetime.now().strftime("%Y%m%d-%H:%M:%S") + ".log", level=log)
    objective_name = _refuse_unsupported(call)
    problem = _problem(call)
    cache_path, replayed = _cache(call, problem)
    keep = space_dir or os.environ.get(KEEP_ENV)
    folder = (
        claim(Path(keep), database is None) if keep else Path(tempfile.mkdtemp(prefix=f"kt_{safe_name(kernel_name)}_"))
    )
    # after the results are in: the backend's close (the GPU worker's exit, the compile processes killed: 0.3-0.5 s
    # on an H100 host) and the folder's removal run in a thread once the call has returned (`_clean_up`)
    cleanup: list[Callable[[], object]] = []  # the backend's close, once the results are in
    remove: list[Callable[[], object]] = [] if keep else [functools.partial(shutil.rmtree, folder, ignore_errors=True)]
    try:
        results, env, used = _attempts(problem, compiler, folder, start, _attempt(call, cache_path, replayed), cleanup)
    except BaseException:
        _clean_up(cleanup + remove, wait=True)  # a failed call cleans up before its error propagates
        raise
    try:  # the results stay in their database until they are returned: a metric that fails leaves them there
        _metrics(results, metrics)
    except Exception as exc:
        _clean_up(cleanup + (remove if database else []), wait=True)  # the folder goes only if it holds no results
        raise UserError(
            f"tune_kernel: a metric failed on the results: {type(exc).__name__}: {exc}",
            hint=f"fix the metric; the results are kept in {env['autotune']['database']}",
        ) from exc
    _clean_up(cleanup + remove, wait=False)
    _finish_env(env, results, problem, objective_name, call, start)
    env["autotune"]["space_dir"] = str(used) if keep else None
    return results, env


def _refuse_unsupported(call: Mapping[str, Any]) -> str:
    """Refuse what autotune does not do, in Kernel Tuner's argument order; returns the objective's name."""
    lang, smem_args, compiler, verify = call["lang"], call["smem_args"], call["compiler"], call["verify"]
    if lang is not None and str(lang).upper() not in LANGS:
        raise _refuse(f"lang={lang!r}", "autotune tunes CUDA kernels (lang None, 'CUDA', 'CuPy' or 'nvcuda')")
    if call["texmem_args"]:
        raise _refuse("texmem_args (texture memory)", "read the data through a pointer argument (__ldg)")
    if call["observers"]:
        raise _refuse("observers", "autotune records time, registers and shared memory; drop the observers")
    if smem_args and set(smem_args) - {"size"}:
        raise _refuse(f"smem_args keys {sorted(set(smem_args) - {'size'})}", "give only {'size': bytes}")
    if smem_args and callable(smem_args.get("size")):
        raise _refuse("a smem_args['size'] function", "give an int or a string expression of the parameters")
    if compiler not in (None, "nvcc", "nvrtc"):
        raise _refuse(f"compiler={compiler!r}", "use compiler='nvcc' (or None: NVRTC)")
    if verify is not None:
        try:
            import cloudpickle  # noqa: F401
        except ImportError:
            raise _refuse(
                "verify= without cloudpickle", "pip install cloudpickle (the check runs in the GPU worker)"
            ) from None
    objective_name = _objective(
        call["objective"], call["objective_higher_is_better"], call["objectives"], call["metrics"]
    )
    read_strategy(call["strategy"], call["strategy_options"], None)  # refused here, before any process starts
    defines = call["defines"]
    if isinstance(defines, dict) and any(callable(v) for v in defines.values()):
        raise _refuse("a defines function", "give an expression of the tunable parameters as a string")
    return objective_name


def _problem(call: Mapping[str, Any]) -> KTProblem:
    """The checked call as a `KTProblem`: the block size names (Kernel Tuner's defaults where not given), the
    source, the problem size, grid divisors and restrictions read."""
    from autotune.interop.kt_space import KTProblem

    given = list(call["block_size_names"] or [])
    bx, by, bz = (given + ["block_size_x", "block_size_y", "block_size_z"][len(given) :])[:3]
    source_text, source_file = read_source(call["kernel_source"])
    compiler, smem_args = call["compiler"], call["smem_args"]
    return KTProblem(
        kernel_name=call["kernel_name"],
        source_text=source_text,
        source_file=source_file,
        problem_size=read_problem_size(call["problem_size"]),
        arguments=list(call["arguments"]),
        tune_params={str(k): list(v) for k, v in call["tune_params"].items()},
        grid_div=tuple(read_grid_div(call[f"grid_div_{axis}"], axis) for axis in ("x", "y", "z")),
        block_size_names=(bx, by, bz),
        restrictions=read_restrictions(call["restrictions"]),
        answer=call["answer"],
        atol=float(call["atol"]),
        verify=call["verify"],
        smem_size=(smem_args or {}).get("size"),
        cmem_args=dict(call["cmem_args"] or {}),
        compiler=compiler if compiler == "nvcc" else None,
        compiler_options=list(call["compiler_options"] or []),
        defines=call["defines"],
    )


def _cache(call: Mapping[str, Any], problem: KTProblem) -> tuple[Path | None, KTCache | None]:
    """The cache file's path (`.json` added where missing) and, in simulation mode, the cache it replays; an
    existing cache outside simulation mode is refused (continuing one is not supported)."""
    cache, simulation = call["cache"], bool(call["simulation_mode"])
    cache_path = None if not cache else Path(str(cache) if str(cache).endswith(".json") else f"{cache}.json")
    replayed = _replayed(cache_path, problem, call["problem_size"]) if simulation else None
    if not simulation and cache_path is not None and cache_path.exists():
        raise _refuse(
            f"continuing the existing cache {cache_path}",
            "replay it with simulation_mode=True, or give "
            "a new file name (autotune keeps its own results database: database=...)",
        )
    return cache_path, replayed


def _attempt(call: Mapping[str, Any], cache_path: Path | None, replayed: KTCache | None) -> Attempt:
    """How the sweep runs: the call's cache, repetitions, strategy, device, database and output."""
    from autotune.interop.kt_sweep import Attempt

    given = {f.name: call[f.name] for f in dataclasses.fields(Attempt) if f.name in call}  # the rest by name
    return Attempt(cache_path=cache_path, replayed=replayed, **given)


def _finish_env(
    env: dict[str, Any],
    results: list[dict[str, Any]],
    problem: KTProblem,
    objective_name: str,
    call: Mapping[str, Any],
    start: float,
) -> None:
    """Add the best configuration (printed unless quiet) and the framework's total time to `env`."""
    env["best_config"] = _best(results, objective_name, bool(call["objective_higher_is_better"]))
    if not call["quiet"] and env["best_config"]:
        shown = {k: env["best_config"][k] for k in [*problem.tune_params, objective_name] if k in env["best_config"]}
        print(f"best performing configuration: {', '.join(f'{k}={v}' for k, v in shown.items())}")
    env["total_framework_time"] = 1000 * (time.perf_counter() - start) - sum(
        r.get("compile_time", 0) + r.get("benchmark_time", 0) for r in results
    )


def _attempts(
    problem: KTProblem,
    compiler: str | None,
    folder: Path,
    start: float,
    call: Attempt,
    cleanup: list[Callable[[], object]],
) -> tuple[list[dict[str, Any]], dict[str, Any], Path]:
    """The call run as asked; once more with nvcc where NVRTC failed systematically and nvcc is there
    (`autotune.interop.kt_sweep.decide`); (results, env, the folder used)."""
    from autotune.interop.kt_sweep import StoppedRun, decide, run_attempt
    from autotune.sweep.compile.nvcc import find_nvcc

    try:
        results, env = run_attempt(problem, folder, start, call, cleanup)
        return results, env, folder
    except StoppedRun as stopped:
        decision = decide(stopped.stop, compiler, find_nvcc())
        if not decision.retry_with_nvcc:
            raise decision.error() from None
    print(decision.line, file=sys.stderr, flush=True)  # at any `quiet`: the call is not what was asked
    retry = dataclasses.replace(problem, compiler="nvcc")
    try:
        results, env = run_attempt(retry, folder / "nvcc", start, call, cleanup)
    except StoppedRun as stopped:
        raise decide(stopped.stop, "nvcc", find_nvcc()).error() from None
    return results, env, folder / "nvcc"


def _replayed(path: Path | None, problem: KTProblem, problem_size: Any) -> KTCache:
    """The cache simulation mode replays, read and checked against the call as Kernel Tuner checks it (another
    kernel, problem size or tunable parameters refused, in its words), before anything is written or started."""
    from autotune.interop.kt_store import check_call, load_cache

    if path is None or not path.is_file():
        raise UserError(
            "tune_kernel: simulation_mode replays a cache file; none was found",
            hint=f"give cache= the file a run wrote{f' ({path} does not exist)' if path else ''}",
        )
    cache = load_cache(path)
    check_call(cache, path, problem.kernel_name, problem_size, list(problem.tune_params))
    return cache


def _objective(objective: Any, higher: Any, objectives: Any, metrics: Any) -> str:
    if objectives:
        if list(objectives) not in ([], ["time"]) or any(objectives.values()):
            raise _refuse("several objectives", "tune for one objective: time or a metric")
        return "time"
    name = objective or "time"
    if not isinstance(name, str) or (name != "time" and name not in (metrics or {})):
        raise _refuse(f"objective={name!r}", "use 'time' or the name of one of the metrics")
    return name


def _metrics(results: list[dict[str, Any]], metrics: Mapping[str, Any] | None) -> None:
    """Kernel Tuner's user metrics: a function of the result dict (or a string expression of its keys)."""
    from autotune.expr import evaluate, parse

    for r in results:
        if "__error__" in r or not metrics:
            continue
        for name, m in metrics.items():
            if callable(m):
                r[name] = m(r)
            else:
                value = evaluate(parse(str(m)), {k: v for k, v in r.items() if isinstance(v, (int, float))})
                r[name] = float(value)


def _best(results: list[dict[str, Any]], objective: str, higher: bool) -> dict[str, Any] | None:
    ok = [r for r in results if "__error__" not in r and isinstance(r.get(objective), (int, float))]
    return (max if higher else min)(ok, key=lambda r: r[objective]) if ok else None


CLEANUP_THREAD = "autotune-tune_kernel-cleanup"


def _clean_up(steps: list[Callable[[], object]], wait: bool) -> None:
    """Run the call's clean-up steps in order, each failure ignored (closing and removing are best effort, as
    before). wait=False: in a thread the interpreter waits for at exit (not a daemon: the GPU worker still exits
    cleanly and the folder is still removed), so the call returns as soon as its results are in, as Kernel Tuner's
    returns without tearing anything down."""

    def run() -> None:
        for step in steps:
            try:
                step()
            except Exception:  # noqa: BLE001 - best effort
                pass

    if wait:
        run()
    elif steps:
        threading.Thread(target=run, name=CLEANUP_THREAD).start()


__all__ = ["KEEP_ENV", "tune_kernel"]
