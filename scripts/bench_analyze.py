"""Time the analyzer on a synthetic seed-scale sweep (default 5,000 instances x 128 test points).

Prints the time of each stage: pivot, winners, greedy and exact reduction at each TOL, the dispatch
table, and (with --loo) the leave-one-out study. Target: the whole analysis under 60 s on 2 cores.
    python scripts/bench_analyze.py [--instances 5000] [--points 128] [--bk 10] [--loo]
"""

from __future__ import annotations

import argparse
import os
import time


from autotune.dispatch.table import Provenance, build_table
from autotune.dispatch.emit import emit_cpp, emit_python
from autotune.dispatch.loo import leave_one_out
from autotune.analysis.setcover import select
from autotune.analysis.winners import Criteria, perf_matrix, winners
from autotune.problems.gemm.synthetic import synthetic_measurements


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=5000)
    ap.add_argument("--points", type=int, default=128)
    ap.add_argument("--bk", type=int, default=10, help="0: every verified instance is a candidate")
    ap.add_argument("--tols", default="0,0.05,0.1,0.15")
    ap.add_argument("--loo", action="store_true", help="also time leave-one-out (exact, one TOL)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sizes = [(s, s, s) for s in range(1, args.points + 1)]  # one (precision, shape) group: the hardest case
    df = synthetic_measurements(args.instances, sizes, seed=args.seed)
    print(
        f"synthetic sweep: {args.instances} instances x {len(sizes)} points = {len(df):,} rows, cpus={os.cpu_count()}"
    )
    t0 = time.perf_counter()
    matrix = perf_matrix(df)
    print(f"pivot              {time.perf_counter() - t0:7.2f} s")
    bk = args.bk if args.bk > 0 else None
    for tol in (float(x) for x in args.tols.split(",")):
        t = time.perf_counter()
        w = winners(matrix, Criteria(bk=bk, tol=tol))
        tw = time.perf_counter() - t
        g, e = select(w, "greedy"), select(w, "exact")
        print(
            f"TOL {100 * tol:5.1f}%  winners {tw:5.2f} s | greedy {g.n_kernels:3d} kernels {g.solve_s:6.2f} s | "
            f"exact {e.n_kernels:3d} kernels ({'proven' if e.optimal else 'NOT proven'}, {e.secondary}) "
            f"{e.solve_s:6.2f} s | worst loss greedy {100 * g.worst_loss:.2f}% exact {100 * e.worst_loss:.2f}%"
        )
    t = time.perf_counter()
    table = build_table(w, e, Provenance(device="synthetic"))
    emit_cpp(table), emit_python(table)
    print(f"dispatch + emit    {time.perf_counter() - t:7.2f} s ({len(table.data['regions'])} regions)")
    if args.loo:
        t = time.perf_counter()
        res = leave_one_out(matrix, Criteria(bk=bk, tol=tol), "exact")
        print(
            f"leave-one-out      {time.perf_counter() - t:7.2f} s (worst held-out loss {100 * res.worst_loss:.2f}%, "
            f"{res.failures} held-out answers not verified at their point)"
        )
    print(f"total              {time.perf_counter() - t0:7.2f} s")


if __name__ == "__main__":
    main()
