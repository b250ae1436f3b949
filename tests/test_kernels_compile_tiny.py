"""Compile-only check of the tiny batched GEMM family (kernels_src/gemm_tiny.cuh) for sm_90 with nvcc (no GPU needed).

For each precision, one translation unit takes the address of hand-picked instances (every work split: one element,
one column, one row, a whole problem and a 2-D micro-tile per thread; STAGES 1 and 2; non-power-of-two bounds; bounds
above 16 with a ragged split and two micro-tiles per thread; the largest bounds, 32, fp64 included) and of the first
and last instances of the generated space (hard and soft constraints), so that a space whose hard constraints let
through an instance the kernel rejects (static_assert) fails here. Each instance compiles in one of the four shapes,
the shapes taking turns (and another shape in each precision), the one with the most shared memory in all four
(tests/support/nvcc.py, one_shape_each: the shape changes indexing only; about a quarter of the nvcc time of every
instance in every shape, which the GPU tier compiles). Name expressions come from the space file
(Space.template_name), exactly what NVRTC compiles at run time.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autotune.problems.gemm import gemm_point
from autotune.devices import get_device
from autotune.space.generator import generate, serving
from autotune.space.spec import load_space
from tests.support.nvcc import SHAPES, assert_all_compile, compile_object, one_shape_each

pytestmark = pytest.mark.nvcc

SPACE = "gemm_tiny_simt"
PRECISIONS = ("fp64", "fp32", "fp16")

HAND_PICKED = [
    dict(BM=4, BN=4, BK=4, RM=1, RN=1, THREADS=256, PPB=64, STAGES=2),  # one element per thread
    dict(BM=3, BN=5, BK=7, RM=3, RN=1, THREADS=128, PPB=32, STAGES=1),  # one column per thread, ragged bounds
    dict(BM=2, BN=2, BK=2, RM=2, RN=2, THREADS=128, PPB=128, STAGES=2),  # one problem per thread
    dict(BM=6, BN=7, BK=5, RM=1, RN=7, THREADS=256, PPB=32, STAGES=2),  # one row per thread
    dict(BM=16, BN=16, BK=16, RM=4, RN=2, THREADS=256, PPB=2, STAGES=2),  # 2-D micro-tile, bounds of 16
    dict(BM=32, BN=32, BK=32, RM=4, RN=4, THREADS=64, PPB=1, STAGES=1),  # largest bounds: fp64 n = 32 (24 KB)
    dict(BM=32, BN=32, BK=32, RM=2, RN=4, THREADS=128, PPB=1, STAGES=2),  # largest bounds, prefetch
    dict(BM=24, BN=24, BK=24, RM=8, RN=2, THREADS=64, PPB=2, STAGES=2),  # two micro-tiles per thread
    dict(BM=17, BN=24, BK=19, RM=4, RN=6, THREADS=128, PPB=2, STAGES=2),  # ragged split: 5 x 4 threads, 4 x 6 tile
]


def _params(precision: str) -> list[dict]:
    space = load_space(SPACE)
    dev = get_device("H100")
    frame = generate(space, dev, precision).frame
    sampled = [{k: int(v) for k, v in frame.iloc[r].items()} for r in sorted({0, len(frame) - 1})]
    hand = []
    for p in HAND_PICKED:  # keep only what passes the hard constraints at this precision (shared memory)
        values = space.values(p, precision, dev)
        if all(bool(space.eval(c, values)) for c in space.hard):
            hand.append(p)
    return hand + sampled


def _translation_unit(names: list[str]) -> str:
    refs = "\n".join(f"    reinterpret_cast<const void*>(&{n})," for n in names)
    return f'#include "gemm_tiny.cuh"\n\nconst void* tiny_instances[] = {{\n{refs}\n}};\n'


def test_hand_picked_instances_pass_hard_constraints_in_fp32() -> None:
    space = load_space(SPACE)
    dev = get_device("H100")
    for p in HAND_PICKED:
        values = space.values(p, "fp32", dev)
        assert all(bool(space.eval(c, values)) for c in space.hard), p


@pytest.mark.parametrize("precision", PRECISIONS)
def test_every_small_size_has_a_serving_instance(precision: str) -> None:
    """Every square n = 1..32 and every M, N, K in 2..8 is served by some instance that passes the soft constraints."""
    g = generate(load_space(SPACE), get_device("H100"), precision)
    sizes = [(n, n, n) for n in range(1, 33)]
    sizes += [(m, n, k) for m in range(2, 9) for n in range(2, 9) for k in range(2, 9)]
    missing = [s for s in sizes if not serving(g, gemm_point(precision, "NN", *s, 1000)).any()]
    assert not missing, f"no serving instance for {missing[:10]}"


@pytest.mark.parametrize("precision", PRECISIONS)
def test_sizes_above_16_have_a_few_tens_of_instances(precision: str) -> None:
    """Each square n = 17..32 is served by its own bound (BM = BN = BK = n) and tens of instances, not thousands (a sweep
    compiles each one); every one has a micro-tile of at least 8 elements of C and fits 48 KB of shared memory."""
    space = load_space(SPACE)
    g = generate(space, get_device("H100"), precision)
    for n in range(17, 33):
        rows = serving(g, gemm_point(precision, "NN", n, n, n, 1000))
        assert 4 <= rows.sum() <= 64, (n, int(rows.sum()))
        frame = g.frame[rows]
        assert set(frame["BM"]) == {n} and set(frame["BK"]) == {n}
        assert ((frame["RM"] * frame["RN"]) >= 8).all()
        tpp = -(-frame["BM"] // frame["RM"]) * -(-frame["BN"] // frame["RN"])  # threads per problem
        assert (frame["THREADS"] <= frame["PPB"] * tpp).all()  # every thread has a micro-tile


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_tiny_family_compiles_for_sm90(tmp_path: Path) -> None:
    space = load_space(SPACE)
    units = []
    covered = set()
    for i, precision in enumerate(PRECISIONS):
        pairs = one_shape_each(space, _params(precision), precision, start=i)
        covered |= {(precision, s) for _, s in pairs}
        names = sorted({space.template_name(p, precision, s) for p, s in pairs})
        cu = tmp_path / f"tiny_{precision}.cu"
        cu.write_text(_translation_unit(names))
        units.append(cu)
    assert covered == {(p, s) for p in PRECISIONS for s in SHAPES}
    assert_all_compile(units)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_kernel_rejects_instance_outside_hard_constraints(tmp_path: Path) -> None:
    """Static shared memory above 48 KB: the space says no and the kernel's static_assert agrees."""
    space = load_space(SPACE)
    bad = dict(BM=8, BN=8, BK=8, RM=1, RN=1, THREADS=256, PPB=64, STAGES=1)  # 64 * 192 * 4 bytes = 48 KB + ends
    hard = {c.name: bool(space.eval(c, space.values(bad, "fp32", get_device("H100")))) for c in space.hard}
    assert hard["static_smem"] is False
    cu = tmp_path / "bad.cu"
    cu.write_text(_translation_unit([space.template_name(bad, "fp32", "NN")]))
    r = compile_object(cu)
    assert r.returncode != 0 and "static assertion" in (r.stderr + r.stdout)
