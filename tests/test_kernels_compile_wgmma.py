"""Compile-only checks of hgemm_wgmma_tc (kernels_src/hgemm_wgmma_tc.cuh) for sm_90a with nvcc (no GPU needed).

The family's representative instances (hand-picked: both warpgroup counts, N from 8 to 128 including the slab
paddings 4, 2 and 1 and none, the 128-byte swizzle, every K-slice (16 to 128), both C paths; and the first and last instances of the generated space)
compile with the optimising build the sweep uses, one translation unit, each instance in one shape (the shapes
taking turns, the one with the most shared memory in all four: tests/support/nvcc.py, one_shape_each). ptxas -v says
every instance became a kernel with no spills and no warpgroup.arrive injected between the wgmmas (C7519: ptxas
serialising them). The space's smem_bytes equals the kernel's hgemm_wgmma_tc_smem_bytes<...>() in the largest
shape, by static_assert, for every instance of the space. A host program reads every tile geometry back through the
kernel's descriptors and a model of wgmma's addressing (MODEL). The sweep's own compile of the family (NVRTC or nvcc with
`-arch=sm_90a`) is tests/test_arch_specific.py.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from autotune.devices import get_device
from autotune.paths import KERNELS_DIR
from autotune.space.generator import generate
from autotune.space.spec import load_space
from tests.support.nvcc import SHAPES, compile_object, one_shape_each, wgmma_log

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
    # KS = 128 (the whole K up to 128 in one slice: 8 k-steps, K-major tiles of 16 slabs)
    dict(BM=128, BN=128, KS=128, STAGES=3, SPAD=1, SWZ=0, CDIRECT=0, PERSIST=1),  # n = 121..128, the most smem
    dict(BM=128, BN=104, KS=128, STAGES=2, SPAD=0, SWZ=0, CDIRECT=1, PERSIST=1),  # n = 97..104, unpadded
    dict(BM=64, BN=64, KS=128, STAGES=4, SPAD=1, SWZ=0, CDIRECT=0, PERSIST=0),  # one warpgroup
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
    wgmma_log(tmp_path / "wgmma.cu", "hgemm_wgmma_tc.cuh", names)


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
    # every instance but PERSIST (the same kernel): SWZ = 0 (4 KS) and SWZ = 1 (KS = 64, SPAD = 0), less the 22 over
    # 227 KB (KS = 128, BM = 128, STAGES = 4: BN >= 80 with the shared C, BN >= 104 without; both SPAD)
    assert len(seen) == 2 * 16 * 4 * 3 * 2 * 2 + 2 * 16 * 3 * 2 - 22
    cu = tmp_path / "wgmma_smem.cu"
    cu.write_text('#include <initializer_list>\n#include "hgemm_wgmma_tc.cuh"\n' + "\n".join(asserts) + "\n")
    r = compile_object(cu, target="sm_90a")
    assert r.returncode == 0, (r.stderr + r.stdout)[-4000:]


# wgmma's reading of an operand through a descriptor, as the PTX ISA's matrix descriptor and canonical layouts say
# (CuTe's GmmaDescriptor: INTERLEAVE and B128 for K-major and MN-major): the byte address of element (r, k) of the
# piece it describes (r along M or N, k < 16). A model of the hardware written apart from the kernel, which the
# kernel's descriptors (a_descriptor, b_descriptor) and tile offsets (Tile::offset, what the copies write) must meet.
MODEL = r"""
static unsigned model(unsigned long long d, bool mn_major, int r, int k) {
  const unsigned start = unsigned(d & 0x3FFF) << 4, lbo = unsigned((d >> 16) & 0x3FFF) << 4;
  const unsigned sbo = unsigned((d >> 32) & 0x3FFF) << 4;
  if ((d >> 49 & 7) != 0) return 1u << 30;  // base offset: never set here
  if ((d >> 62) == 0) {  // core matrices of 8 rows x 16 bytes; LBO: the next one along K, SBO: along M or N
    return mn_major ? start + (k / 8) * lbo + (r / 8) * sbo + (k % 8) * 16 + (r % 8) * 2   // rows are k
                    : start + (k / 8) * lbo + (r / 8) * sbo + (r % 8) * 16 + (k % 8) * 2;  // rows are r
  }
  if ((d >> 62) != 1) return 1u << 30;
  // 128-byte swizzle: 128-byte rows in atoms of 8 rows on 1024-byte boundaries, chunk (bits 4..6) XOR row (7..9).
  // K-major: a row is 64 k of one r (LBO unused), SBO the next 8 rows; MN-major: a row is 64 r of one k, LBO the
  // next 64 r, SBO the next 8 k.
  const unsigned o = mn_major ? start + (r / 64) * lbo + (k / 8) * sbo + (k % 8) * 128 + (r % 64) * 2
                              : start + (r / 8) * sbo + (r % 8) * 128 + k * 2;
  return o ^ ((o >> 3) & 0x70);
}

template <int TA_, int TB_, int BM, int BN, int KS, int SPAD, int SWZ> int check() {
  using G = autotune::wgmma_detail::Geo<TA_, TB_, BM, BN, KS, 2, SPAD, SWZ, 1>;
  using TA = typename G::TA;
  using TB = typename G::TB;
  std::vector<int> buf(G::STAGE / 2, -1);
  int bad = 0;
  auto put = [&](unsigned off, int id, unsigned lo, unsigned hi) {  // what the copies write, each slot once
    if (off % 2 || off < lo || off >= hi || buf[off / 2] != -1) ++bad; else buf[off / 2] = id;
  };
  for (int i = 0; i < BM; ++i)
    for (int k = 0; k < KS; ++k) put(TA_ == 0 ? TA::offset(i, k) : TA::offset(k, i), i * KS + k, 0, TA::BYTES);
  for (int j = 0; j < BN; ++j)
    for (int k = 0; k < KS; ++k)
      put(TA::BYTES + (TB_ == 0 ? TB::offset(k, j) : TB::offset(j, k)), 1000000 + j * KS + k, TA::BYTES, G::STAGE);
  auto got = [&](unsigned a) { return a / 2 < buf.size() && a % 2 == 0 ? buf[a / 2] : -2; };
  for (int kk = 0; kk < KS / 16; ++kk) {
    for (int wg = 0; wg < BM / 64; ++wg) {
      const unsigned long long d = autotune::wgmma_detail::a_descriptor<TA_, TA, SWZ>(0, wg, kk);
      for (int r = 0; r < 64; ++r)
        for (int k = 0; k < 16; ++k) bad += got(model(d, TA_ == 0, r, k)) != (64 * wg + r) * KS + 16 * kk + k;
    }
    const unsigned long long d = autotune::wgmma_detail::b_descriptor<TB_, TB, SWZ>(TA::BYTES, kk);
    for (int j = 0; j < BN; ++j)
      for (int k = 0; k < 16; ++k) bad += got(model(d, TB_ == 1, j, k)) != 1000000 + j * KS + 16 * kk + k;
  }
  if (bad) std::printf("MISMATCH <%d, %d, %d, %d, %d, %d, %d>: %d\n", TA_, TB_, BM, BN, KS, SPAD, SWZ, bad);
  return bad;
}

int check_window8() {  // the odd-column copies' shift: halves s .. s + n - 1 of two 16-byte words, zeros after
  int bad = 0;
  for (int s = 0; s < 8; ++s)
    for (int n = 0; n <= 8; ++n) {
      unsigned w[8];
      for (int i = 0; i < 8; ++i) w[i] = (2u * i + 1) | (2u * i + 2) << 16;  // half h holds h + 1
      const uint4 v = autotune::wgmma_detail::window8(w, s, n);
      const unsigned r[4] = {v.x, v.y, v.z, v.w};
      for (int e = 0; e < 8; ++e) bad += ((r[e / 2] >> (16 * (e % 2))) & 0xFFFF) != (e < n ? unsigned(s + e + 1) : 0u);
    }
  if (bad) std::printf("window8: %d wrong halves\n", bad);
  return bad;
}
"""


@needs_nvcc
def test_descriptors_read_what_the_copies_wrote(tmp_path: Path) -> None:
    """For every tile geometry of the space (both warpgroup counts, every BN, KS, SPAD and SWZ, all four shapes), a
    host program fills one stage as the copies do (Tile::offset: every slot written once, inside its tile) and reads
    every warpgroup's A piece and B's piece at every k-step back through the kernel's descriptors and the model of
    wgmma's addressing above: each element is the one the MMA needs. It also checks window8, the shift of the
    copies for columns that start on an odd half."""
    calls = [
        f"bad += check<{ta}, {tb}, {bm}, {bn}, {ks}, {spad}, {swz}>();"
        for ta in (0, 1)
        for tb in (0, 1)
        for bm in (64, 128)
        for bn in range(8, 129, 8)
        for ks in (16, 32, 64, 128)
        for spad, swz in ((0, 0), (1, 0), (0, 1))
        if not swz or ks == 64
    ]
    assert len(calls) == 4 * 2 * 16 * 9
    body = "\n  ".join(calls)
    cu = tmp_path / "layout.cu"
    cu.write_text(
        f'#include <cstdio>\n#include <vector>\n#include "hgemm_wgmma_tc.cuh"\n{MODEL}\n'
        f'int main() {{\n  int bad = check_window8();\n  {body}\n  std::printf("checked {len(calls)}, bad %d\\n", bad);\n'
        "  return bad != 0;\n}\n"
    )
    exe = tmp_path / "layout"
    cmd = ["nvcc", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", f"-I{KERNELS_DIR}", "-o", str(exe), str(cu)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, (r.stderr + r.stdout)[-4000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and f"checked {len(calls)}, bad 0" in run.stdout, run.stdout[-4000:]
