"""Check a kernel's output against a float64 reference computed by cuBLAS (cupy.matmul) on the same GPU.

Rule: before the verified launch C is poisoned with NaN (beta == 0; with beta != 0 the kernel must read
C, so C holds random values instead and the reference includes beta * C). After the launch,
every element of C must be finite (a NaN left means an element was never written), and for every
matrix b of the batch  ||C_b - ref_b||_F / ||ref_b||_F  must stay under the precision's tolerance.
The worst matrix counts (`max_rel_err`), so one wrong matrix in a batch of 100,000 is not diluted.

Tolerances relative to the norm of the reference: fp64 1e-12, fp32 1e-5, fp16 1e-2 (fp16 inputs, fp32
accumulation: the output's rounding to fp16 alone is ~5e-4). The reference runs on the same rounded
inputs upcast to float64, so input rounding is no error. Accumulation error grows about like sqrt(K):
the tolerance is multiplied by max(1, sqrt(K / 1024)), which leaves it unchanged for K <= 1024.
"""

from __future__ import annotations

import math
from typing import Any

from autotune.problems.base import Verdict
from autotune.problems.base import judge as judge_tolerance
from autotune.problems.gemm.data import ProblemData

BASE_TOLERANCE = {"fp64": 1e-12, "fp32": 1e-5, "fp16": 1e-2}
CHUNK_BYTES = 256 << 20  # float64 working memory of the reference per chunk of the batch


def tolerance(precision: str, k: int) -> float:
    return BASE_TOLERANCE[precision] * max(1.0, math.sqrt(k / 1024))


def judge(max_rel_err: float, unwritten: int, precision: str, k: int) -> Verdict:
    """Pure verdict from the measured error (NaN errors count as infinite)."""
    return judge_tolerance(max_rel_err, unwritten, tolerance(precision, k))


def poison(data: ProblemData, copy: int, beta: float) -> None:
    """Prepare C of one copy for the verified launch."""
    import cupy as cp

    c = data.c_copy(copy)
    if beta == 0:
        c.fill(cp.nan)
    else:
        c[...] = data.c_init


def _stored(flat: Any, batch: int, rows: int, cols: int, ld: int) -> Any:
    """(batch, rows, cols) view of a column-major batch stored with leading dimension ld."""
    return flat[: batch * ld * cols].reshape(batch, cols, ld).transpose(0, 2, 1)[:, :rows, :]


def reference_chunks(data: ProblemData, alpha: float, beta: float) -> list[tuple[int, int, Any, Any]]:
    """[(b0, b1, ref, ||ref_b||^2 per matrix)] float64 reference of copy 0, computed in chunks of the batch (the
    norms once per point: every instance verified there reuses them)."""
    p, lay = data.point, data.lay
    a_flat, b_flat = data.matrices(0)
    a = _stored(a_flat, p.batch, lay.a_rows, lay.a_cols, lay.lda)
    b = _stored(b_flat, p.batch, lay.b_rows, lay.b_cols, lay.ldb)
    c0 = _stored(data.c_init, p.batch, p.m, p.n, lay.ldc)
    per = 8 * (p.m * p.k + p.k * p.n + 2 * p.m * p.n)
    step = max(1, CHUNK_BYTES // per)
    out = []
    for b0 in range(0, p.batch, step):
        b1 = min(p.batch, b0 + step)
        ref = reference_batch(a[b0:b1], b[b0:b1], c0[b0:b1] if beta != 0 else None, p.shape, alpha, beta)
        out.append((b0, b1, ref, _squared_norms(ref)))
    return out


def reference_batch(a: Any, b: Any, c: Any, shape: str, alpha: float, beta: float) -> Any:
    """float64 alpha * op(A) op(B) + beta * C for stored (batch, rows, cols) views of A, B and C (C may be None
    when beta == 0); NumPy or CuPy arrays, any strides (padding, gaps, offsets: the caller's views)."""
    op_a, op_b = a.astype("float64"), b.astype("float64")
    if shape[0] == "T":
        op_a = op_a.transpose(0, 2, 1)
    if shape[1] == "T":
        op_b = op_b.transpose(0, 2, 1)
    ref = alpha * (op_a @ op_b)
    if beta != 0:
        ref += beta * c.astype("float64")
    return ref


def _squared_norms(ref: Any) -> Any:
    """||ref_b||_F^2 per matrix of a (batch, m, n) float64 array."""
    return (ref * ref).reshape(ref.shape[0], -1).sum(axis=1)


_SQ_DIFF: Any = None  # the fused CuPy reduction of matrix_errors, built at its first use (CuPy caches its binary)


def _sq_diff() -> Any:
    """sum over a matrix of (got - ref)^2 in float64, +inf where got holds a non-finite element: one pass over
    got and ref, whatever got's type (fp16/fp32/fp64) and strides."""
    global _SQ_DIFF
    if _SQ_DIFF is None:
        import cupy as cp

        _SQ_DIFF = cp.ReductionKernel(
            "T got, float64 ref",
            "float64 out",
            "isfinite((double)got) ? ((double)got - ref) * ((double)got - ref)"
            " : __longlong_as_double(0x7ff0000000000000LL)",
            "a + b",
            "out = a",
            "0",
            "autotune_verify_sq_diff",
        )
    return _SQ_DIFF


def matrix_errors(got: Any, ref: Any, ref_sq: Any = None) -> tuple[float, int]:
    """(max over the batch of ||got_b - ref_b||_F / ||ref_b||_F, count of non-finite elements of got) for
    (batch, m, n) arrays (NumPy or CuPy); inf where a matrix holds a non-finite element. `ref_sq`: the
    reference's squared norms per matrix when known (`reference_chunks` keeps them).

    On CuPy arrays one fused reduction reads got and ref once and one value comes back to the host (the count of
    non-finite elements is taken only when some matrix is not finite); on NumPy arrays the same figures from
    NumPy's norms."""
    import numpy as np

    try:
        import cupy as xp_gpu

        xp = xp_gpu.get_array_module(got)
    except ImportError:  # pragma: no cover - NumPy-only callers
        xp = np
    n = got.shape[0]
    if n == 0:
        return 0.0, 0
    if xp is np:
        got = got.astype(np.float64)
        bad = int(got.size - int(np.isfinite(got).sum()))
        diff = np.linalg.norm((got - ref).reshape(n, -1), axis=1)
        norm = np.linalg.norm(ref.reshape(n, -1), axis=1)
        rel = diff / np.maximum(norm, np.finfo(np.float64).tiny)
        return float(np.nan_to_num(rel, nan=np.inf, posinf=np.inf).max()), bad
    sq = _sq_diff()(got, ref, axis=tuple(range(1, got.ndim)))
    ref_sq = _squared_norms(ref) if ref_sq is None else ref_sq
    rel2 = sq / xp.maximum(ref_sq, np.finfo(np.float64).tiny)
    worst = math.sqrt(float(xp.nan_to_num(rel2, nan=np.inf, posinf=np.inf).max()))
    bad = 0 if math.isfinite(worst) else int(got.size - int(xp.isfinite(got).sum()))
    return worst, bad


def compare(data: ProblemData, reference: list[tuple[int, int, Any, Any]]) -> tuple[float, int]:
    """(max over the batch of ||C_b - ref_b|| / ||ref_b||, count of non-finite elements) for copy 0."""
    p, lay = data.point, data.lay
    c = _stored(data.c_copy(0), p.batch, p.m, p.n, lay.ldc)
    worst, bad = 0.0, 0
    for b0, b1, ref, ref_sq in reference:
        err, nonfinite = matrix_errors(c[b0:b1], ref, ref_sq)
        worst, bad = max(worst, err), bad + nonfinite
    return worst, bad


def verify(data: ProblemData, reference: list[tuple[int, int, Any, Any]]) -> Verdict:
    """Check copy 0's C (after the verified launch) against the reference."""
    err, bad = compare(data, reference)
    return judge(err, bad, data.point.precision, data.point.k)
