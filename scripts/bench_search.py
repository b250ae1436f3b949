"""Benchmark the search strategies on complete recorded (space, point) pairs (issue 33).

A pair is complete when every instance of the space (current space file, H100 limits, hard and soft
constraints) that serves the point was measured at it in a committed database (results/**/*.sqlite.gz,
examples/*/results/*.sqlite.gz). Each strategy is replayed on each pair (ask/tell against the recorded
measurements, as the runner's per-point search drives it; early-stopped instances keep their partial median,
failures are failures), with --seeds seeds at budgets of 1, 2, 5, 10 and 20% of the pair's instances. Writes
results/bench/search.csv (tool,strategy,space,point,seed,space_size,evals,best_ms,true_best_ms) and a plot of
best-so-far against evaluations (median and 90th percentile over seeds), and prints median and p90 of
best_ms / true_best_ms - 1 per strategy and budget.

    python scripts/bench_search.py --list            # the complete pairs and their sizes
    python scripts/bench_search.py --seeds 30        # the benchmark (minutes per strategy on 2 cores)
"""
from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune.devices import get_device  # noqa: E402
from autotune.space.generator import generate, serving  # noqa: E402
from autotune.space.instance import Instance  # noqa: E402
from autotune.space.spec import Space, load_space  # noqa: E402
from autotune.sweep.strategies import make_strategy  # noqa: E402
from autotune.vocab import Measurement, Status, TestPoint  # noqa: E402

FRACTIONS = (0.01, 0.02, 0.05, 0.10, 0.20)
STRATEGIES = ("random", "tpe", "brute")
ASK = 256  # what the runner asks for; a model-based strategy returns its batch


@dataclass
class Pair:
    db: str
    space: Space
    point: TestPoint
    instances: list[Instance]  # every instance serving the point, in generation order
    recorded: dict[str, Measurement]

    @property
    def true_best(self) -> float:
        return min(m.median_ms for m in self.recorded.values() if m.status == Status.OK and m.median_ms is not None)

    @property
    def label(self) -> str:
        return f"{self.space.name}@{self.point.key}"


def space_files() -> dict[str, Path]:
    out = {}
    for path in [*sorted((ROOT / "spaces").glob("*.yaml")), *sorted(ROOT.glob("examples/*/space.yaml"))]:
        try:
            out.setdefault(load_space(path).name, path)
        except Exception:  # noqa: BLE001 - a space file that does not load here is not benchmarked
            continue
    return out


def find_pairs(min_size: int = 1) -> list[Pair]:
    """Every complete (space, point) pair of the committed databases (the first database and device that has it)."""
    import warnings

    from autotune.store.store import Store
    files = space_files()
    dbs = sorted(ROOT.glob("results/**/*.sqlite.gz")) + sorted(ROOT.glob("examples/*/results/*.sqlite.gz"))
    pairs, seen = [], set()
    device = get_device("H100")
    generated: dict = {}
    for gz in dbs:
        if "validation" in gz.parts:
            continue  # validation runs measure dispatch-table picks, not spaces
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # older schema versions are read through a migrated copy
            with Store.open(str(gz), readonly=True) as store:
                frame = store.measurements()
        for name, rows in frame.groupby("space"):
            if name not in files:
                continue
            space = load_space(files[name])
            sizes = list(space.kind.size_names)
            for key, at in rows.groupby(["device", "kind", "precision", "shape", *sizes], dropna=False):
                _, kind, precision, shape, *values = key
                if len(at) < min_size or kind != space.kind.name:
                    continue
                try:
                    point = space.kind.point(precision, shape if isinstance(shape, str) else "",
                                             dict(zip(sizes, (int(v) for v in values))))
                except (ValueError, TypeError):
                    continue
                if (name, point) in seen:
                    continue
                if (name, precision) not in generated:
                    generated[(name, precision)] = generate(space, device, precision)
                g = generated[(name, precision)]
                insts = g.instances()
                wanted = [insts[r] for r in np.flatnonzero(serving(g, point))]
                got = {r.instance_id: (r.status, r.median_ms) for r in at.itertuples()}
                if len(wanted) < min_size or any(i.id not in got for i in wanted):
                    continue
                recorded = {i.id: Measurement(i.id, point, Status(got[i.id][0]),
                                              median_ms=None if got[i.id][1] != got[i.id][1] else got[i.id][1])
                            for i in wanted}
                if not any(m.status == Status.OK for m in recorded.values()):
                    continue
                seen.add((name, point))
                pairs.append(Pair(str(gz.relative_to(ROOT)), space, point, wanted, recorded))
    return pairs


def replay(pair: Pair, strategy: str, budget: int, seed: int) -> list[float]:
    """Best verified time after each evaluation (inf before the first)."""
    s = make_strategy(strategy, pair.instances, budget, seed, **({} if strategy in ("random", "brute")
                                                                else {"study": None}))
    best, out = math.inf, []
    while asked := s.ask(ASK):
        for inst in asked:
            m = pair.recorded[inst.id]
            s.tell(inst, [m])
            if m.status == Status.OK and m.median_ms is not None:
                best = min(best, m.median_ms)
            out.append(best)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="list the complete pairs and exit")
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--min-size", type=int, default=50, help="smallest pair benchmarked (instances)")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "search.csv"))
    args = ap.parse_args()
    pairs = find_pairs(args.min_size)
    for p in pairs:
        print(f"{p.label:70s} {len(p.instances):6d} instances  true best {p.true_best:.5g} ms  ({p.db})")
    if args.list:
        return
    rows, curves = [], {}
    strategies = args.strategies.split(",")
    for p in pairs:
        n = len(p.instances)
        for strategy in strategies:
            seeds = range(1) if strategy == "brute" else range(args.seeds)  # brute does not depend on the seed
            t = time.monotonic()
            for frac in FRACTIONS:
                budget = max(1, math.ceil(frac * n))
                for seed in seeds:
                    trace = replay(p, strategy, budget, seed)
                    rows.append(("autotune", strategy, p.space.name, p.point.key, seed, n, budget, trace[-1],
                                 p.true_best))
                    if frac == FRACTIONS[-1]:
                        curves.setdefault((p.label, strategy), []).append(trace)
            print(f"  {p.label} {strategy}: {time.monotonic() - t:.1f} s", file=sys.stderr)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["tool", "strategy", "space", "point", "seed", "space_size", "evals", "best_ms", "true_best_ms"])
        w.writerows(rows)
    summarize(rows, strategies)
    plot(curves, pairs, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")


def summarize(rows: list[tuple], strategies: list[str]) -> None:
    print(f"\n{'strategy':10s} " + " ".join(f"{f'{int(f * 100)}%':>14s}" for f in FRACTIONS))
    print(f"{'':10s} " + " ".join(f"{'median / p90':>14s}" for _ in FRACTIONS))
    for strategy in strategies:
        cells = []
        for frac in FRACTIONS:
            gaps = [r[7] / r[8] - 1 for r in rows if r[1] == strategy and r[6] == max(1, math.ceil(frac * r[5]))]
            gaps = [g if math.isfinite(g) else 9.99 for g in gaps]  # no valid time found: shown as 999%
            cells.append(f"{np.median(gaps):6.3f} / {np.percentile(gaps, 90):5.3f}" if gaps else "-")
        print(f"{strategy:10s} " + " ".join(f"{c:>14s}" for c in cells))


def plot(curves: dict, pairs: list[Pair], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cols = min(3, len(pairs))
    fig, axes = plt.subplots(math.ceil(len(pairs) / cols), cols, figsize=(5 * cols, 3.5 * math.ceil(len(pairs) / cols)),
                             squeeze=False)
    for ax, p in zip(axes.flat, pairs):
        for i, ((label, strategy), traces) in enumerate((k, v) for k, v in curves.items() if k[0] == p.label):
            gap = np.array([np.array(t) / p.true_best - 1 for t in traces])
            gap[~np.isfinite(gap)] = np.nan
            x = np.arange(1, gap.shape[1] + 1)
            color = f"C{i}"
            ax.plot(x, np.nanmedian(gap, axis=0), color=color, label=f"{strategy} median")
            if len(traces) > 1:
                ax.plot(x, np.nanpercentile(gap, 90, axis=0), color=color, ls="--", label=f"{strategy} p90")
        ax.set_yscale("symlog", linthresh=0.01)
        ax.set_title(f"{p.label} ({len(p.instances)})", fontsize=8)
        ax.set_xlabel("evaluations")
        ax.set_ylabel("best / true best - 1")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
