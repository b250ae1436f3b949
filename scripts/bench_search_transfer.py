"""What transfer between test points saves (issue 33, item 3), replayed on complete recorded spaces.

For every complete database pair whose (device, space) has other complete points (results/complete_h100: three
points each of gemm_batched_simt and hgemm_mma; results/complete_conv_h200: four points of convolution_5x5_wide),
the sweep's `--transfer K` is replayed as the runner does it (`runner._transfer`): the nearest other point (by the
size of its shape, log scale) is searched first with the same strategy and seed up to --source-budget of its
instances; its K best verified instances start the target point (enqueued first, `start=`), and the target is
searched until its best is within --tol of its true best (or 20% of its instances). Reported per pair: the number
of evaluations to reach the tolerance, with and without transfer, median over seeds (a run that does not reach it
counts as 20% + 1: the medians say so with ">").

    python scripts/bench_search_transfer.py --seeds 10 --k 1,3,8
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from search_pairs import Pair, load_sources, replay, temp_work

SOURCES = ("results/complete_h100/complete_h100.sqlite.xz", "results/complete_conv_h200/complete_conv_h200.sqlite.xz")


def size_of(pair: Pair) -> float:
    """log of the shape's volume (the product of the numbers in the point key's last field)."""
    dims = [int(d) for d in pair.point.key.rsplit(":", 1)[-1].split("x") if d.isdigit()]
    return math.log(math.prod(dims)) if dims else 0.0


def search(pair: Pair, strategy: str, seed: int, limit: int, start: list, tol: float | None) -> tuple[int, list]:
    """Replay `strategy` on `pair` (search_pairs.replay): (evaluations until within `tol` of the true best, or
    limit + 1; the instances measured, fastest verified first)."""
    r = replay(pair, strategy, limit, seed, start=start, until_ms=None if tol is None else pair.true_best * (1 + tol))
    reached = tol is not None and len(r.trace) and r.trace[-1] <= pair.true_best * (1 + tol)
    return (len(r.trace) if reached else limit + 1), r.ranked()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strategy", default="hybrid")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--k", default="3", help="transfer sizes (comma-separated; 0, no transfer, is always run)")
    ap.add_argument("--tol", type=float, default=0.02, help="within this fraction of the true best")
    ap.add_argument("--source-budget", type=float, default=0.05, help="fraction of the source point searched")
    ap.add_argument("--out", default="", help="write the per-run evaluations here (JSON)")
    args = ap.parse_args()
    ks = sorted({0, *(int(k) for k in args.k.split(","))})
    pairs = load_sources(list(SOURCES), temp_work(), 1000)
    groups: dict[tuple[str, str], list[Pair]] = {}
    for p in pairs:
        groups.setdefault((p.device, p.space), []).append(p)
    runs: dict[str, dict[int, list[int]]] = {}
    t0 = time.monotonic()
    print(f"| pair | size | source point | {' | '.join(f'K={k}' for k in ks)} |")
    print("|---|---|---|" + "---|" * len(ks))
    for (_, space), group in groups.items():
        if len(group) < 2:
            continue
        for target in group:
            source = min((q for q in group if q is not target), key=lambda q: abs(size_of(q) - size_of(target)))
            limit = max(1, math.ceil(0.20 * len(target.instances)))
            src_limit = max(1, math.ceil(args.source_budget * len(source.instances)))
            per_k: dict[int, list[int]] = {k: [] for k in ks}
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                _, ranked = search(source, args.strategy, seed, src_limit, [], None)
                ids = {i.id: i for i in target.instances}
                for k in ks:
                    start = [ids[i.id] for i in ranked if i.id in ids][:k]
                    n, _ = search(target, args.strategy, seed, limit, start, args.tol)
                    per_k[k].append(n)
            runs[f"{space}@{target.point.key}"] = per_k
            cells = []
            for k in ks:
                med = float(np.median(per_k[k]))
                cells.append(f"{'>' if med > limit else ''}{min(med, limit):.0f}")
            print(
                f"| {space} {target.point.key} | {len(target.instances)} | {source.point.key} | {' | '.join(cells)} |",
                flush=True,
            )
    print(
        f"({time.monotonic() - t0:.0f} s; {args.strategy}, seeds {args.first_seed}-{args.first_seed + args.seeds - 1}, "
        f"source searched to {args.source_budget:.0%}, target until within {args.tol:.0%} of its true best)"
    )
    if args.out:
        Path(args.out).write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
