"""Compile-only checks of hgemm_wgmma_tc (kernels_src/hgemm_wgmma_tc.cuh) for sm_90a with nvcc (no GPU needed).

The family's representative instances (hand-picked: both warpgroup counts, N from 8 to 128 including the slab
paddings 4, 2 and 1 and none, the 128-byte swizzle, every K-slice, both C paths; and the first and last instances of the generated space)
compile with the optimising build the sweep uses, one translation unit, each instance in one shape (the shapes
taking turns, the one with the most shared memory in all four: tests/support/nvcc.py, one_shape_each). ptxas -v says
every instance became a kernel with no spills and no warpgroup.arrive injected between the wgmmas (C7519: ptxas
serialising them). The space's smem_bytes equals the kernel's hgemm_wgmma_tc_smem_bytes<...>() in the largest
shape, by static_assert, for every instance of the space. The sweep's own compile of the family (NVRTC or nvcc with
`-arch=sm_90a`) is tests/test_arch_specific.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autotune.devices import get_device
from autotune.space.generator import generate
from autotune.space.spec import load_space
from tests.support.nvcc import SHAPES, compile_object, one_shape_each

pytestmark = pytest.mark.nvcc
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")

SPACE = "hgemm_wgmma_tc"
HAND_PICKED = [
    dict(BM=128, BN=128, KS=32, STAGES=3, SPAD=1, SWZ=0, CDIRECT=0, PERSIST=1),  # n = 121..128: two warpgroups, N = 128
    dict(BM=64, BN=64, KS=64, STAGES=4, SPAD=1, SWZ=0, CDIRECT=1, PERSIST=0),  # one warpgroup, direct C, K-slabs of 64
    dict(
        BM=128, BN=104, KS=16, STAGES=2, SPAD=1, SWZ=0, CDIRECT=0, PERSIST=1
    ),  # N = 104: 13 slabs; K-slabs of 16 (pad 4)
    dict(BM=64, BN=24, KS=32, STAGES=3, SPAD=1, SWZ=0, CDIRECT=0, PERSIST=1),  # 3 slabs of N (pad 2)
    dict(BM=128, BN=120, KS=64, STAGES=4, SPAD=0, SWZ=0, CDIRECT=0, PERSIST=0),  # unpadded, the largest stages
    dict(BM=64, BN=8, KS=16, STAGES=2, SPAD=1, SWZ=0, CDIRECT=1, PERSIST=1),  # the smallest wgmma (m64n8k16)
    dict(BM=128, BN=104, KS=64, STAGES=3, SPAD=0, SWZ=1, CDIRECT=0, PERSIST=1),  # 128-byte swizzle, N = 104
    dict(BM=64, BN=64, KS=64, STAGES=2, SPAD=0, SWZ=1, CDIRECT=1, PERSIST=0),  # 128-byte swizzle, one warpgroup
]


def _params() -> list[dict]:
    frame = generate(load_space(SPACE), get_device("H100"), "fp16").frame
    sampled = [{k: int(v) for k, v in frame.iloc[r].items()} for r in sorted({0, len(frame) - 1})]
    return HAND_PICKED + sampled


def test_hand_picked_instances_are_in_the_space() -> None:
    space = load_space(SPACE)
    dev = get_device("H100")
    for p in HAND_PICKED:
        values = space.values(p, "fp16", dev)
        assert all(space.eval(c, values) for c in space.hard), p


@needs_nvcc
def test_instances_compile_for_sm90a_without_spills(tmp_path: Path) -> None:
    space = load_space(SPACE)
    pairs = one_shape_each(space, _params(), "fp16")
    assert {s for _, s in pairs} == set(SHAPES)
    names = sorted({space.template_name(p, "fp16", s) for p, s in pairs})
    refs = "\n".join(f"    reinterpret_cast<const void*>(&{n})," for n in names)
    cu = tmp_path / "wgmma.cu"
    cu.write_text(f'#include "hgemm_wgmma_tc.cuh"\n\nconst void* wgmma_instances[] = {{\n{refs}\n}};\n')
    r = compile_object(cu, timeout=400, target="sm_90a", flags=("-Xptxas", "-v"))
    log = r.stderr + r.stdout
    assert r.returncode == 0, log[-4000:]
    assert log.count("Compiling entry function") == len(names), log[-4000:]
    spills = [ln.strip() for ln in log.splitlines() if "spill stores" in ln]
    assert len(spills) == len(names) and all(s.startswith("0 bytes stack frame, 0 bytes spill stores") for s in spills)
    assert "C7519" not in log and "C7510" not in log, log[-4000:]  # wgmmas not serialised by ptxas


@needs_nvcc
def test_sm90_without_the_a_is_refused(tmp_path: Path) -> None:
    """Why the space is `arch_specific: true`: for plain sm_90 ptxas refuses wgmma."""
    cu = tmp_path / "plain.cu"
    name = load_space(SPACE).template_name(HAND_PICKED[1], "fp16", "NN")
    cu.write_text(f'#include "hgemm_wgmma_tc.cuh"\nconst void* p = reinterpret_cast<const void*>(&{name});\n')
    r = compile_object(cu, target="sm_90", flags=())
    assert r.returncode != 0 and "not supported on .target 'sm_90'" in r.stderr + r.stdout


@needs_nvcc
def test_shared_memory_formula_matches_the_kernel(tmp_path: Path) -> None:
    """smem_bytes of every instance of the space (H100 profile, all soft constraints off) is the largest of the
    kernel's hgemm_wgmma_tc_smem_bytes<...>() over the four shapes (the kernel traps when launched with less)."""
    space = load_space(SPACE)
    frame = generate(space, get_device("H100"), "fp16", soft=False).frame
    dev = get_device("H100")
    asserts = [
        "constexpr int largest(std::initializer_list<int> v) { int m = 0; for (int x : v) m = x > m ? x : m; "
        "return m; }"
    ]
    seen = set()
    for r in range(len(frame)):
        p = {k: int(v) for k, v in frame.iloc[r].items()}
        key = tuple(v for k, v in sorted(p.items()) if k != "PERSIST")
        if key in seen:
            continue
        seen.add(key)
        smem = int(space.values(p, "fp16", dev)["smem_bytes"])
        need = []
        for s in SHAPES:
            args = space.template_name(p, "fp16", s).split("<", 1)[1].rstrip(">")
            need.append(f"autotune::hgemm_wgmma_tc_smem_bytes<{args}>()")
        asserts.append(f'static_assert(largest({{{", ".join(need)}}}) == {smem}, "{p}");')
    assert len(seen) == 2 * 16 * 3 * 3 * 2 * 2 + 2 * 16 * 3 * 2  # every instance but PERSIST (the same kernel)
    cu = tmp_path / "wgmma_smem.cu"
    cu.write_text('#include <initializer_list>\n#include "hgemm_wgmma_tc.cuh"\n' + "\n".join(asserts) + "\n")
    r = compile_object(cu, target="sm_90a")
    assert r.returncode == 0, (r.stderr + r.stdout)[-4000:]
