"""One attempt of a `tune_kernel` call (`autotune.interop.tune_kernel`): its space folder written
(`autotune.interop.kt_space`), swept on the GPU backend or, in simulation mode, on a replay of the call's cache
(imported first: only the configurations of the call's space), and its results collected as Kernel Tuner's
(`autotune.interop.kt_export`).

A sweep that stopped on a systematic failure (`autotune.sweep.compile.failstop`: the first configurations all failed
with one compile or launch error) raises `StoppedRun`, and the call does what `decide` says, whatever `quiet` says.
Kernel Tuner raises on a compile error that is not about resources (`core.compile_kernel`), so a script learns
why; here the sweep records each failure and stops the space once they repeat, and then:

* a compile error under NVRTC (no `compiler=` given) with nvcc there (`autotune.sweep.compile.nvcc.find_nvcc`: CUDA_PATH,
  CUDA_HOME, the PATH, /usr/local/cuda): the call is run again with `compiler="nvcc"`, after one line on stderr
  saying why. NVRTC rejects what the toolkit's headers need from nvcc (`#include <cub/cub.cuh>`: "A function
  explicitly marked as a __host__ function is not allowed in JIT mode"); the space and its instances are then
  those of `compiler="nvcc"` (another space name, so a database of the NVRTC attempt does not resume them);
* anything else: a `SystematicFailure` error with the error text, and what to do (without nvcc: how to ask for it).

`decide` is the whole decision, pure (testable without a GPU); `autotune.interop.tune_kernel` acts on it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.errors import UserError
from autotune.paths import sqlite_files
from autotune.interop.kt_args import read_strategy

if TYPE_CHECKING:  # pragma: no cover
    from autotune.interop.kerneltuner import KTCache
    from autotune.interop.kt_space import KTProblem
    from autotune.space.instance import Instance
    from autotune.space.spec import Space
    from autotune.store.store import Store
    from autotune.sweep.config import SweepConfig
    from autotune.vocab import TestPoint

COMPILE_ERROR = "compile_error"
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


@dataclasses.dataclass(frozen=True)
class Stopped:
    """The sweep stopped the call's space: its first `count` configurations failed alike (`status`, `example`)."""

    kernel_name: str
    status: str  # compile_error or launch_error
    example: str  # the first such error, as recorded
    count: int


class SystematicFailure(UserError, RuntimeError):
    """Every configuration tried failed with one error (a RuntimeError, as Kernel Tuner's compile errors are)."""


@dataclasses.dataclass(frozen=True)
class Decision:
    retry_with_nvcc: bool
    line: str  # printed before the retry (stderr), or the error's message
    hint: str = ""

    def error(self) -> SystematicFailure:
        return SystematicFailure(self.line, hint=self.hint)


def decide(stop: Stopped, compiler: str | None, nvcc: str | None) -> Decision:
    """Retry with nvcc, or the error to raise (see the module docstring). `compiler`: what the call compiled with
    (None: NVRTC chosen by default; "nvrtc" asked for by name, so not replaced); `nvcc`: the nvcc found, or None."""
    what = "compile" if stop.status == COMPILE_ERROR else "launch"
    by = "nvcc" if compiler == "nvcc" else "NVRTC"
    said = " ".join(stop.example.split())[:300] or "(no message)"
    head = (
        f"tune_kernel: {stop.kernel_name}: the first {stop.count} configurations all failed with the same {what} "
        f"error{f' under {by}' if what == 'compile' else ''}: {said}"
    )
    if what == "compile" and compiler is None and nvcc is not None:
        return Decision(True, f"{head}; compiling with nvcc ({nvcc}) instead, as compiler='nvcc' does")
    if what == "launch":
        hint = "fix the kernel or its launch (grid_div_*, block_size_names, problem_size, the arguments' sizes)"
    elif compiler == "nvcc":
        hint = "fix the kernel: nvcc's message is above"
    else:
        how = (
            "nvcc was not found (CUDA_PATH, CUDA_HOME, PATH, /usr/local/cuda): install the CUDA toolkit and the "
            "call retries with it by itself, or pass compiler='nvcc'"
            if nvcc is None
            else "pass compiler='nvcc' (compiler='nvrtc' asked for NVRTC alone)"
        )
        hint = f"if the kernel needs nvcc (CUB, Thrust, host headers NVRTC lacks), {how}; else fix the kernel"
    return Decision(False, f"{head}; the rest were not tried", hint)


class StoppedRun(Exception):
    """The sweep stopped the call's space on a systematic failure (`stopped`)."""

    def __init__(self, stop: Stopped) -> None:
        super().__init__(stop.example)
        self.stop = stop


@dataclasses.dataclass(frozen=True)
class Attempt:
    """What a tune_kernel call asks of each of its attempts (its checked arguments)."""

    cache_path: Path | None
    replayed: KTCache | None  # simulation mode's cache (checked against the call already)
    iterations: int
    strategy: str | None
    strategy_options: Mapping[str, Any] | None
    seed: int | None
    device: int
    database: str | None
    early_stop: bool
    quiet: bool
    verbose: bool


def run_attempt(
    problem: KTProblem, folder: Path, call_start: float, call: Attempt, cleanup: list[Callable[[], object]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One attempt of the call into `folder`: (results, env) as Kernel Tuner's; StoppedRun where the sweep stopped on
    a systematic failure. `cleanup`: where the backend's close goes once the results are in."""
    simulation = call.replayed is not None
    # the GPU backend first: its compile processes and GPU worker start (CuPy's import, the device's context and
    # description) while the space folder is written and planned (the target: the first measurement within 3 s)
    backend: Any = None
    prewarmed_s: float | None = None
    if not simulation and importlib.util.find_spec("cupy") is not None:  # else: _sweep says why, after the arguments
        from autotune.interop import kt_prewarm

        backend, prewarmed_s = kt_prewarm.take(call.device)  # started at `import autotune.kernel_tuner`
        if backend is None:
            from autotune.sweep.backends.local import GpuBackend, LocalOptions

            backend = GpuBackend(LocalOptions(device=call.device, warm_checks=True))
        backend.start()
    from autotune.space.spec import reusing_spaces

    try:
        with reusing_spaces():  # the space file is built once, not at each of its loads
            results, env = _sweep(problem, folder, backend, call_start, call)
        env["autotune"]["prewarmed_s"] = None if prewarmed_s is None else round(prewarmed_s, 3)
        if backend is not None:  # closed once the call has returned (tune_kernel's clean-up)
            cleanup.insert(0, backend.close)
            backend = None
        return results, env
    finally:
        if backend is not None:  # the call failed: closed before its error propagates
            backend.close()


def _sweep(
    problem: KTProblem, folder: Path, backend: Any, call_start: float, call: Attempt
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from autotune.interop.kerneltuner import write_cache
    from autotune.interop.kt_export import collect_results, environment, export_cache
    from autotune.store.store import Store
    from autotune.workflows.sweeps import sweep_into

    phases: dict[str, float] = {}  # seconds after the call's start: where the call's start-up went (--profile)

    def phase(name: str) -> None:
        phases[name] = round(time.perf_counter() - call_start, 3)

    phase("imported")
    url = call.database or f"sqlite:///{folder / 'results.sqlite'}"
    space, sizes, cfg = _configured(problem, folder, url, call, call_start, phase)
    reporter = _Reporter(call.quiet, call.verbose)
    phase("config_loaded")
    simulation = call.replayed is not None
    planned: set[Instance] | None = None
    with Store.open(url) as store:
        phase("store_open")
        if call.replayed is not None:
            backend, planned = _replay_backend(call, cfg, folder, space, sizes)
        else:
            backend = _gpu_ready(backend, call, cfg, space)
        phase("backend_ready")
        try:
            summary = sweep_into(cfg, store, backend, reporter)
            phase("sweep_done")
            info = backend.device_info()
        finally:
            if simulation:
                backend.close()
        point = cfg.points[0]
        planned = planned if planned is not None else _planned(cfg)
        keys = list(problem.tune_params)
        results = collect_results(store, space, point, info.uuid, keys, same_model=True, planned=planned)
        if not simulation and all("__error__" in r for r in results):  # nothing measured: a systematic failure?
            stop = stopped(store, space.name, point, info.uuid, cfg.stop_after_failures, problem.kernel_name)
            if stop is not None:
                raise StoppedRun(stop)
        phase("results_collected")
        if call.cache_path is not None and not simulation:  # the call's problem_size, as Kernel Tuner's header has it
            exported = export_cache(store, space.name, device=info.uuid, point=point.key)
            write_cache(dataclasses.replace(exported, problem_size=problem.problem_size), call.cache_path)
    env = environment(info, call.iterations, problem.compiler_options, results)
    env["autotune"] = {
        "database": url,
        "sweep_id": summary.sweep_id,
        "status": summary.status,
        "space": space.name,
        "point": point.key,
        "planned": reporter.planned,
        "sweep_s": summary.seconds,
        "first_measurement_s": summary.first_measurement_s,
        "startup": dict(backend.timeline),
        "phases": phases,
    }
    return results, env


def _configured(
    problem: KTProblem, folder: Path, url: str, call: Attempt, call_start: float, phase: Callable[[str], None]
) -> tuple[Space, dict[str, Any], SweepConfig]:
    """The call's space folder and sweep config written into `folder` and loaded: (space, problem sizes, config)."""
    import yaml

    from autotune.interop.kt_space import write_space_folder
    from autotune.space.spec import load_space
    from autotune.sweep.config import load_config

    space_file, sizes = write_space_folder(problem, folder)
    phase("folder_written")
    space = load_space(space_file)
    phase("space_loaded")
    config = {
        "name": space.name,
        "spaces": [{"space": "space.yaml", "max_instances": "all"}],
        "points": [{"kind": space.kind.name, "precisions": ["fp32"], "sizes": sizes}],
        "database": url,
        "repetitions": int(call.iterations),
        "seed": int(call.seed or 0),
        "resume": "model",  # as Kernel Tuner's cache: a call resumed on another card of the same model goes on
        **read_strategy(call.strategy, call.strategy_options, None, time.perf_counter() - call_start),
    }
    (folder / "sweep.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    cfg = load_config(folder / "sweep.yaml")
    if config["strategy"] == "random":  # random_sample without max_fevals: a fraction of the space's configurations
        size = len(_planned(cfg))
        config.update(read_strategy(call.strategy, call.strategy_options, size, time.perf_counter() - call_start))
        (folder / "sweep.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        cfg = load_config(folder / "sweep.yaml")
    return space, sizes, cfg


REPLAYED = "replayed.sqlite"  # simulation mode: the call's cache, imported, in the call's folder


def _replay_backend(
    call: Attempt, cfg: SweepConfig, folder: Path, space: Space, sizes: dict[str, Any]
) -> tuple[Any, set[Instance]]:
    """Simulation mode: the call's cache imported into the folder's replay database (only the configurations of the
    call's space) and the backend that replays it into `store`, so the results are the configurations the strategy
    evaluated, as Kernel Tuner's simulation mode returns them; (backend, the configurations planned)."""
    from autotune.interop.kt_store import store_cache
    from autotune.store.store import Store
    from autotune.sweep.backends.replay import ReplayBackend

    planned = _planned(cfg)  # the cache's configurations outside the call's space are not even stored
    replayed = folder / REPLAYED
    for stale in sqlite_files(replayed):
        stale.unlink(missing_ok=True)
    with Store.open(f"sqlite:///{replayed}") as source:
        store_cache(call.replayed, call.cache_path, source, space, sizes=sizes, keep=planned.__contains__)  # type: ignore[arg-type]
    return ReplayBackend(f"sqlite:///{replayed}"), planned


def _gpu_ready(backend: Any, call: Attempt, cfg: SweepConfig, space: Space) -> Any:
    """The GPU backend (started by `run_attempt`, else here: no CuPy raises the same error as `autotune sweep`),
    ready, with the call's early stop and the point's data prepared while the sweep plans."""
    if backend is None:  # no CuPy: the same error as `autotune sweep`
        backend = _gpu_backend(call.device, None)
    backend.ready(_GPU_HINT)
    # the worker's limits: this process then imports no CuPy (asked before prepare_ahead: it would wait
    # behind the data)
    backend.device_limits()
    backend.tol = cfg.tol if call.early_stop else None
    if space.kernel is not None:  # the point's data while the sweep plans
        from autotune.sweep.runner import kind_scalars

        backend.prepare_ahead(space.kind, cfg.points[0], space.kernel.convention, kind_scalars(space.kind, cfg))
    return backend


def _planned(cfg: SweepConfig) -> set[Instance]:
    """The configurations of the call's space: its tune_params values that its restrictions (and Kernel Tuner's
    implicit block-size one) keep, as the sweep plans them."""
    from autotune.sweep.plan import plan_sweep

    return {inst for plan in plan_sweep(cfg) for inst in plan.work}


def stopped(
    store: Store, space: str, point: TestPoint, device_uuid: str, limit: int, kernel_name: str
) -> Stopped | None:
    """The systematic failure the sweep stopped the space on (`autotune.sweep.compile.failstop`), or None: read back from
    the database, so a call resumed on a database that stopped before says it too."""
    from autotune.sweep.compile.failstop import earlier_streak

    measured = {iid for iid, p in store.done_pairs(store.device_id(device_uuid)) if p == point}
    streak = earlier_streak(store, space, measured, limit)
    if not streak.stopped:
        return None
    return Stopped(kernel_name, streak.status, streak.example, streak.count)
