"""Benchmark the search strategies on complete (space, point) pairs, against Kernel Tuner's (issue 33).

Pairs come from explicit sources (scripts/search_pairs.py): recorded databases, whose pairs' universe is exactly the
instances recorded at that point (default results/complete_h100: six pairs measured without early stop), and
Kernel Tuner caches (default results/bench/hub: twelve brute-forced spaces of the benchmark hub, imported into a
temporary database; universe = every configuration of the cache, Kernel Tuner's failed ones being failures).
`--discover-complete` adds the older rule's pairs (every instance the current space file generates for the point
was recorded). Only pairs of at least --min-size instances (default 1,000) are benchmarked.

Ours: each strategy is replayed on each pair (ask/tell against the recorded measurements, as the runner's per-point
search drives it; failures are failures) with --seeds seeds. Kernel Tuner: its strategies in simulation mode
(scripts/kt_simulate.py under --kt-python) on each pair's Kernel Tuner cache with --kt-seeds seeds. Both run once
per seed at the largest budget (20% of the pair) and are read with first-N-distinct accounting: the result at budget
N is the best of the first N distinct instances evaluated (valid or failed). Our strategies are anytime (nothing in
them depends on the budget but the stop), so the first N of a 20% run is what a run with budget N proposes; for
Kernel Tuner's it is what a 20% run had found after N evaluations (SEARCH_PROVENANCE.md says which depend on it).
Writes --out (results/bench/search.csv: tool,strategy,space,point,seed,space_size,evals,best_ms,true_best_ms,device)
at budgets of 1, 2, 5, 10 and 20%, a plot of best-so-far against evaluations (median and 90th percentile over
seeds), and prints median and p90 of best_ms / true_best_ms - 1 per tool, strategy and budget, with the benchmark
hub methodology's score (scripts/search_score.py: 0 = random search, 1 = the optimum).

    python scripts/bench_search.py --list                      # the pairs and their sizes
    python scripts/bench_search.py --seeds 30 --kt-seeds 10    # the benchmark
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from search_pairs import DEFAULT_SOURCES, ROOT, Pair, discover_complete, load_sources, temp_work
from search_score import pair_score, score

from autotune.sweep.strategies import make_strategy, strategy_class
from autotune.vocab import Status

FRACTIONS = [0.01, 0.02, 0.05, 0.10, 0.20]
STRATEGIES = ("tpe", "random")
KT_STRATEGIES = ("random_sample", "genetic_algorithm", "simulated_annealing", "dual_annealing", "pso",
                 "firefly_algorithm", "greedy_ils", "basinhopping", "diff_evo", "mls")
# a Python with Kernel Tuner 1.5 installed (pip install kernel_tuner==1.5.0 in a venv of its own)
KT_PYTHON = os.environ.get("AUTOTUNE_KT_PYTHON", "/tmp/ktvenv/bin/python")
ASK = 256  # what the runner asks for; a model-based strategy returns its batch
COLUMNS = ["tool", "strategy", "space", "point", "seed", "space_size", "evals", "best_ms", "true_best_ms", "device"]


def budgets(n: int) -> list[int]:
    return [max(1, math.ceil(f * n)) for f in FRACTIONS]


def replay(pair: Pair, strategy: str, budget: int, seed: int, options: dict) -> np.ndarray:
    """Best valid time after each evaluation (inf before the first)."""
    opts = {"study": None, **options} if getattr(strategy_class(strategy), "model_based", False) else {}
    s = make_strategy(strategy, pair.instances, budget, seed, **opts)
    best, out = math.inf, []
    while asked := s.ask(ASK):
        for inst in asked:
            m = pair.recorded[inst.id]
            s.tell(inst, [m])
            if m.status == Status.OK and m.median_ms is not None:
                best = min(best, m.median_ms)
            out.append(best)
    return np.array(out)


def best_so_far(times: list) -> np.ndarray:
    return np.minimum.accumulate(np.array([math.inf if t is None else t for t in times], dtype=float))


def run_kt(pair: Pair, work: Path, strategies: list[str], seeds: int, python: str) -> dict:
    cache = pair.kt_cache(work)
    out = work / f"kt_{abs(hash(pair.label))}.json"
    t = time.monotonic()
    subprocess.run([python, str(Path(__file__).with_name("kt_simulate.py")), str(cache), "--strategies",
                    ",".join(strategies), "--seeds", f"0-{seeds - 1}", "--max-fevals", str(budgets(len(pair.instances))[-1]),
                    "--out", str(out)], check=True, stderr=subprocess.DEVNULL)
    got = json.loads(out.read_text())
    got["wall_s"] = time.monotonic() - t
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", action="append", help=f"database, cache or directory (default: {' '.join(DEFAULT_SOURCES)})")
    ap.add_argument("--discover-complete", action="store_true", help="also the committed databases' pairs complete "
                    "within the current space files")
    ap.add_argument("--list", action="store_true", help="list the pairs and exit")
    ap.add_argument("--min-size", type=int, default=1000, help="smallest pair benchmarked (instances)")
    ap.add_argument("--pairs", default="", help="only pairs whose label contains one of these (comma-separated)")
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1 (tune on "
                    "other seeds than those reported)")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--option", action="append", default=[], help="a model-based strategy option, key=value")
    ap.add_argument("--kt-seeds", type=int, default=10, help="Kernel Tuner's seeds (0: no Kernel Tuner)")
    ap.add_argument("--kt-strategies", default=",".join(KT_STRATEGIES))
    ap.add_argument("--kt-python", default=KT_PYTHON)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "search.csv"))
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--fractions", default=",".join(map(str, FRACTIONS)), help="budgets as fractions of each pair (the last: the runs' length)")
    args = ap.parse_args()
    FRACTIONS[:] = [float(f) for f in args.fractions.split(",")]
    work = temp_work()
    pairs = load_sources(args.source or list(DEFAULT_SOURCES), work, args.min_size)
    if args.discover_complete:
        pairs += discover_complete(args.min_size)
    pairs = [p for p in pairs if len(p.instances) >= args.min_size
             and (not args.pairs or any(s in p.label for s in args.pairs.split(",")))]
    for p in pairs:
        print(f"{p.label:75s} {len(p.instances):6d} instances  true best {p.true_best:.5g} ms  ({p.source})")
    if args.list or not pairs:
        return
    options = {k: json.loads(v) if v[:1].isdigit() or v in ("true", "false") else v
               for k, v in (o.split("=", 1) for o in args.option)}
    rows: list[tuple] = []
    traces: dict[tuple[str, str, str], list[np.ndarray]] = {}  # (tool, strategy, pair label) -> per seed
    timings: dict[str, float] = {}
    pool = ThreadPoolExecutor(1)  # Kernel Tuner runs in its own process beside our replays
    kt_jobs = {p.label: pool.submit(run_kt, p, work, args.kt_strategies.split(","), args.kt_seeds, args.kt_python)
               for p in pairs} if args.kt_seeds > 0 else {}
    for p in pairs:
        bs = budgets(len(p.instances))
        for strategy in args.strategies.split(","):
            t = time.monotonic()
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                traces.setdefault(("autotune", strategy, p.label), []).append(replay(p, strategy, bs[-1], seed, options))
            timings[f"autotune {strategy} {p.label}"] = time.monotonic() - t
            print(f"  {p.label} {strategy}: {time.monotonic() - t:.1f} s", file=sys.stderr, flush=True)
    for p in pairs:
        if p.label not in kt_jobs:
            continue
        got = kt_jobs[p.label].result()
        timings[f"kerneltuner (all strategies) {p.label}"] = got["wall_s"]
        for strategy, why in got["failed"].items():
            print(f"  kerneltuner {strategy} failed on {p.label}: {why}", file=sys.stderr)
        for strategy, runs in got["runs"].items():
            for seed in sorted(runs, key=int):
                traces.setdefault(("kerneltuner", strategy, p.label), []).append(best_so_far(runs[seed]["times"]))
    by_label = {p.label: p for p in pairs}
    for (tool, strategy, label), ts in traces.items():
        p = by_label[label]
        first = args.first_seed if tool == "autotune" else 0
        for i, tr in enumerate(ts):
            for b in budgets(len(p.instances)):
                best = float(tr[min(b, len(tr)) - 1]) if len(tr) else math.inf
                rows.append((tool, strategy, p.space, p.point.key, first + i, len(p.instances), b, best, p.true_best,
                             p.device))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        w.writerows(rows)
    scores = methodology_scores(traces, by_label)
    print(summary(rows, scores))
    (out.with_suffix(".timings.json")).write_text(json.dumps(timings, indent=1))
    if not args.no_plot:
        plot(traces, pairs, out.with_suffix(".png"))
    print(f"wrote {out}" + ("" if args.no_plot else f" and {out.with_suffix('.png')}"))


def methodology_scores(traces: dict, by_label: dict[str, Pair]) -> dict[tuple[str, str], float]:
    curves: dict[tuple[str, str], list[np.ndarray]] = {}
    for (tool, strategy, label), ts in traces.items():
        width = max(len(t) for t in ts)
        arr = np.array([np.pad(t, (0, width - len(t)), mode="edge") if len(t) else np.full(width, np.inf) for t in ts])
        curves.setdefault((tool, strategy), []).append(pair_score(arr, by_label[label].times))
    return {k: score(v) for k, v in curves.items()}


def gaps(rows: list[tuple], tool: str, strategy: str, frac: float) -> list[float]:
    g = [r[7] / r[8] - 1 for r in rows if r[0] == tool and r[1] == strategy and r[6] == max(1, math.ceil(frac * r[5]))]
    return [x if math.isfinite(x) else 9.99 for x in g]  # nothing valid found: counted as 999%


def summary(rows: list[tuple], scores: dict[tuple[str, str], float]) -> str:
    lines = ["| tool | strategy | " + " | ".join(f"{int(f * 100)}% median / p90" for f in FRACTIONS) + " | score |",
             "|---|---|" + "---|" * (len(FRACTIONS) + 1)]
    for tool, strategy in sorted(scores, key=lambda k: -scores[k]):
        cells = []
        for frac in FRACTIONS:
            g = gaps(rows, tool, strategy, frac)
            cells.append(f"{np.median(g):.4f} / {np.percentile(g, 90):.4f}" if g else "-")
        lines.append(f"| {tool} | {strategy} | " + " | ".join(cells) + f" | {scores[(tool, strategy)]:.3f} |")
    return "\n".join(lines)


def plot(traces: dict, pairs: list[Pair], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cols = min(3, len(pairs))
    nrow = math.ceil(len(pairs) / cols)
    fig, axes = plt.subplots(nrow, cols, figsize=(5.5 * cols, 3.6 * nrow), squeeze=False)
    keys = sorted({(t, s) for t, s, _ in traces})
    for ax, p in zip(axes.flat, pairs):
        for i, (tool, strategy) in enumerate(keys):
            ts = traces.get((tool, strategy, p.label))
            if not ts:
                continue
            width = max(len(t) for t in ts)
            gap = np.array([np.pad(t, (0, width - len(t)), mode="edge") for t in ts]) / p.true_best - 1
            gap[~np.isfinite(gap)] = np.nan
            x = np.arange(1, width + 1)
            ours = tool == "autotune"
            ax.plot(x, np.nanmedian(gap, axis=0), color=f"C{i % 10}", lw=1.6 if ours else 0.9,
                    label=f"{'' if ours else 'KT '}{strategy}")
            if ours and len(ts) > 1:
                ax.plot(x, np.nanpercentile(gap, 90, axis=0), color=f"C{i % 10}", ls="--", lw=1.0,
                        label=f"{strategy} p90")
        ax.set_yscale("symlog", linthresh=0.01)
        ax.set_title(f"{p.space} {p.device} {p.point.key.split(':')[-1]} ({len(p.instances)})", fontsize=8)
        ax.set_xlabel("evaluations")
        ax.set_ylabel("best / true best - 1 (median)")
    axes.flat[0].legend(fontsize=5, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
