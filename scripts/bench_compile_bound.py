#!/usr/bin/env python3
"""Issue 31's compile-bound space, tuned over all of it and resumable across calls: Kernel Tuner's 2D convolution
(tests/data/kt_public/convolution.cu, unchanged) over the parameters of the convolution.py example in Kernel Tuner's
examples (cuda folder), with its filter fixed at 17x17 (block_size_x 16..128 step 16, block_size_y 1..32 in powers
of 2, tile_size_x and tile_size_y 1..8, use_padding and read_only 0/1, its restriction "use_padding==0 or block_size_x % 32 != 0", plus
Kernel Tuner's implicit one: at most 1024 threads a block): 7,296 configurations, each one NVRTC compile of seconds
(fully unrolled 17x17 filter loops over tiles of up to 8x8), a third of them over the 48 KB of static shared memory.

Each call runs `autotune.kernel_tuner.tune_kernel` (the one-import switch) with `strategy_options={"time_limit": S}`
into one results database (--database, default runs/compile_bound/convolution.sqlite): a later call measures only
what is missing, so several device calls of at most 10 minutes add up to the whole space. Every call appends a row
to --log (CSV: commit, GPU, seconds of the call, configurations done before and after, the best so far), and --report
prints the totals: configurations done, failed (by reason), the call time summed over the calls, and the projected
time of the whole space at the measured rate. The figure the issue asks for is the summed call time of the calls that
covered the whole space (target: at most 1 hour on one 16-core H100 host).

    python3 scripts/bench_compile_bound.py --time-limit 540          # on the GPU machine, repeat until complete
    python3 scripts/bench_compile_bound.py --report                  # anywhere: the totals from the database
    python3 scripts/bench_compile_bound.py --dry-run                 # here: the space's size only, nothing measured

The reference answer is computed with CuPy (the same sums as the kernel: output[y, x] = sum over i, j of
input[y + i, x + j] * filter[i, j]), so Kernel Tuner need not be installed.
"""

from __future__ import annotations

import argparse
import csv
import functools
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "tests" / "data" / "kt_public" / "convolution.cu"
FILTER = (17, 17)
IMAGE = (4096, 4096)


def tune_params() -> dict[str, list[int]]:
    return {
        "filter_width": [FILTER[0]],
        "filter_height": [FILTER[1]],
        "block_size_x": [16 * i for i in range(1, 9)],
        "block_size_y": [2**i for i in range(6)],
        "tile_size_x": list(range(1, 9)),
        "tile_size_y": list(range(1, 9)),
        "use_padding": [0, 1],
        "read_only": [0, 1],
    }


RESTRICTIONS = ["use_padding==0 or block_size_x % 32 != 0", "block_size_x*block_size_y<=1024"]


@functools.cache
def space_size() -> int:
    """The configurations left after the restrictions (computed once)."""
    import itertools

    p = tune_params()
    n = 0
    for values in itertools.product(*p.values()):
        c = dict(zip(p, values, strict=True))
        n += all(eval(r, {}, dict(c)) for r in RESTRICTIONS)  # noqa: S307 - our own two expressions
    return n


def data(seed: int = 1) -> tuple[list[np.ndarray], dict[str, np.ndarray], list]:
    """The arguments, the constant memory and the answer (CuPy for the reference sums)."""
    rng = np.random.default_rng(seed)
    border = (FILTER[0] // 2 * 2, FILTER[1] // 2 * 2)
    inp = rng.standard_normal((IMAGE[1] + border[1], IMAGE[0] + border[0]), dtype=np.float32)
    filt = rng.standard_normal(FILTER[0] * FILTER[1], dtype=np.float32)
    import cupy as cp

    d_in, d_f = cp.asarray(inp), cp.asarray(filt).reshape(FILTER[1], FILTER[0])
    out = cp.zeros((IMAGE[1], IMAGE[0]), dtype=cp.float32)
    for i in range(FILTER[1]):
        for j in range(FILTER[0]):
            out += d_in[i : i + IMAGE[1], j : j + IMAGE[0]] * d_f[i, j]
    answer = [cp.asnumpy(out).ravel(), None, None]
    args = [np.zeros(IMAGE[0] * IMAGE[1], dtype=np.float32), inp.ravel(), filt]
    return args, {"d_filter": filt}, answer


def done_counts(url: str) -> tuple[int, Counter, float | None]:
    """(configurations recorded, those not ok by status and first words of the error, the best time in ms)."""
    from autotune.store.query import run_query

    if not Path(url.removeprefix("sqlite:///")).exists():
        return 0, Counter(), None
    rows = run_query(  # each configuration once (its latest measurement: a call on another card of the model skips it)
        url,
        "SELECT status, error, median_ms FROM measurements WHERE id IN "
        "(SELECT max(id) FROM measurements GROUP BY instance_id, point_id)",
    )
    n, fails, best = 0, Counter[str](), None
    for status, error, median in rows.itertuples(index=False):
        n += 1
        if status == "skipped":  # timed, then stopped early: slower than the best by more than TOL
            fails["skipped (stopped early: slower than the best)"] += 1
        elif status != "ok":
            fails[f"{status}: {' '.join(str(error or '').split()[:6])}"] += 1
        elif median is not None and (best is None or median < best):
            best = float(median)
    return n, fails, best


def tune(
    inputs: tuple, params: dict[str, list[int]], url: str, limit_s: float, restrictions: list[str] | None = None
) -> list[dict]:
    """One `tune_kernel` call of the convolution (the one-import switch) on `inputs` (`data()`, built before the
    call is timed) over `params`, into the database `url`, for at most `limit_s` seconds: Kernel Tuner's result
    dicts (also scripts/two_stage_compile.py's stages)."""
    from autotune.kernel_tuner import tune_kernel

    args, cmem, answer = inputs
    results, _ = tune_kernel(
        "convolution_kernel",
        KERNEL.read_text(),
        IMAGE,
        args,
        params,
        grid_div_x=["block_size_x", "tile_size_x"],
        grid_div_y=["block_size_y", "tile_size_y"],
        restrictions=restrictions,
        cmem_args=cmem,
        answer=answer,
        atol=1e-3,
        strategy_options={"time_limit": limit_s},
        database=url,
        quiet=True,
    )
    return results


def one_call(url: str, limit_s: float, log: Path) -> None:
    before, _, _ = done_counts(url)
    inputs = data()
    start = time.perf_counter()
    tune(inputs, tune_params(), url, limit_s, RESTRICTIONS)
    seconds = time.perf_counter() - start
    after, fails, best = done_counts(url)
    gpu = subprocess.run(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, check=False
    ).stdout.strip()
    commit = (
        os.environ.get("AUTOTUNE_GIT_COMMIT")
        or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False, cwd=ROOT
        ).stdout.strip()
    )
    new = not log.exists()
    with log.open("a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(["commit", "gpu", "cores", "call_s", "done_before", "done_after", "not_ok", "best_ms"])
        w.writerow([commit, gpu, os.cpu_count(), f"{seconds:.1f}", before, after, sum(fails.values()), best])
    print(f"call: {seconds:.1f} s, configurations {before} -> {after} of {space_size()}, best {best} ms")


def report(url: str, log: Path) -> None:
    total = space_size()
    n, fails, best = done_counts(url)
    calls = list(csv.DictReader(log.open())) if log.exists() else []
    spent = sum(float(c["call_s"]) for c in calls)
    new = sum(int(c["done_after"]) - int(c["done_before"]) for c in calls)
    print(f"space: {total} configurations; recorded {n} ({sum(fails.values())} not ok); best {best} ms")
    for reason, k in fails.most_common(8):
        print(f"  {k:5d}  {reason}")
    print(f"calls: {len(calls)}, {spent:.0f} s summed, {new} configurations measured in them")
    if n >= total:
        print(f"whole space: {spent / 60:.1f} min of calls (target: at most 60)")
    elif new:
        print(f"projected whole space at the measured rate: {spent / new * total / 60:.1f} min (not measured)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--database", default=f"sqlite:///{ROOT / 'runs' / 'compile_bound' / 'convolution.sqlite'}")
    ap.add_argument("--log", type=Path, default=ROOT / "runs" / "compile_bound" / "calls.csv")
    ap.add_argument("--time-limit", type=float, default=540.0, help="seconds this call may tune (default 540)")
    ap.add_argument("--report", action="store_true", help="print the totals, measure nothing")
    ap.add_argument("--dry-run", action="store_true", help="print the space's size, measure nothing")
    a = ap.parse_args(argv)
    if a.dry_run:
        print(f"{space_size()} configurations (Kernel Tuner's convolution example, filter {FILTER[0]}x{FILTER[1]})")
        return 0
    a.log.parent.mkdir(parents=True, exist_ok=True)
    Path(a.database.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    if not a.report:
        one_call(a.database, a.time_limit, a.log)
    report(a.database, a.log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
