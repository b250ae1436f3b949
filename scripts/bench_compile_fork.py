#!/usr/bin/env python3
"""Where an NVRTC compile's time goes in autotune's compile processes (issue 31: our compile times were 3-5x
Kernel Tuner's for the same kernels on an H200, e.g. its stencil example 202 ms against 40 ms).

Compiles one Kernel Tuner example kernel (tests/data/kt_public/, with its first configuration's #defines) N times
each way, every way in a fresh process: `inproc` (NVRTC in the process itself), `fork_cold` (each compile in a
forked child, `compile.with_time_limit`, as the sweep did for its compile timeout until the compile pool, from a
process that never compiled), `fork_warm` (the same after `compile.warm_nvrtc()`), `pool` (the sweep's path now:
`compile_batch` with a 600 s limit submitted to a one-process `compile_pool.CompilePool`, which compiles in its
process and enforces the limit from the parent; timed from submit to result, a fresh cache each time). Prints the
median and min ms per way, and writes them as JSON (--out). NVRTC from CuPy; without a GPU give --arch (e.g. 90):
  python3 scripts/bench_compile_fork.py --out $OUT/compile_fork.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = {
    "stencil": ("stencil.cu", "stencil_kernel", {"block_size_x": 32, "block_size_y": 1}),
    "convolution": (
        "convolution.cu",
        "convolution_kernel",
        {
            "block_size_x": 32,
            "block_size_y": 2,
            "tile_size_x": 1,
            "tile_size_y": 1,
            "filter_width": 3,
            "filter_height": 1,
            "use_padding": 0,
            "read_only": 0,
        },
    ),
}


def one_way(way: str, kernel: str, n: int, arch: int | None = None) -> list[float]:
    sys.path.insert(0, str(ROOT))
    from autotune.sweep.compile import nvrtc as c

    if way == "pool":
        return pool_way(kernel, n, arch or _arch())
    file, name, defines = KERNELS[kernel]
    text = (
        "".join(f"#define {k} {v}\n" for k, v in defines.items()) + (ROOT / "tests/data/kt_public" / file).read_text()
    )
    nvrtc = c._nvrtc()
    arch_opt, kind = c.arch_option(arch or _arch(), tuple(nvrtc.getSupportedArchs()))
    options = (*c.DEFAULT_OPTIONS, arch_opt)
    if way == "fork_warm":
        c.warm_nvrtc()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        if way == "inproc":
            c.nvrtc_compile(text, file, (name,), options, kind)
        else:
            c.with_time_limit(lambda: c.nvrtc_compile(text, file, (name,), options, kind), 60.0, "bench")
        out.append(1000 * (time.perf_counter() - t0))
    return out


def pool_way(kernel: str, n: int, arch: int) -> list[float]:
    import multiprocessing as mp
    import tempfile

    from autotune.sweep.compile.nvrtc import CompileRequest, compile_batch, warm_compile_process
    from autotune.sweep.compile.compile_pool import CompilePool

    file, name, defines = KERNELS[kernel]
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / file
        src.write_text((ROOT / "tests/data/kt_public" / file).read_text())
        options = ("-std=c++17", *(f"-D{k}={v}" for k, v in defines.items()))
        pool = CompilePool(1, mp.get_context("spawn"), initializer=warm_compile_process)
        try:
            pool.submit(os.getpid).result(timeout=120)  # started (and warmed) before the first timed compile
            for i in range(n):
                req = CompileRequest(src, (name,), arch, options=options, timeout_s=600.0)
                t0 = time.perf_counter()
                (ck,) = pool.submit(compile_batch, req, Path(tmp) / f"cache{i}", timeout_s=602.0).result()
                out.append(1000 * (time.perf_counter() - t0))
                if not ck.ok:
                    raise RuntimeError(ck.log)
        finally:
            pool.shutdown()
    return out


def _arch() -> int:
    import cupy

    return int(cupy.cuda.Device(0).compute_capability)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--arch", type=int, help="compute capability as an integer (default: GPU 0's)")
    ap.add_argument("--ways", default="inproc,fork_cold,fork_warm,pool", help="comma-separated ways to measure")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one_way(a.one[0], a.one[1], a.n, a.arch)))
        return 0
    report = {}
    for kernel in KERNELS:
        for way in a.ways.split(","):
            arch = ["--arch", str(a.arch)] if a.arch else []
            proc = subprocess.run(
                [sys.executable, __file__, "--n", str(a.n), *arch, "--one", way, kernel],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if proc.returncode:
                report[f"{kernel}/{way}"] = {"error": proc.stderr[-1500:]}
                print(f"{kernel:<12} {way:<10} failed: {proc.stderr.strip().splitlines()[-1:]}")
                continue
            ms = json.loads(proc.stdout.strip().splitlines()[-1])
            report[f"{kernel}/{way}"] = {"ms": ms, "median_ms": statistics.median(ms), "min_ms": min(ms)}
            print(
                f"{kernel:<12} {way:<10} median {statistics.median(ms):7.1f} ms  min {min(ms):7.1f} ms  "
                f"first {ms[0]:7.1f} ms"
            )
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
