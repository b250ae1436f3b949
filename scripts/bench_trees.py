#!/usr/bin/env python3
"""Benchmark: sweep throughput of two source trees of autotune on the same GPU, in one run (a regression check).

Each round runs `autotune sweep CONFIG` once per tree, alternating the order from round to round, each time
with a fresh SQLite database, a fresh compile cache (the tree's .cache/ is moved aside) and a fresh
CUPY_CACHE_DIR, so compiles, verification and timing are all counted. A tree is a folder holding the `autotune`
package (a checkout, or `git archive COMMIT autotune spaces kernels_src configs pyproject.toml setup.py`).
Throughput = measured pairs (rows of `measurements`, every status) / wall seconds of the sweep process.

  python3 scripts/bench_trees.py --tree before=.before --tree after=. --config configs/default.yaml \
      --max-instances 60 --rounds 2 --out $OUT/trees.json

Prints one line per run and a table last: per tree the median pairs/s, and each tree's ratio to the first.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def one_run(tree: Path, config: str, max_instances: int, workdir: Path) -> dict:
    db = workdir / "bench.sqlite"
    cache = tree / ".cache"
    aside = workdir / "cache-aside"
    if cache.exists():
        shutil.move(str(cache), aside)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(tree.resolve()), os.environ.get("PYTHONPATH")])),
        CUPY_CACHE_DIR=str(workdir / "cupy"),
        CUDA_CACHE_PATH=str(workdir / "cuda"),  # the driver's compute cache (NVRTC's ptxas step): cold for each tree
        PYTHONUNBUFFERED="1",
    )
    cmd = [
        sys.executable,
        "-m",
        "autotune",
        "sweep",
        str(Path(config).resolve()),
        "--db",
        f"sqlite:///{db}",
        "--max-instances",
        str(max_instances),
        "-q",
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    try:
        with sqlite3.connect(db) as conn:
            rows = dict(conn.execute("SELECT status, COUNT(*) FROM measurements GROUP BY status").fetchall())
    except sqlite3.Error:
        rows = {}
    if cache.exists():
        shutil.rmtree(cache)
    if aside.exists():
        shutil.move(str(aside), cache)
    pairs = sum(rows.values())
    return {
        "rc": proc.returncode,
        "wall_s": wall,
        "pairs": pairs,
        "statuses": rows,
        "pairs_per_s": pairs / wall if wall > 0 else 0.0,
        "tail": (proc.stdout + proc.stderr)[-2000:],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", action="append", required=True, help="NAME=PATH of a source tree (two or more)")
    ap.add_argument("--config", default="configs/default.yaml")
    ap.add_argument("--max-instances", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=None, help="JSON with every run")
    args = ap.parse_args()
    trees = [(t.split("=", 1)[0], Path(t.split("=", 1)[1])) for t in args.tree]
    runs: list[dict] = []
    for r in range(args.rounds):
        order = trees if r % 2 == 0 else trees[::-1]
        for name, path in order:
            with tempfile.TemporaryDirectory() as tmp:
                res = one_run(path, args.config, args.max_instances, Path(tmp))
            res.update(tree=name, round=r)
            runs.append(res)
            print(
                f"round {r} {name}: rc {res['rc']} {res['pairs']} pairs in {res['wall_s']:.1f} s "
                f"= {res['pairs_per_s']:.2f} pairs/s {res['statuses']}",
                flush=True,
            )
            if res["rc"] != 0:
                print(res["tail"], file=sys.stderr)
            if args.out:
                Path(args.out).write_text(
                    json.dumps({"config": args.config, "max_instances": args.max_instances, "runs": runs}, indent=1)
                )
    first = None
    print(f"{'tree':<10} {'runs':>4} {'median pairs/s':>15} {'min':>8} {'max':>8} {'ratio':>7}")
    for name, _ in trees:
        rates = [x["pairs_per_s"] for x in runs if x["tree"] == name]
        med = statistics.median(rates)
        first = first or med
        print(f"{name:<10} {len(rates):>4} {med:>15.2f} {min(rates):>8.2f} {max(rates):>8.2f} {med / first:>7.3f}")
    return 0 if all(x["rc"] == 0 for x in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
