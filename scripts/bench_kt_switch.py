#!/usr/bin/env python3
"""Benchmark: Kernel Tuner 1.5's `tune_kernel` against autotune's (`autotune.kernel_tuner`) on Kernel Tuner's own
example scripts, unchanged, in one run on one GPU (issue 31, "Performance").

The kernels and their tuning scripts are copies of Kernel Tuner's examples/cuda (tests/data/kt_public/, see its
PROVENANCE.md): each script's first `tune_kernel` call is one case, with the script's own parameters, restrictions,
problem, data and checks (`answer`, `verify=`, `atol`, `cmem_args`, metrics). Each (case, side) runs in a fresh
process that imports the script and calls its tuning function with `kernel_tuner.tune_kernel` replaced by
  * `kt`:    Kernel Tuner's own, with `lang="cupy"` where the script names none (its default CUDA backend needs
             PyCUDA) and `cache=` a file (written per configuration, so a run stopped at the cap keeps its results);
  * `ours`:  `autotune.kernel_tuner.tune_kernel` (the one-import switch), with `strategy_options={"time_limit": CAP}`
             (the sweep's time budget) and `database=` a file in the run's folder.
Nothing else of the call changes. A run whose call outlasts --cap seconds is stopped: Kernel Tuner's process is
killed at CAP after the call started (its cache keeps what it finished); ours ends itself by its budget (and is
killed at CAP + 120 s if it does not). Every run has fresh compile caches (CUPY_CACHE_DIR, AUTOTUNE_COMPILE_CACHE,
and the driver's compute cache, CUDA_CACHE_PATH, where NVRTC's ptxas step and CuPy's JIT keep their output) and a
fresh working folder; the order of the two sides alternates from case to case.

Reported per case and side (CSV + JSON under --out, a table last): configurations measured (failures included, as
Kernel Tuner counts them) and those that passed; process wall (from the process's start to the call's return or
the stop: imports and the script's own data set-up included, the same work on both sides) and the call's wall;
configs/s over each; the time to the first measurement (from the process start and from the call); the best
configuration and its time (Kernel Tuner: the mean of its iterations; ours: the median); both sides' times for the
configurations both measured (kt_switch_same.csv) and their median ratio; the size of the space (Kernel Tuner's
Searchspace with 1024 threads per block, and what our sweep planned). Targets (issue 31): ours >= 3x Kernel Tuner's
configs/s over process wall on every case, >= 10x where the space has more than 500 configurations, and our best
at most 2% (timing noise) slower than Kernel Tuner's.

  --compile-modes runs ours once more per case with AUTOTUNE_COMPILE_SCREEN=1 (a fast -O0-style screening build for
  every configuration, the full build for the best) and reports whether the best configuration changes (issue 31,
  item 5); with it, only ours runs for that variant.

GPU machine (Kernel Tuner 1.5 from the wheelhouse: bash scripts/build_wheelhouse.sh --with-kerneltuner):
  python3 scripts/bench_kt_switch.py --out $OUT/kt_switch --cap 40
Here (no GPU): --dry-run runs every script's set-up, builds both tools' search spaces from its call (Kernel Tuner's
Searchspace, our sweep's plan) and checks they have the same size; nothing is measured.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

ROOT = Path(__file__).resolve().parent.parent
CASES_DIR = ROOT / "tests" / "data" / "kt_public"
SIDES = ("kt", "ours")
KILL_GRACE_S = 120.0  # ours ends itself at its budget; this is only the watchdog's margin
MAX_THREADS = 1024  # threads per block on every GPU this is meant for (Kernel Tuner's implicit restriction)
BEST_NOISE = 1.02  # "the best found at least as fast", within 2% timing noise (mean vs median of few iterations)


@dataclass(frozen=True)
class Case:
    """One Kernel Tuner example script: the file, the function to call, the files it reads from its folder."""

    name: str
    script: str
    entry: str
    files: tuple[str, ...]
    note: str = ""


CASES: dict[str, Case] = {
    c.name: c
    for c in (
        Case("matmul", "matmul.py", "tune", ("matmul.cu",), "4096x4096 fp32, answer numpy.dot, 32 iterations, GFLOP/s"),
        Case("stencil", "stencil.py", "tune", ("stencil.cu",), "4096x2048, no answer"),
        Case("spmv", "spmv.py", "tune", ("spmv.cu",), "random CSR 128Ki x 64Ki, answer scipy.sparse, atol 1e-4"),
        Case(
            "zeromean",
            "zeromeanfilter.py",
            "tune_zeromean",
            ("zeromeanfilter.cu",),
            "first call: computeMeanVertically, 4391x3539",
        ),
        Case("expdist", "expdist.py", "tune_expdist", ("expdist.cu",), "first call: ExpDist, fp64 2000x2000"),
        Case(
            "convolution",
            "convolution_correct.py",
            "tune",
            ("convolution.cu",),
            "17x17 filter in constant memory (cmem_args), answer from run_kernel's naive kernel",
        ),
        Case(
            "sepconv",
            "sepconv.py",
            "tune",
            ("convolution.cu",),
            "first call: the row filter (filter_height 1), widths 3-17, 64 block widths, cmem_args, no answer",
        ),
        Case(
            "reduction",
            "reduction.py",
            "tune",
            ("reduction.cu",),
            "first call: sum_floats over 800M floats (3.2 GB), verify=, loop_unroll_factor_0",
        ),
    )
}
# five kernels (convolution.cu twice: its 2D and its separable-row space); expdist is left out by default: its
# `#include <cub/cub.cuh>` compiles under NVRTC in neither tool (issue 31), spmv: see tests/data/kt_public/PROVENANCE.md
DEFAULT_CASES = ("matmul", "stencil", "zeromean", "convolution", "sepconv", "reduction")


class FirstCallDone(BaseException):
    """Raised by the replaced tune_kernel after the script's first call: the case ends there."""


# ------------------------------------------------------------------------------------------------ child
def child(side: str, case: Case, work: Path, cap: float, order: str = "script") -> None:
    """Run the case's script in this process with kernel_tuner.tune_kernel replaced (see the module docstring).
    Writes work/call.json (the call's start and end, epoch seconds) and work/child.json (the results). `order`
    "random": the call's strategy is random_sample over the whole space (`random_order`)."""
    import importlib.util

    meta: dict[str, Any] = {"side": side, "case": case.name, "child_start": time.time()}
    if side == "ours":
        kernel_tuner = switched_kernel_tuner()
        original = None
    else:
        import kernel_tuner

        original = kernel_tuner.tune_kernel
    meta["kernel_tuner_imported"] = time.time()

    def mark(**kw: Any) -> None:
        meta.update(kw)
        tmp = work / "call.json.tmp"
        tmp.write_text(json.dumps(meta))
        os.replace(tmp, work / "call.json")

    def replaced(
        kernel_name: str, kernel_source: Any, problem_size: Any, arguments: Any, tune_params: Any, **kw: Any
    ) -> Any:
        if side == "dry":
            dry_sizes(kernel_name, kernel_source, problem_size, arguments, tune_params, kw, work)
            raise FirstCallDone
        mark(call_start=time.time(), kernel_name=kernel_name)
        if order == "random":
            kw.update(random_order(kw))
        if side == "kt":
            if kw.get("lang") is None:
                kw["lang"] = "cupy"
            kw["cache"] = str(work / "kt_cache.json")
            results, env = original(kernel_name, kernel_source, problem_size, arguments, tune_params, **kw)
        else:
            from autotune.kernel_tuner import tune_kernel  # imported by switched_kernel_tuner, at the script's start

            kw["strategy_options"] = {**(kw.get("strategy_options") or {}), "time_limit": cap}
            kw["database"] = f"sqlite:///{work / 'ours.sqlite'}"
            results, env = tune_kernel(kernel_name, kernel_source, problem_size, arguments, tune_params, **kw)
        mark(call_end=time.time())
        space = None
        try:  # after the call's end (not counted): the size of Kernel Tuner's search space for this call
            from kernel_tuner.searchspace import Searchspace

            space = Searchspace(
                dict(tune_params),
                kw.get("restrictions"),
                MAX_THREADS,
                **({"block_size_names": kw["block_size_names"]} if kw.get("block_size_names") else {}),
            ).size
        except Exception as exc:  # noqa: BLE001 - reported, not fatal
            meta["space_error"] = repr(exc)
        keys = list(tune_params)

        def ok(r: dict[str, Any]) -> bool:  # a failure: `__error__` (Kernel Tuner >= 1.4), or a marker as its time
            return "__error__" not in r and isinstance(r.get("time"), (int, float))

        out = [
            {
                "params": {k: r[k] for k in keys},
                "time": float(r["time"]) if ok(r) else None,
                "error": None if ok(r) else str(r.get("__error__", r.get("time"))),
                "timestamp": r.get("timestamp"),
                "compile_ms": r.get("compile_time") if isinstance(r.get("compile_time"), (int, float)) else None,
            }
            for r in results
        ]
        (work / "child.json").write_text(
            json.dumps(
                {
                    **meta,
                    "space_size": space,
                    "keys": keys,
                    "results": out,
                    "env": {k: v for k, v in env.items() if isinstance(v, (str, int, float, dict, list, type(None)))},
                },
                default=str,
            )
        )
        raise FirstCallDone

    kernel_tuner.tune_kernel = replaced
    if side == "dry":  # a script's run_kernel (a reference computed on the GPU) returns its arguments unchanged
        kernel_tuner.run_kernel = lambda name, source, size, arguments, *a, **k: [
            x.copy() if hasattr(x, "copy") else x for x in arguments
        ]
    for f in (case.script, *case.files):
        shutil.copy(CASES_DIR / f, work / f)
    os.chdir(work)
    spec = importlib.util.spec_from_file_location(f"kt_case_{case.name}", work / case.script)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    meta["script_loaded"] = time.time()
    try:
        getattr(module, case.entry)()
    except FirstCallDone:
        return
    raise SystemExit(f"{case.script}: {case.entry}() returned without calling tune_kernel")


def switched_kernel_tuner() -> Any:
    """The script's `kernel_tuner` after the one-import switch (`import autotune.kernel_tuner as kernel_tuner`,
    imported where the script imports it, so its GPU backend starts while the script prepares its data:
    `autotune.interop.kt_prewarm`), for a script that also uses Kernel Tuner's other names (`run_kernel` for a
    reference: autotune.kernel_tuner's, which imports Kernel Tuner's at its first call; `kernel_tuner.util`): those
    still come from Kernel Tuner, imported only when the script uses them (its own cost then, on both sides). Installed as sys.modules["kernel_tuner"]; the child replaces tune_kernel."""
    import importlib
    import importlib.util
    import types

    import autotune.kernel_tuner  # noqa: F401 - the switch (and its pre-started backend)

    real = importlib.util.find_spec("kernel_tuner")
    module = types.ModuleType("kernel_tuner", "autotune.kernel_tuner, with Kernel Tuner's other names on demand")
    if real is not None and real.submodule_search_locations:
        module.__path__ = list(real.submodule_search_locations)  # `from kernel_tuner.util import ...` still works

    module.run_kernel = autotune.kernel_tuner.run_kernel  # type: ignore[attr-defined]  # Kernel Tuner's, at a call

    def __getattr__(name: str) -> Any:
        if name.startswith("__") or real is None:
            raise AttributeError(name)
        interface = importlib.import_module("kernel_tuner.interface")
        if hasattr(interface, name):
            return getattr(interface, name)
        return getattr(importlib.import_module("kernel_tuner.integration"), name)

    module.__getattr__ = __getattr__  # type: ignore[attr-defined]
    sys.modules["kernel_tuner"] = module
    return module


def dry_sizes(
    kernel_name: str,
    kernel_source: Any,
    problem_size: Any,
    arguments: Any,
    tune_params: Any,
    kw: dict[str, Any],
    work: Path,
) -> None:
    """Both tools' search spaces for this call, without a GPU: Kernel Tuner's Searchspace and the number of
    configurations our sweep plans (the facade runs up to the sweep's plan, on the default GPU profile)."""
    from kernel_tuner.searchspace import Searchspace

    from autotune.sweep import runner
    from autotune.sweep.plan import plan_sweep

    class Planned(BaseException):
        pass

    counted: dict[str, Any] = {}

    def plan_only(cfg: Any, store: Any, backend: Any, reporter: Any, limits: Any = runner.get_device) -> Any:
        plans = plan_sweep(cfg, limits)
        counted["ours"] = sum(plan.pairs for plan in plans)
        raise Planned

    import autotune.interop.kt_sweep as attempt
    import autotune.interop.tune_kernel as facade

    saved_run, saved_backend = runner.run_sweep, attempt._gpu_backend
    runner.run_sweep = plan_only  # type: ignore[assignment]

    class NoBackend:
        tol = None

        def ready(self, hint: str = "") -> None:
            pass

        def close(self) -> None:
            pass

    attempt._gpu_backend = lambda device, tol: NoBackend()  # type: ignore[assignment]
    t0 = time.perf_counter()
    try:
        facade.tune_kernel(
            kernel_name,
            kernel_source,
            problem_size,
            arguments,
            tune_params,
            **{k: v for k, v in kw.items() if k != "lang" or v is not None},
        )
    except Planned:
        pass
    finally:
        runner.run_sweep, attempt._gpu_backend = saved_run, saved_backend
    counted["ours_plan_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    counted["kt"] = Searchspace(dict(tune_params), kw.get("restrictions"), MAX_THREADS).size
    counted["kt_space_s"] = time.perf_counter() - t0
    counted["kernel_name"] = kernel_name
    (work / "dry.json").write_text(json.dumps(counted))


# ------------------------------------------------------------------------------------------------ parent
@dataclass
class Run:
    """One (case, side) run as the parent saw it."""

    case: str
    side: str
    returncode: int | None = None
    stopped_at_cap: bool = False
    process_wall_s: float | None = None  # spawn -> the call's return (or its stop)
    call_wall_s: float | None = None
    configs: int = 0  # measured, failures included
    ok: int = 0
    configs_per_s: float | None = None  # over process wall
    configs_per_s_call: float | None = None  # over the call's wall
    first_measurement_process_s: float | None = None
    first_measurement_call_s: float | None = None
    best_time_ms: float | None = None
    best_config: dict[str, Any] | None = None
    space_size: int | None = None
    planned: int | None = None
    sweep_first_measurement_s: float | None = None  # ours: the sweep's own figure (from run_sweep's start)
    # seconds after the spawn: the child's start, Kernel Tuner's (or our switched) import, the script loaded, the
    # call, ours: the call's phases (`tune_kernel`'s env["autotune"]["phases"]) and the GPU backend's start-up
    # (`GpuBackend.timeline`, from the import where it was pre-started), the first measurement, the call's end
    timeline: dict[str, float] = field(default_factory=dict)
    # ours: what each compile process did (`CompilePool.profile`, seconds after the spawn): calls [sent, answered,
    # pid, outcome], starts [pid, spawned, ready]; scripts/kt_switch_bound.py splits the processes' time with it
    compile_profile: dict[str, list] = field(default_factory=dict)
    error: str | None = None
    results: list[dict[str, Any]] = field(default_factory=list)
    spawn_epoch: float | None = None  # when the parent started the child (epoch seconds)


def read_compile_profile(path: Path, offset: float) -> dict[str, list]:
    """The compile pools' profiles `GpuBackend` appended to `path` (one JSON line each, seconds after the backend's
    start), merged and moved by `offset` (the backend's start, in seconds after the spawn); empty without the file."""
    out: dict[str, list] = {"calls": [], "starts": []}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    for line in lines:
        try:
            pool = json.loads(line)
        except ValueError:
            continue
        out["calls"] += [[round(a + offset, 3), round(b + offset, 3), pid, what] for a, b, pid, what in pool["calls"]]
        out["starts"] += [
            [pid, round(a + offset, 3), None if b is None else round(b + offset, 3)] for pid, a, b in pool["starts"]
        ]
    return out


def _epoch(ts: Any) -> float | None:
    if not ts:
        return None
    try:
        d = datetime.fromisoformat(str(ts).replace("Z", "+00:00"))
    except ValueError:
        return None
    return (d if d.tzinfo else d.replace(tzinfo=timezone.utc)).timestamp()


def kt_cache_results(path: Path, keys: list[str] | None) -> tuple[list[str], list[dict[str, Any]]]:
    """Kernel Tuner's cache file (closed, or left open by the stop) as the child's result records."""
    sys.path.insert(0, str(ROOT))
    from autotune.interop.kerneltuner import read_cache

    cache = read_cache(path)
    out = []
    for r in cache.records:
        out.append(
            {
                "params": dict(r.params),
                "time": r.time_ms if r.status == "ok" else None,
                "error": None if r.status == "ok" else r.status,
                "timestamp": r.extra.get("timestamp"),
                "compile_ms": r.extra.get("compile_time"),
            }
        )
    return list(cache.tune_params_keys), out


def random_order(kw: dict[str, Any]) -> dict[str, Any]:
    """`--order random`: both tools' `random_sample` strategy with `fraction` 1.0, i.e. the whole space in a random
    order (Kernel Tuner: numpy's unseeded sample; ours: seed 0). A capped brute-force run measures each tool over
    the space's first configurations in enumeration order, which need not cost what the rest costs (the convolution's
    first tiles are its smallest: the cheapest to compile); a random order measures each over the whole space."""
    return {"strategy": "random_sample", "strategy_options": {**(kw.get("strategy_options") or {}), "fraction": 1.0}}


def run_side(python: str, case: Case, side: str, cap: float, base: Path, log_dir: Path, order: str = "script") -> Run:
    work = Path(tempfile.mkdtemp(prefix=f"{case.name}_{side}_", dir=base))
    sys.path.insert(0, str(ROOT))
    from autotune.sweep.compile.nvrtc import cold_cache_env

    env = dict(
        os.environ,
        **cold_cache_env(work / "caches"),  # ours, CuPy's and the CUDA driver's compute cache, all fresh
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        AUTOTUNE_COMPILE_PROFILE=str(work / "compile_profile.jsonl"),  # (ours: `GpuBackend` appends its pool's)
    )
    run = Run(case.name, side)
    log = open(log_dir / f"{case.name}_{side}.log", "w")
    t_spawn = time.time()
    proc = subprocess.Popen(
        [python, str(Path(__file__).resolve()), "--child", side, case.name, str(work), "--cap", str(cap)]
        + ["--order", order],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    limit = cap if side == "kt" else cap + KILL_GRACE_S
    stop_at = None
    while proc.poll() is None:
        time.sleep(0.2)
        if stop_at is None and (work / "call.json").is_file():
            try:
                stop_at = json.loads((work / "call.json").read_text())["call_start"] + limit
            except (ValueError, KeyError):
                pass
        if stop_at is not None and time.time() > stop_at and not (work / "child.json").is_file():
            os.killpg(proc.pid, signal.SIGKILL)  # the process and the compile processes it started
            proc.wait()
            run.stopped_at_cap = True
            break
    t_end = time.time()
    run.returncode = proc.returncode
    log.close()
    meta = json.loads((work / "call.json").read_text()) if (work / "call.json").is_file() else {}
    data = json.loads((work / "child.json").read_text()) if (work / "child.json").is_file() else None
    if data is not None:
        results, run.space_size = data["results"], data.get("space_size")
        auto = (data.get("env") or {}).get("autotune") or {}
        run.planned, run.sweep_first_measurement_s = auto.get("planned"), auto.get("first_measurement_s")
    elif side == "kt" and (work / "kt_cache.json").is_file():
        _, results = kt_cache_results(work / "kt_cache.json", None)
    else:
        results = []
        run.error = f"no results (exit code {proc.returncode}; see {case.name}_{side}.log)"
    run.timeline = {
        k: round(meta[k] - t_spawn, 3)
        for k in ("child_start", "kernel_tuner_imported", "script_loaded", "call_start", "call_end")
        if k in meta
    }
    if data is not None and "call_start" in meta:
        auto = (data.get("env") or {}).get("autotune") or {}
        call = meta["call_start"] - t_spawn
        run.timeline.update({f"call.{k}": round(call + v, 3) for k, v in (auto.get("phases") or {}).items()})
        backend0 = call - (auto.get("prewarmed_s") or 0.0)
        run.timeline.update({f"backend.{k}": round(backend0 + v, 3) for k, v in (auto.get("startup") or {}).items()})
        run.compile_profile = read_compile_profile(work / "compile_profile.jsonl", backend0)
    if "call_start" in meta:
        end = meta.get("call_end", t_end)
        run.process_wall_s, run.call_wall_s = end - t_spawn, end - meta["call_start"]
    run.results = results
    run.spawn_epoch = t_spawn
    run.configs = len(results)
    run.ok = sum(1 for r in results if r["time"] is not None)
    if run.configs and run.process_wall_s:
        run.configs_per_s = run.configs / run.process_wall_s
        run.configs_per_s_call = run.configs / run.call_wall_s if run.call_wall_s else None
    stamps = [e for e in (_epoch(r.get("timestamp")) for r in results) if e is not None]
    if stamps:
        run.first_measurement_process_s = min(stamps) - t_spawn
        run.timeline["first_measurement"] = round(min(stamps) - t_spawn, 3)
        if "call_start" in meta:
            run.first_measurement_call_s = min(stamps) - meta["call_start"]
    ok = [r for r in results if r["time"] is not None]
    if ok:
        best = min(ok, key=lambda r: r["time"])
        run.best_time_ms, run.best_config = float(best["time"]), best["params"]
    shutil.rmtree(work / "caches", ignore_errors=True)
    return run


def _key(params: dict[str, Any]) -> tuple:
    return tuple(sorted((k, float(v) if isinstance(v, (int, float)) else str(v)) for k, v in params.items()))


def done_by(run: Run, keys: set[tuple]) -> float | None:
    """Seconds from `run`'s spawn until it had measured every configuration in `keys` (failures included), or None
    where it did not measure them all."""
    stamps: dict[tuple, float] = {}
    for r in run.results:
        k, e = _key(r["params"]), _epoch(r.get("timestamp"))
        if k in keys and e is not None:
            stamps[k] = e
    if not keys or len(stamps) < len(keys) or run.spawn_epoch is None:
        return None
    return max(stamps.values()) - run.spawn_epoch


def compare(case: str, kt: Run, ours: Run) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The case's summary row and the configurations both sides measured."""
    kt_t = {_key(r["params"]): r for r in kt.results if r["time"] is not None}
    same = []
    for r in ours.results:
        k = kt_t.get(_key(r["params"]))
        if r["time"] is not None and k is not None:
            same.append(
                {
                    "case": case,
                    **{f"p_{n}": v for n, v in r["params"].items()},
                    "ours_ms": r["time"],
                    "kt_ms": k["time"],
                    "ratio": r["time"] / k["time"],
                }
            )
    space = ours.space_size or kt.space_size
    ratio = ours.configs_per_s / kt.configs_per_s if ours.configs_per_s and kt.configs_per_s else None
    target = 10.0 if space and space > 500 else 3.0
    best_ratio = ours.best_time_ms / kt.best_time_ms if ours.best_time_ms and kt.best_time_ms else None
    kt_of_ours = kt_t.get(_key(ours.best_config)) if ours.best_config else None
    # the same work on both sides: the configurations Kernel Tuner measured before the cap (process wall to the
    # last of them), so a side that got further into a space whose later configurations cost more (a convolution's
    # larger tiles compile for seconds) is not compared on dearer configurations than the other's
    kt_set = {_key(r["params"]) for r in kt.results}
    kt_set_kt_s, kt_set_ours_s = done_by(kt, kt_set), done_by(ours, kt_set)
    row = {
        "case": case,
        "space": space,
        "planned_ours": ours.planned,
        "kt_configs": kt.configs,
        "ours_configs": ours.configs,
        "kt_ok": kt.ok,
        "ours_ok": ours.ok,
        "kt_complete": bool(space) and kt.configs >= space,
        "ours_complete": bool(space) and ours.configs >= space,
        "kt_process_s": kt.process_wall_s,
        "ours_process_s": ours.process_wall_s,
        "kt_call_s": kt.call_wall_s,
        "ours_call_s": ours.call_wall_s,
        "kt_cps": kt.configs_per_s,
        "ours_cps": ours.configs_per_s,
        "ratio": ratio,
        "target": target,
        "ratio_ok": ratio is not None and ratio >= target,
        "kt_cps_call": kt.configs_per_s_call,
        "ours_cps_call": ours.configs_per_s_call,
        "kt_ttfm_s": kt.first_measurement_process_s,
        "ours_ttfm_s": ours.first_measurement_process_s,
        "kt_ttfm_call_s": kt.first_measurement_call_s,
        "ours_ttfm_call_s": ours.first_measurement_call_s,
        "ours_sweep_ttfm_s": ours.sweep_first_measurement_s,
        "kt_best_ms": kt.best_time_ms,
        "ours_best_ms": ours.best_time_ms,
        "best_ratio": best_ratio,
        "best_ok": best_ratio is not None and best_ratio <= BEST_NOISE,
        "kt_best": json.dumps(kt.best_config),
        "ours_best": json.dumps(ours.best_config),
        "kt_time_of_ours_best_ms": kt_of_ours["time"] if kt_of_ours else None,
        "same_configs": len(same),
        "same_median_ratio": statistics.median(s["ratio"] for s in same) if same else None,
        "kt_set_kt_s": kt_set_kt_s,
        "kt_set_ours_s": kt_set_ours_s,
        "ratio_same_work": kt_set_kt_s / kt_set_ours_s if kt_set_kt_s and kt_set_ours_s else None,
        "kt_stopped": kt.stopped_at_cap,
        "ours_stopped": ours.stopped_at_cap,
        "errors": "; ".join(e for e in (kt.error, ours.error) if e),
    }
    return row, same


def screening(full: Run, screened: Run) -> dict[str, Any]:
    """Whether a screening build (AUTOTUNE_COMPILE_SCREEN) keeps the winner: its best against the full build's, the
    full build's time of the screened best (what a two-stage compile would pick: the loss if it differs) and the
    rank the full build's best gets among the screened times."""
    ranked = sorted((r for r in screened.results if r["time"] is not None), key=lambda r: r["time"])
    keys = [_key(r["params"]) for r in ranked]
    full_t = {_key(r["params"]): r["time"] for r in full.results if r["time"] is not None}
    best_key = _key(full.best_config) if full.best_config else None
    picked = full_t.get(keys[0]) if keys else None
    return {
        "screen_configs": screened.configs,
        "screen_cps": screened.configs_per_s,
        "screen_compile_s_median": statistics.median(
            c / 1e3 for c in (r.get("compile_ms") for r in screened.results) if c
        )
        if any(r.get("compile_ms") for r in screened.results)
        else None,
        "full_compile_s_median": statistics.median(c / 1e3 for c in (r.get("compile_ms") for r in full.results) if c)
        if any(r.get("compile_ms") for r in full.results)
        else None,
        "screen_best": json.dumps(screened.best_config),
        "screen_same_best": bool(keys) and keys[0] == best_key,
        "full_time_of_screen_best_ms": picked,
        "two_stage_loss": picked / full.best_time_ms - 1 if picked and full.best_time_ms else None,
        "full_best_rank_in_screen": keys.index(best_key) + 1 if best_key in keys else None,
        # a fast build that fails where the full one compiles would make the precheck wrong: must be 0
        "screen_compile_fail_full_ok": len(
            {_key(r["params"]) for r in screened.results if r["time"] is None and "Compil" in str(r["error"])}
            & set(full_t)
        ),
        "full_compile_fail": sum(1 for r in full.results if r["time"] is None and "Compil" in str(r["error"])),
    }


def table(rows: list[dict[str, Any]]) -> str:
    def f(v: Any, d: int = 2) -> str:
        return "-" if v is None else f"{v:.{d}f}" if isinstance(v, float) else str(v)

    head = (
        f"{'case':<12}{'space':>7}{'kt n':>6}{'ours n':>7}{'kt c/s':>8}{'ours c/s':>9}{'ratio':>7}{'need':>5}"
        f"{'kt 1st':>7}{'our 1st':>8}{'kt best':>9}{'our best':>9}{'same':>6}{'o/k':>6}{'same-work':>10}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['case']:<12}{f(r['space']):>7}{r['kt_configs']:>6}{r['ours_configs']:>7}"
            f"{f(r['kt_cps']):>8}{f(r['ours_cps']):>9}{f(r['ratio'], 1):>7}{f(r['target'], 0):>5}"
            f"{f(r['kt_ttfm_s'], 1):>7}{f(r['ours_ttfm_s'], 1):>8}{f(r['kt_best_ms'], 4):>9}"
            f"{f(r['ours_best_ms'], 4):>9}{r['same_configs']:>6}{f(r['same_median_ratio']):>6}"
            f"{f(r.get('ratio_same_work'), 1):>10}"
        )
    ok = all(r["ratio_ok"] and r["best_ok"] for r in rows)
    lines.append(
        "c/s: configurations per second of process wall; 1st: seconds from the process start to the first "
        "measurement; best in ms; o/k: median of ours/Kernel Tuner's time over the configurations both "
        "measured; same-work: Kernel Tuner's process seconds to its last measured configuration over ours to the "
        "same configurations (a second figure; ratio stays the issue's metric). "
        f"Targets (ratio >= need, best within 2%) met on every case: {'yes' if ok else 'NO'}."
        if rows
        else "no cases"
    )
    return "\n".join(lines)


def provenance(python: str) -> dict[str, Any]:
    def cmd(args: list[str]) -> str | None:
        try:
            return subprocess.run(args, capture_output=True, text=True, timeout=60).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            return None

    probe = (
        "import json, kernel_tuner, numpy\nout = {'kernel_tuner': kernel_tuner.__version__ if hasattr("
        "kernel_tuner, '__version__') else None, 'numpy': numpy.__version__}\ntry:\n import cupy\n"
        " out['cupy'] = cupy.__version__\n out['gpu'] = cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()\n"
        "except Exception as e:\n out['gpu'] = repr(e)\nprint(json.dumps(out))"
    )
    versions = cmd([python, "-c", probe])
    return {
        "command": " ".join(sys.argv),
        "git_commit": os.environ.get("AUTOTUNE_GIT_COMMIT") or cmd(["git", "-C", str(ROOT), "rev-parse", "HEAD"]),
        "python": platform.python_version(),
        "host_cpus": os.cpu_count(),
        "date_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "versions": json.loads(versions) if versions else None,
        "nvidia_smi": cmd(
            ["nvidia-smi", "--query-gpu=name,uuid,driver_version,clocks.max.sm", "--format=csv,noheader"]
        ),
        "autotune_env": settings(os.environ),  # the switches the runs inherit (AUTOTUNE_COMPILE_TWINS, ...)
    }


def settings(env: Mapping[str, str]) -> dict[str, str]:
    """The AUTOTUNE_* variables set for the runs, besides the commit (which `git_commit` records)."""
    return {k: env[k] for k in sorted(env) if k.startswith("AUTOTUNE_") and k != "AUTOTUNE_GIT_COMMIT"}


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        path.write_text("")
        return
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        w.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("kt_switch_out"), help="folder for the CSV, JSON and logs")
    ap.add_argument(
        "--cases",
        default=",".join(DEFAULT_CASES),
        help=f"comma-separated, from {', '.join(CASES)} (default: %(default)s)",
    )
    ap.add_argument(
        "--cap", type=float, default=40.0, help="seconds a tune_kernel call may run on each side (default %(default)s)"
    )
    ap.add_argument(
        "--python",
        default=sys.executable,
        help="the Python both sides run under (needs kernel_tuner 1.5, CuPy and autotune's dependencies)",
    )
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: build both tools' search spaces for each case and check their sizes agree",
    )
    ap.add_argument(
        "--compile-modes",
        action="store_true",
        help="also run ours with AUTOTUNE_COMPILE_SCREEN=1 and report whether the best configuration changes",
    )
    ap.add_argument(
        "--sides",
        default="kt,ours",
        help="which tools run: kt,ours (default) or ours alone (with "
        "--compile-modes: the screening measurement without Kernel Tuner)",
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="print each run's timeline (seconds after its process "
        "started: imports, the script's set-up, the call's phases, the GPU backend's start-up, the first "
        "measurement); it is in kt_switch.json (runs -> timeline) either way",
    )
    ap.add_argument(
        "--order",
        choices=("script", "random"),
        default="script",
        help="script (default): each script's call as written (brute force, in enumeration order); random: both "
        "sides with strategy='random_sample', fraction 1.0 (the whole space in a random order; see random_order)",
    )
    ap.add_argument("--child", nargs=3, metavar=("SIDE", "CASE", "WORK"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        side, name, work = a.child
        child(side, CASES[name], Path(work), a.cap, a.order)
        return 0
    names = [n.strip() for n in a.cases.split(",") if n.strip()]
    sides = {x.strip() for x in a.sides.split(",") if x.strip()}
    if not sides or sides - set(SIDES) or "ours" not in sides:
        ap.error(f"--sides {a.sides!r}: give kt,ours or ours")
    unknown = [n for n in names if n not in CASES]
    if unknown:
        ap.error(f"--cases: unknown {unknown}; choose from {', '.join(CASES)}")
    a.out.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="kt_switch_"))
    if a.dry_run:
        return dry_run(a.python, names, base, a.out)
    report: dict[str, Any] = {
        "provenance": provenance(a.python),
        "cap_s": a.cap,
        "order": a.order,
        "cases": {},
        "rows": [],
    }
    rows, same_all = [], []
    for i, name in enumerate(names):
        case = CASES[name]
        order = [x for x in (SIDES if i % 2 == 0 else SIDES[::-1]) if x in sides]
        runs = {side: Run(name, side, error="not run (--sides)") for side in SIDES}
        for side in order:
            print(f"[{time.strftime('%H:%M:%S')}] {name}: {side} ...", flush=True)
            runs[side] = run_side(a.python, case, side, a.cap, base, a.out, a.order)
            r = runs[side]
            print(
                f"    {r.configs} configs ({r.ok} ok) in {r.process_wall_s or 0:.1f} s process wall"
                f"{' (stopped at the cap)' if r.stopped_at_cap else ''}{'; ' + r.error if r.error else ''}",
                flush=True,
            )
            if a.profile:
                print(
                    "    timeline: "
                    + ", ".join(f"{k} {v:.2f}" for k, v in sorted(r.timeline.items(), key=lambda kv: kv[1])),
                    flush=True,
                )
        row, same = compare(name, runs["kt"], runs["ours"])
        row["order"] = a.order
        if a.compile_modes:
            os.environ["AUTOTUNE_COMPILE_SCREEN"] = "1"
            try:
                screened = run_side(a.python, case, "ours", a.cap, base, a.out, a.order)
            finally:
                os.environ.pop("AUTOTUNE_COMPILE_SCREEN", None)
            row.update(screening(runs["ours"], screened))
            report.setdefault("screened", {})[name] = {k: v for k, v in asdict(screened).items()}
        rows.append(row)
        same_all.extend(same)
        report["cases"][name] = {
            "note": case.note,
            "script": case.script,
            "runs": {s: {k: v for k, v in asdict(r).items() if k != "results"} for s, r in runs.items()},
            "results": {s: r.results for s, r in runs.items()},
        }
        report["rows"] = rows
        (a.out / "kt_switch.json").write_text(json.dumps(report, indent=1, default=str))
        write_csv(a.out / "kt_switch.csv", rows)
        write_csv(a.out / "kt_switch_same.csv", same_all)
    shutil.rmtree(base, ignore_errors=True)
    print(table(rows))
    return 0


def dry_run(python: str, names: list[str], base: Path, out: Path) -> int:
    bad = 0
    for name in names:
        work = Path(tempfile.mkdtemp(prefix=f"{name}_dry_", dir=base))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        t0 = time.perf_counter()
        proc = subprocess.run(
            [python, str(Path(__file__).resolve()), "--child", "dry", name, str(work)],
            capture_output=True,
            text=True,
            env=env,
        )
        (out / f"{name}_dry.log").write_text(proc.stdout + proc.stderr)
        if not (work / "dry.json").is_file():
            print(f"{name:<12} FAILED (exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()[-600:]}")
            bad += 1
            continue
        d = json.loads((work / "dry.json").read_text())
        same = d["kt"] == d["ours"]
        bad += not same
        print(
            f"{name:<12} {d['kernel_name']:<24} Kernel Tuner {d['kt']:>6}  ours {d['ours']:>6}  "
            f"{'same' if same else 'DIFFERENT'}  (plan {d['ours_plan_s']:.1f} s, KT space {d['kt_space_s']:.1f} s; "
            f"script {time.perf_counter() - t0:.1f} s)"
        )
    shutil.rmtree(base, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
