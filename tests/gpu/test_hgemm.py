"""GPU tier: the tensor-core HGEMM families (hgemm_wmma, hgemm_small_tc, hgemm_mma, hgemm_flat_tc, hgemm_stream)
against float64 references.

The reference is cupy.matmul on the float64 upcast of the same fp16 inputs; tolerance 1e-2 relative to the norm
of the reference (fp16 inputs, fp32 accumulation). The first instance of each variant (each family; each ladder
rung) runs every square n from 1 to 33 in NN and NT; every instance runs sizes its tiles do not divide,
rectangular shapes in all the shapes it was compiled for, alpha and beta other than 0 and 1, beta == 0 with C
poisoned with NaN, unpacked leading dimensions with NaN padding (reads reach C, writes are caught), a batch above
65,535 and a capped grid (the grid-stride loop). Cases and checking code live in scripts/check_hgemm.py, the
device harness that also times the kernels.
"""

from __future__ import annotations

import pytest

from tests.support.harness import cupy_with_a_device, load_script

pytestmark = pytest.mark.gpu

harness = load_script("check_hgemm")
KERNELS = harness.KERNELS_UNDER_TEST


def _variant(k) -> tuple:
    return (k.family, k.args[0] if k.family == harness.R else 0)


FIRST = {}
for _k in KERNELS:
    FIRST.setdefault(_variant(_k), _k)


@pytest.fixture(scope="module")
def modules():
    cupy_with_a_device()
    mods = {}
    for fam in (harness.W, harness.S, harness.R, harness.F, harness.X):
        names = sorted({k.name(s) for k in KERNELS if k.family == fam for s in harness.SHAPES_OF(k)})
        mods[fam] = harness.compile_family(fam, names)
    return mods


def test_cases_cover_the_brief() -> None:
    """Every variant gets n = 1..33; rectangular shapes, alpha/beta not 0/1, NaN-poisoned C, batch > 65,535."""
    assert {v[0] for v in FIRST} == {harness.W, harness.S, harness.R, harness.F, harness.X}
    assert {v[1] for v in FIRST if v[0] == harness.R} == {1, 2, 3, 4}
    for kern in FIRST.values():
        cases = harness.correctness_cases(kern, full=True)
        squares = {p.m for p, *_ in cases if p.m == p.n == p.k and p.shape in ("NN", "NT")}
        assert set(range(1, 34)) <= squares
        assert any(p.m != p.n for p, *_ in cases)
        assert any(b == 0.0 for _, _, b, _ in cases) and any(b not in (0.0, 1.0) for _, _, b, _ in cases)
        assert all(a not in (0.0, 1.0) for p, a, _, _ in cases if p.batch < 65_536 and p.batch != 1_000)
        assert any(p.batch > 65_535 for p, *_ in cases) and any(p.pad for p, *_ in cases)


@pytest.mark.parametrize("kern", KERNELS, ids=[k.label for k in KERNELS])
def test_hgemm_matches_reference(kern, modules) -> None:
    import cupy as cp

    worst, bad = harness.check_kernel(kern, modules[kern.family], kern in FIRST.values(), cp.random.RandomState(1), cp)
    assert not bad, f"{len(bad)} failing cases (worst {worst:.3g}):\n" + "\n".join(bad[:10])
    assert worst <= harness.TOL
