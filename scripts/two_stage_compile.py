#!/usr/bin/env python3
"""Issue 31 item 5: does a two-stage compile (screen every instance with a fast build, full-build only the best
X%) keep the best instance of a compile-bound space?

The space is Kernel Tuner's 2D convolution as scripts/bench_kt_switch.py tunes it (tests/data/kt_public/
convolution.cu unchanged, the parameters of Kernel Tuner's convolution_correct.py example: filter 17x17,
block_size_x 16..128 step 16, block_size_y 2..32 in powers of 2, tile_size_x/y 1, 2, 4, use_padding, read_only:
1,080 configurations after Kernel Tuner's implicit limit of 1024 threads a block). The answer is computed with
CuPy as in scripts/bench_compile_bound.py (atol 1e-3).

Two stages, each `autotune.kernel_tuner.tune_kernel` over the whole space in a fresh process with a fresh compile
cache and database (a stage stops at --fast-limit / --full-limit seconds; the report says how much it covered):

* fast: every instance built with AUTOTUNE_COMPILE_SCREEN=1 (NVRTC `--Ofast-compile=max`, autotune/sweep/compile/nvrtc.py
  SCREEN_DEFAULT), compiled, verified and timed;
* full: every instance built as a sweep builds it by default.

The report (--out/two_stage.json, and per instance --out/two_stage.csv): each stage's wall time and compile time
(median and sum of the per-instance compile seconds), the Spearman rank correlation of the two builds' kernel times
over the instances both timed, and for X = 5, 10, 20 %: whether "screen all with the fast build, full-build only the
fast build's best X %" picks the full build's best instance of the whole space, the full-build time of what it
picks against that best, and the compile seconds it would spend against the full build of everything.

    python3 scripts/two_stage_compile.py --out two_stage_out          # on the GPU host (about 5.5 min)
    python3 scripts/two_stage_compile.py --out two_stage_out --analyze  # the report again from the stages' JSON
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from autotune.sweep.compile.nvrtc import cold_cache_env  # noqa: E402 - the repository's own package, by path

FILTER = (17, 17)  # the filter of scripts/bench_compile_bound.py, whose kernel, image and data this script uses
KEYS = ("filter_width", "filter_height", "block_size_x", "block_size_y", "tile_size_x", "tile_size_y")
KEYS += ("use_padding", "read_only")
TOPS = (5, 10, 20)
STAGES = {"fast": "1", "full": "0"}  # AUTOTUNE_COMPILE_SCREEN of each stage


def tune_params() -> dict[str, list[int]]:
    """Kernel Tuner's convolution_correct.py parameters (as tests/data/kt_public/convolution_correct.py)."""
    return {
        "filter_width": [FILTER[0]],
        "filter_height": [FILTER[1]],
        "block_size_x": [16 * i for i in range(1, 9)],
        "block_size_y": [2**i for i in range(1, 6)],
        "tile_size_x": [2**i for i in range(3)],
        "tile_size_y": [2**i for i in range(3)],
        "use_padding": [0, 1],
        "read_only": [0, 1],
    }


def run_stage(stage: str, work: Path, limit_s: float) -> None:
    """One stage in this process (started by `main` with the stage's environment): its results as JSON."""
    from bench_compile_bound import FILTER as BENCH_FILTER  # (a sibling script: run as a file, scripts/ is on the path)
    from bench_compile_bound import data, tune

    assert FILTER == BENCH_FILTER, (FILTER, BENCH_FILTER)
    inputs = data()
    start = time.perf_counter()
    results = tune(inputs, tune_params(), f"sqlite:///{work / (stage + '.sqlite')}", limit_s)
    wall = time.perf_counter() - start
    rows = [
        {
            "params": {k: int(r[k]) for k in KEYS},
            "time_ms": r.get("time") if "__error__" not in r else None,
            "error": None if "__error__" not in r else getattr(r["__error__"], "__name__", str(r["__error__"])),
            "compile_s": float(r.get("compile_time") or 0.0) / 1e3,
        }
        for r in results
    ]
    (work / f"{stage}.json").write_text(json.dumps({"stage": stage, "call_s": wall, "limit_s": limit_s, "rows": rows}))
    print(f"{stage}: {len(rows)} configurations in {wall:.1f} s", flush=True)


def space_size() -> int:
    p = tune_params()
    n = 0
    for bx in p["block_size_x"]:
        for by in p["block_size_y"]:
            n += bx * by <= 1024
    return n * math.prod(len(p[k]) for k in ("tile_size_x", "tile_size_y", "use_padding", "read_only"))


def ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share their mean rank), 0-based."""
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x), dtype=float)
    r[order] = np.arange(len(x), dtype=float)
    for v in np.unique(x):
        tie = x == v
        if tie.sum() > 1:
            r[tie] = r[tie].mean()
    return r


def spearman(a: list[float], b: list[float]) -> float | None:
    if len(a) < 3:
        return None
    ra, rb = ranks(np.asarray(a, dtype=float)), ranks(np.asarray(b, dtype=float))
    return float(np.corrcoef(ra, rb)[0, 1])


def analyze(work: Path) -> dict[str, Any]:
    """The report of the module docstring, from the stages' JSON in `work`."""
    stages = {s: json.loads((work / f"{s}.json").read_text()) for s in STAGES if (work / f"{s}.json").is_file()}
    if set(stages) != set(STAGES):
        raise SystemExit(f"{work}: missing {', '.join(sorted(set(STAGES) - set(stages)))}.json: run the stages first")

    def by_key(stage: str) -> dict[tuple, dict]:
        return {tuple(r["params"][k] for k in KEYS): r for r in stages[stage]["rows"]}

    fast, full = by_key("fast"), by_key("full")
    total = space_size()
    report: dict[str, Any] = {"space": total, "kernel": "tests/data/kt_public/convolution.cu (17x17 filter)"}
    for s, rows in (("fast", fast), ("full", full)):
        compiles = [r["compile_s"] for r in rows.values() if r["compile_s"] > 0]
        report[s] = {
            "configurations": len(rows),
            "timed": sum(r["time_ms"] is not None for r in rows.values()),
            "failed": sum(r["time_ms"] is None for r in rows.values()),
            "call_s": round(stages[s]["call_s"], 1),
            "limit_s": stages[s]["limit_s"],
            "compile_s_median": round(float(np.median(compiles)), 3) if compiles else None,
            "compile_s_sum": round(float(np.sum(compiles)), 1),
            "complete": len(rows) >= total,
        }
    both = [k for k in full if k in fast and full[k]["time_ms"] is not None and fast[k]["time_ms"] is not None]
    report["both_timed"] = len(both)
    report["spearman_kernel_time"] = spearman([fast[k]["time_ms"] for k in both], [full[k]["time_ms"] for k in both])
    ratios = [fast[k]["time_ms"] / full[k]["time_ms"] for k in both]
    report["fast_over_full_time_median"] = round(float(np.median(ratios)), 3) if ratios else None
    report["fast_fails_full_ok"] = sum(
        1 for k in full if k in fast and full[k]["time_ms"] is not None and fast[k]["time_ms"] is None
    )
    report["fast_ok_full_fails"] = sum(
        1 for k in full if k in fast and full[k]["time_ms"] is None and fast[k]["time_ms"] is not None
    )
    # the whole space's best (the full build's) over the instances the fast stage reached too (the screen can only
    # keep what it saw); `complete` says whether that is the whole space
    seen = [k for k in full if k in fast and full[k]["time_ms"] is not None]
    best = min(seen, key=lambda k: full[k]["time_ms"]) if seen else None
    report["full_best"] = dict(zip(KEYS, best, strict=True)) if best else None
    report["full_best_ms"] = full[best]["time_ms"] if best else None
    screened = sorted((k for k in fast if fast[k]["time_ms"] is not None), key=lambda k: fast[k]["time_ms"])
    report["full_best_rank_in_fast"] = screened.index(best) + 1 if best in screened else None
    fast_compile = sum(r["compile_s"] for r in fast.values())
    full_compile = sum(r["compile_s"] for r in full.values())
    tops = []
    for x in TOPS:
        top = screened[: max(1, math.ceil(len(screened) * x / 100))]
        measured = [k for k in top if k in full and full[k]["time_ms"] is not None]
        pick = min(measured, key=lambda k: full[k]["time_ms"]) if measured else None
        tops.append(
            {
                "top_percent": x,
                "instances": len(top),
                "keeps_best": best is not None and best in top,
                "picked_ms": full[pick]["time_ms"] if pick else None,
                "picked_over_best": (
                    round(full[pick]["time_ms"] / full[best]["time_ms"], 4) if pick and best else None
                ),
                "compile_s_two_stage": round(fast_compile + sum(full[k]["compile_s"] for k in top if k in full), 1),
                "compile_s_full_all": round(full_compile, 1),
            }
        )
    report["tops"] = tops
    with (work / "two_stage.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*KEYS, "fast_ms", "full_ms", "fast_compile_s", "full_compile_s", "fast_error", "full_error"])
        for k in sorted(set(fast) | set(full)):
            a, b = fast.get(k, {}), full.get(k, {})
            w.writerow(
                [*k, a.get("time_ms"), b.get("time_ms"), a.get("compile_s"), b.get("compile_s")]
                + [a.get("error"), b.get("error")]
            )
    return report


def provenance(argv: list[str]) -> dict[str, Any]:
    def out(cmd: list[str]) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT).stdout.strip()
        except OSError:
            return ""

    return {
        "command": " ".join(["scripts/two_stage_compile.py", *argv]),
        "git_commit": os.environ.get("AUTOTUNE_GIT_COMMIT") or out(["git", "rev-parse", "HEAD"]),
        "gpu": out(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]),
        "host_cpus": os.cpu_count(),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("two_stage_out"), help="folder for the stages and the report")
    ap.add_argument("--fast-limit", type=float, default=110.0, help="seconds the fast stage may tune (default 110)")
    ap.add_argument("--full-limit", type=float, default=200.0, help="seconds the full stage may tune (default 200)")
    ap.add_argument("--analyze", action="store_true", help="only the report, from the stages already in --out")
    ap.add_argument("--stage", choices=sorted(STAGES), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    work = a.out.resolve()
    if a.stage:
        run_stage(a.stage, work, a.fast_limit if a.stage == "fast" else a.full_limit)
        return 0
    if not a.analyze:
        for stage, screen in STAGES.items():
            (work / f"{stage}.json").unlink(missing_ok=True)
            env = {
                **os.environ,
                "AUTOTUNE_COMPILE_SCREEN": screen,
                **cold_cache_env(work / f"caches_{stage}"),  # ours, CuPy's and the CUDA driver's compute cache
            }
            cmd = [sys.executable, str(Path(__file__).resolve()), "--stage", stage, "--out", str(work)]
            cmd += ["--fast-limit", str(a.fast_limit), "--full-limit", str(a.full_limit)]
            rc = subprocess.run(cmd, env=env, check=False).returncode
            if rc != 0:
                print(f"{stage} stage: exit status {rc}", file=sys.stderr)
    report = {"provenance": provenance(argv), **analyze(work)}
    (work / "two_stage.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
