#!/usr/bin/env python3
"""Benchmark: a large `.npy` file to the GPU, the ways the GPU worker could read it (autotune.problems.npy_upload).

Writes one file of random float32 (--gb, default 3.2 GB: Kernel Tuner's reduction example's input) in --dir, then
times each method in a fresh process with its CUDA context already made (the GPU worker's situation: the file was
just written by another process, so it is in the page cache):
  mmap        numpy.load(mmap_mode="r") + cupy.array (the path before npy_upload)
  read        numpy.load into host memory + cupy.array
  npy_upload  autotune.problems.npy_upload.upload_npy (os.preadv into pinned buffers, READERS threads)
Each method runs --repeat times (interleaved); every result is checked against the file. Prints seconds and GB/s.

GPU machine:  python3 scripts/bench_npy_upload.py
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
METHODS = ("mmap", "read", "npy_upload")


def child(method: str, path: Path) -> None:
    import cupy as cp
    import numpy as np

    cp.cuda.Device(0).use()
    cp.zeros(1)
    cp.cuda.runtime.deviceSynchronize()
    host = np.load(path, mmap_mode="r")
    t0 = time.perf_counter()
    if method == "mmap":
        dev = cp.array(np.load(path, mmap_mode="r"))
    elif method == "read":
        dev = cp.array(np.load(path))
    else:
        from autotune.problems.npy_upload import upload_npy

        dev = upload_npy(cp, path, host.dtype, host.shape)
        assert dev is not None, "npy_upload declined the file"
    cp.cuda.runtime.deviceSynchronize()
    seconds = time.perf_counter() - t0
    picks = np.random.default_rng(0).integers(0, host.size, 1000)
    ok = bool(np.array_equal(cp.asnumpy(dev[cp.asarray(picks)]), host[picks])) and float(dev[-1]) == float(host[-1])
    print(f"{method} {seconds:.4f} {ok}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=3.2, help="the file's size in GB (default 3.2)")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each method (default 2)")
    ap.add_argument("--dir", type=Path, default=None, help="where the file is written (default: a temporary folder)")
    ap.add_argument("--child", nargs=2, metavar=("METHOD", "FILE"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child(a.child[0], Path(a.child[1]))
        return 0
    import numpy as np

    folder = Path(tempfile.mkdtemp(dir=a.dir))
    path = folder / "x.npy"
    n = int(a.gb * 1e9) // 4
    np.save(path, np.random.default_rng(0).random(n, dtype=np.float32))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    rows = []
    try:
        for r in range(a.repeat):
            for method in METHODS:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", method, str(path)],
                    capture_output=True,
                    text=True,
                    env=env,
                    check=False,
                )
                line = (out.stdout.strip().splitlines() or [""])[-1].split()
                if out.returncode != 0 or len(line) != 3:
                    print(f"{method}: failed (exit {out.returncode}): {out.stderr.strip()[-400:]}")
                    return 1
                rows.append((method, r + 1, float(line[1]), line[2] == "True"))
    finally:
        path.unlink(missing_ok=True)
        folder.rmdir()
    print(f"{'method':<11} {'run':>3} {'seconds':>8} {'GB/s':>6}  check   ({n * 4 / 1e9:.2f} GB float32)")
    for method, r, s, ok in rows:
        print(f"{method:<11} {r:>3} {s:>8.3f} {n * 4 / s / 1e9:>6.1f}  {'ok' if ok else 'WRONG'}")
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
