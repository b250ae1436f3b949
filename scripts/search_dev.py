"""Development replays of `hybrid`'s model alone (issue 57): `HybridModel` on each pair's codes, without Optuna, so a
variant's options are compared on development pairs and seeds in minutes (the benchmark's replay, `bench_search.py
--option KEY=VALUE`, goes through the Optuna strategy and is what is reported). Prints median / p90 of best_ms /
true_best_ms - 1 at 2% and 5% of each pair.

    python scripts/search_dev.py --pairs "convolution_milo@A100,gemm_batched_simt@NVIDIA H100 80GB HBM3@gemm:fp32:NN:64" \
        --first-seed 100 --seeds 10 --option clip=0.5 --option stall=20
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: small solves, one thread each (bench_search.py)

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
from multiprocessing import Pool  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_pairs  # noqa: E402

from autotune.sweep.strategies.hybrid import HybridModel, HybridOptions, codes_of  # noqa: E402
from autotune.sweep.strategies.validset import ValidSet  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [
    ROOT / "results/complete_h100/complete_h100.sqlite.xz",
    ROOT / "results/complete_conv_h200/complete_conv_h200.sqlite.xz",
    ROOT / "results/bench/hub",
]
PAIRS: list[tuple[str, np.ndarray, np.ndarray]] = []


def one(job: tuple[int, int, dict, int]) -> tuple[int, float, float]:
    i, seed, opts, batch = job
    _, codes, times = PAIRS[i]
    n = len(times)
    b2, b5 = max(1, round(0.02 * n)), max(1, round(0.05 * n))
    model, free, best, at2 = HybridModel(codes, seed, HybridOptions(**opts)), np.ones(n, bool), math.inf, math.inf
    k = 0
    while k < b5:  # `batch` proposals before their results are told, as the runner asks a model-based strategy
        rows = []
        for _ in range(min(batch, b5 - k)):
            rows.append(model.propose(free))
            free[rows[-1]] = False
        for row in rows:
            k += 1
            t = times[row]
            model.observe(row, None if np.isnan(t) else math.log(t))
            best = best if np.isnan(t) else min(best, t)
            at2 = best if k == b2 else at2
    true_best = float(np.nanmin(times))
    return i, at2 / true_best - 1, best / true_best - 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", required=True, help="pairs whose label contains one of these (comma-separated)")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=100, help="develop on seeds >= 100; 0-29 are reported")
    ap.add_argument("--option", action="append", default=[], help="a HybridModel option, key=value")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument(
        "--batch", type=int, default=1, help="proposals asked before their results are told (the benchmark: 4)"
    )
    a = ap.parse_args()
    opts = {k: float(v) if "." in v else int(v) for k, v in (o.split("=", 1) for o in a.option)}
    wanted = [w for w in a.pairs.split(",") if w]
    for p in search_pairs.load_sources([str(s) for s in SOURCES], search_pairs.temp_work(), 1000):
        if any(w in p.label for w in wanted):
            PAIRS.append((p.label, codes_of(ValidSet(p.instances)), p.times))
    jobs = [(i, s, opts, a.batch) for i in range(len(PAIRS)) for s in range(a.first_seed, a.first_seed + a.seeds)]
    with Pool(a.procs) as pool:  # forked after the pairs are loaded: the workers share them
        got = pool.map(one, jobs, chunksize=1)
    print(f"options {opts or 'default'}; seeds {a.first_seed}-{a.first_seed + a.seeds - 1}; batch {a.batch}")
    for i, (label, _, _) in enumerate(PAIRS):
        r = np.array([(r2, r5) for j, r2, r5 in got if j == i])
        m2, p2 = np.median(r[:, 0]), np.percentile(r[:, 0], 90)
        m5, p5 = np.median(r[:, 1]), np.percentile(r[:, 1], 90)
        miss = int((r[:, 1] > 0.10).sum())
        print(f"{label[:64]:64s} 2%: {m2:.4f} / {p2:.4f}   5%: {m5:.4f} / {p5:.4f}   {miss} of {len(r)} > 10% at 5%")


if __name__ == "__main__":
    main()
