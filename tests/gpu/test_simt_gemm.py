"""GPU tier: every SIMT GEMM family against a float64 cupy.matmul reference.

Families: gemm_batched (strided), gemm_batched_ptr (ptr_array), gemm_vbatched (vbatched, uniform and Gaussian
sizes, early termination), gemm_small (magma-small-v3). For each precision (fp64, fp32, fp16) and shape (NN, NT,
TN, TT): two instances, sizes the tile does not divide (and sizes above the small kernel's bounds), alpha and
beta other than 0 and 1, beta == 0 with C poisoned with NaN, leading dimensions above the matrix with NaN in the
padding (a read of it or a write to it is caught), and batch counts above 65,535. Tolerance relative to the
largest reference element: fp64 1e-12, fp32 1e-5, fp16 (fp32 accumulation) 1e-2.

The cases and the checking code live in scripts/check_simt.py (the device-side harness prints the same checks
as a table); this module runs each case as one test.
"""

from __future__ import annotations

import pytest

from tests.support.harness import cupy_with_a_device, load_script

pytestmark = pytest.mark.gpu

harness = load_script("check_simt")
CASES = harness.correctness_cases()


@pytest.fixture(scope="module")
def modules():
    cupy_with_a_device()
    return harness.compile_modules(CASES)


def test_cases_cover_every_family_precision_and_shape() -> None:
    seen = {(c.family, c.precision, c.shape) for c in CASES}
    assert len(seen) == 4 * 3 * 4
    assert {c.family for c in CASES if c.batch > 65_535} == {"batched", "ptr", "vbatched", "small"}
    assert any(c.beta == 0 for c in CASES) and any(c.beta not in (0, 1) for c in CASES)
    assert all(c.alpha not in (0, 1) for c in CASES if c.batch < 65_536)


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_simt_gemm_matches_reference(case, modules) -> None:
    out = harness.run_case(case, modules)
    assert out.finite, "NaN or Inf in C: an element was not written, or NaN padding / C (beta == 0) was read"
    assert out.untouched, "an element outside the matrices (padding, other problems' slots) was written"
    assert out.rel_err <= harness.TOL[case.precision], f"relative error {out.rel_err:.3e}"
