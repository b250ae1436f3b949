"""GPU tier: the tiny batched GEMM family (kernels_src/gemm_tiny.cuh) against a float64 cupy.matmul reference.

For each precision (fp64, fp32, fp16) and shape (NN, NT, TN, TT): seven hand-picked instances (one element, one
column, one row, a whole problem and a 2-D micro-tile of C per thread; STAGES 1 and 2; bounds 32 and a ragged 17 x 24
x 19) on their exact sizes, sizes below and above the compile-time bounds, a rectangular 3 x 5 x 7, leading dimensions
above the matrix with NaN in the padding, gaps between matrices, matrices off a 16-byte boundary, beta == 0 with
NaN-poisoned C and beta == 2, batch counts PPB does not divide and a capped grid; every square n = 1..16 and n = 17,
20, 24, 31, 32 through instances the space assigns to it; 19 x 32 x 25 through rectangular and cubic bounds; 33 x 17
x 40 (above 32: the slow path); batch = 70,001. Per-matrix relative error (Frobenius) within fp64 1e-12, fp32 1e-5, fp16 (fp32 accumulation) 1e-2.

The cases and the checking code live in scripts/check_tiny.py (the device-side harness prints the same checks as a
table, then timings); this module runs each case as one test.
"""

from __future__ import annotations

import pytest

from tests.support.harness import cupy_with_a_device, load_script

pytestmark = pytest.mark.gpu

harness = load_script("check_tiny")
CASES = harness.correctness_cases()


@pytest.fixture(scope="module")
def modules():
    cupy_with_a_device()
    return harness.compile_modules(CASES)


def test_cases_cover_every_precision_shape_and_hazard() -> None:
    assert {(c.precision, c.shape) for c in CASES} == {(p, s) for p in harness.PRECISIONS for s in harness.SHAPES}
    assert {c.m for c in CASES if c.m == c.n == c.k} >= set(range(1, 17)) | {17, 20, 24, 31, 32}
    assert any((c.m, c.n, c.k) == (19, 32, 25) for c in CASES)
    assert any(max(c.m, c.n, c.k) > 32 for c in CASES)  # the slow path above every bound
    assert any(dict(c.params)["BM"] == 32 and c.precision == "fp64" for c in CASES)
    assert any(c.batch > 65_535 for c in CASES)
    assert any(c.beta == 0 for c in CASES) and any(c.beta not in (0, 1) for c in CASES)
    assert any(c.pad for c in CASES) and any(c.gap for c in CASES) and any(c.offset for c in CASES)
    assert any(c.grid_cap for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_tiny_gemm_matches_reference(case, modules) -> None:
    out = harness.run_case(case, modules)
    assert out.finite, "NaN or Inf in C: an element was not written, or NaN padding / C (beta == 0) was read"
    assert out.untouched, "an element outside the matrices (padding, gaps between matrices) was written"
    assert out.rel_err <= harness.TOL[case.precision], f"relative error {out.rel_err:.3e}"
