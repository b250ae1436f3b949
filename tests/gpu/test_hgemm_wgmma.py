"""GPU tier: hgemm_wgmma_tc (Hopper wgmma, kernels_src/hgemm_wgmma_tc.cuh) against float64 references, on sm_90.

The harness is scripts/check_wgmma.py (WGMMA_KERNELS, wgmma_cases) on scripts/check_hgemm.py's: the reference is
the package's float64 GEMM of the same fp16 inputs, tolerance 1e-2 relative to the norm of the reference, over the
whole batch; C poisoned with NaN where beta == 0, NaN in the gaps of unpacked layouts (a read of them reaches C, a
write to them fails). Every instance runs sizes that do not divide its tiles or its K-slice (1, 7, 33, 97, 113, 127
within its bounds; the served squares in NN and NT), every copy width (packed n % 8 == 0, 4, 2 and odd; unpacked
with aligned and odd leading dimensions), rectangles (the first instance in all four shapes), K of one k-step and of
many slices, beta != 0, capped grids (one block's ring across many problems), a batch above 65,535 and sizes above
its bounds (the per-element path). Compiled by NVRTC for sm_90a (the space's `arch_specific: true`); other GPUs
skip (the space's hard constraint `cc == 90` leaves them out).
"""

from __future__ import annotations

import pytest

from tests.support.harness import cupy_with_a_device, load_script

pytestmark = pytest.mark.gpu

harness = load_script("check_wgmma")
KERNELS = harness.WGMMA_KERNELS


@pytest.fixture(scope="module")
def module():
    cp = cupy_with_a_device()
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("wgmma runs on sm_90 (H100, H200) only")
    names = sorted({k.name(s) for k in KERNELS for s in harness.shapes_of(k)})
    return harness.compile_family(harness.FAMILY, names)


@pytest.mark.parametrize("kern", KERNELS, ids=[k.label for k in KERNELS])
def test_wgmma_matches_reference(kern, module) -> None:
    import cupy as cp

    worst, bad = harness.check_wgmma(kern, module, kern is KERNELS[0], cp.random.RandomState(1), cp)
    assert not bad, f"{len(bad)} failing cases (worst {worst:.3g}):\n" + "\n".join(bad[:10])
    assert worst <= harness.TOL
