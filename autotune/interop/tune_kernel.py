"""Kernel Tuner's `tune_kernel` on autotune's engine: `from autotune.kernel_tuner import tune_kernel`.

The same signature and return value as Kernel Tuner 1.5's (`kernel_tuner/interface.py`): a list of result dicts
(the parameters, `time` in ms, `times`, `compile_time`, `verification_time`, `benchmark_time`, `strategy_time`,
`framework_time`, `timestamp`; a failure has `__error__`: Kernel Tuner's `CompilationFailedConfig`,
`RuntimeFailedConfig` or `InvalidConfig`, its own classes where the script imported
`kernel_tuner.util`) and an env dict
(`device_name`, `iterations`, `compiler_options`, `uuid`, `compute_capability`, `best_config`, the `total_*_time`s,
and `autotune`: where the space folder and the results database are).

The call is written as a space folder (`autotune.interop.kt_space`) and run as a sweep (`run_sweep`, the GPU backend,
or in `simulation_mode` a replay of the `cache` file). Differences from Kernel Tuner, argument by argument, are in
docs/kerneltuner.md; in short:

* `time` is the median of the repetitions (Kernel Tuner: their mean); `iterations` is the repetitions. An instance
  clearly slower than the best so far stops after 5 repetitions (`early_stop=False` times every one fully).
* `strategy`: None/"brute_force" -> brute; "random_sample" -> random; any other Kernel Tuner strategy -> our `auto`
  (Optuna TPE where the space is large). `strategy_options`: `max_fevals` -> the evaluations per point (budget),
  `time_limit` -> the sweep's time budget, `fraction` (random_sample) -> max_fevals = fraction * space size.
* A configuration that fails verification is recorded as `RuntimeFailedConfig` with the tuning going on (Kernel
  Tuner raises and stops). When the first configurations all fail alike, the sweep stops that space.
* `cache`: the results are written as a Kernel Tuner cache file when the run ends; an existing file is replayed with
  `simulation_mode=True` and refused otherwise (continuing a Kernel Tuner cache is not supported).
* Refused (UserError): a callable kernel source, problem_size, grid divisor or restriction; a list of source files;
  languages other than CUDA/CuPy/nvcuda; `texmem_args`; `observers`; `smem_args` other than `size`; objectives other
  than `time` or a metric; `verify=`, `cmem_args` and `loop_unroll_factor_*` parameters where this autotune has no
  `check:` / `constants:` / `kernel: semantics:` space key.

Extra keywords (after Kernel Tuner's): `space_dir` keeps the generated folder there (so does the environment variable
AUTOTUNE_KEEP_SPACE=DIR), `database` a results database URL to record into (default: one inside the folder),
`early_stop`.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.errors import UserError
from autotune.interop.kt_args import (
    LANGS,
    read_grid_div,
    read_problem_size,
    read_restrictions,
    read_source,
    read_strategy,
)
from autotune.interop.kt_args import refuse as _refuse

if TYPE_CHECKING:  # pragma: no cover
    from autotune.interop.kt_space import KTProblem

# The rest is imported by the call, not by `import autotune.kernel_tuner`: a script's own set-up (and a spawned process
# that re-imports the script) does not load the results database's SQLAlchemy, YAML or the space machinery; guarded
# by tests/test_kt_import.py.

KEEP_ENV = "AUTOTUNE_KEEP_SPACE"


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
    start = time.perf_counter()
    from autotune.interop.kt_space import KTProblem, space_supports

    if log:
        logging.basicConfig(filename=kernel_name + datetime.now().strftime("%Y%m%d-%H:%M:%S") + ".log", level=log)
    if lang is not None and str(lang).upper() not in LANGS:
        raise _refuse(f"lang={lang!r}", "autotune tunes CUDA kernels (lang None, 'CUDA', 'CuPy' or 'nvcuda')")
    if texmem_args:
        raise _refuse("texmem_args (texture memory)", "read the data through a pointer argument (__ldg)")
    if observers:
        raise _refuse("observers", "autotune records time, registers and shared memory; drop the observers")
    if smem_args and set(smem_args) - {"size"}:
        raise _refuse(f"smem_args keys {sorted(set(smem_args) - {'size'})}", "give only {'size': bytes}")
    if smem_args and callable(smem_args.get("size")):
        raise _refuse("a smem_args['size'] function", "give an int or a string expression of the parameters")
    if compiler not in (None, "nvcc", "nvrtc"):
        raise _refuse(f"compiler={compiler!r}", "use compiler='nvcc' (or None: NVRTC)")
    if cmem_args and not space_supports("problem", "constants"):
        raise _refuse(
            "cmem_args (constant memory) in this autotune version", "update autotune (space key `constants:`)"
        )
    if verify is not None:
        if not space_supports("problem", "check"):
            raise _refuse("verify= in this autotune version", "update autotune (space key `check:`), or give answer=")
        try:
            import cloudpickle  # noqa: F401
        except ImportError:
            raise _refuse(
                "verify= without cloudpickle", "pip install cloudpickle (the check runs in the GPU worker)"
            ) from None
    objective_name = _objective(objective, objective_higher_is_better, objectives, metrics)
    read_strategy(strategy, strategy_options, None)  # refused here, before any process starts
    if isinstance(defines, dict) and any(callable(v) for v in defines.values()):
        raise _refuse("a defines function", "give an expression of the tunable parameters as a string")
    given = list(block_size_names or [])
    bx, by, bz = (given + ["block_size_x", "block_size_y", "block_size_z"][len(given) :])[:3]
    names = (bx, by, bz)
    params = {str(k): list(v) for k, v in tune_params.items()}
    unroll = [k for k in params if "loop_unroll_factor" in k]
    if unroll and not space_supports("kernel", "semantics"):
        raise _refuse(
            f"the parameter {unroll[0]!r} in this autotune version (Kernel Tuner passes loop_unroll_factor_* "
            "as constexpr ints and removes `#pragma unroll NAME` where it is 0)",
            "update autotune (space key `kernel: semantics: kerneltuner`), or rename the parameter and "
            "write the pragma with a #define",
        )
    source_text, source_file = read_source(kernel_source)
    problem = KTProblem(
        kernel_name=kernel_name,
        source_text=source_text,
        source_file=source_file,
        problem_size=read_problem_size(problem_size),
        arguments=list(arguments),
        tune_params=params,
        grid_div=(read_grid_div(grid_div_x, "x"), read_grid_div(grid_div_y, "y"), read_grid_div(grid_div_z, "z")),
        block_size_names=names,
        restrictions=read_restrictions(restrictions),
        answer=answer,
        atol=float(atol),
        verify=verify,
        smem_size=(smem_args or {}).get("size"),
        cmem_args=dict(cmem_args or {}),
        compiler=compiler if compiler == "nvcc" else None,
        compiler_options=list(compiler_options or []),
        defines=defines,
    )
    keep = space_dir or os.environ.get(KEEP_ENV)
    folder = Path(keep).resolve() if keep else Path(tempfile.mkdtemp(prefix=f"kt_{kernel_name}_"))
    # after the results are in: the backend's close (the GPU worker's exit, the compile processes killed: 0.3-0.5 s
    # on an H100 host) and the folder's removal run in a thread once the call has returned (`_clean_up`)
    cleanup: list[Callable[[], object]] = []
    if not keep:
        cleanup.append(functools.partial(shutil.rmtree, folder, ignore_errors=True))
    try:
        results, env = _run(
            problem,
            folder,
            start,
            cache=cache,
            simulation=bool(simulation_mode),
            iterations=iterations,
            strategy=strategy,
            strategy_options=strategy_options,
            seed=seed,
            device=device,
            database=database,
            early_stop=early_stop,
            quiet=quiet,
            verbose=verbose,
            cleanup=cleanup,
        )
    except BaseException:
        _clean_up(cleanup, wait=True)  # a failed call cleans up before its error propagates
        raise
    _clean_up(cleanup, wait=False)
    _metrics(results, metrics)
    env["best_config"] = _best(results, objective_name, bool(objective_higher_is_better))
    if not quiet and env["best_config"]:
        shown = {k: env["best_config"][k] for k in [*params, objective_name] if k in env["best_config"]}
        print(f"best performing configuration: {', '.join(f'{k}={v}' for k, v in shown.items())}")
    env["total_framework_time"] = 1000 * (time.perf_counter() - start) - sum(
        r.get("compile_time", 0) + r.get("benchmark_time", 0) for r in results
    )
    env["autotune"]["space_dir"] = str(folder) if keep else None
    return results, env


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


_GPU_HINT = (
    "run on a machine with an NVIDIA GPU and CuPy, or replay a cache: "
    "tune_kernel(..., cache='file.json', simulation_mode=True)"
)


def _gpu_backend(device: int, tol: float | None) -> Any:
    from autotune.sweep.backends.local import gpu_backend

    return gpu_backend(device=device, tol=tol, hint=_GPU_HINT)


class _Reporter:
    def __init__(self, quiet: bool, verbose: bool) -> None:
        self.quiet, self.verbose = quiet, verbose
        self.planned: int | None = None  # the configurations the sweep set out to measure

    def start(self, total_pairs: int, already_done: int) -> None:
        self.planned = total_pairs if self.planned is None else self.planned
        if self.verbose:
            print(f"tune_kernel: {total_pairs} configurations to measure")

    def measured(self, m: Any, best_ms: float | None) -> None:
        if self.verbose and m.error:
            print(f"tune_kernel: {m.instance_id}: {m.status.value}: {m.error}")

    def note(self, text: str) -> None:
        if not self.quiet:
            print(f"tune_kernel: {text}")


def _run(
    problem: KTProblem,
    folder: Path,
    call_start: float,
    *,
    cache: Any,
    simulation: bool,
    iterations: int,
    strategy: str | None,
    strategy_options: Mapping[str, Any] | None,
    seed: int | None,
    device: int,
    database: str | None,
    early_stop: bool,
    quiet: bool,
    verbose: bool,
    cleanup: list[Callable[[], object]],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    cache_path = None if cache is None else Path(str(cache) if str(cache).endswith(".json") else f"{cache}.json")
    if simulation and (cache_path is None or not cache_path.is_file()):
        raise UserError(
            "tune_kernel: simulation_mode replays a cache file; none was found",
            hint=f"give cache= the file a run wrote{f' ({cache_path} does not exist)' if cache_path else ''}",
        )
    if not simulation and cache_path is not None and cache_path.exists():
        raise _refuse(
            f"continuing the existing cache {cache_path}",
            "replay it with simulation_mode=True, or give "
            "a new file name (autotune keeps its own results database: database=...)",
        )
    # the GPU backend first: its compile processes and GPU worker start (CuPy's import, the device's context and
    # description) while the space folder is written and planned (the target: the first measurement within 3 s)
    backend: Any = None
    prewarmed_s: float | None = None
    if not simulation and importlib.util.find_spec("cupy") is not None:  # else: _sweep says why, after the arguments
        from autotune.interop import kt_prewarm

        backend, prewarmed_s = kt_prewarm.take(device)  # started at `import autotune.kernel_tuner`
        if backend is None:
            from autotune.sweep.backends.local import GpuBackend

            backend = GpuBackend(device=device, warm_checks=True)
        backend.start()
    from autotune.space.spec import reusing_spaces

    try:
        with reusing_spaces():  # the space file is built once, not at each of its loads
            results, env = _sweep(
                problem,
                folder,
                backend,
                device,
                call_start,
                cache_path=cache_path,
                simulation=simulation,
                iterations=iterations,
                strategy=strategy,
                strategy_options=strategy_options,
                seed=seed,
                database=database,
                early_stop=early_stop,
                quiet=quiet,
                verbose=verbose,
            )
        env["autotune"]["prewarmed_s"] = None if prewarmed_s is None else round(prewarmed_s, 3)
        if backend is not None:  # closed once the call has returned (tune_kernel's clean-up)
            cleanup.insert(0, backend.close)
            backend = None
        return results, env
    finally:
        if backend is not None:  # the call failed: closed before its error propagates
            backend.close()


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

    if not steps:
        return
    if wait:
        run()
        return
    threading.Thread(target=run, name=CLEANUP_THREAD).start()


def _sweep(
    problem: KTProblem,
    folder: Path,
    backend: Any,
    device: int,
    call_start: float,
    *,
    cache_path: Path | None,
    simulation: bool,
    iterations: int,
    strategy: str | None,
    strategy_options: Mapping[str, Any] | None,
    seed: int | None,
    database: str | None,
    early_stop: bool,
    quiet: bool,
    verbose: bool,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    import yaml

    from autotune.interop.kerneltuner import write_cache
    from autotune.interop.kt_results import collect_results, environment
    from autotune.interop.kt_space import write_space_folder
    from autotune.interop.kt_store import export_cache, import_cache
    from autotune.space.spec import load_space
    from autotune.store.store import Store
    from autotune.sweep.config import load_config
    from autotune.sweep.runner import run_sweep

    phases: dict[str, float] = {}  # seconds after the call's start: where the call's start-up went (--profile)

    def phase(name: str) -> None:
        phases[name] = round(time.perf_counter() - call_start, 3)

    phase("imported")
    space_file, sizes = write_space_folder(problem, folder)
    phase("folder_written")
    space = load_space(space_file)
    phase("space_loaded")
    url = database or f"sqlite:///{folder / 'results.sqlite'}"
    config = {
        "name": space.name,
        "spaces": [{"space": "space.yaml", "max_instances": "all"}],
        "points": [{"kind": space.kind.name, "precisions": ["fp32"], "sizes": sizes}],
        "database": url,
        "repetitions": int(iterations),
        "seed": int(seed or 0),
        "resume": "model",  # as Kernel Tuner's cache: a call resumed on another card of the same model goes on
        **read_strategy(strategy, strategy_options, None, time.perf_counter() - call_start),
    }
    (folder / "sweep.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    cfg = load_config(folder / "sweep.yaml")
    reporter = _Reporter(quiet, verbose)
    phase("config_loaded")
    with Store.open(url) as store:
        phase("store_open")
        if simulation:
            from autotune.sweep.backends.replay import ReplayBackend

            import_cache(cache_path, store, space)  # type: ignore[arg-type]
            backend = ReplayBackend(url)
        else:
            if backend is None:  # no CuPy: the same error as `autotune sweep`
                backend = _gpu_backend(device, None)
            backend.ready(_GPU_HINT)
            read = getattr(backend, "device_limits", None)  # the worker's: this process then imports no CuPy
            if read is not None:  # (asked before prepare_ahead: it would wait behind the data)
                read()
            backend.tol = cfg.tol if early_stop else None
            ahead = getattr(backend, "prepare_ahead", None)
            if ahead is not None and space.kernel is not None:  # the point's data while the sweep plans
                from autotune.sweep.runner import kind_scalars

                ahead(space.kind, cfg.points[0], space.kernel.convention, kind_scalars(space.kind, cfg))
        phase("backend_ready")
        try:
            summary = run_sweep(cfg, store, backend, reporter)
            phase("sweep_done")
            info = backend.device_info()
        finally:
            if simulation:
                backend.close()
        point = cfg.points[0]
        results = collect_results(store, space, point, info.uuid, list(problem.tune_params), same_model=True)
        phase("results_collected")
        if cache_path is not None and not simulation:
            write_cache(export_cache(store, space.name, device=info.uuid, point=point.key), cache_path)
    env = environment(info, iterations, problem.compiler_options, results)
    env["autotune"] = {
        "database": url,
        "sweep_id": summary.sweep_id,
        "status": summary.status,
        "space": space.name,
        "point": point.key,
        "planned": reporter.planned,
        "sweep_s": summary.seconds,
        "first_measurement_s": summary.first_measurement_s,
        "startup": dict(getattr(backend, "timeline", {})),
        "phases": phases,
    }
    return results, env


__all__ = ["KEEP_ENV", "tune_kernel"]
