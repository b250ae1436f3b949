#!/usr/bin/env python3
"""Benchmark: a large `.npy` argument to the GPU, as the GPU worker prepares a point's data (issue 31: Kernel Tuner's
reduction example hands 800M floats, 3.2 GB; its data took 2.6 s to prepare on an H100 host).

Writes one float32 `.npy` of --gb GB in --dir, then times, --reps times each, in this order, on the file hot in the
page cache (as after tune_kernel wrote it):
  * mapped:  np.load(mmap_mode="r") + cupy.array: the path before autotune.problems.upload;
  * staged:  np.load(mmap_mode="r") + autotune.problems.upload.to_device (two pinned buffers, chunks overlapped);
  * memory:  cupy.asarray of an array already in host memory (Kernel Tuner's path: its arguments are in memory).
Each result is checked equal to the file (a sum on both sides). Prints a table (median seconds, GB/s); --json
writes the numbers with the machine's description.

GPU machine: python3 scripts/bench_upload.py --gb 3.2 --dir /tmp --json $OUT/upload.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=3.2, help="size of the array in GB (default %(default)s)")
    ap.add_argument("--reps", type=int, default=3, help="timings of each path (default %(default)s)")
    ap.add_argument("--dir", type=Path, default=None, help="where the .npy is written (default: a temporary folder)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    a = ap.parse_args(argv)

    import cupy as cp

    from autotune.problems.upload import to_device

    n = int(a.gb * 1e9) // 4
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        path = Path(tmp) / "x.npy"
        host = np.random.default_rng(0).random(n, dtype=np.float32)
        np.save(path, host)
        want = float(host.astype(np.float64).sum())
        cp.cuda.Device().synchronize()

        def mapped() -> object:
            return cp.array(np.load(path, mmap_mode="r"))

        def staged() -> object:
            return to_device(cp, np.load(path, mmap_mode="r"))

        def memory() -> object:
            return cp.asarray(host)

        paths = {"mapped": mapped, "staged": staged, "memory": memory}
        seconds: dict[str, list[float]] = {k: [] for k in paths}
        for _ in range(a.reps):
            for name, fn in paths.items():
                t0 = time.perf_counter()
                got = fn()
                cp.cuda.Device().synchronize()
                seconds[name].append(time.perf_counter() - t0)
                total = float(got.astype(cp.float64).sum())  # type: ignore[attr-defined]
                if abs(total - want) > 1e-6 * abs(want):
                    raise SystemExit(f"{name}: the array on the GPU differs from the file (sum {total} != {want})")
                del got
                cp.get_default_memory_pool().free_all_blocks()
    nbytes = n * 4
    rows = {
        k: {"median_s": statistics.median(v), "gb_per_s": nbytes / statistics.median(v) / 1e9, "all_s": v}
        for k, v in seconds.items()
    }
    if a.json:
        props = cp.cuda.runtime.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        a.json.write_text(json.dumps({"gpu": name, "host": platform.node(), "bytes": nbytes, "rows": rows}, indent=1))
    print(f"{'path':8} {'median s':>9} {'GB/s':>6}   ({nbytes / 1e9:.2f} GB, {a.reps} reps)")
    for k, r in rows.items():
        print(f"{k:8} {r['median_s']:9.3f} {r['gb_per_s']:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
