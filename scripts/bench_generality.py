#!/usr/bin/env python3
"""Benchmark: does generality cost sweep throughput? (target: configs/s before and after within 5%)

Runs the same GEMM sweep with two source trees of autotune (e.g. the commit before the problem-kind redesign,
exported with `git archive`, and the working tree), alternating A B A B ... in one run on one GPU, each run in a
fresh process with a fresh compile cache and a fresh SQLite file: one space (default gemm_batched_simt), one
test point (fp32 NN 32x32x32, batch 20,000), the sweep's seeded `random` strategy picking N instances (default
120), early stop off. Throughput = measurements / wall clock of `run_sweep` (worker start, device description,
cuBLAS, compiles, verification and timing included). Prints one line per run and the ratio of the medians;
writes JSON with --out.

  python scripts/bench_generality.py --tree before=.before --tree after=. --rounds 2 --out $OUT/generality.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

CHILD = textwrap.dedent("""
    import json, sys, time, tempfile
    from pathlib import Path
    try:  # the package layout after the redesign
        from autotune.sweep.config import parse_config
        from autotune.sweep.runner import run_sweep
        from autotune.sweep.backends.local import GpuBackend
        from autotune.store.store import Store
    except ImportError:  # the flat layout before it
        from autotune.config import parse_config
        from autotune.runner import run_sweep
        from autotune.worker import GpuBackend
        from autotune.store import Store
    try:  # since issue 58 GpuBackend takes its options as one LocalOptions; before, as keywords
        from autotune.sweep.backends.local import LocalOptions
    except ImportError:
        LocalOptions = None

    class Quiet:
        def start(self, total, done): pass
        def measured(self, m, best): pass
        def note(self, text): pass

    space, instances, tmp = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    text = f'''name: generality
    spaces: [{{space: {space}, max_instances: {instances}}}]
    points: [{{precisions: [fp32], shapes: [NN], sizes: {{square: 32}}, batch: 20000}}]
    strategy: random
    seed: 0
    repetitions: 20
    database: sqlite:///{tmp / "db.sqlite"}
    '''
    cfg = parse_config(text, file=tmp / "generality.yaml")
    store = Store.open(cfg.database)
    options = dict(cache_dir=tmp / "cache", tol=None)
    backend = GpuBackend(LocalOptions(**options)) if LocalOptions is not None else GpuBackend(**options)
    t0 = time.perf_counter()
    try:
        summary = run_sweep(cfg, store, backend, Quiet())
    finally:
        backend.close()
        store.close()
    seconds = time.perf_counter() - t0
    print(json.dumps({"measured": summary.measured, "seconds": seconds, "status": summary.status,
                      "counts": dict(summary.counts)}))
""")


def run_once(tree: Path, space: str, instances: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="autotune-generality-") as tmp:
        path = os.pathsep.join(x for x in (str(tree.resolve()), os.environ.get("PYTHONPATH", "")) if x)
        env = {**os.environ, "PYTHONPATH": path, "CUPY_CACHE_DIR": str(Path(tmp) / "cupy")}
        env["CUDA_CACHE_PATH"] = str(Path(tmp) / "cuda")  # the driver's compute cache (NVRTC's ptxas step): cold
        out = subprocess.run(
            [sys.executable, "-c", CHILD, space, str(instances), tmp],
            env=env,
            cwd=tree,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if out.returncode != 0:
            raise SystemExit(f"run in {tree} failed:\n{out.stdout}\n{out.stderr}")
        result = json.loads(out.stdout.strip().splitlines()[-1])
    result["configs_per_s"] = result["measured"] / result["seconds"]
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--tree",
        action="append",
        required=True,
        metavar="LABEL=PATH",
        help="a source tree of autotune to measure (give two or more)",
    )
    ap.add_argument("--space", default="gemm_batched_simt")
    ap.add_argument("--instances", type=int, default=120)
    ap.add_argument("--rounds", type=int, default=2, help="runs of each tree, alternating")
    ap.add_argument("--warmup", type=int, default=1, help="rounds run first and not counted (disk caches, clocks)")
    ap.add_argument("--out", help="write the JSON here")
    args = ap.parse_args()
    trees = [(label, Path(path)) for label, path in (t.split("=", 1) for t in args.tree)]
    runs: dict[str, list[dict]] = {label: [] for label, _ in trees}
    for r in range(args.warmup):
        for label, path in trees:
            res = run_once(path, args.space, args.instances)
            print(f"warm-up {r + 1} {label:>8}: {res['configs_per_s']:.2f} configs/s (not counted)", flush=True)
    for r in range(args.rounds):
        for label, path in trees:
            res = run_once(path, args.space, args.instances)
            runs[label].append(res)
            print(
                f"round {r + 1} {label:>8}: {res['measured']} measurements in {res['seconds']:.1f} s = "
                f"{res['configs_per_s']:.2f} configs/s {res['counts']}",
                flush=True,
            )
    medians = {label: statistics.median(x["configs_per_s"] for x in rs) for label, rs in runs.items()}
    first = trees[0][0]
    report = {
        "space": args.space,
        "instances": args.instances,
        "rounds": args.rounds,
        "warmup": args.warmup,
        "runs": runs,
        "median_configs_per_s": medians,
        "ratio_to_first": {label: medians[label] / medians[first] for label in medians},
    }
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))
    print("\ntree      median configs/s   vs " + first)
    for label, m in medians.items():
        print(f"{label:>8}  {m:16.2f}   {m / medians[first]:.3f}")


if __name__ == "__main__":
    main()
