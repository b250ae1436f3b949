#!/usr/bin/env python3
"""Device-side check of the SIMT GEMM kernels (kernels_src/gemm_batched.cuh, kernels_src/gemm_small.cuh).

Compiles a few instances of every family with the runner's compiler (autotune.sweep.compile.nvrtc, name expressions
from the space files), runs them on problems chosen to break a kernel (sizes the tile does not divide, leading
dimensions above the matrix with NaN in the padding, alpha and beta other than 0 and 1, NaN-poisoned C when
beta == 0, batch counts above 65,535, uniform and Gaussian vbatched sizes), compares with the package's float64
reference (worst per-matrix relative error, autotune.problems.gemm.verify), then measures a few memory-bound
points (working set about 1 GB, beyond L2) through GpuBackend against the measured device-to-device copy
bandwidth and the cuBLAS baseline (the sweep's verification and timing).

    python3 scripts/check_simt.py [--no-timing] [--only FAMILY]

The pytest tier (tests/gpu/test_simt_gemm.py) runs `correctness_cases()` through `run_case()`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path


import functools

import numpy as np

from autotune.paths import KERNELS_DIR
from autotune.problems.gemm import GEMM, gemm_point
from autotune.problems.gemm.data import Operand, ptr_array_args, strided_args, vbatched_args
from autotune.problems.gemm.verify import BASE_TOLERANCE, matrix_errors, reference_batch
from autotune.space.instance import Instance
from autotune.space.spec import load_space
from autotune.vocab import Measurement, Status

ROOT = Path(__file__).resolve().parent.parent

TOL = BASE_TOLERANCE
DTYPE = {"fp64": np.float64, "fp32": np.float32, "fp16": np.float16}
SPACE = {
    "batched": "gemm_batched_simt",
    "ptr": "gemm_batched_simt",
    "vbatched": "gemm_vbatched_simt",
    "small": "gemm_small_simt",
}
FAMILIES = tuple(SPACE)


@functools.lru_cache(maxsize=None)
def _space(name: str):
    return load_space(name)


def _p(**kw: int) -> tuple[tuple[str, int], ...]:
    return tuple(kw.items())


# Instances (all pass the hard constraints of their space); chosen for ragged and multi-stage paths.
BATCHED = (
    _p(DIM_X=16, DIM_Y=8, BLK_M=32, BLK_N=32, BLK_K=8, DIM_XA=16, DIM_YA=8, DIM_XB=8, DIM_YB=16, NSG=1),
    _p(DIM_X=8, DIM_Y=4, BLK_M=16, BLK_N=24, BLK_K=4, DIM_XA=32, DIM_YA=1, DIM_XB=4, DIM_YB=8, NSG=3),
)
SMALL = (_p(BLK_M=4, BLK_N=4, BLK_K=4, NSG=16), _p(BLK_M=5, BLK_N=3, BLK_K=8, NSG=7))
TIMED_BATCHED = {
    8: _p(DIM_X=16, DIM_Y=16, BLK_M=64, BLK_N=64, BLK_K=8, DIM_XA=32, DIM_YA=8, DIM_XB=8, DIM_YB=32, NSG=1),
    16: _p(DIM_X=16, DIM_Y=16, BLK_M=64, BLK_N=64, BLK_K=16, DIM_XA=32, DIM_YA=8, DIM_XB=16, DIM_YB=16, NSG=1),
    32: _p(DIM_X=16, DIM_Y=16, BLK_M=64, BLK_N=64, BLK_K=16, DIM_XA=32, DIM_YA=8, DIM_XB=16, DIM_YB=16, NSG=1),
}


@dataclass(frozen=True)
class Case:
    """One kernel instance on one problem (for vbatched, m, n, k are the maxima of the size distribution)."""

    family: str
    params: tuple[tuple[str, int], ...]
    precision: str
    shape: str
    m: int
    n: int
    k: int
    batch: int
    alpha: float = 0.75
    beta: float = -1.25
    pad: int = 3  # leading dimension minus rows, for A, B and C
    dist: str = "fixed"  # vbatched: "uniform" or "gaussian"

    @property
    def label(self) -> str:
        p = "-".join(str(v) for _, v in self.params)
        return (
            f"{self.family}:{self.precision}:{self.shape}:{self.m}x{self.n}x{self.k}:b{self.batch}"
            f":beta{self.beta:g}:{self.dist}:[{p}]"
        )

    @property
    def source(self) -> str:
        return "gemm_small.cuh" if self.family == "small" else "gemm_batched.cuh"

    def name_expression(self) -> str:
        name = _space(SPACE[self.family]).template_name(dict(self.params), self.precision, self.shape)
        if self.family == "ptr":
            name = name.replace("autotune::gemm_batched<", "autotune::gemm_batched_ptr<", 1)
        return name

    @property
    def point(self):
        return gemm_point(self.precision, self.shape, self.m, self.n, self.k, self.batch)

    def geometry(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        g = _space(SPACE[self.family]).geometry(dict(self.params), self.point)
        return tuple(g.grid), tuple(g.block)  # RawKernel wants tuples


def correctness_cases() -> list[Case]:
    """Every family x precision x shape, two instances, ragged sizes, beta != 0 and beta == 0, large batch."""
    cases: list[Case] = []
    for prec in ("fp64", "fp32", "fp16"):
        for shape in ("NN", "NT", "TN", "TT"):
            for i, params in enumerate(BATCHED):
                cases.append(Case("batched", params, prec, shape, 37, 29, 19, 50))
                cases.append(Case("batched", params, prec, shape, 5, 3, 2, 33, alpha=-1.5, beta=0.0))
                cases.append(Case("ptr", params, prec, shape, 70, 41, 13, 9, beta=0.0 if i else 0.5))
                cases.append(
                    Case(
                        "vbatched",
                        params,
                        prec,
                        shape,
                        70,
                        45,
                        37,
                        300,
                        beta=0.0 if i else -1.25,
                        dist="gaussian" if i else "uniform",
                    )
                )
            for params in SMALL:
                cases.append(Case("small", params, prec, shape, 4, 4, 4, 61))
                cases.append(Case("small", params, prec, shape, 7, 5, 11, 40, alpha=1.25, beta=0.0))
                cases.append(Case("small", params, prec, shape, 3, 2, 1, 19, beta=2.0, pad=0))
    # batch above 65,535 (grid.y / grid.z limit): every convention that takes a batch count
    cases.append(Case("batched", BATCHED[0], "fp32", "NT", 3, 5, 2, 70_001, pad=1))
    cases.append(Case("ptr", BATCHED[1], "fp64", "TN", 2, 3, 4, 66_000, beta=0.0, pad=0))
    cases.append(Case("small", SMALL[1], "fp16", "TT", 5, 3, 6, 65_600))
    cases.append(Case("vbatched", BATCHED[1], "fp32", "NN", 3, 3, 3, 66_000, dist="uniform", pad=0))
    return cases


@dataclass(frozen=True)
class Outcome:
    rel_err: float  # max |C - ref| / max |ref| over the batch
    finite: bool  # no NaN / Inf in the written region
    untouched: bool  # padding and everything outside the matrices still NaN
    ok: bool


def compile_modules(cases: list) -> dict[str, object]:
    """{source file: LoadedKernels} holding every name expression the cases need, compiled one per NVRTC call in
    a process pool through the runner's compiler and on-disk cache (autotune.sweep.compile.nvrtc)."""
    import cupy as cp

    from autotune.sweep.compile.nvrtc import CompileRequest, compile_all
    from autotune.sweep.backends.local import DEFAULT_CACHE_DIR
    from autotune.sweep.backends.gpu_worker import LoadedKernels

    arch = int(cp.cuda.Device().compute_capability)  # CuPy gives "90" for sm_90
    names: dict[str, set[str]] = {}
    for c in cases:
        names.setdefault(c.source, set()).add(c.name_expression())
    reqs = [
        CompileRequest(KERNELS_DIR / src, (e,), arch, (KERNELS_DIR,))
        for src, exprs in sorted(names.items())
        for e in sorted(exprs)
    ]
    kernels = compile_all(reqs, DEFAULT_CACHE_DIR)
    return {src: LoadedKernels({e: kernels[e] for e in exprs}) for src, exprs in names.items()}


def _rand(rs, shape, prec):
    return rs.uniform(-1.0, 1.0, shape).astype(DTYPE[prec])


def _dims(c: Case):
    ta, tb = c.shape[0] == "T", c.shape[1] == "T"
    return ta, tb, ((c.k, c.m) if ta else (c.m, c.k)), ((c.n, c.k) if tb else (c.k, c.n))


def run_case(case: Case, modules: dict[str, object], seed: int = 0) -> Outcome:
    if case.family == "vbatched":
        return _run_vbatched(case, modules, seed)
    import cupy as cp

    rs = cp.random.RandomState(seed)
    prec, batch = case.precision, case.batch
    ta, tb, (ra, ca), (rb, cb) = _dims(case)
    lda, ldb, ldc = ra + case.pad, rb + case.pad, case.m + case.pad
    A = cp.full((batch, ca, lda), cp.nan, DTYPE[prec])
    B = cp.full((batch, cb, ldb), cp.nan, DTYPE[prec])
    C = cp.full((batch, case.n, ldc), cp.nan, DTYPE[prec])
    A[:, :, :ra] = _rand(rs, (batch, ca, ra), prec)
    B[:, :, :rb] = _rand(rs, (batch, cb, rb), prec)
    if case.beta != 0:
        C[:, :, : case.m] = _rand(rs, (batch, case.n, case.m), prec)
    # stored matrix b is X[b].T for X = buffer[:, :, :rows]
    ref = reference_batch(
        A[:, :, :ra].transpose(0, 2, 1),
        B[:, :, :rb].transpose(0, 2, 1),
        C[:, :, : case.m].transpose(0, 2, 1),
        case.shape,
        case.alpha,
        case.beta,
    )
    fn = modules[case.source].get_function(case.name_expression())
    grid, block = case.geometry()
    if case.family == "ptr":
        order = np.arange(batch)[::-1]  # the pointer arrays, not the layout, decide which matrix is which

        def ptrs(x):
            return cp.asarray(x.data.ptr + order * (x.shape[1] * x.shape[2] * x.itemsize), dtype=cp.uint64)

        pa, pb, pc = ptrs(A), ptrs(B), ptrs(C)
        fn(
            grid,
            block,
            ptr_array_args(
                prec,
                (case.m, case.n, case.k),
                case.alpha,
                Operand(pa, lda),
                Operand(pb, ldb),
                case.beta,
                Operand(pc, ldc),
                batch,
            ),
        )
    else:
        fn(
            grid,
            block,
            strided_args(
                prec,
                (case.m, case.n, case.k),
                case.alpha,
                Operand(A, lda, ca * lda),
                Operand(B, ldb, cb * ldb),
                case.beta,
                Operand(C, ldc, case.n * ldc),
                batch,
            ),
        )
    cp.cuda.runtime.deviceSynchronize()
    return _outcome(C[:, :, : case.m].transpose(0, 2, 1), ref, bool(cp.isnan(C[:, :, case.m :]).all()), prec)


def _outcome(got, ref, untouched: bool, prec: str) -> Outcome:
    """The harness's rule: max |C - ref| / max |ref| over the whole batch. The sweep's per-matrix rule
    (verify.matrix_errors) flags correct results where one small matrix cancels (3x3x3 with beta = -1.25 over
    66,000 matrices: 2.1e-5 against 1e-5 on an H100), so the harness keeps the batch-wide scale."""
    import cupy as cp

    xp = cp.get_array_module(got)  # the vbatched path checks on the host
    _, nonfinite = matrix_errors(got, ref)
    finite = nonfinite == 0
    scale = float(xp.abs(ref).max()) or 1.0
    err = float(xp.abs(got.astype(xp.float64) - ref).max()) / scale if finite else float("inf")
    return Outcome(err, finite, untouched, finite and untouched and err <= TOL[prec])


def _sizes(dist: str, top: int, batch: int, rng) -> np.ndarray:
    if dist == "uniform":
        return rng.integers(1, top + 1, batch)
    return np.clip(np.rint(rng.normal(top / 2, top / 6, batch)), 1, top).astype(np.int64)


def _vb_matrix(rows, cols, lds, slot_rows, slot_cols, prec, rng, fill: bool):
    """Host buffer (batch, slot) with matrix i stored column-major (ld lds[i]) and NaN elsewhere, its
    float64 values zero-padded to (batch, slot_rows, slot_cols), and the mask of the stored elements."""
    batch = len(rows)
    slot = (slot_rows + 3) * slot_cols
    host = np.full((batch, slot), np.nan, DTYPE[prec])
    dense = np.zeros((batch, slot_rows, slot_cols))
    mask = np.zeros((batch, slot), bool)
    for i in range(batch):
        r, c = int(rows[i]), int(cols[i])
        idx = (np.arange(r)[:, None] + np.arange(c)[None, :] * int(lds[i])).ravel()
        mask[i, idx] = True
        if fill:
            v = rng.uniform(-1, 1, (r, c)).astype(DTYPE[prec])
            host[i, idx] = v.ravel()
            dense[i, :r, :c] = v
    return host, dense, mask


def _run_vbatched(case: Case, modules: dict[str, object], seed: int) -> Outcome:
    import cupy as cp

    rng = np.random.default_rng(seed)
    prec, batch = case.precision, case.batch
    ta, tb = case.shape[0] == "T", case.shape[1] == "T"
    m, n, k = (_sizes(case.dist, top, batch, rng) for top in (case.m, case.n, case.k))
    pads = lambda: rng.integers(0, case.pad + 1, batch)  # noqa: E731
    ra, ca = (k, m) if ta else (m, k)
    rb, cb = (n, k) if tb else (k, n)
    tops_a = (case.k, case.m) if ta else (case.m, case.k)
    tops_b = (case.n, case.k) if tb else (case.k, case.n)
    lda, ldb, ldc = ra + pads(), rb + pads(), m + pads()
    ha, da, _ = _vb_matrix(ra, ca, lda, *tops_a, prec, rng, True)
    hb, db, _ = _vb_matrix(rb, cb, ldb, *tops_b, prec, rng, True)
    hc, dc, mask_c = _vb_matrix(m, n, ldc, case.m, case.n, prec, rng, case.beta != 0)
    ref = reference_batch(da, db, dc, case.shape, case.alpha, case.beta)  # zero-padded to the maxima
    A, B, C = cp.asarray(ha), cp.asarray(hb), cp.asarray(hc)

    def ptrs(x):
        return cp.asarray(x.data.ptr + np.arange(batch) * x.shape[1] * x.itemsize, dtype=cp.uint64)

    sizes = tuple(cp.asarray(v.astype(np.int32)) for v in (m, n, k, lda, ldb, ldc))
    fn = modules[case.source].get_function(case.name_expression())
    grid, block = case.geometry()
    fn(
        grid,
        block,
        vbatched_args(prec, sizes, case.alpha, (ptrs(A), ptrs(B), ptrs(C)), case.beta, batch, (case.m, case.n, case.k)),
    )
    cp.cuda.runtime.deviceSynchronize()
    out = cp.asnumpy(C)
    got = np.zeros(ref.shape)  # C_b in the top-left corner, zeros elsewhere (as in the reference)
    for i in range(batch):
        got[i, : m[i], : n[i]] = out[i, mask_c[i]].reshape(int(n[i]), int(m[i])).T
    return _outcome(got, ref, bool(np.isnan(out[~mask_c]).all()), prec)


# ----------------------------------------------------------------------------------------------- timing
def measure_cases(cases: list, reps: int = 20) -> tuple[float, dict, dict]:
    """(copy bandwidth, {case: Measurement}, {point: cuBLAS Measurement}): every case (NN, alpha = 1, beta = 0,
    packed) through GpuBackend, which compiles, verifies against the float64 reference and times the way the
    sweep does, and the cuBLAS baseline at every point."""
    from autotune.sweep.backends.base import Job
    from autotune.sweep.backends.local import GpuBackend

    jobs, of = [], {}
    for c in cases:
        space = _space(SPACE[c.family])
        inst = Instance.of(space.name, dict(c.params))
        of[(inst.id, c.point)] = c
        jobs.append(Job(space, inst, (c.point,), GEMM.scalars(), reps))
    with GpuBackend() as backend:
        bw = backend.device_info().copy_bandwidth
        got = {of[(m.instance_id, m.point)]: m for m in backend.run(jobs)}
        cublas = {p: backend.baseline(GEMM, p, GEMM.scalars(), reps) for p in dict.fromkeys(c.point for c in cases)}
    return bw, got, cublas


def roofline(m: Measurement, bandwidth: float) -> tuple[float, float]:
    """(median ms, fraction of the copy roofline); NaN where the measurement has no verified time."""
    if m.status != Status.OK or not m.median_ms:
        return float("nan"), float("nan")
    return m.median_ms, GEMM.bytes_moved(m.point, {"beta": 0.0}) / bandwidth / (m.median_ms * 1e-3)


def timed_cases() -> list[Case]:
    """NN, alpha = 1, beta = 0, contiguous matrices, about 1 GB moved (several times the L2)."""
    out = []
    for prec in ("fp64", "fp32"):
        eb = DTYPE[prec]().itemsize
        for n in (2, 3, 4, 8, 16, 32):
            bk = min(b for b in (2, 4, 8, 12, 16, 24, 32) if b >= n)
            batch = int(1e9 // (eb * 3 * n * n))
            for threads in (128, 256, 512):
                nsg = max(1, threads // (n * n))
                nsg = 1 << (nsg.bit_length() - 1)
                c = Case("small", _p(BLK_M=n, BLK_N=n, BLK_K=bk, NSG=nsg), prec, "NN", n, n, n, batch, 1.0, 0.0, 0)
                if c not in out:
                    out.append(c)
        for k, params in TIMED_BATCHED.items():
            small_tile = _p(
                DIM_X=16,
                DIM_Y=8,
                BLK_M=32,
                BLK_N=32,
                BLK_K=min(k, 16),
                DIM_XA=32,
                DIM_YA=4,
                DIM_XB=min(k, 16),
                DIM_YB=128 // min(k, 16),
                NSG=1,
            )
            for mn in (32, 64, 128, 256):
                batch = int(1e9 // (eb * (2 * mn * k + mn * mn)))
                for prm in (params, small_tile):
                    out.append(Case("batched", prm, prec, "NN", mn, mn, k, batch, 1.0, 0.0, 0))
        out.append(Case("batched", TIMED_BATCHED[32], prec, "NN", 32, 32, 32, int(1e9 // (eb * 3 * 1024)), 1.0, 0.0, 0))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--only", choices=FAMILIES)
    args = ap.parse_args()
    import time

    import cupy as cp

    cases = [c for c in correctness_cases() if args.only in (None, c.family)]
    timed = [] if args.no_timing else [c for c in timed_cases() if args.only in (None, c.family)]
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
        summary.setdefault((c.family, c.precision), []).append(o.rel_err if o.ok else float("inf"))
    print("\ncorrectness (max relative error over each family's cases; inf = a failure)")
    print(f"{'family':9} {'prec':5} {'cases':>5} {'max_rel_err':>12} {'tol':>8} result")
    for (fam, prec), errs in sorted(summary.items()):
        worst = max(errs)
        print(
            f"{fam:9} {prec:5} {len(errs):5d} {worst:12.2e} {TOL[prec]:8.0e} {'PASS' if worst <= TOL[prec] else 'FAIL'}"
        )
    if timed:
        cp.get_default_memory_pool().free_all_blocks()  # the timing runs in GpuBackend's worker process
        bw, got, cublas = measure_cases(timed)
        print(
            f"\ntiming: NN, alpha=1, beta=0, ~1 GB per launch, GpuBackend (median); copy bandwidth {bw / 1e12:.3f} TB/s"
        )
        print(
            f"{'family':8} {'prec':5} {'m':>4} {'n':>4} {'k':>3} {'batch':>9} {'ms':>8} {'roof':>5} "
            f"{'cublas_ms':>9} {'roof':>5} {'speedup':>7} ok  instance"
        )
        for c in timed:
            m = got[c]
            (ms, frac), (cms, cfrac) = roofline(m, bw), roofline(cublas[c.point], bw)
            print(
                f"{c.family:8} {c.precision:5} {c.m:4d} {c.n:4d} {c.k:3d} {c.batch:9d} {ms:8.3f} "
                f"{frac:5.2f} {cms:9.3f} {cfrac:5.2f} "
                f"{cms / ms:7.2f} {'y' if m.status == Status.OK else 'N'}   {'-'.join(str(v) for _, v in c.params)}"
            )
    print(f"\n{len(cases) - fails}/{len(cases)} correctness cases pass")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
