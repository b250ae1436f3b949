#!/usr/bin/env python3
"""How far a capped, compile-bound case of `scripts/bench_kt_switch.py` could go on its host: an upper bound on our
configurations and on the ratio, from that run's own compile times (issue 31: the convolution's 10x).

For each case where our call stopped at the cap (not every configuration measured) and recorded compile times:

  span       from our first compile submitted to the sweep's end (`backend.first_submit` .. `call.sweep_done`)
  capacity   compile processes x span (the processes: the run's AUTOTUNE_COMPILE_WORKERS, else the host's cores less
             one, as GpuBackend's default, or --workers)
  compiled   the sum of the compile times of the configurations measured (`compile_ms`)
  busy       compiled / capacity
  bound      configurations measured + (capacity - compiled) / the mean compile time of the last --tail measured
  ratio max  the benchmark's ratio (configurations per second of process wall, ours over Kernel Tuner's) had ours
             measured `bound` configurations in the same process wall
  needed     the configurations the case's target ratio needs in that process wall

Where the run recorded what each compile process did (`runs.ours.compile_profile`, bench_kt_switch.py since
this change), a second table splits the capacity over the same span: `absent` (processes not started yet:
the pool grows from 4), `starting` (spawned, not ready), `compiling` (calls answered: compiled or failed),
`deferred` (calls that answered "later": a twin waiting, `autotune.sweep.compile.twins`), `cut` (compiles killed at the end
or past their limit, or dead), `idle` (ready, no call).

The bound assumes every compile process busy from the first submit to the end and the configurations after the last
measured costing at least what the last --tail did: true where compile cost grows along the enumeration order (the
convolution's tiles), so no scheduling of these compiles measures more within the cap on that host. It counts compiles
only: a case far from busy (the reduction: its GPU is the bottleneck) is bounded by its measurements, not by this.

    python3 scripts/kt_switch_bound.py results/bench/kt_switch_h100_kt7.json.xz [--workers N] [--tail 10]

A run of ours alone (`bench_kt_switch.py --sides ours`, a variant measured beside a full run on the same machine)
takes Kernel Tuner's run of each case from that full run's JSON: `--kt-from FULL.json`.
"""

from __future__ import annotations

import argparse
import json
import lzma
import statistics
import sys
from pathlib import Path
from typing import Any


def load(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    if path.suffix == ".xz":
        raw = lzma.decompress(raw)
    data = json.loads(raw)
    if not isinstance(data, dict) or "cases" not in data:
        raise SystemExit(f"{path}: not a bench_kt_switch.py JSON (no `cases`)")
    return data


def bound(case: dict[str, Any], workers: int, tail: int) -> dict[str, Any] | None:
    """The bound of one case (the module docstring), or None where ours was not stopped by the cap, or its run lacks
    the timeline or compile times it needs."""
    runs, results = case.get("runs") or {}, case.get("results") or {}
    ours, kt = runs.get("ours"), runs.get("kt")
    if not ours or not kt or not kt.get("configs") or not kt.get("process_wall_s"):
        return None
    if ours.get("space_size") is not None and ours.get("configs", 0) >= ours["space_size"]:
        return None  # every configuration measured: nothing to bound
    times = [r["compile_ms"] / 1e3 for r in results.get("ours") or [] if isinstance(r.get("compile_ms"), (int, float))]
    timeline = ours.get("timeline") or {}
    first, end = timeline.get("backend.first_submit"), timeline.get("call.sweep_done")
    if not times or first is None or end is None or end <= first:
        return None
    span = end - first
    capacity, compiled = workers * span, sum(times)
    last = statistics.fmean(times[-tail:])
    n = len(times)
    most = n + max(0.0, capacity - compiled) / last
    wall = ours["process_wall_s"]
    kt_rate = kt["configs"] / kt["process_wall_s"]
    target = 10.0 if (ours.get("space_size") or 0) > 500 else 3.0
    return {
        "measured": n,
        "span_s": span,
        "compiled_s": compiled,
        "busy": compiled / capacity,
        "last_mean_s": last,
        "bound": most,
        "ratio": n / wall / kt_rate,
        "ratio_max": most / wall / kt_rate,
        "target": target,
        "needed": target * kt_rate * wall,
    }


def split(case: dict[str, Any], workers: int) -> dict[str, float] | None:
    """The shares of the capacity (the module docstring), or None without a compile profile or a span."""
    ours = (case.get("runs") or {}).get("ours") or {}
    profile, timeline = ours.get("compile_profile") or {}, ours.get("timeline") or {}
    first, end = timeline.get("backend.first_submit"), timeline.get("call.sweep_done")
    if not profile.get("starts") or first is None or end is None or end <= first:
        return None

    def overlap(a: float, b: float) -> float:
        return max(0.0, min(b, end) - max(a, first))

    capacity = workers * (end - first)
    gone = {pid: b for a, b, pid, what in profile.get("calls", []) if what in ("killed", "died")}
    alive = sum(overlap(spawned, gone.get(pid, end)) for pid, spawned, _ in profile["starts"])
    starting = sum(overlap(spawned, end if ready is None else ready) for _, spawned, ready in profile["starts"])
    shares = {"absent": capacity - alive, "starting": starting, "compiling": 0.0, "deferred": 0.0, "cut": 0.0}
    for a, b, _, what in profile.get("calls", []):
        key = {"ok": "compiling", "error": "compiling", "later": "deferred"}.get(what, "cut")
        shares[key] += overlap(a, b)
    shares["idle"] = max(0.0, capacity - sum(shares.values()))
    return {k: v / capacity for k, v in shares.items()}


def borrow_kt(data: dict[str, Any], other: dict[str, Any]) -> int:
    """Give each case of `data` that has no Kernel Tuner run `other`'s run of the same case (in place); how many."""
    n = 0
    for name, case in data["cases"].items():
        runs = case.setdefault("runs", {})
        theirs = ((other.get("cases") or {}).get(name) or {}).get("runs", {}).get("kt")
        if not (runs.get("kt") or {}).get("configs") and theirs and theirs.get("configs"):
            runs["kt"] = theirs
            n += 1
    return n


def run_workers(provenance: dict[str, Any]) -> int:
    """The run's compile processes: its AUTOTUNE_COMPILE_WORKERS (the switches bench_kt_switch.py records), else
    GpuBackend's default, the host's cores less one."""
    given = str((provenance.get("autotune_env") or {}).get("AUTOTUNE_COMPILE_WORKERS") or "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    return max(1, int(provenance.get("host_cpus") or 2) - 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", type=Path, help="kt_switch.json of bench_kt_switch.py (or its .xz)")
    ap.add_argument(
        "--workers",
        type=int,
        help="compile processes (default: the run's AUTOTUNE_COMPILE_WORKERS, else host_cpus - 1)",
    )
    ap.add_argument("--tail", type=int, default=10, help="the last N compile times the rest is assumed to cost")
    ap.add_argument(
        "--kt-from",
        type=Path,
        help="a full run's kt_switch.json whose Kernel Tuner runs stand in where this one has none (--sides ours)",
    )
    a = ap.parse_args(argv)
    data = load(a.json)
    if a.kt_from is not None:
        print(f"Kernel Tuner's run of {borrow_kt(data, load(a.kt_from))} case(s) from {a.kt_from}")
    workers = a.workers or run_workers(data.get("provenance") or {})
    rows = [(name, b) for name, case in data["cases"].items() if (b := bound(case, workers, max(1, a.tail)))]
    if not rows:
        print(f"{a.json}: no case of ours stopped at the cap with compile times")
        return 0
    print(f"{a.json} ({workers} compile processes, the rest costing the mean of the last {a.tail})")
    head = f"{'case':<12}{'measured':>9}{'span s':>8}{'compiled s':>11}{'busy':>6}{'last s':>8}"
    print(head + f"{'bound':>7}{'ratio':>7}{'max':>7}{'target':>7}{'needed':>8}")
    for name, b in rows:
        print(
            f"{name:<12}{b['measured']:>9}{b['span_s']:>8.1f}{b['compiled_s']:>11.1f}{b['busy']:>6.2f}"
            f"{b['last_mean_s']:>8.2f}{b['bound']:>7.0f}{b['ratio']:>7.1f}{b['ratio_max']:>7.1f}{b['target']:>7.0f}"
            f"{b['needed']:>8.0f}"
        )
    shares = [(name, sh) for name, case in data["cases"].items() if (sh := split(case, workers))]
    if shares:
        print("\nthe compile processes' time over the same span (shares of the capacity):")
        keys = ["absent", "starting", "compiling", "deferred", "cut", "idle"]
        print(f"{'case':<12}" + "".join(f"{k:>10}" for k in keys))
        for name, sh in shares:
            print(f"{name:<12}" + "".join(f"{sh[k]:>10.2f}" for k in keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
