#!/usr/bin/env python3
"""Device harness for the tensor-core HGEMM families (hgemm_wmma, hgemm_small_tc, hgemm_mma, hgemm_flat_tc).

Compiles a few instances of each family with NVRTC (cupy.RawModule), checks them against a float64 reference
(NaN-poisoned C, alpha/beta not 0/1, every n from 1 to 33, rectangular and unpacked shapes, batch > 65,535),
then times them at square sizes next to cuBLAS (torch.bmm, else cupy.matmul) and prints roofline fractions.
bytes = batch * 2 * (MK + KN + MN) (beta = 0); bandwidth = a large device-to-device copy measured in the same run.

    python3 scripts/check_hgemm.py --out results/hgemm_check      # needs a GPU, cupy, numpy
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels_src"
sys.path.insert(0, str(ROOT))
from autotune.problems.gemm import gemm_point
from autotune.vocab import TestPoint  # noqa: E402
from autotune.space.spec import load_space  # noqa: E402


@functools.lru_cache(maxsize=None)
def _space(family: str):
    return load_space(family)


@dataclass(frozen=True)
class Kernel:
    """One instance: family, template arguments (without TRANS_A/TRANS_B) and its launch geometry."""

    family: str  # hgemm_wmma | hgemm_small_tc | hgemm_mma | hgemm_flat_tc
    args: tuple[int, ...]
    label: str

    def name(self, shape: str) -> str:
        ta, tb = int(shape[0] == "T"), int(shape[1] == "T")
        return f"autotune::{self.family}<{', '.join(str(v) for v in (ta, tb) + self.args)}>"

    def params(self) -> dict[str, int]:
        """The space's parameters: the template arguments after TRANS_A and TRANS_B, by name."""
        names = [a for a in _space(self.family).kernel.template_args if a not in ("TRANS_A", "TRANS_B")]
        if len(names) != len(self.args):
            raise ValueError(f"{self.label}: {len(self.args)} arguments for {self.family}'s {names}")
        return dict(zip(names, self.args))

    def geometry(self, m: int, n: int, k: int, batch: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(grid, block) from spaces/<family>.yaml, as the runner launches it (H100 profile where the GPU is none)."""
        g = _geometry(self, m, n, k, batch)
        return tuple(g.grid), tuple(g.block)

    def shared_bytes(self) -> int:
        """Dynamic shared memory from the space (hgemm_flat_tc's smem_bytes; 0 for the others)."""
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


W, S, R, F = "hgemm_wmma", "hgemm_small_tc", "hgemm_mma", "hgemm_flat_tc"
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
]


def cuda_include_dir() -> str | None:
    """Where <mma.h> lives: CUDA_PATH, cupy's CUDA path, next to nvcc, or the pip nvidia packages."""
    import cupy

    cands = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME")]
    try:
        cands.append(cupy.cuda.get_cuda_path())
    except Exception:  # noqa: BLE001 - older cupy
        pass
    nvcc = shutil.which("nvcc")
    if nvcc:
        cands.append(str(Path(nvcc).resolve().parent.parent))
    cands += ["/usr/local/cuda"]
    for c in cands:
        if c and (Path(c) / "include" / "mma.h").exists():
            return str(Path(c) / "include")
    for p in sys.path:
        for sub in ("nvidia/cu13/include", "nvidia/cuda_runtime/include", "nvidia/cuda_nvcc/include"):
            if (Path(p) / sub / "mma.h").exists():
                return str(Path(p) / sub)
    return None


def compile_family(family: str, names: list[str]):
    import cupy

    opts = ["-std=c++17", f"--include-path={KERNELS}"]
    inc = cuda_include_dir()
    if inc:
        opts.append(f"--include-path={inc}")
    code = (KERNELS / f"{family}.cuh").read_text()
    mod = cupy.RawModule(code=code, options=tuple(opts), name_expressions=names)
    mod.compile()
    return mod


@dataclass
class Problem:
    m: int
    n: int
    k: int
    batch: int
    shape: str = "NN"
    pad: int = 0  # extra leading-dimension elements (unpacked layout)


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
    grid, block, smem = tuple(g.grid), tuple(g.block), g.shared_bytes
    if grid_cap:
        grid = (min(grid[0], grid_cap), 1, 1)
    i32, i64, f32 = np.int32, np.int64, np.float32
    if smem > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = smem
    fn(grid, block, (i32(p.m), i32(p.n), i32(p.k), f32(alpha), o.a, i32(o.lda), i64(o.sa), o.b, i32(o.ldb),
                     i64(o.sb), f32(beta), o.c, i32(o.ldc), i64(o.sc), i32(p.batch)), shared_mem=smem)


def rel_error(fn, kern: Kernel, p: Problem, alpha: float, beta: float, rng, cp, grid_cap=None) -> float:
    o = make_operands(p, rng, cp, poison=beta == 0.0)
    a_op = o.a_view.transpose(0, 2, 1) if p.shape[0] == "T" else o.a_view
    b_op = o.b_view.transpose(0, 2, 1) if p.shape[1] == "T" else o.b_view
    ref = alpha * cp.matmul(a_op.astype(cp.float64), b_op.astype(cp.float64))
    if beta != 0.0:
        ref += beta * o.c_view.astype(cp.float64)
    launch(fn, kern, p, o, alpha, beta, grid_cap)
    cp.cuda.Device().synchronize()
    out = o.c_view.astype(cp.float64)
    if not bool(cp.isfinite(out).all()):
        return float("inf")
    if p.pad and not bool(cp.isnan(o.c[:, :, p.m:]).all()):
        return float("inf")  # the kernel wrote into C's padding
    return float(cp.linalg.norm(out - ref) / max(float(cp.linalg.norm(ref)), 1e-30))


def SHAPES_OF(kern: Kernel) -> tuple[str, ...]:  # noqa: N802 - the first instance of a family gets all four
    first = next(k for k in KERNELS_UNDER_TEST if k.family == kern.family)
    return ("NN", "NT", "TN", "TT") if kern == first else ("NN", "NT")


def correctness_cases(kern: Kernel, full: bool) -> list[tuple[Problem, float, float, int | None]]:
    """(problem, alpha, beta, grid cap). `full`: every n from 1 to 33 in NN and NT."""
    if kern.family == F:
        return flat_cases(kern, full)
    cases = []
    small = kern.family == S
    sizes = range(1, 34) if full else ([2, 5, 8, 13, 16] if small else [3, 8, 17, 31, 33])
    for n in sizes:
        for shape in ("NN", "NT"):
            cases.append((Problem(n, n, n, 3, shape), 1.5, -0.75 if n % 2 else 0.0, None))
    rect = [(5, 7, 3), (3, 8, 16), (8, 3, 31), (1, 6, 9)] if small else [(5, 7, 3), (17, 9, 33), (40, 24, 70), (70, 33, 9)]
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
    """hgemm_flat_tc: the sizes its bound b serves (b - 7 .. b; `full`: every n from 1 to b) in NN and NT, odd
    rectangular sizes within the bound in the four shapes (the first instance) or NN/NT, unpacked layouts, a
    batch above 65,535, a capped grid (several groups per block), and sizes above the bound (the slow path)."""
    b = kern.bound()
    cases = []
    for n in (range(1, b + 1) if full else range(max(1, b - 7), b + 1)):
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


def time_ms(run, cp, reps: int) -> list[float]:
    for _ in range(3):
        run()
    cp.cuda.Device().synchronize()
    evs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(reps)]
    for s, e in evs:
        s.record()
        run()
        e.record()
    evs[-1][1].synchronize()
    return [cp.cuda.get_elapsed_time(s, e) for s, e in evs]


def copy_bandwidth(cp, nbytes: int = 1 << 30) -> float:
    src = cp.ones(nbytes // 2, dtype=cp.float16)
    dst = cp.empty_like(src)
    t = float(np.median(time_ms(lambda: cp.copyto(dst, src), cp, 20)))
    return 2 * nbytes / (t * 1e-3)


def cublas_runner(p: Problem, cp):
    """torch.bmm on fp16 (column-major C = A B is row-major C^T = B^T A^T), else cupy.matmul."""
    try:
        import torch

        a = torch.randn(p.batch, p.k, p.m, device="cuda", dtype=torch.float16)  # A col-major = A^T row-major
        b = torch.randn(p.batch, p.n, p.k, device="cuda", dtype=torch.float16)
        c = torch.empty(p.batch, p.n, p.m, device="cuda", dtype=torch.float16)
        return (lambda: torch.bmm(b, a, out=c)), "torch.bmm"
    except Exception:  # noqa: BLE001 - torch absent or without CUDA
        a = cp.random.rand(p.batch, p.n, p.k).astype(cp.float16)
        b = cp.random.rand(p.batch, p.k, p.m).astype(cp.float16)
        c = cp.empty((p.batch, p.n, p.m), dtype=cp.float16)
        return (lambda: cp.matmul(a, b, out=c)), "cupy.matmul"


@dataclass
class Timing:
    label: str
    n: int
    batch: int
    ms: float
    frac: float
    spread: tuple[float, float] = field(default=(0.0, 0.0))


def time_kernel(fn, kern: Kernel, p: Problem, o: Operands, bw: float, cp, reps: int) -> Timing:
    o.c.fill(float("nan"))
    ts = time_ms(lambda: launch(fn, kern, p, o, 1.0, 0.0), cp, reps)
    ms = float(np.median(ts))
    nbytes = p.batch * 2 * (p.m * p.k + p.k * p.n + p.m * p.n)
    return Timing(kern.label, p.n, p.batch, ms, nbytes / bw / (ms * 1e-3),
                  (float(np.percentile(ts, 20)), float(np.percentile(ts, 80))))


def batch_for(n: int, target_bytes: float) -> int:
    return max(100, math.ceil(target_bytes / (6 * n * n)))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "results" / "hgemm_check"))
    ap.add_argument("--sizes", default="2,4,8,16,24,32,48,64,96,128")
    ap.add_argument("--target-mb", type=float, default=256.0, help="working set per timed problem set (MB)")
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--full", action="store_true", help="every n from 1 to 33 for every instance")
    ap.add_argument("--families", default="hgemm_wmma,hgemm_small_tc,hgemm_mma,hgemm_flat_tc",
                    help="families to compile, check and time (comma-separated)")
    ap.add_argument("--batch-sweep", default="8,32", help="sizes for the batch-count study ('' to skip)")
    a = ap.parse_args()
    import cupy as cp

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = cp.random.RandomState(0)
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    print(f"GPU {props['name'].decode()} cc{props['major']}{props['minor']} cupy {cp.__version__} "
          f"cuda_include {cuda_include_dir()}", flush=True)

    mods, fails, log = {}, [], []
    for fam in [f for f in (W, S, R, F) if f in a.families.split(",")]:
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

    bw = copy_bandwidth(cp)
    print(f"device-to-device copy bandwidth (read+write): {bw / 1e12:.3f} TB/s", flush=True)
    rows, timings = [], []
    bad_labels = set(fails)
    for n in [int(s) for s in a.sizes.split(",") if s]:
        p = Problem(n, n, n, batch_for(n, a.target_mb * 1e6), "NN")
        run_cublas, lib = cublas_runner(p, cp)
        cub = float(np.median(time_ms(run_cublas, cp, a.reps)))
        nbytes = p.batch * 2 * 3 * n * n
        o = make_operands(p, rng, cp, poison=True)
        best: dict[str, Timing] = {}
        for kern in KERNELS_UNDER_TEST:
            if kern.family not in mods or kern.label in bad_labels:
                continue
            if (kern.family == S and n > 16) or not kern.fits(n):
                continue
            t = time_kernel(mods[kern.family].get_function(kern.name("NN")), kern, p, o, bw, cp, a.reps)
            timings.append(t.__dict__)
            if kern.family not in best or t.ms < best[kern.family].ms:
                best[kern.family] = t
        del o
        cp.get_default_memory_pool().free_all_blocks()
        if not best:
            continue
        top = min(best.values(), key=lambda t: t.ms)
        rows.append((n, p.batch, nbytes / 1e6, cub, nbytes / bw / (cub * 1e-3), best, top))

    sweep = []
    for n in [int(s) for s in a.batch_sweep.split(",") if s]:
        for batch in (100, 1_000, 10_000, 100_000, 1_000_000):
            p = Problem(n, n, n, batch, "NN")
            run_cublas, _ = cublas_runner(p, cp)
            cub = float(np.median(time_ms(run_cublas, cp, a.reps)))
            o = make_operands(p, rng, cp, poison=True)
            ts = [time_kernel(mods[k.family].get_function(k.name("NN")), k, p, o, bw, cp, a.reps)
                  for k in KERNELS_UNDER_TEST if k.family in mods and k.label not in bad_labels
                  and not (k.family == S and n > 16) and k.fits(n)]
            t = min(ts, key=lambda t: t.ms)
            gf = lambda ms: 2 * n ** 3 * batch / (ms * 1e-3) / 1e9  # noqa: E731
            sweep.append((n, batch, t.label, gf(t.ms), gf(cub), cub / t.ms))
            cp.get_default_memory_pool().free_all_blocks()

    rect = []  # the paper's Fig. 15: M = 4, N = 3, K varies, batch 1M: v2 against v1 (WMMA + NSG) and the ladder
    for k in (4, 8, 16):
        p = Problem(4, 3, k, 1_000_000, "NN")
        o = make_operands(p, rng, cp, poison=True)
        run_cublas, _ = cublas_runner(p, cp)
        cub = float(np.median(time_ms(run_cublas, cp, a.reps)))
        by_fam = {}
        for kern in KERNELS_UNDER_TEST:
            if kern.family in mods and kern.label not in bad_labels and k <= kern.bound():
                t = time_kernel(mods[kern.family].get_function(kern.name("NN")), kern, p, o, bw, cp, a.reps)
                if kern.family not in by_fam or t.ms < by_fam[kern.family].ms:
                    by_fam[kern.family] = t
        rect.append((k, cub, by_fam))
        del o
        cp.get_default_memory_pool().free_all_blocks()

    (out / "check_hgemm.json").write_text(json.dumps({"bandwidth": bw, "checks": log, "timings": timings,
                                                      "cublas_lib": lib, "failures": fails}, indent=1))
    print("\nbatch-count study (square n, NN, beta=0): best of the instances above vs cuBLAS")
    print(f"{'n':>4} {'batch':>8} {'best':>14} {'GFLOP/s':>9} {'cuBLAS':>9} {'speedup':>8}")
    for n, batch, lab, g1, g2, sp in sweep:
        print(f"{n:>4} {batch:>8} {lab:>14} {g1:>9.1f} {g2:>9.1f} {sp:>8.2f}")
    print("\nM=4 N=3, batch 1M, NN (paper Fig. 15): best instance per family, ms (roofline fraction)")
    for k, cub, by_fam in rect:
        cells = "  ".join(f"{f[6:]}: {t.label} {t.ms:.4f} ({t.frac:.2f})" for f, t in by_fam.items())
        print(f"K={k:>2}  cuBLAS {cub:.4f}  {cells}")
    fams = [W, S, R, F]
    print(f"\nsquare NN, alpha=1 beta=0, copy bw {bw / 1e12:.2f} TB/s, reps {a.reps}, median; frac = roofline fraction;"
          f" cuBLAS = {lib}")
    print(f"{'n':>4} {'batch':>8} {'MB':>6} | {'cuBLAS ms':>9} {'frac':>5} | "
          + " | ".join(f"{f[6:]:>22}" for f in fams) + f" | {'best/cuBLAS':>11}")
    for n, batch, mb, cub, cfrac, best, top in rows:
        cells = [f"{best[f].label:>12} {best[f].frac:>4.2f}" if f in best else f"{'-':>17}" for f in fams]
        cells = [f"{c:>22}" for c in cells]
        print(f"{n:>4} {batch:>8} {mb:>6.0f} | {cub:>9.4f} {cfrac:>5.2f} | " + " | ".join(cells)
              + f" | {cub / top.ms:>10.2f}x")
    print("FAILURES: " + (", ".join(fails) if fails else "none"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
