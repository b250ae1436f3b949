#!/usr/bin/env python3
"""Device harness for the tensor-core HGEMM families (hgemm_wmma, hgemm_small_tc, hgemm_mma, hgemm_flat_tc,
hgemm_stream).

Compiles a few instances of each family with the runner's compiler (autotune.sweep.compile.nvrtc, on-disk cache), checks
them against the package's float64 reference (NaN-poisoned C, alpha/beta not 0/1, every n from 1 to 33, rectangular
and unpacked shapes, batch > 65,535), then measures them at square sizes through GpuBackend (the sweep's
verification and timing) next to its cuBLAS baseline and prints roofline fractions.
bytes = batch * 2 * (MK + KN + MN) (beta = 0); bandwidth = the backend's measured device-to-device copy.

    python3 scripts/check_hgemm.py --out results/hgemm_check      # needs a GPU, cupy, numpy
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from autotune.problems.gemm import GEMM, gemm_point
from autotune.problems.gemm.data import Operand, strided_args
from autotune.problems.gemm.verify import matrix_errors, reference_batch
from autotune.space.instance import Instance
from autotune.space.spec import load_space
from autotune.sweep.backends.base import Job
from autotune.sweep.compile.nvrtc import CompileRequest, compile_all, cuda_include_dir
from autotune.sweep.backends.local import DEFAULT_CACHE_DIR, GpuBackend, LocalOptions
from autotune.sweep.backends.gpu_worker import LoadedKernels, allow_dynamic_shared
from autotune.vocab import Status
from autotune.devices import no_gpu_reason

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels_src"


@functools.lru_cache(maxsize=None)
def _space(family: str):
    return load_space(family)


@dataclass(frozen=True)
class Kernel:
    """One instance: family, template arguments (without TRANS_A/TRANS_B) and its launch geometry."""

    family: (
        str  # hgemm_wmma | hgemm_small_tc | hgemm_mma | hgemm_flat_tc | hgemm_stream | hgemm_ring_tc | hgemm_wgmma_tc
    )
    args: tuple[int, ...]
    label: str
    extra: tuple[tuple[str, int], ...] = ()  # parameters that are no template argument (hgemm_wgmma_tc's PERSIST)

    def name(self, shape: str) -> str:
        ta, tb = int(shape[0] == "T"), int(shape[1] == "T")
        return f"autotune::{self.family}<{', '.join(str(v) for v in (ta, tb) + self.args)}>"

    def params(self) -> dict[str, int]:
        """The space's parameters: the template arguments after TRANS_A and TRANS_B, by name."""
        names = [a for a in _space(self.family).kernel.template_args if a not in ("TRANS_A", "TRANS_B")]
        if len(names) != len(self.args):
            raise ValueError(f"{self.label}: {len(self.args)} arguments for {self.family}'s {names}")
        return {**dict(zip(names, self.args, strict=True)), **dict(self.extra)}

    def geometry(self, m: int, n: int, k: int, batch: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(grid, block) from spaces/<family>.yaml, as the runner launches it (H100 profile where the GPU is none)."""
        g = _geometry(self, m, n, k, batch)
        return tuple(g.grid), tuple(g.block)

    def shared_bytes(self) -> int:
        """Dynamic shared memory from the space (hgemm_flat_tc's and hgemm_stream's smem_bytes; 0 for the others)."""
        return _geometry(self, 1, 1, 1, 1).shared_bytes

    def fits(self, n: int) -> bool:
        """Whether timing this instance at size n says anything: the space's `serves:` assigns n^3 to it."""
        return _serves(self, n)

    def bound(self) -> int:
        """The largest square size the instance serves (its fast path's bound); 2^30 where it serves every size."""
        return _bound(self)


@functools.lru_cache(maxsize=None)
def _serves(kern: Kernel, n: int) -> bool:
    return _space(kern.family).serves(kern.params(), gemm_point("fp16", "NN", n, n, n, 1))


@functools.lru_cache(maxsize=None)
def _bound(kern: Kernel) -> int:
    """Evaluated once per instance (256 evaluations of the space's `serves:`; the timing loop asks per size)."""
    if _space(kern.family).kernel.serves is None:
        return 1 << 30
    return max(n for n in range(1, 257) if _serves(kern, n))


@functools.lru_cache(maxsize=None)
def _geometry(kern: Kernel, m: int, n: int, k: int, batch: int):
    """The space's launch geometry, evaluated once per instance and problem: evaluating the space file costs
    0.4-0.7 ms, more than a kernel, and `launch` runs between the timing events."""
    return _space(kern.family).geometry(kern.params(), gemm_point("fp16", "NN", m, n, k, batch))


W, S, R, F, X = "hgemm_wmma", "hgemm_small_tc", "hgemm_mma", "hgemm_flat_tc", "hgemm_stream"
BOUNDED = (F, X)  # families whose instances serve sizes up to compile-time bounds (flat_cases)
KERNELS_UNDER_TEST = [
    # WMMA (TC_M, TC_N, TC_K, BLK_M, BLK_N, BLK_K, DIM_X, DIM_Y, NSG)
    Kernel(W, (16, 16, 16, 16, 16, 16, 16, 2, 1), "wmma16_nsg1"),
    Kernel(W, (16, 16, 16, 16, 16, 16, 16, 2, 4), "wmma16_nsg4"),
    Kernel(W, (32, 8, 16, 32, 32, 16, 16, 4, 2), "wmma32x8_b32"),
    Kernel(W, (8, 32, 16, 32, 32, 32, 16, 2, 1), "wmma8x32_b32"),
    Kernel(W, (8, 32, 16, 48, 96, 32, 16, 8, 1), "wmma_rr18on4"),  # 18 sub-blocks round-robin on 4 warps
    Kernel(W, (16, 16, 16, 64, 64, 32, 32, 4, 1), "wmma_b64"),
    Kernel(W, (16, 16, 16, 128, 64, 32, 32, 4, 1), "wmma_b128x64"),
    # magma-small-v2 (NWARPS, GPW, TC_N, KMAX)
    Kernel(S, (4, 2, 16, 16), "v2_w4g2"),
    Kernel(S, (4, 4, 16, 16), "v2_w4g4"),
    Kernel(S, (2, 4, 8, 32), "v2_w2g4_n8"),
    Kernel(S, (8, 2, 16, 32), "v2_w8g2_k32"),
    # ladder (RUNG, BM, BN, BK, WM, WN, STAGES, NSG)
    Kernel(R, (1, 32, 32, 32, 2, 2, 1, 1), "r1_32"),
    Kernel(R, (2, 64, 64, 32, 2, 2, 1, 1), "r2_64"),
    Kernel(R, (3, 64, 64, 32, 2, 2, 2, 1), "r3_64"),
    Kernel(R, (4, 16, 16, 16, 1, 1, 2, 4), "r4_16_nsg4"),
    Kernel(R, (4, 16, 16, 16, 1, 1, 2, 8), "r4_16_nsg8"),
    Kernel(R, (4, 16, 16, 16, 1, 1, 3, 4), "r4_16_s3"),
    Kernel(R, (4, 32, 32, 32, 1, 1, 2, 4), "r4_32_nsg4"),
    Kernel(R, (4, 32, 32, 32, 1, 1, 3, 2), "r4_32_s3_nsg2"),
    Kernel(R, (4, 128, 128, 16, 2, 4, 4, 1), "r4_128_k16"),
    Kernel(R, (4, 64, 64, 64, 2, 2, 2, 1), "r4_64_k64"),
    Kernel(R, (4, 64, 64, 32, 2, 2, 3, 1), "r4_64_s3"),
    Kernel(R, (4, 128, 64, 32, 2, 2, 3, 1), "r4_128x64"),
    Kernel(R, (4, 128, 128, 32, 2, 4, 3, 1), "r4_128_w8"),
    # flat copies + repack + ldmatrix/mma.sync (BM, BN, BK, WM, WN, NWARPS, PPB, STAGES, CDIRECT); the first runs n = 1..40
    Kernel(F, (40, 40, 40, 1, 1, 4, 2, 2, 0), "flat40_w4"),
    Kernel(F, (8, 8, 8, 1, 1, 2, 16, 1, 0), "flat8_p16"),
    Kernel(F, (8, 8, 8, 1, 1, 4, 32, 2, 0), "flat8_p32s2"),
    Kernel(F, (16, 16, 16, 1, 1, 4, 8, 1, 0), "flat16_p8"),
    Kernel(F, (16, 16, 16, 1, 1, 4, 8, 2, 0), "flat16_p8s2"),
    Kernel(F, (24, 24, 24, 1, 1, 4, 4, 2, 0), "flat24_p4s2"),
    Kernel(F, (32, 32, 32, 2, 2, 2, 2, 1, 0), "flat32_w2x2"),
    Kernel(F, (32, 32, 32, 1, 1, 4, 2, 2, 0), "flat32_p2s2"),
    Kernel(F, (48, 48, 48, 1, 2, 4, 1, 2, 0), "flat48_1x2s2"),
    Kernel(F, (64, 64, 64, 2, 2, 4, 1, 1, 0), "flat64_2x2"),
    Kernel(F, (64, 64, 64, 2, 2, 4, 1, 2, 0), "flat64_2x2s2"),
    Kernel(F, (72, 72, 72, 1, 1, 8, 1, 2, 0), "flat72_w8s2"),
    Kernel(F, (96, 96, 96, 2, 2, 8, 1, 2, 0), "flat96_2x2s2"),
    Kernel(F, (128, 128, 128, 2, 4, 8, 1, 1, 0), "flat128_2x4"),
    Kernel(F, (128, 128, 128, 4, 2, 8, 1, 1, 0), "flat128_4x2"),
    Kernel(F, (40, 40, 40, 1, 2, 4, 2, 1, 1), "flat40_cdirect"),  # C straight to global memory
    Kernel(F, (72, 72, 72, 1, 1, 8, 1, 2, 1), "flat72_w8s2_cd"),
    Kernel(F, (128, 128, 128, 2, 4, 8, 1, 1, 1), "flat128_2x4_cd"),
    # streaming ring of slots (BM, BN, BK, WM, WN, NWARPS, PPB, STAGES, BULK); the first runs n = 1..40
    Kernel(X, (40, 40, 40, 1, 1, 4, 2, 4, 0), "stream40_p2s4"),
    Kernel(X, (40, 40, 40, 1, 1, 4, 2, 4, 1), "stream40_bulk"),  # cp.async.bulk per column + mbarrier
    Kernel(X, (64, 64, 64, 2, 2, 4, 1, 4, 0), "stream64_2x2s4"),
    Kernel(X, (72, 72, 72, 1, 1, 8, 1, 4, 0), "stream72_w8s4"),
    Kernel(X, (96, 96, 96, 2, 2, 8, 1, 5, 1), "stream96_bulk"),
    Kernel(X, (128, 128, 128, 2, 4, 8, 1, 3, 0), "stream128_2x4"),
    Kernel(X, (128, 128, 128, 2, 2, 16, 1, 3, 1), "stream128_w16_bulk"),
]


def compile_family(family: str, names: list[str]) -> LoadedKernels:
    """The family's name expressions, one per NVRTC call in a process pool, through the runner's compile cache."""
    import cupy

    arch = int(cupy.cuda.Device().compute_capability)
    src = KERNELS / f"{family}.cuh"
    specific = _space(family).kernel.arch_specific  # hgemm_wgmma_tc: sm_90a, as the sweep compiles it
    requests = [CompileRequest(src, (nm,), arch, (KERNELS,), arch_specific=specific) for nm in names]
    kernels = compile_all(requests, DEFAULT_CACHE_DIR)
    failed = [ck for ck in kernels.values() if not ck.ok]
    if failed:
        raise RuntimeError(
            f"{len(failed)} of {family}'s kernels did not compile, first {failed[0].name_expression}:\n"
            + failed[0].log[-2000:]
        )
    return LoadedKernels(kernels)


@dataclass
class Problem:
    m: int
    n: int
    k: int
    batch: int
    shape: str = "NN"
    pad: int = 0  # extra leading-dimension elements (unpacked layout)
    off: int = 0  # A, B and C start this many elements past the start of their allocations (16-byte aligned)


@dataclass
class Operands:
    """Device arrays in column-major batched layout plus what the kernel call needs."""

    a: object
    b: object
    c: object
    lda: int
    ldb: int
    ldc: int
    sa: int
    sb: int
    sc: int
    a_view: object  # batch x rows x cols views of the stored matrices (column-major storage)
    b_view: object
    c_view: object  # batch x m x n


def make_operands(p: Problem, rs, cp, poison: bool) -> Operands:
    """Random fp16 operands on the device (rs: cupy RandomState); C all NaN when `poison`."""

    def stored(rows: int, cols: int):
        ld = rows + p.pad
        if p.off:  # a view p.off elements into its allocation: the kernel gets an unaligned pointer
            flat = rs.uniform(-1.0, 1.0, size=p.off + p.batch * cols * ld, dtype=cp.float32).astype(cp.float16)
            arr = flat[p.off :].reshape(p.batch, cols, ld)
        else:
            arr = rs.uniform(-1.0, 1.0, size=(p.batch, cols, ld), dtype=cp.float32).astype(cp.float16)
        return arr, ld, cols * ld, arr[:, :, :rows].transpose(0, 2, 1)

    ta, tb = p.shape[0] == "T", p.shape[1] == "T"
    a, lda, sa, av = stored(p.k, p.m) if ta else stored(p.m, p.k)
    b, ldb, sb, bv = stored(p.n, p.k) if tb else stored(p.k, p.n)
    c, ldc, sc, cv = stored(p.m, p.n)
    if poison:
        c.fill(float("nan"))
    if p.pad:  # NaN in the padding: a read of it reaches C, a write to it is caught by padding_intact()
        for arr, rows in ((a, p.k if ta else p.m), (b, p.n if tb else p.k), (c, p.m)):
            arr[:, :, rows:] = float("nan")
    return Operands(a, b, c, lda, ldb, ldc, sa, sb, sc, av, bv, cv)


def launch(fn, kern: Kernel, p: Problem, o: Operands, alpha: float, beta: float, grid_cap: int | None = None):
    g = _geometry(kern, p.m, p.n, p.k, p.batch)
    grid = (min(g.grid[0], grid_cap), 1, 1) if grid_cap else tuple(g.grid)
    allow_dynamic_shared(fn, g.shared_bytes)
    fn(
        grid,
        tuple(g.block),
        strided_args(
            "fp16",
            (p.m, p.n, p.k),
            alpha,
            Operand(o.a, o.lda, o.sa),
            Operand(o.b, o.ldb, o.sb),
            beta,
            Operand(o.c, o.ldc, o.sc),
            p.batch,
        ),
        shared_mem=g.shared_bytes,
    )


def rel_error(fn, kern: Kernel, p: Problem, alpha: float, beta: float, rng, cp, grid_cap=None) -> float:
    """Worst per-matrix relative error against the package's float64 reference (inf: a NaN left in C, or a
    write into C's padding)."""
    o = make_operands(p, rng, cp, poison=beta == 0.0)
    ref = reference_batch(o.a_view, o.b_view, o.c_view, p.shape, alpha, beta)
    launch(fn, kern, p, o, alpha, beta, grid_cap)
    cp.cuda.Device().synchronize()
    err, nonfinite = matrix_errors(o.c_view, ref)
    if nonfinite:
        return float("inf")
    if p.pad and not bool(cp.isnan(o.c[:, :, p.m :]).all()):
        return float("inf")  # the kernel wrote into C's padding
    return err


def SHAPES_OF(kern: Kernel) -> tuple[str, ...]:  # noqa: N802 - the first instance of a family gets all four
    first = next(k for k in KERNELS_UNDER_TEST if k.family == kern.family)
    return ("NN", "NT", "TN", "TT") if kern == first else ("NN", "NT")


def correctness_cases(kern: Kernel, full: bool) -> list[tuple[Problem, float, float, int | None]]:
    """(problem, alpha, beta, grid cap). `full`: every n from 1 to 33 in NN and NT."""
    if kern.family in BOUNDED:
        return flat_cases(kern, full)
    cases = []
    small = kern.family == S
    sizes = range(1, 34) if full else ([2, 5, 8, 13, 16] if small else [3, 8, 17, 31, 33])
    for n in sizes:
        for shape in ("NN", "NT"):
            cases.append((Problem(n, n, n, 3, shape), 1.5, -0.75 if n % 2 else 0.0, None))
    rect = (
        [(5, 7, 3), (3, 8, 16), (8, 3, 31), (1, 6, 9)] if small else [(5, 7, 3), (17, 9, 33), (40, 24, 70), (70, 33, 9)]
    )
    for m, n, k in rect:
        for shape in SHAPES_OF(kern):
            cases.append((Problem(m, n, k, 5, shape), -0.5, 0.25, None))
        cases.append((Problem(m, n, k, 4, "NN", pad=3), 1.25, 0.5, None))  # unpacked, unaligned leading dims
    big = Problem(2, 3, 4, 70_000, "NN") if small else Problem(8, 8, 8, 70_000, "NT")
    cases.append((big, 1.0, 0.0, None))  # batch above 65,535
    cases.append((Problem(big.m, big.n, big.k, 1_000, "NN"), 1.0, 2.0, 7))  # grid-stride loop with a capped grid
    if not small:  # several work items per block (grid-stride) with K spanning several k-tiles
        cases.append((Problem(40, 24, 70, 50, "NN"), -1.5, 0.5, 3))
    if small:
        cases.append((Problem(12, 20, 40, 6, "NN"), 0.75, 0.5, None))  # outside v2's domain: fallback path
    return cases


def flat_cases(kern: Kernel, full: bool) -> list[tuple[Problem, float, float, int | None]]:
    """hgemm_flat_tc and hgemm_stream: the sizes the bound b serves (b - 7 .. b; `full`: every n from 1 to b) in NN
    and NT, odd rectangular sizes within the bound in the four shapes (the first instance) or NN/NT, unpacked layouts,
    a batch above 65,535, a capped grid (several groups per block: hgemm_stream's ring of slots wraps), and sizes
    above the bound (the slow path)."""
    b = kern.bound()
    cases = []
    for n in range(1, b + 1) if full else range(max(1, b - 7), b + 1):
        for shape in ("NN", "NT"):
            cases.append((Problem(n, n, n, 3, shape), 1.5, -0.75 if n % 2 else 0.0, None))
    rect = [(b, max(1, b - 3), max(1, b - 5)), (max(1, b - 6), b, 1), (3, max(1, b - 1), b), (5, 7, 3)]
    for m, n, k in rect:
        for shape in SHAPES_OF(kern):
            cases.append((Problem(m, n, k, 5, shape), -0.5, 0.25, None))
        cases.append((Problem(m, n, k, 4, "NN", pad=3), 1.25, 0.5, None))  # unpacked, unaligned leading dims
        cases.append((Problem(m, n, k, 4, "NT", pad=1), 1.25, 0.0, None))
    cases.append((Problem(8, 8, 8, 70_000, "NT"), 1.0, 0.0, None))  # batch above 65,535
    cases.append((Problem(8, 8, 8, 1_000, "NN"), 1.0, 2.0, 7))  # grid-stride loop with a capped grid, beta != 0
    m = max(1, b - 1)
    cases.append((Problem(m, max(1, b - 2), b, 50, "NN"), -1.5, 0.5, 3))  # several groups per block
    cases.append((Problem(m, max(1, b - 2), b, 50, SHAPES_OF(kern)[-1]), -1.25, 0.0, 2))
    cases.append((Problem(b + 3, b + 1, b + 2, 3, "NN"), 0.75, 0.5, None))  # above the bound: slow path
    return cases


TOL = 1e-2  # fp16 inputs, fp32 accumulation: relative to the norm of the reference


def check_kernel(kern: Kernel, mod, full: bool, rng, cp) -> tuple[float, list[str]]:
    """Run every correctness case of `kern`; returns the worst relative error and the failing cases."""
    worst, bad = 0.0, []
    for p, alpha, beta, cap in correctness_cases(kern, full):
        err = rel_error(mod.get_function(kern.name(p.shape)), kern, p, alpha, beta, rng, cp, cap)
        worst = max(worst, err)
        if not err <= TOL:
            bad.append(f"{p} a={alpha} b={beta} cap={cap}: {err:.3g}")
    return worst, bad


# K-sliced ring straight into padded tiles, aligned sizes only (BM, BN, KS, WM, WN, NWARPS, STAGES, VEC, CDIRECT); the
# first runs every shape. Its own GPU test (tests/gpu/test_hgemm_ring.py) and cases (ring_cases).
G = "hgemm_ring_tc"
RING_KERNELS = [
    Kernel(G, (128, 128, 32, 2, 4, 8, 3, 16, 0), "ring128_k32s3"),
    Kernel(G, (128, 128, 32, 2, 4, 8, 4, 16, 1), "ring128_k32s4_cd"),
    Kernel(G, (120, 120, 64, 4, 2, 8, 2, 16, 0), "ring120_k64s2"),
    Kernel(G, (104, 104, 32, 2, 2, 8, 3, 16, 0), "ring104_2x2"),  # 112 x 128 tiles for 104: three items pad
    Kernel(G, (96, 96, 32, 3, 2, 6, 3, 16, 0), "ring96_3x2w6"),
    Kernel(G, (64, 64, 16, 1, 1, 8, 4, 16, 0), "ring64_k16_ipw2"),  # 16 warp tiles on 8 warps
    Kernel(G, (48, 48, 16, 1, 3, 6, 2, 8, 0), "ring48_v8"),  # 8-byte copies
    Kernel(G, (120, 120, 32, 2, 4, 8, 3, 4, 0), "ring120_v4"),  # 4-byte copies: even sizes
    Kernel(G, (40, 40, 32, 1, 1, 4, 3, 4, 1), "ring40_v4_cd"),  # a warp with 5 tiles, 4-byte copies, direct C
]


def ring_cases(kern: Kernel, full: bool) -> list[tuple[Problem, float, float, int | None]]:
    """hgemm_ring_tc: aligned sizes (multiples of e = VEC / 2) up to the bound b in NN and NT (`full`: every aligned
    n from b - 40, else the three largest), K that is not a multiple of the slice or of 16 and K far above the
    bound (many slices), rectangles in the four shapes (the first instance) or NN/NT, an unpacked layout whose
    leading dimension stays aligned (the fast path, NaN in the gaps) and one that does not (the per-element path),
    unaligned and above-bound sizes (the per-element path), beta != 0 (element stores reading C), beta == 0 with C
    poisoned (the 16-byte store path), capped grids (a block's ring runs across many problems) and a batch above
    65,535."""
    b, e = kern.bound(), kern.params()["VEC"] // 2
    ks = kern.params()["KS"]
    sq = [n for n in range(e, b + 1, e)]
    sq = [n for n in sq if n >= b - 40] if full else sq[-3:]
    cases = []
    for n in sq:
        for shape in ("NN", "NT"):
            cases.append((Problem(n, n, n, 3, shape), 1.5, -0.75 if n % 16 else 0.0, None))
    kodd = ((ks + 16 + e) // e) * e  # one slice and a part, not a multiple of 16 where e < 16
    rect = [(b, b - 2 * e, kodd), (b - 3 * e, b, e), (e, b - e, 2 * b + 2 * e), (2 * e, e, 3 * e)]
    for m, n, k in rect:
        for shape in SHAPES_OF_RING(kern):
            cases.append((Problem(m, n, k, 5, shape), -0.5, 0.0, None))
            cases.append((Problem(m, n, k, 4, shape), 1.25, 0.5, None))
        cases.append((Problem(m, n, k, 4, "NN", pad=8), 1.25, 0.0, None))  # unpacked, aligned: fast path
        cases.append((Problem(m, n, k, 4, "NT", pad=3), 1.25, 0.5, None))  # unpacked, unaligned: per element
    cases.append((Problem(b - 1, b - 1, b - 1, 3, "NN"), 1.0, 0.0, None))  # unaligned size: per element
    cases.append((Problem(b, b, b + 3, 3, "NT"), 1.0, 0.0, None))  # unaligned K only: per element
    cases.append((Problem(b + e, b, b, 3, "NN"), 0.75, 0.5, None))  # above the bound: per element
    cases.append((Problem(4 * e, 4 * e, 4 * e, 70_000, "NT"), 1.0, 0.0, None))  # batch above 65,535
    cases.append((Problem(b, b, b, 50, "NN"), -1.5, 0.0, 3))  # 17 problems per block through one ring
    cases.append((Problem(b, b - e, kodd, 50, SHAPES_OF_RING(kern)[-1]), -1.25, 0.5, 2))
    cases.append((Problem(b - e, b, 3 * ks + e, 7, "NN"), 1.0, 0.0, 1))  # one block, K of several slices
    return cases


def SHAPES_OF_RING(kern: Kernel) -> tuple[str, ...]:  # noqa: N802 - the first ring instance gets all four
    return ("NN", "NT", "TN", "TT") if kern == RING_KERNELS[0] else ("NN", "NT")


def check_ring(kern: Kernel, mod, full: bool, rng, cp) -> tuple[float, list[str]]:
    """check_kernel over ring_cases."""
    worst, bad = 0.0, []
    for p, alpha, beta, cap in ring_cases(kern, full):
        err = rel_error(mod.get_function(kern.name(p.shape)), kern, p, alpha, beta, rng, cp, cap)
        worst = max(worst, err)
        if not err <= TOL:
            bad.append(f"{p} a={alpha} b={beta} cap={cap}: {err:.3g}")
    return worst, bad


@dataclass
class Timing:
    label: str
    n: int
    batch: int
    ms: float
    frac: float
    spread: tuple[float, float] = field(default=(0.0, 0.0))


def batch_for(n: int, target_bytes: float) -> int:
    return max(100, math.ceil(target_bytes / (6 * n * n)))


def measure(backend, kernels: list[Kernel], points: dict[Kernel, list], reps: int, bw: float) -> dict:
    """{(kernel label, point): Timing} for every verified measurement, through GpuBackend (the sweep's protocol)."""
    jobs, label = [], {}
    for kern in kernels:
        if points.get(kern):
            inst = Instance.of(_space(kern.family).name, kern.params())
            label[inst.id] = kern.label
            jobs.append(Job(_space(kern.family), inst, tuple(dict.fromkeys(points[kern])), GEMM.scalars(), reps))
    out = {}
    for m in backend.run(jobs):
        if m.status != Status.OK:
            print(f"timing {label[m.instance_id]} {m.point.key}: {m.status.value} {m.error or ''}", flush=True)
            continue
        p = m.point
        frac = GEMM.bytes_moved(p, {"beta": 0.0}) / bw / (m.median_ms * 1e-3)
        out[(label[m.instance_id], p)] = Timing(
            label[m.instance_id], p.n, p.batch, m.median_ms, frac, (m.p20_ms, m.p80_ms)
        )
    return out


def cublas_ms(backend, point, reps: int) -> float:
    m = backend.baseline(GEMM, point, GEMM.scalars(), reps)
    return m.median_ms if m.status == Status.OK and m.median_ms else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "results" / "hgemm_check"))
    ap.add_argument("--sizes", default="2,4,8,16,24,32,48,64,96,128")
    ap.add_argument("--target-mb", type=float, default=256.0, help="working set per timed problem set (MB)")
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--full", action="store_true", help="every n from 1 to 33 for every instance")
    ap.add_argument(
        "--families",
        default="hgemm_wmma,hgemm_small_tc,hgemm_mma,hgemm_flat_tc,hgemm_stream",
        help="families to compile, check and time (comma-separated)",
    )
    ap.add_argument("--batch-sweep", default="8,32", help="sizes for the batch-count study ('' to skip)")
    a = ap.parse_args()
    if (why := no_gpu_reason()) is not None:
        raise SystemExit(f"error: {Path(__file__).name} measures on a GPU and {why}")
    import cupy as cp

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = cp.random.RandomState(0)
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    print(
        f"GPU {props['name'].decode()} cc{props['major']}{props['minor']} cupy {cp.__version__} "
        f"cuda_include {cuda_include_dir()}",
        flush=True,
    )

    mods, fails, log = {}, [], []
    for fam in [f for f in (W, S, R, F, X) if f in a.families.split(",")]:
        names = sorted({k.name(s) for k in KERNELS_UNDER_TEST if k.family == fam for s in SHAPES_OF(k)})
        t0 = time.time()
        try:
            mods[fam] = compile_family(fam, names)
            print(f"compiled {fam}: {len(names)} kernels in {time.time() - t0:.1f} s", flush=True)
        except Exception as e:  # noqa: BLE001 - report and go on with the other families
            print(f"COMPILE FAIL {fam}: {e}", flush=True)
            fails.append(f"compile {fam}")
    first = {}
    for kern in KERNELS_UNDER_TEST:
        if kern.family not in mods:
            continue
        variant = (kern.family, kern.args[0] if kern.family == R else 0)  # each ladder rung is a variant
        full = a.full or variant not in first
        first.setdefault(variant, kern)
        worst, bad = check_kernel(kern, mods[kern.family], full, rng, cp)
        status = "PASS" if not bad else f"FAIL({len(bad)})"
        print(f"check {kern.label:14s} {'full' if full else 'quick'} worst rel err {worst:.2e} {status}", flush=True)
        log.append({"kernel": kern.label, "name": kern.name("NN"), "worst": worst, "bad": bad})
        if bad:
            fails.append(kern.label)
            print("   " + "\n   ".join(bad[:6]), flush=True)

    cp.get_default_memory_pool().free_all_blocks()  # the timing runs in GpuBackend's worker process
    bad_labels = set(fails)
    timed = [k for k in KERNELS_UNDER_TEST if k.family in mods and k.label not in bad_labels]
    square = [int(s) for s in a.sizes.split(",") if s]
    sweep_ns = [int(s) for s in a.batch_sweep.split(",") if s]
    sq_pts = {n: gemm_point("fp16", "NN", n, n, n, batch_for(n, a.target_mb * 1e6)) for n in square}
    sw_pts = {
        (n, b): gemm_point("fp16", "NN", n, n, n, b) for n in sweep_ns for b in (100, 1_000, 10_000, 100_000, 1_000_000)
    }
    rect_pts = {k: gemm_point("fp16", "NN", 4, 3, k, 1_000_000) for k in (4, 8, 16)}  # the paper's Fig. 15
    points: dict[Kernel, list] = {}
    for kern in timed:
        serves = lambda n, kern=kern: not (kern.family == S and n > 16) and kern.fits(n)  # noqa: E731
        points[kern] = (
            [p for n, p in sq_pts.items() if serves(n)]
            + [p for (n, _), p in sw_pts.items() if serves(n)]
            + [p for k, p in rect_pts.items() if k <= kern.bound()]
        )
    with GpuBackend(LocalOptions(include_dirs=(KERNELS,))) as backend:
        bw = backend.device_info().copy_bandwidth
        print(f"device-to-device copy bandwidth (read+write): {bw / 1e12:.3f} TB/s", flush=True)
        got = measure(backend, timed, points, a.reps, bw)
        cub = {p: cublas_ms(backend, p, a.reps) for p in {*sq_pts.values(), *sw_pts.values(), *rect_pts.values()}}
    lib = "cublasGemmStridedBatchedEx"
    timings = [t.__dict__ for t in got.values()]

    def best_by_family(p) -> dict[str, Timing]:
        best: dict[str, Timing] = {}
        for t in (got[(k.label, p)] for k in timed if (k.label, p) in got):
            fam = next(k.family for k in timed if k.label == t.label)
            if fam not in best or t.ms < best[fam].ms:
                best[fam] = t
        return best

    rows = []
    for n, p in sq_pts.items():
        best = best_by_family(p)
        if best:
            nbytes = GEMM.bytes_moved(p, {"beta": 0.0})
            rows.append(
                (
                    n,
                    p.batch,
                    nbytes / 1e6,
                    cub[p],
                    nbytes / bw / (cub[p] * 1e-3),
                    best,
                    min(best.values(), key=lambda t: t.ms),
                )
            )
    sweep = []
    for (n, batch), p in sw_pts.items():
        best = best_by_family(p)
        if best:
            t = min(best.values(), key=lambda t: t.ms)
            gf = lambda ms, n=n, batch=batch: 2 * n**3 * batch / (ms * 1e-3) / 1e9  # noqa: E731
            sweep.append((n, batch, t.label, gf(t.ms), gf(cub[p]), cub[p] / t.ms))
    rect = [(k, cub[p], best_by_family(p)) for k, p in rect_pts.items()]

    (out / "check_hgemm.json").write_text(
        json.dumps({"bandwidth": bw, "checks": log, "timings": timings, "cublas_lib": lib, "failures": fails}, indent=1)
    )
    print("\nbatch-count study (square n, NN, beta=0): best of the instances above vs cuBLAS")
    print(f"{'n':>4} {'batch':>8} {'best':>14} {'GFLOP/s':>9} {'cuBLAS':>9} {'speedup':>8}")
    for n, batch, lab, g1, g2, sp in sweep:
        print(f"{n:>4} {batch:>8} {lab:>14} {g1:>9.1f} {g2:>9.1f} {sp:>8.2f}")
    print("\nM=4 N=3, batch 1M, NN (paper Fig. 15): best instance per family, ms (roofline fraction)")
    for k, cub, by_fam in rect:
        cells = "  ".join(f"{f[6:]}: {t.label} {t.ms:.4f} ({t.frac:.2f})" for f, t in by_fam.items())
        print(f"K={k:>2}  cuBLAS {cub:.4f}  {cells}")
    fams = [W, S, R, F, X]
    print(
        f"\nsquare NN, alpha=1 beta=0, copy bw {bw / 1e12:.2f} TB/s, reps {a.reps}, median; frac = roofline fraction;"
        f" cuBLAS = {lib}"
    )
    print(
        f"{'n':>4} {'batch':>8} {'MB':>6} | {'cuBLAS ms':>9} {'frac':>5} | "
        + " | ".join(f"{f[6:]:>22}" for f in fams)
        + f" | {'best/cuBLAS':>11}"
    )
    for n, batch, mb, cub, cfrac, best, top in rows:
        cells = [f"{best[f].label:>12} {best[f].frac:>4.2f}" if f in best else f"{'-':>17}" for f in fams]
        cells = [f"{c:>22}" for c in cells]
        print(
            f"{n:>4} {batch:>8} {mb:>6.0f} | {cub:>9.4f} {cfrac:>5.2f} | "
            + " | ".join(cells)
            + f" | {cub / top.ms:>10.2f}x"
        )
    print("FAILURES: " + (", ".join(fails) if fails else "none"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
