"""GPU tier: hgemm_wgmma_flat_tc (hgemm_wgmma_tc with a staged flat copy for unaligned operands,
kernels_src/hgemm_wgmma_flat_tc.cuh) against float64 references, on sm_90.

The harness is scripts/check_wgmma.py (FLAT_KERNELS, flat_cases) on scripts/check_hgemm.py's: the reference is the
package's float64 GEMM of the same fp16 inputs, tolerance 1e-2 relative to the norm of the reference, over the whole
batch; C poisoned with NaN where beta == 0, NaN in the gaps of unpacked layouts (a read of them reaches C, a write
to them fails). Every instance runs the square sizes it serves (none a multiple of 8: the staged path) in NN and NT,
the unaligned sizes 97, 98, 106, 113, 114, 126 within its bounds in its shapes (all four for the first instance),
K within one slice (a K-major operand copied as one flat range) and of several slices (one range per column), A
aligned and B not and the reverse, both aligned (hgemm_wgmma_tc's path in this kernel), pointers off a 16-byte
boundary, unpacked layouts (odd and aligned leading dimensions), beta != 0, capped grids (one block's ring across
many problems), a batch above 65,535 and sizes above its bounds (the per-element path). Compiled by NVRTC for sm_90a
(the space's `arch_specific: true`); other GPUs skip (the space's hard constraint `cc == 90` leaves them out).
"""

from __future__ import annotations

import pytest

from tests.support.harness import cupy_with_a_device, load_script

pytestmark = pytest.mark.gpu

harness = load_script("check_wgmma")
KERNELS = harness.FLAT_KERNELS


@pytest.fixture(scope="module")
def module():
    cp = cupy_with_a_device()
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("wgmma runs on sm_90 (H100, H200) only")
    names = sorted({k.name(s) for k in KERNELS for s in harness.shapes_of(k)})
    return harness.compile_family(harness.FLAT_FAMILY, names)


@pytest.mark.parametrize("kern", KERNELS, ids=[k.label for k in KERNELS])
def test_wgmma_flat_matches_reference(kern, module) -> None:
    import cupy as cp

    worst, bad = harness.check_wgmma(kern, module, kern is KERNELS[0], cp.random.RandomState(1), cp)
    assert not bad, f"{len(bad)} failing cases (worst {worst:.3g}):\n" + "\n".join(bad[:10])
    assert worst <= harness.TOL
