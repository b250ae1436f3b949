"""GPU tier: the fused verification (autotune.problems.gemm.verify.matrix_errors on CuPy arrays) gives the figures
of the NumPy computation, for every precision, strided views of C, non-finite elements and all-zero references."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autotune.problems.gemm.verify import _stored, matrix_errors

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_fused_errors_match_numpy(dtype) -> None:
    import cupy as cp

    rng = np.random.default_rng(7)
    batch, m, n, ld = 37, 13, 11, 16  # C stored column-major with padding (a strided, non-contiguous view)
    ref = rng.standard_normal((batch, m, n))
    flat = np.full(batch * ld * n, np.nan)
    got = _stored(flat, batch, m, n, ld)
    got[...] = ref * (1 + rng.standard_normal((batch, m, n)) * np.logspace(-6, -1, batch)[:, None, None])
    flat = flat.astype(dtype)
    got_np = _stored(flat, batch, m, n, ld)
    want = matrix_errors(got_np, ref)
    have = matrix_errors(_stored(cp.asarray(flat), batch, m, n, ld), cp.asarray(ref))
    assert have[1] == want[1] == 0
    assert have[0] == pytest.approx(want[0], rel=1e-9)
    assert want[0] > 0.05  # the worst matrix was perturbed by ~0.1: the maximum is over the batch, not an average

    for bad in (np.nan, np.inf, -np.inf):  # one unwritten / overflowed element in one matrix of the batch
        broken = flat.copy()
        broken[5 * ld * n + 3] = bad
        want = matrix_errors(_stored(broken, batch, m, n, ld), ref)
        have = matrix_errors(_stored(cp.asarray(broken), batch, m, n, ld), cp.asarray(ref))
        assert math.isinf(have[0]) and math.isinf(want[0])
        assert have[1] == want[1] == 1


def test_zero_reference_and_cached_norms() -> None:
    import cupy as cp

    ref = cp.zeros((4, 3, 3))
    assert matrix_errors(cp.zeros((4, 3, 3), dtype=cp.float16), ref) == (0.0, 0)
    got = cp.zeros((4, 3, 3))
    got[2, 1, 1] = 1e-3
    assert matrix_errors(got, ref)[0] > 1e6  # any error against a zero matrix is huge, never 0 or NaN
    ref = cp.arange(36, dtype=cp.float64).reshape(4, 3, 3)
    ref_sq = (ref * ref).reshape(4, -1).sum(axis=1)
    assert matrix_errors(ref * (1 + 1e-3), ref, ref_sq) == pytest.approx(matrix_errors(ref * (1 + 1e-3), ref))
