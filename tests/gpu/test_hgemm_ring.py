"""GPU tier: hgemm_ring_tc (the K-sliced cp.async ring, kernels_src/hgemm_ring_tc.cuh) against float64 references.

The harness is scripts/check_hgemm.py (RING_KERNELS, ring_cases): the reference is cupy.matmul on the float64 upcast
of the same fp16 inputs, tolerance 1e-2 relative to the norm of the reference, over the whole batch. Every instance
runs aligned sizes that do not divide its tiles or its K-slice (and the aligned sizes up to its bound), K of many
slices, rectangles (the first instance in all four shapes), an unpacked layout that stays aligned (fast path, NaN
in the gaps) and unaligned layouts and sizes (the per-element path the space never serves), beta != 0, C poisoned
with NaN where beta == 0, capped grids (one block's ring across many problems) and a batch above 65,535.
"""

from __future__ import annotations

import pytest

from tests.support.harness import cupy_with_a_device, load_script

pytestmark = pytest.mark.gpu

harness = load_script("check_hgemm")
KERNELS = harness.RING_KERNELS


@pytest.fixture(scope="module")
def module():
    cupy_with_a_device()
    names = sorted({k.name(s) for k in KERNELS for s in harness.SHAPES_OF_RING(k)})
    return harness.compile_family(harness.G, names)


def test_cases_cover_the_brief() -> None:
    """Sizes that do not divide the tiles or the slice, every shape, the per-element path, several problems per
    block, a batch above 65,535."""
    assert set(harness.SHAPES_OF_RING(KERNELS[0])) == {"NN", "NT", "TN", "TT"}
    for kern in KERNELS:
        p = kern.params()
        mp = -(-p["BM"] // (16 * p["WM"])) * 16 * p["WM"]
        cases = harness.ring_cases(kern, full=kern is KERNELS[0])
        assert any(c.m % (16 * p["WM"]) and c.m < mp for c, *_ in cases)  # M not dividing the tile
        assert any(c.k % p["KS"] and c.k % 16 for c, *_ in cases)  # K not dividing the slice nor 16
        assert any(c.k > 2 * p["KS"] for c, *_ in cases)  # several slices
        assert any(c.m % (p["VEC"] // 2) for c, *_ in cases)  # unaligned: the per-element path
        assert any(cap for *_, cap in cases) and any(c.batch > 65_535 for c, *_ in cases)
        assert any(b == 0.0 for _, _, b, _ in cases) and any(b not in (0.0, 1.0) for _, _, b, _ in cases)
        assert any(c.pad and c.pad % 8 == 0 for c, *_ in cases) and any(c.pad % 8 for c, *_ in cases)


@pytest.mark.parametrize("kern", KERNELS, ids=[k.label for k in KERNELS])
def test_ring_matches_reference(kern, module) -> None:
    import cupy as cp

    worst, bad = harness.check_ring(kern, module, kern is KERNELS[0], cp.random.RandomState(1), cp)
    assert not bad, f"{len(bad)} failing cases (worst {worst:.3g}):\n" + "\n".join(bad[:10])
    assert worst <= harness.TOL
