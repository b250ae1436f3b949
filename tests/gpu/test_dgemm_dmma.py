"""GPU tier: dgemm_dmma_tc (fp64 tensor cores, kernels_src/dgemm_dmma_tc.cuh) against a float64 reference.

The harness is scripts/check_dmma.py (DMMA_KERNELS, cases, check): every instance in the four shapes on sizes its
tiles and K-slices do not divide, fixed K = 32 at 64..256, rectangles, unpacked and misaligned layouts (both copy
widths), beta != 0, NaN-poisoned C where beta == 0, capped grids and batches above 65,535; the error is
max |C - ref| / max |ref| over the whole batch against the fp64 tolerance (1e-12 up to K = 1024). That the cases
cover what this tier promises is checked without a GPU (tests/test_kernels_compile_dmma.py).
"""

from __future__ import annotations

import pytest

from tests.support.harness import cupy_with_a_device, load_script

pytestmark = pytest.mark.gpu

harness = load_script("check_dmma")
KERNELS = harness.DMMA_KERNELS


@pytest.fixture(scope="module")
def module():
    cupy_with_a_device()
    return harness.compile_kernels(KERNELS)


@pytest.mark.parametrize("kern", KERNELS, ids=[k.label for k in KERNELS])
def test_dmma_matches_reference(kern, module) -> None:
    import cupy as cp

    worst, bad = harness.check_all(kern, module, cp.random.RandomState(1))
    assert not bad, f"{len(bad)} failing cases (worst error / tolerance {worst:.3g}):\n" + "\n".join(bad[:10])
    assert worst <= 1.0
