"""scripts/check_hgemm.py asks the space files which sizes an instance serves (no restated rule): the flat
and streaming kernels' instances serve n^3 exactly where n <= BM < n + 8, the families without `serves:` every size, and
Space.serves agrees with the generator's vectorised `serving` on whole spaces."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.problems.gemm import gemm_point
from autotune.devices import get_device
from autotune.space.generator import generate, serving
from autotune.space.spec import load_space
from tests.support.harness import load_script

harness = load_script("check_hgemm")


@pytest.mark.parametrize("kern", harness.KERNELS_UNDER_TEST, ids=[k.label for k in harness.KERNELS_UNDER_TEST])
def test_harness_sizes_come_from_the_space(kern) -> None:
    if kern.family in harness.BOUNDED:
        bm = kern.params()["BM"]
        assert [n for n in range(1, 140) if kern.fits(n)] == [n for n in range(1, 140) if n <= bm < n + 8]
        assert kern.bound() == bm
    else:
        assert all(kern.fits(n) for n in (1, 33, 128)) and kern.bound() == 1 << 30


@pytest.mark.parametrize("kern", harness.RING_KERNELS, ids=[k.label for k in harness.RING_KERNELS])
def test_ring_harness_sizes_come_from_the_space(kern) -> None:
    """hgemm_ring_tc serves n^3 where n <= BM < n + 8 and n is a multiple of VEC / 2 (its columns aligned)."""
    bm, e = kern.params()["BM"], kern.params()["VEC"] // 2
    assert [n for n in range(1, 140) if kern.fits(n)] == [n for n in range(1, 140) if n <= bm < n + 8 and n % e == 0]
    assert kern.bound() == bm


@pytest.mark.parametrize(
    "space_name,precision",
    [
        ("hgemm_flat_tc", "fp16"),
        ("hgemm_stream", "fp16"),
        ("gemm_tiny_simt", "fp32"),
        ("hgemm_mma", "fp16"),
        ("hgemm_ring_tc", "fp16"),
        ("hgemm_wgmma_tc", "fp16"),
        ("hgemm_wgmma_flat_tc", "fp16"),
    ],
)
def test_space_serves_matches_the_generator(space_name: str, precision: str) -> None:
    space = load_space(space_name)
    gen = generate(space, get_device("H100"), precision)
    rng = np.random.default_rng(3)
    rows = rng.choice(gen.count, size=min(40, gen.count), replace=False)
    for n in (2, 17, 33, 64, 120):
        point = gemm_point(precision, "NN", n, n, n, 1000)
        mask = serving(gen, point)
        for r in rows:
            params = {k: int(v) for k, v in gen.frame.iloc[int(r)].items()}
            assert space.serves(params, point) == bool(mask[r])
    if space.kernel.serves is not None:  # the check is not vacuous: some rows are served, some are not
        n = 64 if space_name in ("hgemm_ring_tc", "hgemm_wgmma_tc") else 17  # the ring: aligned sizes only
        mask = serving(gen, gemm_point(precision, "NN", n, n, n, 1000))
        assert mask.any() and not mask.all()


wgmma = load_script("check_wgmma")


@pytest.mark.parametrize("kern", wgmma.WGMMA_KERNELS, ids=[k.label for k in wgmma.WGMMA_KERNELS])
def test_wgmma_harness_sizes_come_from_the_space(kern) -> None:
    """hgemm_wgmma_tc serves n^3 where n <= BM < n + 64 and n <= BN < n + 8 (every warpgroup has rows)."""
    bm, bn = kern.params()["BM"], kern.params()["BN"]
    assert [n for n in range(1, 140) if kern.fits(n)] == [
        n for n in range(1, 140) if n <= bm < n + 64 and n <= bn < n + 8
    ]
    assert kern.bound() == min(bm, bn)


@pytest.mark.parametrize("kern", wgmma.WGMMA_KERNELS, ids=[k.label for k in wgmma.WGMMA_KERNELS])
def test_wgmma_cases_cover_the_brief(kern) -> None:
    """Sizes that do not divide the tiles or the slice, every shape (the first instance), every copy width, the
    per-element path, several problems per block, a batch above 65,535; the instances are in the space."""
    p = kern.params()
    space = load_space("hgemm_wgmma_tc")
    values = space.values(p, "fp16", get_device("H100"))
    assert all(space.eval(c, values) for c in space.hard)
    cases = wgmma.wgmma_cases(kern, full=kern == wgmma.WGMMA_KERNELS[0])
    shapes = {c.shape for c, *_ in cases}
    assert shapes == ({"NN", "NT", "TN", "TT"} if kern == wgmma.WGMMA_KERNELS[0] else {"NN", "NT"})
    inside = [c for c, *_ in cases if c.m <= p["BM"] and c.n <= p["BN"]]
    assert any(c.m % 64 and c.n % 8 and c.k % 16 for c in inside)  # M, N, K not dividing the tiles
    assert any(c.k > 2 * p["KS"] for c in inside) and any(c.k % p["KS"] and c.k > p["KS"] for c in inside)
    assert {1, 7, 33} <= {c.m for c in inside}
    lds = {(c.m + c.pad) % 8 for c in inside if c.shape == "NN"}  # A's leading dimension: the copy width
    assert {0, 1} <= lds and lds & {2, 6} and 4 in lds | {(c.m + c.pad) % 8 for c in inside}
    assert any(c.m > p["BM"] or c.n > p["BN"] for c, *_ in cases)  # the per-element path
    assert any(cap for *_, cap in cases) and any(c.batch > 65_535 for c, *_ in cases)
    assert any(b == 0.0 for _, _, b, _ in cases) and any(b not in (0.0, 1.0) for _, _, b, _ in cases)
    assert any(c.pad and c.pad % 8 == 0 for c, *_ in cases) and any(c.pad % 2 for c, *_ in cases)


@pytest.mark.parametrize("kern", wgmma.FLAT_KERNELS, ids=[k.label for k in wgmma.FLAT_KERNELS])
def test_wgmma_flat_harness_sizes_come_from_the_space(kern) -> None:
    """hgemm_wgmma_flat_tc serves n^3 where hgemm_wgmma_tc does and n is not a multiple of 8 (where it is, packed
    operands are 16-byte aligned and the kernel runs hgemm_wgmma_tc's own path)."""
    bm, bn = kern.params()["BM"], kern.params()["BN"]
    assert [n for n in range(1, 140) if kern.fits(n)] == [
        n for n in range(1, 140) if n <= bm < n + 64 and n <= bn < n + 8 and n % 8
    ]
    assert kern.bound() == min(bm, bn) - 1


@pytest.mark.parametrize("kern", wgmma.FLAT_KERNELS, ids=[k.label for k in wgmma.FLAT_KERNELS])
def test_wgmma_flat_cases_cover_the_brief(kern) -> None:
    """The unaligned sizes 97, 98, 106, 113, 114, 126 within the bounds, every shape (the first instance), each copy
    mode (K within one slice and of several), mixed and full alignment, unaligned pointers, unpacked layouts, beta
    != 0, capped grids, a batch above 65,535 with unaligned operands; the instances are in the space and serve."""
    p = kern.params()
    space = load_space("hgemm_wgmma_flat_tc")
    values = space.values(p, "fp16", get_device("H100"))
    assert all(space.eval(c, values) for c in space.hard)
    assert any(kern.fits(n) for n in range(1, 129))
    first = kern == wgmma.FLAT_KERNELS[0]
    cases = wgmma.flat_cases(kern, full=first)
    assert {c.shape for c, *_ in cases} == ({"NN", "NT", "TN", "TT"} if first else {"NN", "NT"})
    inside = [c for c, *_ in cases if c.m <= p["BM"] and c.n <= p["BN"]]
    brief = {n for n in (97, 98, 106, 113, 114, 126) if n <= p["BM"] and n <= p["BN"]}
    for n in brief:
        assert {c.shape for c in inside if c.m == c.n == c.k == n} == set(wgmma.shapes_of(kern))
    if first:
        assert brief == {97, 98, 106, 113, 114}
    assert any(c.k < p["KS"] and c.k % 8 for c in inside) and any(c.k > 2 * p["KS"] and c.k % 8 for c in inside)
    nn = [c for c in inside if c.shape == "NN" and not c.pad and not c.off]
    assert any(c.m % 8 == 0 and c.k % 8 for c in nn) and any(c.m % 8 == 0 and c.k % 8 == 0 for c in nn)
    nt = [c for c in inside if c.shape == "NT" and not c.pad and not c.off]
    assert any(c.m % 8 and c.n % 8 == 0 for c in nt)  # B aligned, A not
    assert any(c.off % 8 for c in inside) and any(c.pad % 2 for c in inside) and any(c.pad == 8 for c in inside)
    assert any(c.m > p["BM"] or c.n > p["BN"] for c, *_ in cases)  # the per-element path
    assert any(cap for *_, cap in cases) and any(c.batch > 65_535 and c.m % 8 for c in inside)
    assert any(b == 0.0 for _, _, b, _ in cases) and any(b not in (0.0, 1.0) for _, _, b, _ in cases)
