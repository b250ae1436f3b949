"""Compile-only check of the tensor-core HGEMM families for sm_90 with nvcc (no GPU needed).

One translation unit per family (hgemm_wmma, hgemm_small_tc, hgemm_mma, hgemm_flat_tc, hgemm_stream, hgemm_ring_tc) includes the kernel
source and takes the address of hand-picked instances (every tensor-core shape, every ladder rung, several problems per
block) and of the first and last instances of the generated space; taking the address instantiates the template, so a
static_assert the space's hard constraints let through fails here. Each instance compiles in one of the four shapes,
the shapes taking turns (every family has at least four instances: it sees every shape), the one with the most shared
memory in all four (tests/support/nvcc.py, one_shape_each: the shape changes indexing only; about a third of the nvcc
time of every instance in every shape, which the GPU tier compiles). Name expressions come from the space files
(Space.template_name), exactly what NVRTC compiles at run time. The shared-memory formula test below still takes
every shape of every instance (constant expressions only: no kernel is compiled).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autotune.devices import get_device
from autotune.space.generator import generate
from autotune.space.spec import load_space
from tests.support.nvcc import SHAPES, assert_all_compile, compile_object, one_shape_each

pytestmark = pytest.mark.nvcc

HAND_PICKED = {
    "hgemm_wmma": [
        dict(TC_M=16, TC_N=16, TC_K=16, BLK_M=16, BLK_N=16, BLK_K=16, DIM_X=16, DIM_Y=2, NSG=4),
        dict(TC_M=32, TC_N=8, TC_K=16, BLK_M=64, BLK_N=32, BLK_K=16, DIM_X=16, DIM_Y=4, NSG=1),
        dict(
            TC_M=8, TC_N=32, TC_K=16, BLK_M=48, BLK_N=96, BLK_K=32, DIM_X=16, DIM_Y=8, NSG=1
        ),  # 18 sub-blocks on 4 warps
    ],
    "hgemm_small_tc": [dict(NWARPS=4, GPW=2, TC_N=16, KMAX=16), dict(NWARPS=2, GPW=4, TC_N=8, KMAX=32)],
    "hgemm_mma": [
        dict(RUNG=1, BM=32, BN=32, BK=32, WM=2, WN=2, STAGES=1, NSG=1),
        dict(RUNG=2, BM=64, BN=64, BK=32, WM=2, WN=2, STAGES=1, NSG=2),
        dict(RUNG=3, BM=64, BN=32, BK=64, WM=2, WN=1, STAGES=2, NSG=1),
        dict(RUNG=4, BM=16, BN=16, BK=16, WM=1, WN=1, STAGES=2, NSG=8),
        dict(RUNG=4, BM=128, BN=128, BK=32, WM=2, WN=4, STAGES=3, NSG=1),
    ],
    "hgemm_flat_tc": [
        dict(BM=8, BN=8, BK=8, WM=1, WN=1, NWARPS=2, PPB=16, STAGES=1, CDIRECT=0),
        dict(BM=40, BN=24, BK=72, WM=1, WN=1, NWARPS=4, PPB=2, STAGES=2, CDIRECT=1),  # rectangular bounds
        dict(BM=128, BN=128, BK=128, WM=2, WN=4, NWARPS=8, PPB=1, STAGES=1, CDIRECT=0),  # the largest
    ],
    "hgemm_stream": [
        dict(BM=40, BN=40, BK=40, WM=1, WN=1, NWARPS=4, PPB=2, STAGES=4, BULK=0),
        dict(BM=40, BN=24, BK=72, WM=1, WN=2, NWARPS=4, PPB=1, STAGES=3, BULK=1),  # rectangular bounds, bulk copies
        dict(BM=128, BN=128, BK=128, WM=2, WN=4, NWARPS=8, PPB=1, STAGES=3, BULK=1),  # the largest
        dict(BM=96, BN=96, BK=96, WM=2, WN=2, NWARPS=16, PPB=1, STAGES=2, BULK=0),
    ],
    "hgemm_ring_tc": [  # two hand-picked (with the first and last of the space: four instances, every shape once)
        dict(BM=128, BN=128, KS=32, WM=2, WN=4, NWARPS=8, STAGES=3, VEC=16, CDIRECT=0),  # n = 97..128's candidate
        dict(BM=96, BN=96, KS=16, WM=3, WN=2, NWARPS=6, STAGES=4, VEC=4, CDIRECT=1),  # 4-byte copies, 48-wide tiles
    ],
}


def _params(space_name: str) -> list[dict]:
    frame = generate(load_space(space_name), get_device("H100"), "fp16").frame
    sampled = [{k: int(v) for k, v in frame.iloc[r].items()} for r in sorted({0, len(frame) - 1})]
    return HAND_PICKED[space_name] + sampled


def _translation_unit(source: str, names: list[str]) -> str:
    refs = "\n".join(f"    reinterpret_cast<const void*>(&{n})," for n in names)
    return f'#include "{source}"\n\nconst void* tc_instances[] = {{\n{refs}\n}};\n'


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_tensor_core_families_compile_for_sm90(tmp_path: Path) -> None:
    units = []
    for space_name in HAND_PICKED:
        space = load_space(space_name)
        pairs = one_shape_each(space, _params(space_name), "fp16")
        assert {s for _, s in pairs} == set(SHAPES)
        names = sorted({space.template_name(p, "fp16", s) for p, s in pairs})
        cu = tmp_path / f"{space_name}.cu"
        cu.write_text(_translation_unit(Path(space.kernel.source).name, names))
        units.append(cu)
    assert_all_compile(units)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_wmma_rejects_instance_outside_hard_constraints(tmp_path: Path) -> None:
    """TC_M must divide BLK_M: the space says no and the kernel's static_assert agrees."""
    space = load_space("hgemm_wmma")
    bad = dict(TC_M=32, TC_N=8, TC_K=16, BLK_M=48, BLK_N=32, BLK_K=16, DIM_X=16, DIM_Y=2, NSG=1)
    values = space.values(bad, "fp16", get_device("H100"))
    hard = {c.name: bool(space.eval(c, values)) for c in space.hard}
    assert hard["tc_divides_blk"] is False
    cu = tmp_path / "bad.cu"
    cu.write_text(_translation_unit("hgemm_wmma.cuh", [space.template_name(bad, "fp16", "NN")]))
    r = compile_object(cu)
    assert r.returncode != 0 and "static assertion" in (r.stderr + r.stdout)


def test_spaces_keep_every_rung_and_paper_soft_constraints() -> None:
    """Every ladder rung survives the soft constraints; the WMMA space keeps the paper's soft set."""
    mma = generate(load_space("hgemm_mma"), get_device("H100"), "fp16").frame
    assert set(mma["RUNG"]) == {1, 2, 3, 4}
    wmma = generate(load_space("hgemm_wmma"), get_device("H100"), "fp16")
    names = [s.name for s in wmma.funnel]
    assert {"blk_range", "max_warps", "smem_32k"} <= set(names)
    f = wmma.frame
    assert ((f.BLK_M % 16 == 0) & (f.BLK_M <= 128) & (f.BLK_K <= 128)).all()
    assert set(f["NSG"]) == {1, 2, 3, 4}
    assert set(zip(f.TC_M, f.TC_N, strict=True)) == {(16, 16), (32, 8), (8, 32)}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
@pytest.mark.parametrize("space_name", ["hgemm_flat_tc", "hgemm_stream", "hgemm_ring_tc"])
def test_shared_memory_formula_matches_the_kernel(space_name: str, tmp_path: Path) -> None:
    """The space's smem_bytes (the launch's dynamic shared memory) is what the kernel needs in its largest shape:
    <family>_smem_bytes<...>() of every shape is at most smem_bytes and the largest equals it, checked by
    static_assert for the hand-picked and sampled instances (the kernels trap when launched with less)."""
    space = load_space(space_name)
    dev = get_device("H100")
    asserts = [
        "constexpr int largest(std::initializer_list<int> v) { int m = 0; for (int x : v) m = x > m ? x : m; "
        "return m; }"
    ]
    for p in _params(space_name):
        smem = int(space.values(p, "fp16", dev)["smem_bytes"])
        need = []
        for s in SHAPES:
            args = space.template_name(p, "fp16", s).split("<", 1)[1].rstrip(">")
            need.append(f"autotune::{space_name}_smem_bytes<{args}>()")
            asserts.append(f'static_assert({need[-1]} <= {smem}, "{s} {p}");')
        asserts.append(f'static_assert(largest({{{", ".join(need)}}}) == {smem}, "largest shape {p}");')
    cu = tmp_path / f"{space_name}_smem.cu"
    source = Path(space.kernel.source).name
    cu.write_text(f'#include <initializer_list>\n#include "{source}"\n' + "\n".join(asserts) + "\n")
    r = compile_object(cu)
    assert r.returncode == 0, r.stderr + r.stdout
