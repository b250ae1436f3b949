#!/usr/bin/env python3
"""Device check of the Hopper wgmma families (sm_90a) in one command: hgemm_wgmma_tc (kernels_src/hgemm_wgmma_tc.cuh)
or, with --space hgemm_wgmma_flat_tc, its staged flat copy for unaligned operands (kernels_src/hgemm_wgmma_flat_tc.cuh).

1. Correctness: compiles the space's checked instances (WGMMA_KERNELS or FLAT_KERNELS; NVRTC with -arch=sm_90a, the
   runner's compile cache) and checks each against the package's float64 reference over the whole batch
   (scripts/check_hgemm.py's harness: C poisoned with NaN where beta == 0, unpacked layouts with NaN in the gaps) at
   wgmma_cases (flat_cases: the same and more): sizes that do not divide the tiles (1, 7, 33, 97, 113, 127 where the
   bounds allow), every copy width (n % 8 == 0, 4, 2, odd), rectangles, all four shapes (the first instance), beta != 0,
   capped and persistent grids, a batch above 65,535, sizes above the bounds.
2. Timing: every instance of the space (H100 profile, soft constraints on) that serves one of the sizes, next to a
   baseline and cuBLAS, through GpuBackend (the sweep's compile, verification and timing); prints per size the
   roofline fraction (batch * 6 n^2 bytes / measured device-to-device copy / time) of cuBLAS, the best baseline
   instance and the best instance of the space, and the speed-ups. hgemm_wgmma_tc: default fp16 NN n = 48, 64, 96,
   97, 104, 113, 114, 120, 128, baseline the committed best instances of the older families (OLD_BEST:
   results/ring_h100/table.txt). hgemm_wgmma_flat_tc: default n = 98, 102, 106, 110, 114, 118, 122, 126, 97, 113,
   baseline every hgemm_wgmma_tc instance with KS = 64 and STAGES = 2 serving them (the options that won at eight or
   nine of the nine sizes of results/wgmma_h100). Batch: 500 MB of A + B + C a size.

    python3 scripts/check_wgmma.py --out results/wgmma_check      # needs an H100 or H200, cupy, numpy
    python3 scripts/check_wgmma.py --space hgemm_wgmma_flat_tc --out results/wgmma_flat_check
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from check_hgemm import (
    TOL,
    Kernel,
    Problem,
    batch_for,
    compile_family,
    cublas_ms,
    measure,
    rel_error,
)

from autotune.devices import get_device, no_gpu_reason
from autotune.problems.gemm import GEMM, gemm_point
from autotune.space.generator import generate
from autotune.space.spec import load_space

ROOT = Path(__file__).resolve().parent.parent
FAMILY = "hgemm_wgmma_tc"
P1, P0 = (("PERSIST", 1),), (("PERSIST", 0),)
# (BM, BN, KS, STAGES, SPAD, SWZ, CDIRECT) + PERSIST; the first runs all four shapes
WGMMA_KERNELS = [
    Kernel(FAMILY, (128, 128, 32, 3, 1, 0, 0), "wg128_k32s3", P1),  # n = 121..128, two warpgroups
    Kernel(FAMILY, (128, 128, 64, 4, 1, 0, 1), "wg128_k64s4_cd_np", P0),  # direct C, one block per problem
    Kernel(FAMILY, (128, 120, 32, 3, 1, 0, 0), "wg120_k32s3", P1),  # n = 113..120
    Kernel(FAMILY, (128, 104, 16, 2, 1, 0, 0), "wg104_k16s2", P1),  # n = 97..104; K-slabs of 16 (pad 4)
    Kernel(FAMILY, (128, 96, 32, 3, 0, 0, 0), "wg96_nopad", P1),  # SPAD = 0: 128-byte aligned core matrices
    Kernel(FAMILY, (64, 64, 32, 3, 1, 0, 0), "wg64_k32s3", P1),  # one warpgroup
    Kernel(FAMILY, (64, 48, 64, 2, 1, 0, 1), "wg48_k64_cd_np", P0),
    Kernel(FAMILY, (64, 24, 32, 4, 1, 0, 0), "wg24_pad2", P1),  # N = 24: 3 slabs of N (pad 2) when N is contiguous
    Kernel(FAMILY, (128, 128, 64, 3, 0, 1, 0), "wg128_swz", P1),  # 128-byte swizzle
    Kernel(FAMILY, (128, 104, 64, 3, 0, 1, 0), "wg104_swz", P1),  # swizzle, N = 104: part of a 64-wide atom
    Kernel(FAMILY, (64, 40, 64, 2, 0, 1, 1), "wg40_swz_cd_np", P0),  # swizzle, one warpgroup
    Kernel(FAMILY, (128, 128, 128, 2, 1, 0, 1), "wg128_k128_cd", P1),  # KS = 128: K <= 128 in one slice
    Kernel(FAMILY, (64, 64, 128, 2, 0, 0, 0), "wg64_k128_np", P0),  # KS = 128, one warpgroup, unpadded
]
F, R, G = "hgemm_flat_tc", "hgemm_mma", "hgemm_ring_tc"
OLD_BEST = [  # the best hgemm_flat_tc / hgemm_mma / hgemm_ring_tc instances at these sizes (results/ring_h100)
    Kernel(F, (48, 48, 48, 1, 1, 4, 2, 1, 0), "flat48"),
    Kernel(F, (64, 64, 64, 4, 1, 8, 2, 1, 0), "flat64"),
    Kernel(F, (96, 96, 96, 1, 4, 8, 1, 1, 0), "flat96"),
    Kernel(F, (104, 104, 104, 1, 2, 8, 1, 1, 1), "flat104_cd"),
    Kernel(F, (120, 120, 120, 2, 4, 8, 1, 1, 1), "flat120_cd"),
    Kernel(R, (4, 128, 128, 32, 4, 2, 3, 1), "mma128_4x2"),
    Kernel(R, (4, 128, 128, 32, 2, 4, 3, 1), "mma128_2x4"),
    Kernel(G, (96, 96, 32, 1, 3, 6, 3, 16, 0), "ring96"),
    Kernel(G, (120, 120, 32, 1, 4, 8, 4, 16, 0), "ring120"),
    Kernel(G, (128, 128, 32, 1, 4, 8, 3, 16, 0), "ring128"),
]
SIZES = "48,64,96,97,104,113,114,120,128"

FLAT_FAMILY = "hgemm_wgmma_flat_tc"
# (BM, BN, KS, STAGES, TILES, SPAD, SWZ, CDIRECT) + PERSIST; the first runs all four shapes
FLAT_KERNELS = [
    Kernel(FLAT_FAMILY, (128, 120, 32, 2, 2, 1, 0, 0), "fl120_k32s2t2", P1),  # n = 113..119, repack during wgmmas
    Kernel(FLAT_FAMILY, (128, 128, 64, 2, 1, 0, 1, 1), "fl128_swz_t1_cd", P1),  # 128-byte swizzle, one tile set
    Kernel(FLAT_FAMILY, (128, 104, 16, 4, 2, 1, 0, 0), "fl104_k16s4_np", P0),  # n = 97..103, one block per problem
    Kernel(FLAT_FAMILY, (128, 112, 32, 3, 1, 1, 0, 1), "fl112_k32s3t1_cd", P1),  # n = 105..111
    Kernel(FLAT_FAMILY, (128, 128, 32, 3, 2, 0, 0, 1), "fl128_nopad_cd", P1),  # n = 121..127, unpadded slabs
    Kernel(FLAT_FAMILY, (64, 64, 64, 2, 2, 0, 1, 0), "fl64_swz", P1),  # one warpgroup, swizzled
    Kernel(FLAT_FAMILY, (64, 24, 32, 3, 1, 1, 0, 1), "fl24_pad2", P1),  # 3 slabs of N (a repack item of 3 pieces)
    Kernel(FLAT_FAMILY, (64, 8, 16, 2, 2, 1, 0, 1), "fl8_k16", P1),  # the smallest wgmma
    Kernel(FLAT_FAMILY, (128, 120, 128, 2, 1, 1, 0, 1), "fl120_k128_cd", P1),  # KS = 128: B in NN one flat range
    Kernel(FLAT_FAMILY, (128, 104, 128, 2, 1, 0, 0, 0), "fl104_k128_np", P0),  # KS = 128, shared C, unpadded
    Kernel(FLAT_FAMILY, (64, 64, 128, 2, 2, 1, 0, 1), "fl64_k128t2", P1),  # KS = 128, two tile sets
]
FLAT_SIZES = "98,102,106,110,114,118,122,126,97,113"


def shapes_of(kern: Kernel) -> tuple[str, ...]:
    return ("NN", "NT", "TN", "TT") if kern in (WGMMA_KERNELS[0], FLAT_KERNELS[0]) else ("NN", "NT")


def wgmma_cases(kern: Kernel, full: bool) -> list[tuple[Problem, float, float, int | None]]:
    """(problem, alpha, beta, grid cap). Square sizes the instance serves (`full`: all of them, else the two ends and
    one of each copy width), the brief's non-dividing sizes within the bounds, rectangles (four shapes for the first
    instance), K of one k-step, of a part slice and of many slices, unpacked layouts (aligned with NaN in the gaps:
    16-byte copies; odd: shifted 16-byte loads), beta != 0, capped grids, a batch above 65,535, sizes above the bounds."""
    p = kern.params()
    bm, bn, ks = p["BM"], p["BN"], p["KS"]
    served = [n for n in range(1, 129) if kern.fits(n)]
    if not full:
        picks = {served[0], served[-1]} | {next((n for n in served if n % 8 == r), served[0]) for r in (0, 4, 2, 1)}
        served = sorted(picks)
    cases = []
    for n in served:
        for shape in ("NN", "NT"):
            cases.append((Problem(n, n, n, 3, shape), 1.5, -0.75 if n % 3 else 0.0, None))
    for n in (1, 7, 33, 97, 113, 127):  # the wgmma path with padding in M, N and the K-slice
        if n <= bm:
            cases.append((Problem(n, min(n, bn), n, 4, "NN"), 1.0, 0.0, None))
    kodd = ks + 16 + 5  # one slice and a part, not a multiple of 16
    rect = [(bm, bn - 3, kodd), (max(1, bm - 40), bn, 1), (1, bn, 2 * bm + 3), (bm, 1, 7), (33, min(7, bn), 113)]
    for m, n, k in rect:
        for shape in shapes_of(kern):
            cases.append((Problem(m, n, k, 5, shape), -0.5, 0.0, None))
            cases.append((Problem(m, n, k, 4, shape), 1.25, 0.5, None))
        cases.append((Problem(m, n, k, 4, "NN", pad=8), 1.25, 0.0, None))  # unpacked, aligned: 16-byte copies
        cases.append((Problem(m, n, k, 4, "NT", pad=3), 1.25, 0.5, None))  # unpacked, odd: shifted loads
        cases.append((Problem(m, n, k, 4, "NN", pad=2), 1.0, 0.0, None))  # 4-byte copies where m is even
    cases.append((Problem(8, 8, 8, 70_000, "NT"), 1.0, 0.0, None))  # batch above 65,535
    cases.append((Problem(bm, bn, bm, 50, "NN"), -1.5, 0.0, 3))  # 17 problems per block through one ring
    cases.append((Problem(bm - 1, bn - 1, kodd, 50, shapes_of(kern)[-1]), -1.25, 0.5, 2))
    cases.append((Problem(bm, bn, 3 * ks + 5, 7, "NN"), 1.0, 0.0, 1))  # one block, K of several slices
    cases.append((Problem(bm + 1, bn, 5, 3, "NN"), 0.75, 0.5, None))  # above the bounds: per element
    cases.append((Problem(bm, bn + 1, 5, 3, "NT"), 0.75, 0.0, None))
    return cases


def flat_cases(kern: Kernel, full: bool) -> list[tuple[Problem, float, float, int | None]]:
    """wgmma_cases (the square sizes an hgemm_wgmma_flat_tc instance serves: none a multiple of 8, so the staged
    path) and: the brief's unaligned sizes 97, 98, 106, 113, 114, 126 within the bounds, packed, in every shape of
    the instance, with beta 0 and not; K within one slice (the K-major operand one flat range) and of several slices
    (runs); A aligned and B not, and the reverse (the aligned operand staged too); both operands aligned (the
    hgemm_wgmma_tc path inside this kernel); pointers off a 16-byte boundary (head bytes before the first element);
    a batch above 65,535 with unaligned operands; capped grids through the staged ring."""
    p = kern.params()
    bm, bn, ks = p["BM"], p["BN"], p["KS"]
    cases = wgmma_cases(kern, full)
    for n in (97, 98, 106, 113, 114, 126):
        if n <= bm and n <= bn:
            for shape in shapes_of(kern):
                cases.append((Problem(n, n, n, 6, shape), 1.0, 0.0, None))
                cases.append((Problem(n, n, n, 3, shape), -0.5, 0.25, None))
    m, n = min(bm, 61), min(bn, 13)  # odd: every operand unaligned
    for shape in shapes_of(kern):
        cases.append((Problem(m, n, ks - 3, 9, shape), 1.0, 0.0, None))  # K < KS: one slice
        cases.append((Problem(m, n, 3 * ks + 3, 4, shape), 1.0, 0.0, None))  # three slices and a part
    m8, n8 = 8 * (min(bm, 64) // 8), 8 * (bn // 8)
    cases.append((Problem(m8, n, 2 * ks + 1, 6, "NN"), 1.0, 0.0, None))  # A aligned (lda = M = 64), B not (ldb = K)
    cases.append((Problem(m8, n, 2 * ks, 6, "NT"), 1.0, 0.5, None))  # A aligned, B not (ldb = N = 13)
    cases.append((Problem(m, n8, 2 * ks, 6, "NT"), 1.0, 0.0, None))  # B aligned (N multiple of 8 in NT), A not
    cases.append((Problem(m8, n8, 2 * ks, 6, "NN"), 1.0, 0.0, None))  # both aligned: hgemm_wgmma_tc's path
    cases.append((Problem(m, n, 2 * ks + 1, 5, "NN", off=3), 1.0, 0.0, None))  # pointers 3 halves off 16 bytes
    cases.append((Problem(m, n, ks + 1, 5, shapes_of(kern)[-1], off=1), 1.0, -1.0, None))
    cases.append((Problem(7, 7, 9, 70_000, "NN"), 1.0, 0.0, None))  # batch above 65,535, unaligned
    cases.append((Problem(m, n, 2 * ks + 5, 37, "NN"), 1.0, 0.0, 3))  # 12-13 problems per block through the ring
    cases.append((Problem(m, n, ks - 5, 37, "NT"), 1.0, 0.0, 1))  # one block, K within one slice
    return cases


def check_wgmma(kern: Kernel, mod, full: bool, rng, cp) -> tuple[float, list[str]]:
    """The worst relative error over the instance's cases (wgmma_cases, flat_cases) and the failing cases."""
    worst, bad = 0.0, []
    cases = flat_cases if kern.family == FLAT_FAMILY else wgmma_cases
    for p, alpha, beta, cap in cases(kern, full):
        err = rel_error(mod.get_function(kern.name(p.shape)), kern, p, alpha, beta, rng, cp, cap)
        worst = max(worst, err)
        if not err <= TOL:
            bad.append(f"{p} a={alpha} b={beta} cap={cap}: {err:.3g}")
    return worst, bad


def candidates(sizes: list[int], family: str = FAMILY, where=None) -> list[Kernel]:
    """Every instance of the family's space (H100 profile, soft constraints on) that serves one of the square sizes
    (and `where(params)`, when given)."""
    frame = generate(load_space(family), get_device("H100"), "fp16").frame
    out = []
    for r in range(len(frame)):
        p = {k: int(v) for k, v in frame.iloc[r].items()}
        if where is not None and not where(p):
            continue
        if family == FLAT_FAMILY:
            args = (p["BM"], p["BN"], p["KS"], p["STAGES"], p["TILES"], p["SPAD"], p["SWZ"], p["CDIRECT"])
            label = "fl{}x{}_k{}s{}t{}_p{}w{}c{}P{}".format(*args, p["PERSIST"])
        else:
            args = (p["BM"], p["BN"], p["KS"], p["STAGES"], p["SPAD"], p["SWZ"], p["CDIRECT"])
            label = "wg{}x{}_k{}s{}_p{}w{}c{}P{}".format(*args, p["PERSIST"])
        kern = Kernel(family, args, label, (("PERSIST", p["PERSIST"]),))
        if any(kern.fits(n) for n in sizes):
            out.append(kern)
    return out


def baseline(space: str, sizes: list[int]) -> tuple[list[Kernel], str]:
    """What the space is timed against besides cuBLAS, and its name in the table."""
    if space == FLAT_FAMILY:  # hgemm_wgmma_tc with the options that won in results/wgmma_h100
        return candidates(sizes, FAMILY, lambda p: p["KS"] == 64 and p["STAGES"] == 2), "wgmma_tc"
    return OLD_BEST, "old"


# space -> (checked instances, default sizes, results file)
SPACES = {
    FAMILY: (WGMMA_KERNELS, SIZES, "check_wgmma.json"),
    FLAT_FAMILY: (FLAT_KERNELS, FLAT_SIZES, "check_wgmma_flat.json"),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--space", choices=sorted(SPACES), default=FAMILY, help="the family to check and time")
    ap.add_argument("--out", default=str(ROOT / "results" / "wgmma_check"))
    ap.add_argument(
        "--sizes", default=None, help=f"square fp16 NN sizes to time (default {SIZES}; {FLAT_SIZES} for {FLAT_FAMILY})"
    )
    ap.add_argument("--target-mb", type=float, default=500.0, help="working set (A + B + C) per timed size, MB")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--full", action="store_true", help="every served square size for every checked instance")
    ap.add_argument("--no-timing", action="store_true", help="the correctness check only")
    a = ap.parse_args()
    if (why := no_gpu_reason()) is not None:
        raise SystemExit(f"error: {Path(__file__).name} measures on a GPU and {why}")
    import cupy as cp

    from autotune.sweep.backends.local import GpuBackend

    kernels, default_sizes, result_file = SPACES[a.space]
    a.sizes = a.sizes or default_sizes
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    print(f"GPU {props['name'].decode()} cc{props['major']}{props['minor']} cupy {cp.__version__}", flush=True)

    fails, log = [], []
    names = sorted({k.name(s) for k in kernels for s in shapes_of(k)})
    t0 = time.time()
    try:
        mod = compile_family(a.space, names)
        print(f"compiled {a.space}: {len(names)} kernels (sm_90a) in {time.time() - t0:.1f} s", flush=True)
    except Exception as e:  # noqa: BLE001 - reported; the timing below still runs (and records its failures)
        print(f"COMPILE FAIL {a.space}: {e}", flush=True)
        mod, fails = None, [f"compile {a.space}"]
    rng = cp.random.RandomState(0)
    for kern in kernels if mod is not None else []:
        full = a.full or kern == kernels[0]
        worst, bad = check_wgmma(kern, mod, full, rng, cp)
        print(
            f"check {kern.label:18s} {'full' if full else 'quick'} worst rel err {worst:.2e} "
            f"{'PASS' if not bad else f'FAIL({len(bad)})'}",
            flush=True,
        )
        log.append({"kernel": kern.label, "name": kern.name("NN"), "params": kern.params(), "worst": worst, "bad": bad})
        if bad:
            fails.append(kern.label)
            print("   " + "\n   ".join(bad[:8]), flush=True)
    cp.get_default_memory_pool().free_all_blocks()  # the timing runs in GpuBackend's worker process

    rows, timings = [], {}
    if not a.no_timing:
        sizes = [int(s) for s in a.sizes.split(",") if s]
        pts = {n: gemm_point("fp16", "NN", n, n, n, batch_for(n, a.target_mb * 1e6)) for n in sizes}
        new, (old, old_name) = candidates(sizes, a.space), baseline(a.space, sizes)
        points = {k: [pts[n] for n in sizes if k.fits(n)] for k in [*new, *old]}
        print(
            f"timing {len(new)} {a.space} instances, {len(old)} {old_name} ones and cuBLAS at n = {a.sizes}", flush=True
        )
        with GpuBackend() as backend:
            bw = backend.device_info().copy_bandwidth
            got = measure(backend, [*new, *old], points, a.reps, bw)
            cub = {n: cublas_ms(backend, p, a.reps) for n, p in pts.items()}
        timings = {f"{lab} n={p.n}": t.__dict__ for (lab, p), t in got.items()}
        new_labels = {k.label for k in new}
        print(
            f"\nfp16 NN square, beta = 0, batch: {a.target_mb:.0f} MB of A + B + C, copy bandwidth "
            f"{bw / 1e12:.3f} TB/s, median of {a.reps}; frac = roofline fraction; {old_name} = best of its instances"
        )
        head = f"{old_name} best"
        print(
            f"{'n':>4} {'batch':>7} | {'cuBLAS ms':>9} {'frac':>5} | {head:>24} {'ms':>7} {'frac':>5} | "
            f"{'best':>28} {'ms':>7} {'frac':>5} | {'/cuBLAS':>9} {'/' + old_name:>9}"
        )
        for n, p in pts.items():
            at = [t for (lab, q), t in got.items() if q == p]
            wg = min((t for t in at if t.label in new_labels), key=lambda t: t.ms, default=None)
            ob = min((t for t in at if t.label not in new_labels), key=lambda t: t.ms, default=None)
            cfrac = GEMM.bytes_moved(p, {"beta": 0.0}) / bw / (cub[n] * 1e-3)
            cell = lambda t, w: f"{t.label:>{w}} {t.ms:>7.4f} {t.frac:>5.3f}" if t else f"{'-':>{w}} {'':>7} {'':>5}"  # noqa: E731
            speed = f"{cub[n] / wg.ms:>8.3f}x {ob.ms / wg.ms if ob else float('nan'):>8.3f}x" if wg else ""
            print(f"{n:>4} {p.batch:>7} | {cub[n]:>9.4f} {cfrac:>5.3f} | {cell(ob, 24)} | {cell(wg, 28)} | {speed}")
            rows.append(
                {
                    "n": n,
                    "batch": p.batch,
                    "cublas_ms": cub[n],
                    "cublas_frac": cfrac,
                    "old": ob.__dict__ if ob else None,
                    "wgmma": wg.__dict__ if wg else None,
                }
            )
            top = sorted((t for t in at if t.label in new_labels), key=lambda t: t.ms)[:3]
            print("        top: " + ", ".join(f"{t.label} {t.ms:.4f}" for t in top))
    (out / result_file).write_text(
        json.dumps({"space": a.space, "checks": log, "table": rows, "timings": timings, "failures": fails}, indent=1)
    )
    print("FAILURES: " + (", ".join(fails) if fails else "none"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
