#!/usr/bin/env python3
"""Device check of the fp64 tensor-core family dgemm_dmma_tc (kernels_src/dgemm_dmma_tc.cuh, spaces/dgemm_dmma_tc.yaml).

1. Correctness: every instance of DMMA_KERNELS in the four shapes, compiled with the runner's compiler
   (autotune.sweep.compile.nvrtc, on-disk cache, name expressions from the space file), on problems chosen to break
   it: sizes its tiles and slices do not divide (1, 7, 13, 33, 97, 127, 255, 26..32), fixed K = 32 at 64..256,
   rectangles, K of many slices and K below one k-step, leading dimensions above the matrix with NaN in the gaps
   (odd ones: the 8-byte copy fallback; even ones: 16-byte copies), operands that start 8 bytes past a 16-byte
   boundary, beta != 0 (C read) and beta == 0 with C poisoned with NaN, capped grids (one block's ring across many
   units) and batches above 65,535 (a partial last group of PPB problems). The reference is the package's float64
   alpha * op(A) op(B) + beta * C (autotune.problems.gemm.verify.reference_batch) over the whole batch; the error is
   max |C - ref| / max |ref| over the batch against verify.tolerance("fp64", K) (1e-12 up to K = 1024); C's padding
   must still be NaN.
2. Timing (fp64 NN, alpha = 1, beta = 0, packed): the batches of the committed results where the FMA kernels lose to
   cuBLAS, fixed K = 32 at M = N = 64, 128, 256 (results/fixedk_h100/summary.csv) and square n = 26..32
   (results/square_share_h100/summary.csv), through GpuBackend (the sweep's verification and timing): every
   DMMA_KERNELS instance the space serves there, the committed best SIMT instance of the point (COMMITTED_BEST,
   from scripts/kernel_status.py's sources) and cuBLAS, with the roofline fraction (bytes of A, B and C once against
   the measured device-to-device copy) and the speed-ups over cuBLAS and over the SIMT instance.

    python3 scripts/check_dmma.py [--no-timing] [--reps 20] [--csv FILE]     # needs a GPU, cupy

The pytest tier (tests/gpu/test_dgemm_dmma.py) runs `cases()` through `check()`.
"""

from __future__ import annotations

import argparse
import csv
import functools
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from autotune.devices import no_gpu_reason
from autotune.paths import KERNELS_DIR
from autotune.problems.gemm import GEMM, gemm_point
from autotune.problems.gemm.data import Operand, strided_args
from autotune.problems.gemm.verify import reference_batch, tolerance
from autotune.space.instance import Instance
from autotune.space.spec import load_space
from autotune.vocab import Status

FAMILY = "dgemm_dmma_tc"
SHAPES = ("NN", "NT", "TN", "TT")


@functools.lru_cache(maxsize=None)
def _space(name: str):
    return load_space(name)


@dataclass(frozen=True)
class Kernel:
    """One instance of a space: its parameters (PERSIST included for dgemm_dmma_tc) and a label."""

    label: str
    params: tuple[tuple[str, int], ...]
    space: str = FAMILY

    def p(self) -> dict[str, int]:
        return dict(self.params)

    def name(self, shape: str) -> str:
        return _space(self.space).template_name(self.p(), "fp64", shape)

    def geometry(self, m: int, n: int, k: int, batch: int):
        return _space(self.space).geometry(self.p(), gemm_point("fp64", "NN", m, n, k, batch))

    def serves(self, point) -> bool:
        return _space(self.space).serves(self.p(), point)


def _k(label: str, **kw: int) -> Kernel:
    return Kernel(label, tuple(kw.items()))


# BM, BN, KS, WM, WN, NWARPS, STAGES, PPB, VEC, PERSIST, MMA. All pass the space's hard constraints (the nvcc tier
# checks it and compiles them without spills); d128_4x4 fails its soft ones (64 accumulators a thread: kept for
# coverage, the largest tile). The last three use sm_90's m16n8k4 / m16n8k8.
DMMA_KERNELS = [
    _k("d64_k32", BM=64, BN=64, KS=32, WM=2, WN=2, NWARPS=4, STAGES=3, PPB=1, VEC=16, PERSIST=0, MMA=884),
    _k("d64_k16_pers", BM=64, BN=64, KS=16, WM=2, WN=2, NWARPS=4, STAGES=3, PPB=1, VEC=16, PERSIST=1, MMA=884),
    _k("d32_k32", BM=32, BN=32, KS=32, WM=2, WN=2, NWARPS=4, STAGES=2, PPB=1, VEC=16, PERSIST=0, MMA=884),
    _k("d48_ipw3_v8", BM=48, BN=48, KS=16, WM=2, WN=2, NWARPS=4, STAGES=4, PPB=1, VEC=8, PERSIST=1, MMA=884),
    _k("d32_p2", BM=32, BN=32, KS=32, WM=2, WN=2, NWARPS=4, STAGES=2, PPB=2, VEC=16, PERSIST=1, MMA=884),
    _k("d32_p4_k16", BM=32, BN=32, KS=16, WM=2, WN=1, NWARPS=4, STAGES=3, PPB=4, VEC=16, PERSIST=1, MMA=884),
    _k("d16_w1", BM=16, BN=16, KS=8, WM=2, WN=2, NWARPS=1, STAGES=2, PPB=1, VEC=16, PERSIST=1, MMA=884),
    _k("d128_4x4", BM=128, BN=128, KS=16, WM=4, WN=4, NWARPS=8, STAGES=2, PPB=1, VEC=16, PERSIST=0, MMA=884),
    _k("d32_p8_k8_v8", BM=32, BN=32, KS=8, WM=1, WN=1, NWARPS=8, STAGES=4, PPB=8, VEC=8, PERSIST=0, MMA=884),
    _k("d64_k32_m16k8", BM=64, BN=64, KS=32, WM=2, WN=2, NWARPS=4, STAGES=3, PPB=1, VEC=16, PERSIST=1, MMA=1688),
    _k("d48_m16k4_v8", BM=48, BN=48, KS=8, WM=1, WN=2, NWARPS=4, STAGES=3, PPB=1, VEC=8, PERSIST=0, MMA=1684),
    _k("d32_p2_m16k8", BM=32, BN=32, KS=16, WM=2, WN=4, NWARPS=2, STAGES=3, PPB=2, VEC=16, PERSIST=1, MMA=1688),
]

# The committed best SIMT instance at each timed point (scripts/kernel_status.py's sources, H100; the top-3 transfer
# runs of results/kernels_top3_h100 re-measured several and found 8b541a959dc42578 at n = 30, 31): space, parameters,
# the source of the figure.
_FIXK_64 = dict(DIM_X=16, DIM_Y=8, BLK_M=64, BLK_N=32, BLK_K=32, DIM_XA=16, DIM_YA=8, DIM_XB=32, DIM_YB=4, NSG=1)
_FIXK_128 = dict(DIM_X=16, DIM_Y=16, BLK_M=64, BLK_N=64, BLK_K=32, DIM_XA=32, DIM_YA=8, DIM_XB=8, DIM_YB=32, NSG=1)
_SQ_TOP3 = dict(DIM_X=8, DIM_Y=8, BLK_M=32, BLK_N=32, BLK_K=16, DIM_XA=16, DIM_YA=4, DIM_XB=8, DIM_YB=8, NSG=1)
_SQ_32 = dict(DIM_X=8, DIM_Y=16, BLK_M=32, BLK_N=32, BLK_K=16, DIM_XA=16, DIM_YA=8, DIM_XB=16, DIM_YB=8, NSG=2)


def _tiny(n: int, rm: int, rn: int, ppb: int) -> dict[str, int]:
    return dict(BM=n, BN=n, BK=n, RM=rm, RN=rn, THREADS=64, PPB=ppb, STAGES=1)


# (m, n, k, batch) -> (space, params, source of the figure)
COMMITTED_BEST: dict[tuple[int, int, int, int], tuple[str, dict[str, int], str]] = {
    (64, 64, 32, 7630): ("gemm_batched_simt", _FIXK_64, "fixedk_h100"),
    (128, 128, 32, 2544): ("gemm_batched_simt", _FIXK_128, "kernels_top3_h100"),
    (256, 256, 32, 763): ("gemm_batched_simt", _FIXK_128, "kernels_top3_h100"),
    (26, 26, 26, 30819): ("gemm_tiny_simt", _tiny(26, 2, 7, 2), "simt32_h100"),
    (27, 27, 27, 28578): ("gemm_tiny_simt", _tiny(27, 4, 4, 2), "kernels_top3_h100"),
    (28, 28, 28, 26574): ("gemm_tiny_simt", _tiny(28, 2, 7, 2), "kernels_top3_h100"),
    (29, 29, 29, 24773): ("gemm_tiny_simt", _tiny(29, 4, 4, 2), "kernels_top3_h100"),
    (30, 30, 30, 23149): ("gemm_batched_simt", _SQ_TOP3, "kernels_top3_h100"),
    (31, 31, 31, 21679): ("gemm_batched_simt", _SQ_TOP3, "kernels_top3_h100"),
    (32, 32, 32, 20346): ("gemm_batched_simt", _SQ_32, "square_h100"),
}


@dataclass(frozen=True)
class Case:
    """One problem: sizes, batch, shape, alpha/beta, leading-dimension padding, element offset of the operands' base
    pointers (1: 8 bytes past a 16-byte boundary), grid cap (None: the space's grid)."""

    m: int
    n: int
    k: int
    batch: int
    shape: str = "NN"
    alpha: float = 1.5
    beta: float = 0.0
    pad: int = 0
    offset: int = 0
    cap: int | None = None


def cases(kern: Kernel) -> list[Case]:
    """The correctness cases of one instance (module docstring), every shape."""
    out: list[Case] = []
    for i, n in enumerate((1, 7, 13, 33, 97, 127, 255, *range(26, 33), 64, 128, 256)):
        for shape in SHAPES:
            out.append(Case(n, n, n, 3, shape, 1.5, -0.75 if (n + i) % 2 else 0.0))
    for mn, batch in ((64, 7), (128, 5), (256, 3)):  # fixed K = 32
        out.append(Case(mn, mn, 32, batch, "NN", 1.0, 0.0))
        out.append(Case(mn, mn, 32, batch, "TN", -0.5, 0.25))
    rect = [(97, 13, 33), (7, 255, 5), (256, 1, 70), (33, 127, 300), (40, 24, 3), (1, 9, 1)]
    for m, n, k in rect:
        for shape in SHAPES:
            out.append(Case(m, n, k, 5, shape, -0.5, 0.0))
            out.append(Case(m, n, k, 4, shape, 1.25, 0.5))
    for shape in SHAPES:
        out.append(Case(30, 26, 44, 6, shape, 1.25, 0.5, pad=2))  # even leading dimensions: 16-byte copies, NaN gaps
        out.append(Case(27, 33, 19, 6, shape, 1.25, 0.0, pad=3))  # odd ones: the 8-byte fallback
        out.append(Case(64, 32, 40, 5, shape, 0.75, -1.0, offset=1))  # bases 8 bytes past 16: 8-byte copies, element C
    out.append(Case(8, 8, 8, 70_001, "NT", 1.0, 0.0))  # batch above 65,535, a partial last group
    out.append(Case(5, 3, 6, 66_000, "TN", 1.0, -1.25, pad=1))
    out.append(Case(32, 32, 32, 50, "NN", -1.5, 0.0, cap=3))  # one ring across many units
    out.append(Case(100, 70, 3 * 64 + 5, 7, "TT", 1.0, 0.5, cap=1))  # one block: every unit, K of several slices
    out.append(Case(29, 29, 29, 33, "NT", 1.0, 0.0, cap=7))
    return out


def compile_kernels(kernels: list[Kernel]):
    """LoadedKernels with every instance in every shape (one NVRTC call each, process pool, the runner's cache)."""
    import cupy as cp

    from autotune.sweep.backends.gpu_worker import LoadedKernels
    from autotune.sweep.backends.local import DEFAULT_CACHE_DIR
    from autotune.sweep.compile.nvrtc import CompileRequest, compile_all

    arch = int(cp.cuda.Device().compute_capability)
    names = sorted({k.name(s) for k in kernels for s in SHAPES})
    src = KERNELS_DIR / f"{FAMILY}.cuh"
    got = compile_all([CompileRequest(src, (nm,), arch, (KERNELS_DIR,)) for nm in names], DEFAULT_CACHE_DIR)
    failed = [ck for ck in got.values() if not ck.ok]
    if failed:
        raise RuntimeError(
            f"{len(failed)} kernels did not compile, first {failed[0].name_expression}:\n{failed[0].log[-2000:]}"
        )
    return LoadedKernels(got)


def _stored(cp, rs, batch: int, rows: int, cols: int, c: Case, fill: bool):
    """(buffer, ld, stride, view): `batch` column-major rows x cols matrices with ld = rows + pad, starting `offset`
    elements into a NaN-filled buffer; view is the (batch, rows, cols) matrices."""
    ld = rows + c.pad
    buf = cp.full(c.offset + batch * cols * ld, cp.nan, cp.float64)
    body = buf[c.offset :].reshape(batch, cols, ld)
    if fill:
        body[:, :, :rows] = rs.uniform(-1.0, 1.0, (batch, cols, rows))
    return body, ld, cols * ld, body[:, :, :rows].transpose(0, 2, 1)


def check(kern: Kernel, mod, c: Case, rs) -> float:
    """Relative error of one case (inf: a non-finite element in C, or a write into C's padding)."""
    import cupy as cp

    ta, tb = c.shape[0] == "T", c.shape[1] == "T"
    a, lda, sa, av = _stored(cp, rs, c.batch, *((c.k, c.m) if ta else (c.m, c.k)), c, True)
    b, ldb, sb, bv = _stored(cp, rs, c.batch, *((c.n, c.k) if tb else (c.k, c.n)), c, True)
    cc, ldc, sc, cv = _stored(cp, rs, c.batch, c.m, c.n, c, c.beta != 0.0)  # NaN where beta == 0: never read
    ref = reference_batch(av, bv, cv, c.shape, c.alpha, c.beta)
    g = kern.geometry(c.m, c.n, c.k, c.batch)
    grid = (min(g.grid[0], c.cap), 1, 1) if c.cap else tuple(g.grid)
    fn = mod.get_function(kern.name(c.shape))
    from autotune.sweep.backends.gpu_worker import allow_dynamic_shared

    allow_dynamic_shared(fn, g.shared_bytes)
    args = strided_args(
        "fp64",
        (c.m, c.n, c.k),
        c.alpha,
        Operand(a, lda, sa),
        Operand(b, ldb, sb),
        c.beta,
        Operand(cc, ldc, sc),
        c.batch,
    )
    fn(grid, tuple(g.block), args, shared_mem=g.shared_bytes)
    cp.cuda.Device().synchronize()
    if not bool(cp.isfinite(cv).all()) or (c.pad and not bool(cp.isnan(cc[:, :, c.m :]).all())):
        return float("inf")
    scale = float(cp.abs(ref).max()) or 1.0
    return float(cp.abs(cv - ref).max()) / scale


def check_all(kern: Kernel, mod, rs) -> tuple[float, list[str]]:
    """(worst error relative to its tolerance, failing cases) over cases(kern)."""
    worst, bad = 0.0, []
    for c in cases(kern):
        err = check(kern, mod, c, rs)
        worst = max(worst, err / tolerance("fp64", c.k))
        if not err <= tolerance("fp64", c.k):
            bad.append(f"{c}: {err:.3g}")
    return worst, bad


def timed_points() -> list:
    return [gemm_point("fp64", "NN", m, n, k, b) for (m, n, k, b) in COMMITTED_BEST]


def measure(kernels: list[Kernel], reps: int):
    """(copy bandwidth, {(label, point): Measurement}, {point: cuBLAS Measurement}) through GpuBackend."""
    from autotune.sweep.backends.base import Job
    from autotune.sweep.backends.local import GpuBackend, LocalOptions

    jobs, label = [], {}
    for kern in kernels:
        pts = tuple(p for p in timed_points() if kern.serves(p))
        if pts:
            inst = Instance.of(kern.space, kern.p())
            label[inst.id] = kern.label
            jobs.append(Job(_space(kern.space), inst, pts, GEMM.scalars(), reps))
    for (m, n, k, b), (space, params, _) in COMMITTED_BEST.items():
        inst = Instance.of(space, params)
        label[inst.id] = f"{space}:{inst.id}"
        jobs.append(Job(_space(space), inst, (gemm_point("fp64", "NN", m, n, k, b),), GEMM.scalars(), reps))
    with GpuBackend(LocalOptions(include_dirs=(KERNELS_DIR,))) as backend:
        bw = backend.device_info().copy_bandwidth
        got = {(label[m.instance_id], m.point): m for m in backend.run(jobs)}
        cublas = {p: backend.baseline(GEMM, p, GEMM.scalars(), reps) for p in timed_points()}
    return bw, got, cublas


def _ms(m) -> float:
    return m.median_ms if m is not None and m.status == Status.OK and m.median_ms else float("nan")


def report(bw: float, got: dict, cublas: dict, csv_path: str | None) -> None:
    print(f"\ntiming: fp64 NN, alpha=1, beta=0, packed, GpuBackend median; copy bandwidth {bw / 1e12:.3f} TB/s")
    head = [
        "m",
        "n",
        "k",
        "batch",
        "cublas_ms",
        "cublas_roof",
        "simt_ms",
        "simt_roof",
        "best_dmma",
        "dmma_ms",
        "dmma_roof",
    ]
    head += ["x_cublas", "x_simt", "verified"]  # verified: DMMA instances correct at the point / timed there
    print(" ".join(f"{h:>12}" for h in head))
    rows = []
    for (m, n, k, b), (space, params, source) in COMMITTED_BEST.items():
        p = gemm_point("fp64", "NN", m, n, k, b)
        roof = GEMM.bytes_moved(p, {"beta": 0.0}) / bw * 1e3  # ms at the copy roofline
        cub = _ms(cublas.get(p))
        simt = _ms(got.get((f"{space}:{Instance.of(space, params).id}", p)))
        dm = {kk.label: _ms(got.get((kk.label, p))) for kk in DMMA_KERNELS}
        for kk in DMMA_KERNELS:
            if (kk.label, p) in got and got[(kk.label, p)].status != Status.OK:
                print(
                    f"  {kk.label} at {m}x{n}x{k}: {got[(kk.label, p)].status.value} {got[(kk.label, p)].error or ''}"
                )
        ok = {lab: ms for lab, ms in dm.items() if ms == ms}
        best = min(ok, key=ok.get) if ok else "-"
        bms = ok.get(best, float("nan"))
        timed = sum((kk.label, p) in got for kk in DMMA_KERNELS)
        row = [m, n, k, b, cub, roof / cub, simt, roof / simt, best, bms, roof / bms, cub / bms, simt / bms]
        row.append(f"{len(ok)}/{timed}")
        rows.append(row + [source] + [dm[kk.label] for kk in DMMA_KERNELS])
        print(" ".join(f"{v:>12.4f}" if isinstance(v, float) else f"{v:>12}" for v in row))
    if csv_path:
        with open(csv_path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(head + ["simt_source"] + [f"ms_{kk.label}" for kk in DMMA_KERNELS])
            w.writerows(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--csv", help="write the timing table (every instance's median per point) to this file")
    a = ap.parse_args()
    if (why := no_gpu_reason()) is not None:
        raise SystemExit(f"error: {Path(__file__).name} runs on a GPU and {why}")
    import cupy as cp

    t0 = time.perf_counter()
    mod = compile_kernels(DMMA_KERNELS)
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(
        f"compiled {len(DMMA_KERNELS) * len(SHAPES)} kernels in {time.perf_counter() - t0:.1f} s on {dev}", flush=True
    )
    rs = cp.random.RandomState(1)
    fails = []
    for kern in DMMA_KERNELS:
        worst, bad = check_all(kern, mod, rs)
        print(
            f"check {kern.label:14s} {len(cases(kern))} cases, worst error / tolerance {worst:.2e} "
            f"{'PASS' if not bad else f'FAIL({len(bad)})'}",
            flush=True,
        )
        if bad:
            fails.append(kern.label)
            print("   " + "\n   ".join(bad[:8]), flush=True)
    if not a.no_timing:
        cp.get_default_memory_pool().free_all_blocks()  # the timing runs in GpuBackend's worker process
        report(*measure([k for k in DMMA_KERNELS if k.label not in fails], a.reps), a.csv)
    print("FAILURES: " + (", ".join(fails) if fails else "none"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
