#!/usr/bin/env python3
"""Device-side check of the tiny batched GEMM kernel (kernels_src/gemm_tiny.cuh, space gemm_tiny_simt).

Compiles a handful of instances per precision and shape with NVRTC through CuPy (name expressions from the space
file), runs them on problems chosen to break the kernel: every square n = 1..16 and n = 17, 20, 24, 31, 32 (through
instances the space's `serves:` assigns), rectangular sizes (3 x 5 x 7, and 19 x 32 x 25 through rectangular bounds
20 x 32 x 26 and through 32 x 32 x 32), sizes below and above the compile-time bounds (above 32: the slow path), leading dimensions
above the matrix with NaN in the padding, gaps between matrices (non-packed strides), matrices that start off a
16-byte boundary, alpha = 1.5 with beta = 0 and NaN-poisoned C, alpha = -0.5 with beta = 2, batch counts that PPB does
not divide, a grid smaller than the group count, and batch = 70,001. Each matrix of the batch is compared with a
float64 cupy.matmul reference: ||C_b - ref_b||_F / ||ref_b||_F within 1e-12 (fp64), 1e-5 (fp32), 1e-2 (fp16), every
element finite, and everything outside the matrices (padding, gaps) still NaN.

Then times memory-bound points (NN, alpha = 1, beta = 0, packed, A + B + C about 1 GB; fp64, fp32, fp16; square
n = 2, 3, 4, 5, 6, 8, 12, 16, 20, 24, 28, 32) for a few instances of the space with exact bounds (--per-point up to 16,
--per-point-above-16 above), the gemm_small (magma-small-v3)
instances of scripts/check_simt.py for comparison, and cuBLAS (cupy.matmul), as a fraction of the copy roofline
(bytes / measured device-to-device copy bandwidth, read + write).

    python3 scripts/check_tiny.py [--no-timing] [--per-point N] [--per-point-above-16 N] [--list]

Exit code 1 if any correctness case fails. The pytest tier (tests/gpu/test_tiny.py) runs `correctness_cases()`
through `run_case()`.
"""

from __future__ import annotations

import argparse
import functools
import sys
from dataclasses import dataclass
from pathlib import Path


import numpy as np

import check_simt  # noqa: E402  (tolerances, compile, outcome, measurement through GpuBackend)
from autotune.problems.gemm import GEMM
from autotune.devices import get_device
from autotune.problems.gemm import gemm_point
from autotune.problems.gemm.data import Operand, strided_args
from autotune.problems.gemm.verify import reference_batch
from autotune.space.spec import load_space
from autotune.devices import no_gpu_reason

ROOT = Path(__file__).resolve().parent.parent

TOL = check_simt.TOL
DTYPE = check_simt.DTYPE
SPACE = {"tiny": "gemm_tiny_simt", "small": "gemm_small_simt"}
SOURCE = {"tiny": "gemm_tiny.cuh", "small": "gemm_small.cuh"}
PRECISIONS = ("fp64", "fp32", "fp16")
SHAPES = ("NN", "NT", "TN", "TT")


@functools.lru_cache(maxsize=None)
def _space(name: str):
    return load_space(name)


def _p(**kw: int) -> tuple[tuple[str, int], ...]:
    return tuple(kw.items())


# Hand-picked instances (each passes the hard constraints at every precision): every work split, STAGES 1 and 2,
# non-power-of-two bounds, bounds above 16 (a ragged split: 17 = 5 threads x 4 rows with the last row guarded, two
# micro-tiles per thread) and the largest bounds (32, fp64: one problem of 24 KB per block).
INSTANCES = (
    _p(BM=4, BN=4, BK=4, RM=1, RN=1, THREADS=256, PPB=64, STAGES=2),  # one element of C per thread
    _p(BM=3, BN=5, BK=7, RM=3, RN=1, THREADS=128, PPB=32, STAGES=1),  # one column per thread
    _p(BM=2, BN=2, BK=2, RM=2, RN=2, THREADS=128, PPB=128, STAGES=2),  # one problem per thread
    _p(BM=6, BN=7, BK=5, RM=1, RN=7, THREADS=256, PPB=32, STAGES=2),  # one row per thread
    _p(BM=16, BN=16, BK=16, RM=4, RN=2, THREADS=256, PPB=2, STAGES=1),  # 2-D micro-tile, bounds of 16
    _p(BM=32, BN=32, BK=32, RM=2, RN=4, THREADS=64, PPB=1, STAGES=2),  # largest bounds, 2 micro-tiles per thread
    _p(BM=17, BN=24, BK=19, RM=4, RN=6, THREADS=128, PPB=2, STAGES=1),  # ragged 4 x 6 micro-tile above 16
)
# Rectangular bounds above 16 (these pass the soft constraints only with --no-soft), for 19 x 32 x 25.
RECT = _p(BM=20, BN=32, BK=26, RM=4, RN=4, THREADS=64, PPB=2, STAGES=2)
SQUARES = tuple(range(1, 17)) + (17, 20, 24, 31, 32)  # square sizes checked through instances the space assigns


@dataclass(frozen=True)
class Case:
    """One kernel instance on one problem. Stored matrices of the batch lie `stride = ld * cols + gap` apart,
    the first one `offset` elements past the start of a 256-byte aligned buffer."""

    family: str  # "tiny" or "small"
    params: tuple[tuple[str, int], ...]
    precision: str
    shape: str
    m: int
    n: int
    k: int
    batch: int
    alpha: float = 1.5
    beta: float = 0.0
    pad: int = 0  # leading dimension minus rows (A, B and C)
    gap: int = 0  # stride minus ld * cols
    offset: int = 0  # elements before the first matrix (misaligns the 16-byte chunks)
    grid_cap: int = 0  # > 0: launch at most this many blocks (grid stride)

    @property
    def label(self) -> str:
        p = "-".join(str(v) for _, v in self.params)
        return (
            f"{self.family}:{self.precision}:{self.shape}:{self.m}x{self.n}x{self.k}:b{self.batch}"
            f":a{self.alpha:g}:b{self.beta:g}:pad{self.pad}:gap{self.gap}:off{self.offset}"
            f"{':grid' + str(self.grid_cap) if self.grid_cap else ''}:[{p}]"
        )

    @property
    def source(self) -> str:
        return SOURCE[self.family]

    def name_expression(self) -> str:
        return _space(SPACE[self.family]).template_name(dict(self.params), self.precision, self.shape)

    @property
    def point(self):
        return gemm_point(self.precision, self.shape, self.m, self.n, self.k, self.batch)

    def geometry(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        g = _space(SPACE[self.family]).geometry(dict(self.params), self.point)
        grid = tuple(g.grid)
        if self.grid_cap:
            grid = (min(grid[0], self.grid_cap),) + grid[1:]
        return grid, tuple(g.block)  # RawKernel wants tuples


@functools.lru_cache(maxsize=None)
def _generated(precision: str):
    from autotune.space.generator import generate

    return generate(_space("gemm_tiny_simt"), get_device("H100"), precision)


def serving_instances(precision: str, m: int, n: int, k: int) -> list[tuple[tuple[str, int], ...]]:
    """Instances of the generated space (hard and soft constraints, H100 profile) that serve M x N x K."""
    from autotune.space.generator import serving

    g = _generated(precision)
    rows = np.flatnonzero(serving(g, gemm_point(precision, "NN", m, n, k, 1000)))
    frame = g.frame
    return [tuple((c, int(frame.iloc[r][c])) for c in frame.columns) for r in rows]


def _pick(insts: list, count: int) -> list:
    """Up to `count` instances spread over the list (different splits and stages), in a stable order."""
    if len(insts) <= count:
        return list(insts)
    idx = np.unique(np.linspace(0, len(insts) - 1, count).round().astype(int))
    return [insts[i] for i in idx]


def correctness_cases() -> list[Case]:
    cases: list[Case] = []
    for prec in PRECISIONS:
        for shape in SHAPES:
            for i, prm in enumerate(INSTANCES):
                d = dict(prm)
                bm, bn, bk, ppb = d["BM"], d["BN"], d["BK"], d["PPB"]
                nb = 3 * ppb + 5  # the last group is partial
                cases += [
                    Case("tiny", prm, prec, shape, bm, bn, bk, nb, 1.5, 0.0),  # exact, packed
                    Case("tiny", prm, prec, shape, bm, bn, bk, nb, -0.5, 2.0, offset=1 + i % 3),  # misaligned
                    Case("tiny", prm, prec, shape, bm, bn, bk, 2 * ppb + 1, 1.5, 0.0, pad=3),  # lda > rows
                    Case("tiny", prm, prec, shape, bm, bn, bk, 2 * ppb + 3, -0.5, 2.0, gap=5, offset=1),  # gaps
                    Case(
                        "tiny", prm, prec, shape, max(1, bm - 1), bn, max(1, bk - 1), nb, -0.5, 2.0, offset=3
                    ),  # below bounds
                    Case("tiny", prm, prec, shape, bm + 1, bn, bk + 2, 37, 1.5, 0.0, pad=1),  # above bounds
                    Case("tiny", prm, prec, shape, 3, 5, 7, 2 * ppb + 7, -0.5, 2.0),  # rectangular
                    Case(
                        "tiny", prm, prec, shape, bm, bn, bk, 11 * ppb + 3, 1.5, 0.0, offset=2, grid_cap=3
                    ),  # grid stride
                ]
        # square sizes and a rectangular size, through instances the space assigns to them (two above 16)
        for n in SQUARES:
            for prm in _pick(serving_instances(prec, n, n, n), 1 if n <= 16 else 2):
                for shape in ("NN", "TT") if n % 2 else ("NT", "TN"):
                    cases.append(Case("tiny", prm, prec, shape, n, n, n, 1001, 1.5, 0.0))
                    cases.append(Case("tiny", prm, prec, shape, n, n, n, 333, -0.5, 2.0, pad=1, offset=1))
        for prm in _pick(serving_instances(prec, 3, 5, 7), 2):
            cases.append(Case("tiny", prm, prec, "NN", 3, 5, 7, 1001, 1.5, 0.0, offset=1))
            cases.append(Case("tiny", prm, prec, "TT", 3, 5, 7, 1001, -0.5, 2.0))
        # 19 x 32 x 25: rectangular bounds (in-bounds path with run-time M and K) and cubic bounds of 32; above 32
        # (M, K > BM, BK): the one-thread-per-element slow path of an instance that serves n = 32
        n32 = _pick(serving_instances(prec, 32, 32, 32), 1)
        for i, shape in enumerate(SHAPES):
            cases.append(Case("tiny", RECT, prec, shape, 19, 32, 25, 1001, 1.5, 0.0, offset=i))
            cases.append(Case("tiny", RECT, prec, shape, 19, 32, 25, 333, -0.5, 2.0, pad=1, offset=1))
            cases.append(Case("tiny", RECT, prec, shape, 20, 32, 26, 2 * 2 + 1, 1.5, 0.0))  # exact, partial group
            for prm in n32:
                cases.append(Case("tiny", prm, prec, shape, 19, 32, 25, 1001, -0.5, 2.0, offset=i))
                cases.append(Case("tiny", prm, prec, shape, 33, 17, 40, 101, 1.5, 0.0, pad=2))  # above 32
    # batch above 65,535
    cases.append(Case("tiny", INSTANCES[0], "fp32", "NN", 4, 4, 4, 70_001, 1.5, 0.0, offset=1))
    cases.append(Case("tiny", INSTANCES[1], "fp64", "TN", 3, 5, 7, 70_001, -0.5, 2.0))
    cases.append(Case("tiny", INSTANCES[2], "fp16", "NT", 2, 2, 2, 70_001, 1.5, 0.0, pad=1))
    cases.append(Case("tiny", INSTANCES[3], "fp32", "TT", 6, 7, 5, 70_001, -0.5, 2.0, gap=2))
    cases.append(Case("tiny", INSTANCES[5], "fp32", "TN", 31, 31, 31, 70_001, 1.5, 0.0, offset=3))
    return cases


Outcome = check_simt.Outcome  # worst per-matrix relative error, every element finite, the rest still NaN


compile_modules = check_simt.compile_modules  # {source: LoadedKernels}: the runner's compiler and cache


def _dims(c: Case):
    ta, tb = c.shape[0] == "T", c.shape[1] == "T"
    return ta, tb, ((c.k, c.m) if ta else (c.m, c.k)), ((c.n, c.k) if tb else (c.k, c.n))


def _operand(cp, batch: int, rows: int, cols: int, pad: int, gap: int, offset: int, prec: str):
    """Flat buffer of NaN for `batch` matrices rows x cols (ld = rows + pad, stride = ld * cols + gap) from
    element `offset` on; returns (buffer, index (batch, cols, rows) of each stored element in it, ld, stride)."""
    ld = rows + pad
    stride = ld * cols + gap
    buf = cp.full(offset + batch * stride + 8, cp.nan, DTYPE[prec])
    idx = (
        offset
        + cp.arange(batch, dtype=cp.int64)[:, None, None] * stride
        + cp.arange(cols, dtype=cp.int64)[None, :, None] * ld
        + cp.arange(rows, dtype=cp.int64)[None, None, :]
    )
    return buf, idx, ld, stride


def run_case(case: Case, modules: dict[str, object], seed: int = 0) -> Outcome:
    import cupy as cp

    rs = cp.random.RandomState(seed)
    prec, batch = case.precision, case.batch
    ta, tb, (ra, ca), (rb, cb) = _dims(case)
    bufA, ia, lda, sa = _operand(cp, batch, ra, ca, case.pad, case.gap, case.offset, prec)
    bufB, ib, ldb, sb = _operand(cp, batch, rb, cb, case.pad, case.gap, case.offset, prec)
    bufC, ic, ldc, sc = _operand(cp, batch, case.m, case.n, case.pad, case.gap, case.offset, prec)
    bufA[ia] = rs.uniform(-1.0, 1.0, ia.shape).astype(DTYPE[prec])
    bufB[ib] = rs.uniform(-1.0, 1.0, ib.shape).astype(DTYPE[prec])
    if case.beta != 0:
        bufC[ic] = rs.uniform(-1.0, 1.0, ic.shape).astype(DTYPE[prec])
    # stored matrix b is X[b].T for X = buf[idx] (batch, cols, rows)
    ref = reference_batch(
        bufA[ia].transpose(0, 2, 1),
        bufB[ib].transpose(0, 2, 1),
        bufC[ic].transpose(0, 2, 1),
        case.shape,
        case.alpha,
        case.beta,
    )
    mask = cp.zeros(bufC.shape, dtype=bool)  # the elements of C the kernel may write
    mask[ic.ravel()] = True

    fn = modules[case.source].get_function(case.name_expression())
    grid, block = case.geometry()
    fn(
        grid,
        block,
        strided_args(
            prec,
            (case.m, case.n, case.k),
            case.alpha,
            Operand(bufA[case.offset :], lda, sa),
            Operand(bufB[case.offset :], ldb, sb),
            case.beta,
            Operand(bufC[case.offset :], ldc, sc),
            batch,
        ),
    )
    cp.cuda.runtime.deviceSynchronize()
    return check_simt._outcome(bufC[ic].transpose(0, 2, 1), ref, bool(cp.isnan(bufC[~mask]).all()), prec)


# ----------------------------------------------------------------------------------------------- timing
TIMED_SIZES = (2, 3, 4, 5, 6, 8, 12, 16, 20, 24, 28, 32)


def _batch_1gb(prec: str, n: int) -> int:
    return int(1e9 // (DTYPE[prec]().itemsize * 3 * n * n))


def _small_params(n: int, threads: int) -> tuple[tuple[str, int], ...]:
    """gemm_small instances as scripts/check_simt.py times them: exact tile, NSG problems per block."""
    bk = min(b for b in (2, 4, 8, 12, 16, 24, 32) if b >= n)
    nsg = max(1, threads // (n * n))
    nsg = 1 << (nsg.bit_length() - 1)
    return _p(BLK_M=n, BLK_N=n, BLK_K=bk, NSG=nsg)


def timed_cases(per_point: int = 4, per_point_above_16: int = 6) -> list[Case]:
    """NN, alpha = 1, beta = 0, packed, about 1 GB moved: up to `per_point` (`per_point_above_16` for n > 16) tiny
    instances with exact bounds (spread over splits and stages), and the gemm_small instances of check_simt (128,
    256, 512 threads)."""
    out: list[Case] = []
    for prec in PRECISIONS:
        for n in TIMED_SIZES:
            batch = _batch_1gb(prec, n)
            exact = [
                p
                for p in serving_instances(prec, n, n, n)
                if dict(p)["BM"] == n and dict(p)["BN"] == n and dict(p)["BK"] == n
            ]
            for prm in _pick(exact, per_point if n <= 16 else per_point_above_16):
                out.append(Case("tiny", prm, prec, "NN", n, n, n, batch, 1.0, 0.0))
            seen = set()
            for threads in (128, 256, 512):
                prm = _small_params(n, threads)
                if prm not in seen:
                    seen.add(prm)
                    out.append(Case("small", prm, prec, "NN", n, n, n, batch, 1.0, 0.0))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--per-point", type=int, default=4, help="tiny instances timed per size and precision, n <= 16")
    ap.add_argument(
        "--per-point-above-16", type=int, default=6, help="tiny instances timed per size and precision, n > 16"
    )
    ap.add_argument(
        "--list",
        action="store_true",
        help="print the cases and the number of kernels to compile, then exit (no GPU needed)",
    )
    args = ap.parse_args()
    import time

    cases = correctness_cases()
    timed = [] if args.no_timing else timed_cases(args.per_point, args.per_point_above_16)
    if args.list:
        for c in cases:
            print(c.label)
        for c in timed:
            print("timed", c.label)
        names = {(c.source, c.name_expression()) for c in cases + timed}
        print(f"{len(cases)} correctness cases, {len(timed)} timed cases, {len(names)} kernels to compile")
        return 0

    if (why := no_gpu_reason()) is not None:
        raise SystemExit(f"error: {Path(__file__).name} measures on a GPU and {why}")
    import cupy as cp

    t0 = time.perf_counter()
    modules = compile_modules(cases)  # the same module as the pytest tier: NVRTC cache hit there
    print(
        f"compiled {len({c.name_expression() for c in cases})} kernels in "
        f"{time.perf_counter() - t0:.1f} s on {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}"
    )

    fails = 0
    summary: dict[tuple[str, str], list[float]] = {}
    for c in cases:
        try:
            o = run_case(c, modules)
        except Exception as exc:  # a failure is data: report it and go on
            o = Outcome(float("inf"), False, False, False)
            print(f"ERROR {c.label}: {type(exc).__name__}: {exc}")
        if not o.ok:
            fails += 1
            print(f"FAIL {c.label}: rel_err={o.rel_err:.2e} finite={o.finite} untouched={o.untouched}")
        summary.setdefault((c.precision, c.shape), []).append(o.rel_err if o.ok else float("inf"))

    rows = []
    if timed:
        cp.get_default_memory_pool().free_all_blocks()  # the timing runs in GpuBackend's worker process
        bw, got, cublas = check_simt.measure_cases(timed)
        print(
            f"\ntiming: NN, alpha=1, beta=0, packed, ~1 GB per launch, GpuBackend (median); "
            f"copy bandwidth {bw / 1e12:.3f} TB/s (read + write)"
        )
        print(f"{'family':6} {'prec':5} {'n':>3} {'batch':>10} {'ms':>8} {'roof':>5} ok  instance")
        best: dict[tuple[str, int, str], tuple[float, str]] = {}
        for c in timed:
            m = got[c]
            ms, frac = check_simt.roofline(m, bw)
            inst = "-".join(str(v) for _, v in c.params)
            ok = m.status == check_simt.Status.OK
            print(
                f"{c.family:6} {c.precision:5} {c.n:3d} {c.batch:10d} {ms:8.3f} {frac:5.2f} {'y' if ok else 'N'}   {inst}"
            )
            if not ok:
                fails += 1
                print(f"FAIL timed {c.label}: {m.status.value} {m.error or ''}")
                continue
            key = (c.precision, c.n, c.family)
            if key not in best or ms < best[key][0]:
                best[key] = (ms, inst)
        for prec in PRECISIONS:
            for n in TIMED_SIZES:
                point = gemm_point(prec, "NN", n, n, n, _batch_1gb(prec, n))
                cb, cf = check_simt.roofline(cublas[point], bw) if point in cublas else (float("nan"),) * 2
                t = best.get((prec, n, "tiny"), (float("nan"), "-"))
                s = best.get((prec, n, "small"), (float("nan"), "-"))
                frac = lambda ms, point=point: GEMM.bytes_moved(point, {"beta": 0.0}) / bw / (ms * 1e-3)  # noqa: E731
                rows.append((prec, n, point.batch, t[0], frac(t[0]), t[1], s[0], frac(s[0]), cb, cf))

    print(f"\ncorrectness (worst per-matrix relative error; inf = a failure); {len(cases)} cases")
    print(f"{'prec':5} {'shape':5} {'cases':>5} {'max_rel_err':>12} {'tol':>8} result")
    for (prec, shape), errs in sorted(summary.items()):
        worst = max(errs)
        print(
            f"{prec:5} {shape:5} {len(errs):5d} {worst:12.2e} {TOL[prec]:8.0e} "
            f"{'PASS' if worst <= TOL[prec] else 'FAIL'}"
        )
    if rows:
        print("\nbest times (ms) and fraction of the copy roofline: gemm_tiny vs gemm_small vs cuBLAS")
        print(
            f"{'prec':5} {'n':>3} {'batch':>10} {'tiny_ms':>8} {'roof':>5} {'small_ms':>8} {'roof':>5} "
            f"{'cublas':>8} {'roof':>5} {'speedup':>7}  best tiny instance"
        )
        for prec, n, batch, tm, tf, ti, sm, sf, cb, cf in rows:
            print(
                f"{prec:5} {n:3d} {batch:10d} {tm:8.3f} {tf:5.2f} {sm:8.3f} {sf:5.2f} {cb:8.3f} {cf:5.2f} "
                f"{sm / tm:7.2f}  {ti}"
            )
    print(
        f"\n{len(cases) - sum(1 for e in summary.values() for x in e if x == float('inf'))}/{len(cases)} "
        f"correctness cases pass; {fails} failure(s) in all"
    )
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
