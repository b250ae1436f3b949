"""Compile-only check of the SIMT GEMM families for sm_90 with nvcc (runs wherever nvcc is, no GPU needed).

For each precision, one translation unit includes both kernel sources and instantiates hand-picked instances
(ragged reading layouts, several problems per block, non-power-of-two bounds) and instances drawn from the generated
spaces, so that a space whose hard constraints let through an instance the kernel rejects (static_assert) fails
here. Each instance compiles in one of the four shapes, the shapes taking turns (another shape in each precision, and
for gemm_batched's ptr_array entry point), the one of each family with the most shared memory in all four
(tests/support/nvcc.py, one_shape_each: the shape changes indexing only; about a quarter of the nvcc time of every
instance in every shape, which the GPU tier compiles). Name expressions come from the space files
(Space.template_name), exactly what NVRTC compiles at run time.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autotune.devices import get_device
from autotune.space.generator import generate
from autotune.space.spec import load_space
from tests.support.nvcc import assert_all_compile, compile_object, one_shape_each

pytestmark = pytest.mark.nvcc

PRECISIONS = ("fp64", "fp32", "fp16")
SPACES = ("gemm_batched_simt", "gemm_vbatched_simt", "gemm_small_simt")

HAND_PICKED = {
    "gemm_batched_simt": [
        dict(DIM_X=16, DIM_Y=8, BLK_M=32, BLK_N=32, BLK_K=8, DIM_XA=16, DIM_YA=8, DIM_XB=8, DIM_YB=16, NSG=1),
        dict(DIM_X=8, DIM_Y=4, BLK_M=16, BLK_N=24, BLK_K=4, DIM_XA=32, DIM_YA=1, DIM_XB=4, DIM_YB=8, NSG=3),
    ],
    "gemm_vbatched_simt": [
        dict(DIM_X=8, DIM_Y=8, BLK_M=24, BLK_N=16, BLK_K=16, DIM_XA=8, DIM_YA=8, DIM_XB=16, DIM_YB=4, NSG=2),
    ],
    "gemm_small_simt": [
        dict(BLK_M=4, BLK_N=4, BLK_K=4, NSG=16),
        dict(BLK_M=5, BLK_N=3, BLK_K=8, NSG=7),
        dict(BLK_M=32, BLK_N=32, BLK_K=32, NSG=1),
    ],
}


def _sampled(space_name: str, precision: str, count: int = 2) -> list[dict]:
    """First and last surviving instances of the generated space (hard and soft constraints)."""
    g = generate(load_space(space_name), get_device("H100"), precision)
    frame = g.frame
    rows = sorted({0, len(frame) - 1})[:count]
    return [{k: int(v) for k, v in frame.iloc[r].items()} for r in rows]


def _names(precision: str) -> list[str]:
    names = []
    start = PRECISIONS.index(precision)
    for space_name in SPACES:
        space = load_space(space_name)
        instances = HAND_PICKED[space_name] + _sampled(space_name, precision)
        for params, shape in one_shape_each(space, instances, precision, start):
            names.append(space.template_name(params, precision, shape))
        if space_name == "gemm_batched_simt":  # the ptr_array entry point shares the template arguments
            for params, shape in one_shape_each(space, instances, precision, start + 1):
                name = space.template_name(params, precision, shape)
                names.append(name.replace("autotune::gemm_batched<", "autotune::gemm_batched_ptr<", 1))
    return names


def _translation_unit(names: list[str]) -> str:
    refs = "\n".join(f"    reinterpret_cast<const void*>(&{n})," for n in names)
    return f'#include "gemm_batched.cuh"\n#include "gemm_small.cuh"\n\nconst void* simt_instances[] = {{\n{refs}\n}};\n'


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_simt_families_compile_for_sm90(tmp_path: Path) -> None:
    units = []
    for precision in PRECISIONS:
        names = _names(precision)
        assert {tuple(n.split(", ")[1:3]) for n in names} == {("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")}
        cu = tmp_path / f"simt_{precision}.cu"
        cu.write_text(_translation_unit(sorted(set(names))))
        units.append(cu)
    assert_all_compile(units)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_kernel_rejects_instance_outside_hard_constraints(tmp_path: Path) -> None:
    """The kernel's static_asserts are the hard constraints: DIM_XA * DIM_YA != DIM_X * DIM_Y must not compile."""
    space = load_space("gemm_batched_simt")
    bad = dict(DIM_X=16, DIM_Y=8, BLK_M=32, BLK_N=32, BLK_K=8, DIM_XA=16, DIM_YA=4, DIM_XB=8, DIM_YB=16, NSG=1)
    hard = {c.name: bool(space.eval(c, space.values(bad, "fp64", get_device("H100")))) for c in space.hard}
    assert hard["a_layout"] is False
    cu = tmp_path / "bad.cu"
    cu.write_text(_translation_unit([space.template_name(bad, "fp64", "NN")]))
    r = compile_object(cu)
    assert r.returncode != 0 and "static assertion" in (r.stderr + r.stdout)
