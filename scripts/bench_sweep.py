#!/usr/bin/env python3
"""Benchmark: sweep throughput against Kernel Tuner 1.5 on the same GPU (targets: TARGET_RATIO and TARGET_MINUTES below).

One run, one GPU, one space (a name under spaces/ or any space YAML; --kernel swaps in another kernel file),
one test point (default fp32 NN 32x32x32, batch 20,000, alpha 1, beta 0):
  1. SELECT: N instances (default 200) of the space valid for the test point (its hard and soft constraints,
     this GPU's limits), drawn by the sweep's own seeded `random` strategy, so both tools see that exact set.
  2. OURS: `run_sweep` on a config built in code (strategy random, max_instances N, the same seed) into a fresh
     temporary SQLite file, with a fresh compile cache and CUPY_CACHE_DIR and early stop off
     (`GpuBackend(LocalOptions(tol=None))`). Wall clock from the call to the last result (worker start, device
     description, cuBLAS point, compiles, verification and timing included).
  3. KERNEL TUNER: `tune_kernel` (lang="cupy", brute force) in a child process on the same kernel file:
     tune_params = the values the sample uses; restrictions = membership of each prefix of the parameter tuple in
     the sample (its search space is then exactly the N instances: checked); kernel_name = the template's name
     expression with parameter names, which Kernel Tuner substitutes (checked against ours for every config);
     grid and dynamic shared memory from the space's launch geometry (callables); the same problem as host arrays
     (C poisoned with NaN when beta == 0); the same verification rule (per matrix ||C - ref||_F / ||ref||_F under
     autotune.problems.gemm.verify's tolerance, any non-finite element is wrong) through `verify=` with the reference as
     `answer=`; `iterations=` = our repetitions; a fresh CUPY_CACHE_DIR. Wall clock of the tune_kernel calls
     (problem data and reference are built before the clock starts). A config that aborts Kernel Tuner (wrong
     result, compile error) is recorded and Kernel Tuner is started again on the configs it had not reached.
  4. PROJECTION: a sweep of ours shaped like a seed-scale one (M instances x 15 square test points 2..30, batch
     >= 100 MB, early stop on as in a real sweep), measured; 5,000 x 15 pairs projected from its throughput.
  5. JSON to $OUT/sweep_throughput.json (rewritten after every phase; also --out), our runs' per-measurement
     logs to $OUT/ours_runs.json, Kernel Tuner's per-config results to $OUT/kernel_tuner.json; a table last.
  --variant CB[:ASK] adds runs of ours with GpuBackend(LocalOptions(compile_batch_size=CB)) and the runner's
  ASK_BATCH = ASK ('all': the whole sample at once), reported apart (ours_variants), never as the headline figure.

Run on the GPU machine:  python scripts/bench_sweep.py --out results/bench/sweep_throughput.json
Locally (no GPU): --dry-run selects the instances and checks the Kernel Tuner translation (needs kernel_tuner).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence


from autotune.problems.gemm import gemm_point
from autotune import __version__, paths
from autotune.sweep.compile.nvrtc import COMPILE_CACHE_ENV, cold_cache_env
from autotune.sweep.config import SweepConfig, parse_config
from autotune.space.instance import Instance
from autotune.vocab import Measurement, Status, TestPoint
from autotune.space.spec import Space, load_space
from autotune.sweep.strategies import make_strategy
from autotune.devices import no_gpu_reason

ROOT = Path(__file__).resolve().parent.parent

SEED_SCALE = (5000, 15)  # instances x test points of a seed-scale sweep (the size the targets are stated for)
TARGET_RATIO, TARGET_MINUTES = 10.0, 30.0
PROJ_SIZES = (2, 30, 2)  # square sizes start, stop, step: 15 test points
CPP_SYMBOLS = ("T", "S", "TRANS_A", "TRANS_B")
CPP_TYPES = {"fp64": ("double", "double"), "fp32": ("float", "float"), "fp16": ("__half", "float")}


# ------------------------------------------------------------------------------------------------ pure
def parse_point(text: str) -> TestPoint:
    """'fp32:NN:32x32x32:20000' -> TestPoint."""
    try:
        prec, shape, mnk, batch = text.split(":")
        m, n, k = (int(x) for x in mnk.lower().split("x"))
        return gemm_point(prec, shape.upper(), m, n, k, int(batch))
    except ValueError as exc:
        raise SystemExit(
            f"--point {text!r}: write PRECISION:SHAPE:MxNxK:BATCH, e.g. fp32:NN:32x32x32:20000 ({exc})"
        ) from None


def sweep_yaml(
    space_path: Path, points: str, database: str, reps: int, n: int, seed: int, alpha: float = 1.0, beta: float = 0.0
) -> str:
    """The sweep config of our side, as YAML text (`points` is the YAML of one points entry)."""
    return "\n".join(
        [
            "name: bench_sweep",
            f"spaces: [{json.dumps(str(space_path))}]",
            "points:",
            points,
            f"alpha: {alpha!r}",
            f"beta: {beta!r}",
            f"database: {json.dumps(database)}",
            f"repetitions: {reps}",
            "strategy: random",
            f"max_instances: {n}",
            f"seed: {seed}",
            "",
        ]
    )


def point_yaml(p: TestPoint) -> str:
    return (
        f"  - precisions: [{p.precision}]\n    shapes: [{p.shape}]\n"
        f"    sizes: {{triples: [[{p.m}, {p.n}, {p.k}]]}}\n    batch: {p.batch}"
    )


def projection_points_yaml(precision: str, shape: str) -> str:
    a, b, s = PROJ_SIZES
    return (
        f"  - precisions: [{precision}]\n    shapes: [{shape}]\n"
        f"    sizes: {{square: {{start: {a}, stop: {b}, step: {s}}}}}\n    batch: {{bytes: 100MB}}"
    )


def select_instances(cfg: SweepConfig, candidates: Sequence[Instance]) -> list[Instance]:
    """The instances `run_sweep` measures on a fresh database: its strategy over the planned instances."""
    strategy = make_strategy(cfg.strategy, list(candidates), cfg.max_instances, cfg.seed)
    return strategy.ask(len(candidates))


@dataclass(frozen=True)
class KTSetup:
    """The selected instances as Kernel Tuner takes them. Keys are tuples of tune_params values (in order)."""

    kernel_name: str  # name expression with parameter names (Kernel Tuner substitutes their values)
    tune_params: dict[str, list[Any]]
    restrictions: list[str]
    block_size_names: list[str]
    names: dict[tuple, str]  # our NVRTC name expression of each config
    grid: dict[tuple, tuple[int, int, int]]
    block: dict[tuple, tuple[int, int, int]]
    shared_bytes: dict[tuple, int]
    ids: dict[tuple, str]  # our instance id of each config


def kt_setup(space: Space, point: TestPoint, instances: Sequence[Instance]) -> KTSetup:
    """Translate (space, point, instances) to Kernel Tuner: any template argument or block dimension that is
    not a plain parameter becomes an extra tune parameter whose value is fixed by the membership restrictions."""
    kb = space.kernel
    assert kb is not None
    params = list(space.param_names)
    t, s = CPP_TYPES[point.precision]
    symbols = {"T": t, "S": s, "TRANS_A": str(int(point.shape[0] == "T")), "TRANS_B": str(int(point.shape[1] == "T"))}
    extra = [a for a in kb.template_args if a not in symbols and a not in params]
    block_names = []
    for axis, loc in zip("xyz", kb.block, strict=True):
        text = loc.expr.text.strip()
        block_names.append(text if text in params else f"kt_block_{axis}")
    extra += [b for b in block_names if b not in params and b not in extra]
    names = params + extra
    tokens = [symbols.get(a, a) for a in kb.template_args]
    kernel_name = f"{kb.template}<{', '.join(tokens)}>"
    rows, out_names, grid, block, smem, ids = [], {}, {}, {}, {}, {}
    for inst in instances:
        p = inst.param_dict
        env = space.values(p, point.precision)
        g = space.geometry(p, point)
        vals = dict(p)
        for e in extra:
            vals[e] = g.block["xyz".index(e[-1])] if e.startswith("kt_block_") else int(env[e])
        key = tuple(vals[n] for n in names)
        rows.append(key)
        out_names[key] = space.template_name(p, point.precision, point.shape)
        grid[key], block[key], smem[key], ids[key] = tuple(g.grid), tuple(g.block), int(g.shared_bytes), inst.id
    if len(set(rows)) != len(rows):
        raise ValueError("two selected instances map to the same Kernel Tuner configuration")
    tune_params, restrictions = membership(names, rows)
    return KTSetup(kernel_name, tune_params, restrictions, block_names, out_names, grid, block, smem, ids)


def membership(names: Sequence[str], rows: Sequence[tuple]) -> tuple[dict[str, list[Any]], list[str]]:
    """tune_params and restrictions whose Kernel Tuner search space is exactly `rows`: every prefix of a
    configuration must be a prefix of one of the rows (cheap for its backtracking solver)."""
    tune_params = {n: sorted({r[i] for r in rows}, key=_order) for i, n in enumerate(names)}
    restrictions = [
        f"({', '.join(names[:k])}) in {sorted({r[:k] for r in rows}, key=_orders)!r}" for k in range(2, len(names) + 1)
    ]
    return tune_params, restrictions


def _order(v: Any) -> tuple:
    return (0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, str(v))


def _orders(row: tuple) -> tuple:
    return tuple(_order(v) for v in row)


def check_with_kernel_tuner(setup: KTSetup, max_threads: int = 1024) -> dict[str, Any]:
    """Kernel Tuner's own search space and name substitution for `setup` (needs kernel_tuner, no GPU)."""
    from kernel_tuner.searchspace import Searchspace
    from kernel_tuner.util import replace_param_occurrences

    t0 = time.perf_counter()
    ss = Searchspace(setup.tune_params, setup.restrictions, max_threads, block_size_names=setup.block_size_names)
    build_s = time.perf_counter() - t0
    order = list(setup.tune_params)
    wrong = [
        k
        for k, name in setup.names.items()
        if replace_param_occurrences(setup.kernel_name, dict(zip(order, k, strict=True))) != name
    ]
    return {
        "size": ss.size,
        "same_set": set(map(tuple, ss.list)) == set(setup.names),
        "build_s": build_s,
        "names_differ": len(wrong),
    }


def substitute(kernel_name: str, params: dict[str, Any]) -> str:
    """What Kernel Tuner 1.5 does to kernel_name (kernel_tuner.util.replace_param_occurrences)."""
    import re

    return "".join(str(params[part]) if part in params else part for part in re.split("([a-zA-Z0-9_]+)", kernel_name))


def rate(count: int, seconds: float | None) -> float | None:
    return count / seconds if count and seconds else None


def projection(
    measured_pairs: int, wall_s: float, first_s: float, last_s: float, target: tuple[int, int] = SEED_SCALE
) -> dict[str, Any]:
    """Seed-scale time from a measured sweep: wall rate (startup included: conservative) and
    startup + pairs / steady rate (first to last result)."""
    pairs = target[0] * target[1]
    wall_rate = measured_pairs / wall_s
    steady = (measured_pairs - 1) / (last_s - first_s) if measured_pairs > 1 and last_s > first_s else wall_rate
    conservative = pairs / wall_rate
    return {
        "seed_scale_instances": target[0],
        "seed_scale_points": target[1],
        "pairs": pairs,
        "measured_pairs": measured_pairs,
        "wall_s": wall_s,
        "pairs_per_s_wall": wall_rate,
        "pairs_per_s_steady": steady,
        "projected_min": conservative / 60,
        "projected_min_startup_plus_steady": (first_s + pairs / steady) / 60,
        "under_30_min": conservative / 60 < TARGET_MINUTES,
    }


REQUIRED = ("ours_configs_per_s", "kernel_tuner_configs_per_s", "gpu", "space", "problem")


def check_report(report: dict[str, Any]) -> list[str]:
    """Problems with a report (empty: it has every REQUIRED field, with consistent values)."""
    bad = [f"missing {k}" for k in REQUIRED if k not in report]
    for k in ("ours_configs_per_s", "kernel_tuner_configs_per_s"):
        v = report.get(k)
        if v is not None and not (isinstance(v, (int, float)) and v > 0):
            bad.append(f"{k} must be a positive number or null, got {v!r}")
    gpu = report.get("gpu", {})
    if not isinstance(gpu, dict) or not gpu.get("name") or not gpu.get("uuid"):
        bad.append("gpu needs name and uuid")
    ours, kt = report.get("ours_configs_per_s"), report.get("kernel_tuner_configs_per_s")
    if ours and kt and abs(report.get("ratio", 0) - ours / kt) > 1e-9 * ours / kt:
        bad.append("ratio is not ours / kernel_tuner")
    return bad


def table(report: dict[str, Any]) -> str:
    def f(v: Any, fmt: str = "{:.2f}") -> str:
        return "-" if v is None else fmt.format(v)

    o, k = report.get("ours", {}), report.get("kernel_tuner", {})
    ko = k.get("timings_s", {})
    lines = [
        f"{'tool':<14}{'configs':>8}{'ok':>6}{'wall s':>9}{'configs/s':>11}{'compile s':>11}{'verify s':>10}"
        f"{'bench s':>9}",
        f"{'autotune':<14}{o.get('configs', 0):>8}{o.get('ok', 0):>6}{f(o.get('wall_s')):>9}"
        f"{f(report.get('ours_configs_per_s')):>11}{f(o.get('compile_s_sum')):>11}{'(GPU)':>10}{'':>9}",
        f"{'kernel_tuner':<14}{k.get('configs') or 0:>8}{k.get('ok') or 0:>6}{f(k.get('wall_s')):>9}"
        f"{f(report.get('kernel_tuner_configs_per_s')):>11}{f(ko.get('compile')):>11}"
        f"{f(ko.get('verification')):>10}{f(ko.get('benchmark')):>9}",
    ]
    for v in report.get("ours_variants", []):
        lines.append(
            f"{'autotune*':<14}{v.get('configs', 0):>8}{v.get('ok', 0):>6}{f(v.get('wall_s')):>9}"
            f"{f(v.get('configs_per_s')):>11}{f(v.get('compile_s_sum')):>11}{'(GPU)':>10}{'':>9}"
            f"  * compile_batch_size={v.get('compile_batch_size')} ask={v.get('ask_batch')}: "
            f"{f(v.get('ratio_to_kernel_tuner'))}x"
        )
    lines.append(
        f"ratio {f(report.get('ratio'))}x (target >= {TARGET_RATIO:.0f}x) on {report['gpu'].get('name')}, "
        f"{report['space']['name']}, {report['problem']['key']}, {report['repetitions']} reps"
    )
    pj = report.get("projection")
    if pj:
        lines.append(
            f"seed-scale {pj['seed_scale_instances']:,} x {pj['seed_scale_points']} pairs: "
            f"{pj['projected_min']:.1f} min at {pj['pairs_per_s_wall']:.1f} pairs/s wall "
            f"({pj['projected_min_startup_plus_steady']:.1f} min at {pj['pairs_per_s_steady']:.1f}/s steady); "
            f"target < {TARGET_MINUTES:.0f} min"
        )
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ our sweep
@dataclass
class Clock:
    """Reporter that timestamps every measurement."""

    times: list[float] = field(default_factory=list)
    results: list[Measurement] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def start(self, total_pairs: int, already_done: int) -> None:
        self.notes.append(f"{total_pairs} pairs, {already_done} already done")

    def measured(self, m: Measurement, best_ms: float | None) -> None:
        self.times.append(time.perf_counter())
        self.results.append(m)

    def note(self, text: str) -> None:
        self.notes.append(text)


def run_ours(cfg_text: str, workdir: Path, backend: Any, ask_batch: int | None = None) -> dict[str, Any]:
    """Our sweep of `cfg_text` through `backend` into a fresh database; closes the backend. `ask_batch`
    overrides autotune.sweep.runner.ASK_BATCH (instances asked of the strategy, hence handed to the backend, at once)."""
    import autotune.sweep.runner as runner
    from autotune.store.store import Store

    workdir.mkdir(parents=True, exist_ok=True)
    cfg = parse_config(cfg_text, file=workdir / "bench.yaml")
    clock = Clock()
    default_ask = runner.ASK_BATCH
    runner.ASK_BATCH = ask_batch or default_ask
    try:
        with Store.open(cfg.database) as store:
            t0 = time.perf_counter()
            summary = runner.run_sweep(cfg, store, backend, clock)
            t_end = time.perf_counter()
            frame = store.measurements()
        info = backend.device_info()
    finally:
        runner.ASK_BATCH = default_ask
        backend.close()
    statuses = Counter(Status(m.status).value for m in clock.results)
    last = clock.times[-1] if clock.times else t_end
    return {
        "wall_s": last - t0,
        "run_sweep_s": t_end - t0,
        "to_first_result_s": (clock.times[0] - t0) if clock.times else None,
        "first_to_last_s": (last - clock.times[0]) if clock.times else None,
        "configs": len(clock.results),
        "ok": statuses.get("ok", 0),
        "statuses": dict(statuses),
        "instance_ids": sorted(set(frame.instance_id)),
        "sweep_status": summary.status,
        "compile_s_sum": sum(m.compile_s or 0.0 for m in clock.results),
        "compile_workers": getattr(backend, "compile_workers", None),
        "worker_restarts": getattr(backend, "restarts", None),
        "early_stop": getattr(backend, "tol", None) is not None,
        "tol": getattr(backend, "tol", None),
        "notes": clock.notes[:20],
        "compile_batch_size": getattr(backend, "compile_batch_size", None),
        "ask_batch": ask_batch or default_ask,
        "runner_default_ask_batch": default_ask,
        "log": [
            {
                "t_s": t - t0,
                "id": m.instance_id,
                "point": m.point.key,
                "status": m.status.value,
                "compile_s": m.compile_s,
                "median_ms": m.median_ms,
            }
            for t, m in zip(clock.times, clock.results, strict=True)
        ],
        "errors": [
            f"{m.instance_id}: {m.status.value}: {m.error}"
            for m in clock.results
            if m.status not in (Status.OK, Status.SKIPPED)
        ][:20],
        "device": asdict(info),
    }


# ------------------------------------------------------------------------------------- Kernel Tuner side
def kt_problem(point: TestPoint, alpha: float, beta: float, seed: int) -> tuple[list[Any], int, Any]:
    """Host arguments of the `strided` convention, the index of C, and C's reference (C's dtype, flat)."""
    import cupy as cp
    import numpy as np

    from autotune.problems.gemm.data import DTYPES, SCALARS, layout

    lay, p = layout(point), point
    ea, eb, ec = lay.elements()
    rng = np.random.default_rng(seed)
    dt, sc = np.dtype(DTYPES[p.precision]), np.dtype(SCALARS[p.precision]).type
    a = (rng.random(ea, dtype=np.float32) * 2 - 1).astype(dt)
    b = (rng.random(eb, dtype=np.float32) * 2 - 1).astype(dt)
    c = np.full(ec, np.nan, dtype=dt) if beta == 0 else (rng.random(ec, dtype=np.float32) * 2 - 1).astype(dt)
    i32, i64 = np.int32, np.int64
    args = [
        i32(p.m),
        i32(p.n),
        i32(p.k),
        sc(alpha),
        a,
        i32(lay.lda),
        i64(lay.stride_a),
        b,
        i32(lay.ldb),
        i64(lay.stride_b),
        sc(beta),
        c,
        i32(lay.ldc),
        i64(lay.stride_c),
        i32(p.batch),
    ]

    def stored(flat: Any, rows: int, cols: int, ld: int) -> Any:  # (batch, rows, cols), column-major storage
        return cp.asarray(flat).astype(cp.float64).reshape(p.batch, cols, ld).transpose(0, 2, 1)[:, :rows, :]

    op_a = stored(a, lay.a_rows, lay.a_cols, lay.lda)
    op_b = stored(b, lay.b_rows, lay.b_cols, lay.ldb)
    op_a = op_a.transpose(0, 2, 1) if p.shape[0] == "T" else op_a
    op_b = op_b.transpose(0, 2, 1) if p.shape[1] == "T" else op_b
    ref = alpha * cp.matmul(op_a, op_b)
    if beta != 0:
        ref += beta * stored(c, p.m, p.n, lay.ldc)
    ref = cp.asnumpy(ref.transpose(0, 2, 1).reshape(p.batch, -1)).reshape(-1).astype(dt)  # C's layout (ldc == m)
    return args, 11, ref


def _pad_cupy_uuid() -> None:
    """Kernel Tuner 1.5's CuPy backend reads uuid.UUID(bytes=props["uuid"]); CuPy returns the 16 UUID bytes
    as a C string, cut at the first zero byte, so on a GPU whose UUID holds a 0x00 byte Kernel Tuner stops
    with "bytes is not a 16-char string" before its first config (seen on an H100). Pad the cut bytes with
    zeros: Kernel Tuner only records the UUID (kernel_tuner_uuid in the report is then wrong after the cut)."""
    import cupy

    runtime = cupy.cuda.runtime
    original = runtime.getDeviceProperties

    def padded(device: int) -> dict:
        props = dict(original(device))
        raw = props.get("uuid")
        if isinstance(raw, bytes) and len(raw) < 16:
            props["uuid"] = raw.ljust(16, b"\0")
        return props

    runtime.getDeviceProperties = padded


def point_spec(point: Any) -> dict[str, Any]:
    """The test point as `gemm_point`'s keywords, for the Kernel Tuner child (a JSON file between the two)."""
    return {"precision": point.precision, "shape": point.shape, **dict(point.sizes)}


def kt_child(spec_path: Path) -> None:
    """Runs in a child process: Kernel Tuner on the selected configs; writes spec['result']."""
    import numpy as np
    from kernel_tuner import __version__ as kt_version
    from kernel_tuner import tune_kernel
    from kernel_tuner.util import replace_param_occurrences

    from autotune.problems.gemm.verify import judge

    _pad_cupy_uuid()
    spec = json.loads(spec_path.read_text())
    space, point = load_space(spec["space_path"]), gemm_point(**spec["point"])
    if space.kernel.convention != "strided":
        raise SystemExit(f"the Kernel Tuner side handles the `strided` convention only, not {space.kernel.convention}")
    setup = kt_setup(space, point, [Instance.of(space.name, d) for d in spec["instances"]])
    order = list(setup.tune_params)
    for key, name in setup.names.items():
        got = replace_param_occurrences(setup.kernel_name, dict(zip(order, key, strict=True)))
        if got != name:
            raise SystemExit(f"Kernel Tuner would compile {got}, we compile {name}")
    args, ci, ref = kt_problem(point, spec["alpha"], spec["beta"], spec["seed"])
    answer = [None] * len(args)
    answer[ci] = ref
    progress = open(spec["progress"], "w")
    started: list[tuple] = []
    verdicts: dict[tuple, str] = {}  # config -> message of its verification

    def problem_size(params: dict) -> tuple[int, int, int]:
        key = tuple(params[n] for n in order)
        if not started or started[-1] != key:
            started.append(key)
            progress.write(f"{time.perf_counter():.6f} {setup.ids[key]}\n")
            progress.flush()
        return setup.grid[key]

    def verify(ans: list, result_host: list, atol: float | None = None) -> bool:
        got = result_host[ci].reshape(point.batch, -1).astype(np.float64)
        want = ans[ci].reshape(point.batch, -1).astype(np.float64)
        unwritten = int(got.size - np.isfinite(got).sum())
        rel = np.linalg.norm(got - want, axis=1) / np.maximum(np.linalg.norm(want, axis=1), np.finfo(np.float64).tiny)
        v = judge(float(np.nan_to_num(rel, nan=np.inf).max()), unwritten, point.precision, point.k)
        verdicts[started[-1]] = v.message
        return v.ok

    smem = (
        {"size": lambda p: setup.shared_bytes[tuple(p[n] for n in order)]} if any(setup.shared_bytes.values()) else None
    )
    include = sorted({str(paths.KERNELS_DIR), str(Path(spec["kernel_path"]).parent)})
    remaining = list(setup.names)
    out: dict[str, Any] = {"kernel_tuner": kt_version, "runs": [], "failed": [], "results": []}
    t0 = time.perf_counter()
    while remaining:
        tune_params, restrictions = membership(order, remaining)
        started.clear()
        t_run = time.perf_counter()
        try:
            results, env = tune_kernel(
                setup.kernel_name,
                spec["kernel_path"],
                problem_size,
                args,
                tune_params,
                grid_div_x=[],
                grid_div_y=[],
                grid_div_z=[],
                restrictions=restrictions,
                answer=answer,
                verify=verify,
                lang="cupy",
                compiler_options=["-std=c++17", *[f"--include-path={d}" for d in include]],
                defines={"kernel_tuner": 1},
                iterations=spec["reps"],
                block_size_names=setup.block_size_names,
                smem_args=smem,
                strategy="brute_force",
                quiet=True,
            )
            out["runs"].append({"seconds": time.perf_counter() - t_run, "configs": len(results)})
            out["results"] += [
                {
                    "id": setup.ids[tuple(r[n] for n in order)],
                    "time_ms": r.get("time"),
                    "error": repr(r["__error__"]) if "__error__" in r else None,
                    **{
                        t: r.get(t)
                        for t in (
                            "compile_time",
                            "verification_time",
                            "benchmark_time",
                            "framework_time",
                            "strategy_time",
                        )
                    },
                }
                for r in results
            ]
            out["env"] = {
                k: (v if isinstance(v, (int, float, str)) else str(v))
                for k, v in env.items()
                if k != "device_properties"
            }
            remaining = []
        except Exception as exc:  # noqa: BLE001 - Kernel Tuner stops on a wrong result or compile error
            seen = list(dict.fromkeys(started))
            out["runs"].append({"seconds": time.perf_counter() - t_run, "configs": len(seen), "aborted": True})
            if not seen:
                out["fatal"] = f"{type(exc).__name__}: {exc}"[:500]
                break
            failed = seen[-1]
            out["failed"].append(
                {
                    "id": setup.ids[failed],
                    "name": setup.names[failed],
                    "error": f"{type(exc).__name__}: {exc}"[:500],
                    "verdict": verdicts.get(failed),
                    "completed_before_abort": len(seen) - 1,
                }
            )
            remaining = [k for k in remaining if k not in set(seen)]
            if "CUDA" in type(exc).__name__ or "cuda" in type(exc).__module__:
                out["fatal"] = "CUDA context poisoned: Kernel Tuner cannot go on in this process"
                break
            out.setdefault("lost_results", 0)
            out["lost_results"] += len(seen) - 1  # processed, but tune_kernel returned nothing for them
    out["wall_s"] = time.perf_counter() - t0
    out["processed"] = len(out["results"]) + out.get("lost_results", 0) + len(out["failed"])
    out["remaining"] = len(remaining)
    Path(spec["result"]).write_text(json.dumps(out, indent=1, default=str))


def run_kt(spec: dict[str, Any], workdir: Path, timeout_s: float, log_dir: Path) -> dict[str, Any]:
    spec_path = workdir / "kt_spec.json"
    spec.update(result=str(workdir / "kt_result.json"), progress=str(log_dir / "kt_progress.txt"))
    spec_path.write_text(json.dumps(spec))
    env = {**os.environ, **cold_cache_env(workdir / "kt-caches")}
    t0 = time.perf_counter()
    with open(log_dir / "kernel_tuner.log", "w") as log:
        try:
            proc = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--kt-child", str(spec_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                timeout=timeout_s,
                cwd=workdir,
            )  # Kernel Tuner writes temp_*.cu files into its cwd on errors
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    child_s = time.perf_counter() - t0
    res = json.loads(Path(spec["result"]).read_text()) if Path(spec["result"]).exists() else {}
    if res:
        (log_dir / "kernel_tuner.json").write_text(json.dumps(res, indent=1, default=str))
    res.update(exit=code, child_process_s=child_s)
    if not res.get("wall_s"):  # killed: the progress file still says how far it got
        lines = (
            [ln.split() for ln in Path(spec["progress"]).read_text().splitlines()]
            if Path(spec["progress"]).exists()
            else []
        )
        if len(lines) > 1:
            res.update(
                partial=True,
                processed=len(lines) - 1,
                wall_s=float(lines[-1][0]) - float(lines[0][0]),
                wall_note="first to last config started (killed before the end)",
            )
    return res


# ---------------------------------------------------------------------------------------------- report
@dataclass(frozen=True)
class Bench:
    """What was compared: the space, the problem, the instances and how they were measured."""

    space: Space
    space_path: Path
    point: TestPoint
    chosen: tuple[Instance, ...]
    valid: int  # instances of the space valid for the point
    seed: int
    reps: int
    alpha: float = 1.0
    beta: float = 0.0
    command: str = ""


def projection_of(p_ours: dict[str, Any], point: TestPoint, instances: int, reps: int) -> dict[str, Any] | None:
    if not p_ours["configs"] or p_ours["to_first_result_s"] is None:
        return None
    first = p_ours["to_first_result_s"]
    out = projection(p_ours["configs"], p_ours["wall_s"], first, first + p_ours["first_to_last_s"])
    out.update(
        statuses=p_ours["statuses"],
        early_stop=p_ours["early_stop"],
        tol=p_ours["tol"],
        instances=instances,
        points=f"{point.precision} {point.shape} square {PROJ_SIZES[0]}..{PROJ_SIZES[1]} step {PROJ_SIZES[2]}, "
        f"batch >= 100 MB",
        repetitions=reps,
    )
    return out


NOTES = {
    "comparable": [
        "same GPU, one process tree, one after the other (ours first, then Kernel Tuner)",
        "same kernel file, template instances (name expressions checked equal), launch geometry, test point",
        "same instance set (the sweep's seeded random sample; Kernel Tuner's search space checked equal)",
        "same verification rule and tolerance; same repetition count (iterations=)",
        "nothing cached: fresh compile cache, CUPY_CACHE_DIR and database for each tool",
    ],
    "not_comparable": [
        "ours compiles in a process pool (every core) while the GPU times; Kernel Tuner compiles one config at a "
        "time: this is the difference being measured",
        "ours verifies on the GPU; Kernel Tuner copies C to the host and verifies there (its verify= hook)",
        "ours adds warm-up launches (>= 2, ~5 ms) and L2 protection where needed (none here: 246 MB working set); "
        "Kernel Tuner warms up by running its first config twice",
        "our wall clock includes the worker start, the device description (a 1 GiB copy-bandwidth test) and the "
        "cuBLAS time of the point; Kernel Tuner's excludes building the problem data and the reference",
        "a config that aborts Kernel Tuner costs a restart of tune_kernel (counted in its wall clock); results of "
        "the configs it finished before the abort are lost but counted as processed",
        "runs after the first on one machine may find NVRTC programs they share with an earlier run already "
        "compiled somewhere outside the fresh caches (flag compile_cache_suspected): the headline run is the "
        "first, and Kernel Tuner's programs (its own #define prefix) never match ours",
    ],
}


def warm_compiles(cold: dict[str, Any], other: dict[str, Any], factor: float = 0.2) -> bool:
    """Whether `other`'s compiles were served by a cache: NVRTC time per instance far below a cold run's.
    (Seen on an H100: a run that compiled the same NVRTC programs as an earlier run of the same machine took
    0.04 s per instance instead of ~1.2 s, although every run had a fresh compile cache and CUPY_CACHE_DIR.)"""
    a, b = cold.get("compile_s_sum") or 0.0, other.get("compile_s_sum") or 0.0
    return bool(
        a and other.get("configs") and cold.get("configs") and b / other["configs"] < factor * a / cold["configs"]
    )


def build_report(
    b: Bench,
    ours: dict[str, Any],
    kt: dict[str, Any],
    proj: dict[str, Any] | None,
    variants: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The JSON report; `variants` are extra runs of ours with non-default backend/runner settings (labelled)."""
    dev, kt_res, kt_env = ours["device"], kt.get("results", []), kt.get("env", {})
    o_rate = rate(ours["configs"], ours["wall_s"])
    k_rate = rate(kt.get("processed") or 0, kt.get("wall_s"))

    def ksum(name: str) -> float:
        return sum((r.get(name) or 0.0) for r in kt_res) / 1e3

    kb = b.space.kernel
    path = b.space_path.resolve()
    return {
        "benchmark": "sweep throughput against Kernel Tuner (issue 3)",
        "command": b.command,
        "ours_configs_per_s": o_rate,
        "kernel_tuner_configs_per_s": k_rate,
        "ratio": o_rate / k_rate if o_rate and k_rate else None,
        "target_ratio": TARGET_RATIO,
        "gpu": {
            "name": dev["name"],
            "uuid": dev["uuid"],
            "sm_count": dev["sm_count"],
            "cc": dev["cc"],
            "kernel_tuner_device_name": kt_env.get("device_name"),
            "kernel_tuner_uuid": kt_env.get("uuid"),
        },
        "space": {
            "name": b.space.name,
            "path": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
            "kernel_file": kb.source,
            "kernel_sha256": kb.source_hash(),
            "valid_instances": b.valid,
            "selected": len(b.chosen),
            "seed": b.seed,
            "selection": "the sweep's `random` strategy (seeded) over the instances valid for the problem",
        },
        "problem": {
            **asdict(b.point),
            "key": b.point.key,
            "alpha": b.alpha,
            "beta": b.beta,
            "convention": kb.convention,
        },
        "instances": [i.id for i in b.chosen],
        "repetitions": b.reps,
        "same_instance_set": sorted(i.id for i in b.chosen) == ours["instance_ids"],
        "verification": "both: per matrix ||C - ref||_F / ||ref||_F <= autotune.problems.gemm.verify.tolerance "
        "(fp64 1e-12, fp32 1e-5, fp16 1e-2; x sqrt(K/1024) above K = 1024), any non-finite element "
        "is wrong, C poisoned with NaN when beta == 0, float64 reference of the rounded inputs; ours "
        "on the GPU, Kernel Tuner through verify= on the host with answer= holding the reference "
        "rounded to C's type",
        "ours": {k: v for k, v in ours.items() if k not in ("instance_ids", "device", "log")},
        "ours_variants": [
            {
                **{k: v for k, v in o.items() if k not in ("instance_ids", "device", "log", "notes")},
                "configs_per_s": rate(o["configs"], o["wall_s"]),
                "ratio_to_kernel_tuner": rate(o["configs"], o["wall_s"]) / k_rate if k_rate and o["configs"] else None,
                "same_instance_set": sorted(i.id for i in b.chosen) == o["instance_ids"],
                "compile_cache_suspected": warm_compiles(ours, o),
            }
            for o in variants
        ],
        "kernel_tuner": {
            "wall_s": kt.get("wall_s"),
            "configs": kt.get("processed"),
            "ok": sum(1 for r in kt_res if not r.get("error")),
            "failed": kt.get("failed", []),
            "skipped_by_kernel_tuner": [r for r in kt_res if r.get("error")][:20],
            "restarts": max(0, len(kt.get("runs") or []) - 1),
            "runs": kt.get("runs"),
            "fatal": kt.get("fatal"),
            "exit": kt.get("exit"),
            "partial": kt.get("partial", False),
            "remaining": kt.get("remaining"),
            "child_process_s": kt.get("child_process_s"),
            "timings_s": {
                "compile": ksum("compile_time"),
                "verification": ksum("verification_time"),
                "benchmark": ksum("benchmark_time"),
                "framework": ksum("framework_time"),
                "strategy": ksum("strategy_time"),
            },
            "iterations": b.reps,
            "strategy": "brute_force",
            "lang": "cupy",
        },
        "projection": proj,
        "notes": NOTES,
        "versions": {
            "autotune": __version__,
            "git_commit": os.environ.get("AUTOTUNE_GIT_COMMIT") or _git(),
            "kernel_tuner": kt.get("kernel_tuner"),
            "python": platform.python_version(),
            "cupy": dev["cupy"],
            "nvrtc": dev["nvrtc"],
            "driver": dev["driver"],
            "cuda_runtime": dev["cuda_runtime"],
        },
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
    }


# ---------------------------------------------------------------------------------------------- driver
def effective_space(space_arg: str, kernel: str | None, workdir: Path) -> Path:
    """The space file; with --kernel, a copy whose `kernel.source` is that file (instance IDs unchanged)."""
    from autotune.space.spec import find_space

    path = find_space(space_arg).resolve()
    if kernel is None:
        return path
    import yaml

    data = yaml.safe_load(path.read_text())
    data["kernel"]["source"] = str(Path(kernel).resolve())
    out = workdir / path.name
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--space", default="gemm_batched_simt", help="space name under spaces/ or a space YAML path")
    ap.add_argument("--kernel", help="kernel file to use instead of the space's (same template and convention)")
    ap.add_argument("--point", default="fp32:NN:32x32x32:20000", help="PRECISION:SHAPE:MxNxK:BATCH")
    ap.add_argument("--instances", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--beta", type=float, default=0.0)
    ap.add_argument("--proj-instances", type=int, default=40, help="instances of the seed-scale projection (0: skip)")
    ap.add_argument("--kt-timeout", type=float, default=300.0)
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="CB[:ASK]",
        help="also run ours with GpuBackend(LocalOptions(compile_batch_size=CB)) and runner ASK_BATCH=ASK (or 'all'); "
        "reported separately as ours_variants, never as the headline figure",
    )
    ap.add_argument("--proj-variant", metavar="CB[:ASK]", help="settings of the projection sweep (default: defaults)")
    ap.add_argument("--out", help="also write the JSON here (e.g. results/bench/sweep_throughput.json)")
    ap.add_argument("--dry-run", action="store_true", help="select and translate only (no GPU)")
    ap.add_argument("--kt-child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.kt_child:
        kt_child(Path(a.kt_child))
        return 0
    log_dir = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="bench_sweep_out_"))
    log_dir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    point = parse_point(a.point)
    space_path = effective_space(a.space, a.kernel, workdir)
    space = load_space(space_path)
    from autotune.sweep.runner import plan_sweep

    cfg_text = sweep_yaml(
        space_path,
        point_yaml(point),
        f"sqlite:///{workdir / 'ours.sqlite'}",
        a.reps,
        a.instances,
        a.seed,
        a.alpha,
        a.beta,
    )
    cfg = parse_config(cfg_text, file=workdir / "bench.yaml")
    plan = plan_sweep(cfg)[0]
    chosen = select_instances(cfg, list(plan.work))
    setup = kt_setup(space, point, chosen)
    print(
        f"{space.name}: {len(plan.work):,} instances valid for {point.key}; {len(chosen)} selected (seed {a.seed})",
        flush=True,
    )
    if a.dry_run:
        print(
            json.dumps(
                {
                    "kernel_name": setup.kernel_name,
                    "tune_params": setup.tune_params,
                    "restrictions": len(setup.restrictions),
                },
                indent=1,
            )
        )
        try:
            print("Kernel Tuner's view:", check_with_kernel_tuner(setup))
        except ImportError:
            print("kernel_tuner not importable here: translation not checked against it")
        return 0
    if (why := no_gpu_reason()) is not None:
        raise SystemExit(f"error: {Path(__file__).name} measures on a GPU and {why}")
    from autotune.sweep.backends.local import GpuBackend, LocalOptions

    bench = Bench(
        space,
        space_path,
        point,
        tuple(chosen),
        len(plan.work),
        a.seed,
        a.reps,
        a.alpha,
        a.beta,
        " ".join(["scripts/bench_sweep.py", *(sys.argv[1:] if argv is None else argv)]),
    )
    kt: dict[str, Any] = {}
    variants: list[dict[str, Any]] = []
    runs: dict[str, dict[str, Any]] = {}
    proj = None

    def ours_run(
        label: str, points: str, n: int, tol: float | None, compile_batch: int | None = None, ask: int | None = None
    ) -> dict[str, Any]:
        d = workdir / label  # a fresh database, compile cache and CuPy cache for every run
        d.mkdir(parents=True, exist_ok=True)
        text = sweep_yaml(space_path, points, f"sqlite:///{d / 'ours.sqlite'}", a.reps, n, a.seed, a.alpha, a.beta)
        caches = cold_cache_env(d / "caches")
        os.environ.update(caches)  # fresh; inherited by the worker processes
        extra = {"compile_batch_size": compile_batch} if compile_batch else {}
        res = run_ours(
            text, d, GpuBackend(LocalOptions(tol=tol, cache_dir=Path(caches[COMPILE_CACHE_ENV]), **extra)), ask
        )
        res["label"] = label
        runs[label] = res  # one file for all runs: the device returns a limited number of files from $OUT
        (log_dir / "ours_runs.json").write_text(json.dumps(runs, indent=1, default=str))
        print(f"ours[{label}]: {res['configs']} configs in {res['wall_s']:.1f} s {res['statuses']}", flush=True)
        return res

    def save(final: bool) -> dict[str, Any]:
        report = build_report(bench, ours, kt, proj, variants)
        report["complete"] = final  # rewritten after every phase, so a run cut short still leaves its figures
        (log_dir / "sweep_throughput.json").write_text(json.dumps(report, indent=1, default=str))
        return report

    ours = ours_run("default", point_yaml(point), a.instances, None)
    save(False)
    for spec in a.variant:
        cb, _, ask = spec.partition(":")
        variants.append(
            ours_run(
                f"cb{cb}_ask{ask or 'default'}",
                point_yaml(point),
                a.instances,
                None,
                int(cb),
                (10**9 if ask == "all" else int(ask)) if ask else None,
            )
        )
        save(False)
    kt = run_kt(
        {
            "space_path": str(space_path),
            "kernel_path": str(space.kernel.source_path),
            "point": point_spec(point),
            "instances": [i.param_dict for i in chosen],
            "alpha": a.alpha,
            "beta": a.beta,
            "seed": a.seed,
            "reps": a.reps,
        },
        workdir,
        a.kt_timeout,
        log_dir,
    )
    print(f"kernel_tuner: {kt.get('processed')} configs in {kt.get('wall_s')} s (exit {kt.get('exit')})", flush=True)
    save(False)
    if a.proj_instances > 0:
        cb, _, ask = (a.proj_variant or "").partition(":")
        p_ours = ours_run(
            "projection",
            projection_points_yaml(point.precision, point.shape),
            a.proj_instances,
            parse_config(cfg_text).tol,
            int(cb) if cb else None,
            (10**9 if ask == "all" else int(ask)) if ask else None,
        )
        proj = projection_of(p_ours, point, a.proj_instances, a.reps)
        if proj:
            proj.update(
                compile_batch_size=p_ours["compile_batch_size"],
                ask_batch=p_ours["ask_batch"],
                compile_cache_suspected=warm_compiles(ours, p_ours),
            )
    report = save(True)
    problems = check_report(report)
    report["schema_problems"] = problems
    text = json.dumps(report, indent=1, default=str)
    (log_dir / "sweep_throughput.json").write_text(text)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(text)
    print(table(report))
    return 0 if not problems else 1


def _git() -> str | None:
    from autotune.sweep.provenance import git_commit

    return git_commit()


if __name__ == "__main__":
    sys.exit(main())
