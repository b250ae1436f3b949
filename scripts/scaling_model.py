"""Predict a sweep's speed-up on 1..64 GPUs and 1..8 compile nodes from what its databases recorded
(`autotune.sweep.scaling`), and check the model against every measured sweep given.

    python scripts/scaling_model.py --one ONE.sqlite [--dask D1.sqlite --dask D2.sqlite ...] [--pairs 30000]

`--one`: a one-process sweep (the single GPU, timing-bound: its kernels were in the compile cache). From it: pairs,
kernels, their summed compile seconds (`measurements.compile_s`), the start (sweep start to first measurement) and,
with the client's seconds per record, the GPU's seconds per pair. `--dask`: sweeps of the same config through Dask
(the GPUs: the distinct devices of their measurements); the first one's record times give the client's seconds per
record (the client records each chunk's pairs in one burst) and its wall time the per-chunk cost; each one is then
predicted and printed against its measured wall time (the sweep row's start to finish). `--check NAME=DB`: any other
sweep of the same config to predict (one process, `cold` if its kernels were compiled in the run). Then the table of
predicted speed-ups and the predicted wall time of a sweep of `--pairs` pairs (seed scale) on each cluster.
SQLite files only (read with the standard library).
"""

from __future__ import annotations

import argparse
import math
import sqlite3
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Sequence

from autotune.sweep.runner import ASK_BATCH
from autotune.sweep.scaling import (
    Cluster,
    Split,
    fit_chunk_s,
    fit_gpu_s_per_pair,
    predict,
    record_s_per_pair,
    speedups,
)


def _t(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def read(db: str) -> dict:
    """What one sweep database recorded: wall s, start s, pairs, kernels, compile s, GPUs, record times."""
    if not Path(db).is_file():
        raise SystemExit(f"{db}: no such file (give a sweep's SQLite database)")
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        sweeps = c.execute("select started_at, finished_at, status from sweeps order by id").fetchall()
        if len(sweeps) != 1 or sweeps[0][1] is None:
            raise SystemExit(f"{db}: expected exactly one finished sweep, found {len(sweeps)}")
        rows = c.execute(
            "select m.instance_id, p.precision, p.shape, m.compile_s, m.measured_at, m.device_id "
            "from measurements m join test_points p on p.id = m.point_id"
        ).fetchall()
        spaces = c.execute("select count(distinct space_id) from measurements").fetchone()[0]
    if not rows:
        raise SystemExit(f"{db}: no measurements")
    kernels: dict[tuple, float] = {}
    for iid, prec, shape, cs, _, _ in rows:
        kernels[(iid, prec, shape)] = max(kernels.get((iid, prec, shape), 0.0), cs or 0.0)
    times = [_t(r[4]) for r in rows]
    configs = len({r[0] for r in rows})
    start, end = _t(sweeps[0][0]), _t(sweeps[0][1])
    return dict(
        wall_s=end - start,
        start_s=min(times) - start,
        pairs=len(rows),
        kernels=len(kernels),
        compile_cpu_s=sum(kernels.values()),
        gpus=len({r[5] for r in rows}),
        times=times,
        configs=configs,
        batches=spaces * math.ceil(configs / spaces / ASK_BATCH),
    )


def fitted(
    one: dict, first_dask: dict | None, record_s: float | None, host_cores: int, node_cores: int
) -> tuple[Split, Cluster]:
    """The model's split and cluster from a one-process sweep (`read`) and, where given, the first Dask sweep of
    the same config: the client's seconds per record (unless `record_s`) from its record times, the GPU's seconds per
    pair from the one-process wall time, the per-chunk cost from the Dask wall time."""
    w = record_s if record_s is not None else (record_s_per_pair(first_dask["times"]) if first_dask else 0.0)
    t = fit_gpu_s_per_pair(one["wall_s"], one["start_s"], one["pairs"], w)
    split = Split(one["pairs"], one["kernels"], 0.0, t, w, one["start_s"])
    base = Cluster(host_cores=host_cores, node_cores=node_cores, batches=one["batches"])
    if first_dask:
        cluster = replace(base, gpus=first_dask["gpus"])
        split = replace(split, chunk_s=fit_chunk_s(split, cluster, first_dask["wall_s"]))
    return split, base


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="scripts/scaling_model.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--one", required=True, help="a one-process, timing-bound sweep's database")
    ap.add_argument("--dask", action="append", default=[], help="a Dask sweep of the same config (repeatable)")
    ap.add_argument("--check", action="append", default=[], help="NAME=DB or cold:NAME=DB: another sweep to predict")
    ap.add_argument("--record-s", type=float, default=None, help="client seconds per record (else from --dask)")
    ap.add_argument("--host-cores", type=int, default=16, help="cores of each GPU host (default 16)")
    ap.add_argument("--node-cores", type=int, default=16, help="cores of each compile node (default 16)")
    ap.add_argument("--pairs", type=int, default=30000, help="pairs of the seed-scale sweep to predict (default 30000)")
    ap.add_argument("--cold", action="store_true", help="the seed-scale sweep compiles every kernel (default: cached)")
    args = ap.parse_args(argv)

    one = read(args.one)
    dask = [(db, read(db)) for db in args.dask]
    split, base = fitted(one, dask[0][1] if dask else None, args.record_s, args.host_cores, args.node_cores)
    print(
        f"split (from {Path(args.one).name}{', ' + Path(dask[0][0]).name if dask else ''}): {split.pairs} pairs, "
        f"{one['kernels']} kernels compiling {one['compile_cpu_s']:.1f} CPU-s when cold; GPU "
        f"{split.gpu_s_per_pair * 1e3:.2f} ms/pair, client {split.record_s_per_pair * 1e3:.2f} ms/record, "
        f"{split.chunk_s * 1e3:.0f} ms/chunk, start {split.start_s:.2f} s"
    )
    print(f"\n{'sweep':<24} {'GPUs':>4} {'measured s':>10} {'predicted s':>11} {'error':>7}  fitted/predicted")
    print(
        f"{Path(args.one).name:<24} {1:>4} {one['wall_s']:>10.2f} {predict(split, replace(base, dask=False)).wall_s:>11.2f}  (fit)"
    )
    for i, (db, d) in enumerate(dask):
        p = predict(split, replace(base, gpus=d["gpus"])).wall_s
        print(
            f"{Path(db).name:<24} {d['gpus']:>4} {d['wall_s']:>10.2f} {p:>11.2f} {(p / d['wall_s'] - 1) * 100:>+6.1f}%  "
            + ("(fits ms/chunk)" if i == 0 else "predicted")
        )
    for spec in args.check:
        cold, _, rest = spec.partition("cold:") if spec.startswith("cold:") else ("", "", spec)
        name, _, db = rest.partition("=")
        d = read(db)
        s = replace(split, compile_cpu_s=d["compile_cpu_s"] if spec.startswith("cold:") else 0.0)
        p = predict(s, replace(base, gpus=d["gpus"], dask=d["gpus"] > 1)).wall_s
        print(
            f"{name:<24} {d['gpus']:>4} {d['wall_s']:>10.2f} {p:>11.2f} {(p / d['wall_s'] - 1) * 100:>+6.1f}%  predicted"
        )

    seed = split.scaled(args.pairs)
    if args.cold:
        seed = replace(seed, compile_cpu_s=one["compile_cpu_s"] * args.pairs / one["pairs"])
    gpus, nodes = [1, 2, 4, 8, 16, 32, 64], [0, 1, 2, 4, 8]
    configs = one["configs"] * args.pairs / one["pairs"]  # the runner asks ASK_BATCH instances at a time
    base = replace(base, batches=max(1, math.ceil(configs / ASK_BATCH)))
    table = speedups(seed, gpus, nodes, base)
    print(
        f"\npredicted speed-up over one process on one GPU, a {args.pairs}-pair sweep of these kernels "
        f"({'cold: every kernel compiled' if args.cold else 'kernels cached'}); rows GPUs, columns compile nodes "
        f"(0: the GPU hosts compile)"
    )
    print(f"{'GPUs':>5} " + " ".join(f"{k:>7}" for k in nodes) + f" {'wall (0)':>10}  bound")
    for p in gpus:
        pred = predict(seed, replace(base, gpus=p))
        print(f"{p:>5} " + " ".join(f"{table[(p, k)]:>7.2f}" for k in nodes) + f" {pred.wall_s:>9.0f}s  {pred.bound}")
    one_wall = predict(seed, replace(base, dask=False)).wall_s
    print(f"one process on one GPU: {one_wall:.0f} s")


if __name__ == "__main__":
    main()
