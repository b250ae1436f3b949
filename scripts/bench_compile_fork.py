#!/usr/bin/env python3
"""Where an NVRTC compile's time goes in autotune's compile processes (issue 31: our compile times were 3-5x
Kernel Tuner's for the same kernels on an H200, e.g. its stencil example 202 ms against 40 ms).

Compiles one Kernel Tuner example kernel (tests/data/kt_public/, with its first configuration's #defines) N times
each way, every way in a fresh process: `inproc` (NVRTC in the process itself), `fork_cold` (each compile in a
forked child, `compile.with_time_limit`, as the sweep does for its compile timeout, from a process that never
compiled), `fork_warm` (the same after `compile.warm_nvrtc()`: AUTOTUNE_COMPILE_WARM=1). Prints the median and
min ms per way, and writes them as JSON (--out). GPU host only (NVRTC from CuPy):
  python3 scripts/bench_compile_fork.py --out $OUT/compile_fork.json
"""

from __future__ import annotations

import argparse
import json
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


def one_way(way: str, kernel: str, n: int) -> list[float]:
    sys.path.insert(0, str(ROOT))
    from autotune.sweep import compile as c

    file, name, defines = KERNELS[kernel]
    text = (
        "".join(f"#define {k} {v}\n" for k, v in defines.items()) + (ROOT / "tests/data/kt_public" / file).read_text()
    )
    nvrtc = c._nvrtc()
    arch_opt, kind = c.arch_option(_arch(), tuple(nvrtc.getSupportedArchs()))
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


def _arch() -> int:
    import cupy

    return int(cupy.cuda.Device(0).compute_capability)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one_way(a.one[0], a.one[1], a.n)))
        return 0
    report = {}
    for kernel in KERNELS:
        for way in ("inproc", "fork_cold", "fork_warm"):
            proc = subprocess.run(
                [sys.executable, __file__, "--n", str(a.n), "--one", way, kernel],
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
