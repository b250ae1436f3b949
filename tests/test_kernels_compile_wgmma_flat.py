"""Compile-only and host checks of hgemm_wgmma_flat_tc (kernels_src/hgemm_wgmma_flat_tc.cuh) for sm_90a with nvcc
(no GPU needed).

The family's representative instances (hand-picked: both warpgroup counts, N from 8 to 128, every K-slice, the
interleaved layout padded and unpadded and the 128-byte swizzle, one and two tile sets, two to four staging slots,
both C paths; and the first and last instances of the generated space) compile with the optimising build the sweep
uses, one translation unit, each instance in one shape (the one with the most shared memory in all four:
tests/support/nvcc.py, one_shape_each). ptxas -v says every instance became a kernel within the launch bounds' 128
registers, with no spills and no warpgroup.arrive injected between the wgmmas (C7519). The space's smem_bytes equals
the kernel's hgemm_wgmma_flat_tc_smem_bytes<...>() in the largest shape, by static_assert, for every instance of the
space, and its funnel is the one docs/kernels.md states. A host program replays the kernel's own copy and repack
code (Runs, a_slice / b_slice, repack_item: the functions the kernel calls, __host__ __device__) on byte images of
batches in every shape and many layouts, and checks what the copies read and what the tiles hold (REPLAY).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from autotune.devices import get_device
from autotune.paths import KERNELS_DIR, ROOT
from autotune.space.generator import generate
from autotune.space.spec import load_space
from tests.support.nvcc import SHAPES, compile_object, one_shape_each, wgmma_log

pytestmark = pytest.mark.nvcc
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")

SPACE = "hgemm_wgmma_flat_tc"
HAND_PICKED = [
    # n = 113..120, two warpgroups, two tile sets, K-slabs of 32 (pad 2), shared C
    dict(BM=128, BN=120, KS=32, STAGES=2, TILES=2, SPAD=1, SWZ=0, CDIRECT=0, PERSIST=1),
    # 128-byte swizzle, one tile set, direct C
    dict(BM=128, BN=128, KS=64, STAGES=2, TILES=1, SPAD=0, SWZ=1, CDIRECT=1, PERSIST=1),
    # n = 97..104: 13 slabs (three repack pieces of four and one of one a row), K-slabs of 16 (pad 4), four slots
    dict(BM=128, BN=104, KS=16, STAGES=4, TILES=2, SPAD=1, SWZ=0, CDIRECT=0, PERSIST=0),
    dict(BM=64, BN=24, KS=32, STAGES=3, TILES=1, SPAD=1, SWZ=0, CDIRECT=1, PERSIST=1),  # 3 slabs of N (pad 2)
    dict(BM=64, BN=8, KS=16, STAGES=2, TILES=2, SPAD=1, SWZ=0, CDIRECT=1, PERSIST=1),  # the smallest wgmma
    dict(BM=128, BN=112, KS=64, STAGES=3, TILES=1, SPAD=1, SWZ=0, CDIRECT=1, PERSIST=0),  # KS = 64 interleaved
    dict(BM=64, BN=64, KS=64, STAGES=2, TILES=2, SPAD=0, SWZ=1, CDIRECT=0, PERSIST=1),  # swizzle, one warpgroup
    dict(BM=128, BN=128, KS=32, STAGES=3, TILES=2, SPAD=0, SWZ=0, CDIRECT=1, PERSIST=1),  # unpadded, N = 128
    # KS = 128 (the whole K up to 128 in one slice: packed K-major operands one flat range); at BM = 128, BN >= 96
    # only TILES = 1, STAGES = 2 fits 227 KB, with the shared C only up to BN = 112
    dict(BM=128, BN=120, KS=128, STAGES=2, TILES=1, SPAD=1, SWZ=0, CDIRECT=1, PERSIST=1),
    dict(BM=128, BN=104, KS=128, STAGES=2, TILES=1, SPAD=0, SWZ=0, CDIRECT=0, PERSIST=1),
    dict(BM=64, BN=64, KS=128, STAGES=2, TILES=2, SPAD=1, SWZ=0, CDIRECT=0, PERSIST=0),  # one warpgroup, two sets
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


def test_funnel_is_the_documented_one() -> None:
    """The funnel docs/kernels.md states (H100 profile, fp16): raw, after the hard constraints, after the soft ones."""
    gen = generate(load_space(SPACE), get_device("H100"), "fp16")
    steps = {s.name: s for s in gen.funnel}
    raw, hard, soft = gen.funnel[0].remaining, steps["max_smem"].remaining, gen.count
    assert (raw, steps["swizzle_slice"].removed, steps["max_smem"].removed) == (12288, 5376, 584)
    assert (steps["square"].removed, steps["two_blocks"].removed) == (3196, 858)
    assert (hard, soft) == (6328, 2274)
    docs = " ".join((ROOT / "docs" / "kernels.md").read_text().split())  # wrapped lines as one
    assert f"{raw:,} raw → {hard:,} after the hard constraints" in docs and f"→ {soft:,} after the soft ones" in docs


@needs_nvcc
def test_instances_compile_for_sm90a_without_spills(tmp_path: Path) -> None:
    space = load_space(SPACE)
    pairs = one_shape_each(space, _params(), "fp16")
    assert {s for _, s in pairs} == set(SHAPES)
    names = sorted({space.template_name(p, "fp16", s) for p, s in pairs})
    log = wgmma_log(tmp_path / "wgmma_flat.cu", "hgemm_wgmma_flat_tc.cuh", names, timeout=600)
    regs = [int(x) for x in re.findall(r"Used (\d+) registers", log)]
    assert len(regs) == len(names) and max(regs) <= 128, regs  # __launch_bounds__(2 BM, 512 / (2 BM))


@needs_nvcc
def test_sm90_without_the_a_is_refused(tmp_path: Path) -> None:
    """Why the space is `arch_specific: true`: for plain sm_90 ptxas refuses wgmma."""
    cu = tmp_path / "plain.cu"
    name = load_space(SPACE).template_name(HAND_PICKED[3], "fp16", "NN")
    cu.write_text(f'#include "hgemm_wgmma_flat_tc.cuh"\nconst void* p = reinterpret_cast<const void*>(&{name});\n')
    r = compile_object(cu, target="sm_90", flags=())
    assert r.returncode != 0 and "not supported on .target 'sm_90'" in r.stderr + r.stdout


@needs_nvcc
def test_shared_memory_formula_matches_the_kernel(tmp_path: Path) -> None:
    """smem_bytes of the space's instances (H100 profile, all soft constraints off) is the largest of the kernel's
    hgemm_wgmma_flat_tc_smem_bytes<...>() over the four shapes (the kernel traps when launched with less); the staged
    path's tile sets and staging slots decide it for every instance. The formula is checked in Python for all 3,164
    kernels (PERSIST aside) and against the kernel's constexpr for every fifth of them plus those with the smallest
    and largest BN (all static_asserts of the whole set took 22 s of CI time to compile)."""
    space = load_space(SPACE)
    frame = generate(space, get_device("H100"), "fp16", soft=False).frame
    dev = get_device("H100")
    asserts = [
        "constexpr int largest(std::initializer_list<int> v) { int m = 0; for (int x : v) m = x > m ? x : m; "
        "return m; }"
    ]
    seen = set()
    extremes = {k: {int(frame[k].min()), int(frame[k].max())} for k in ("BN",)}
    for r in range(len(frame)):
        p = {k: int(v) for k, v in frame.iloc[r].items()}
        key = tuple(v for k, v in sorted(p.items()) if k != "PERSIST")
        if key in seen:
            continue
        seen.add(key)
        values = space.values(p, "fp16", dev)
        smem = int(values["smem_bytes"])
        assert smem == int(values["staged_smem"]) >= int(values["direct_smem"]), p
        if len(seen) % 5 and not any(p[k] in extremes[k] for k in extremes):
            continue
        need = []
        for s in SHAPES:
            args = space.template_name(p, "fp16", s).split("<", 1)[1].rstrip(">")
            need.append(f"autotune::hgemm_wgmma_flat_tc_smem_bytes<{args}>()")
        asserts.append(f'static_assert(largest({{{", ".join(need)}}}) == {smem}, "{p}");')
    assert len(seen) == 6328 // 2  # every instance after the hard constraints but PERSIST (the same kernel)
    cu = tmp_path / "wgmma_flat_smem.cu"
    cu.write_text('#include <initializer_list>\n#include "hgemm_wgmma_flat_tc.cuh"\n' + "\n".join(asserts) + "\n")
    r = compile_object(cu, target="sm_90a")
    assert r.returncode == 0, (r.stderr + r.stdout)[-4000:]


# The kernel's staged copy and repack replayed on the host, one thread doing every step: byte images of a batch's A and
# B (a nonzero code per element, 0xFFFF in the gaps of unpacked layouts), the slices the kernel takes of every
# problem (a_slice, b_slice), every staging chunk it copies (Runs::chunk: read `bytes` bytes at g, zero the rest),
# every repack item (repack_item, loading staging chunks and storing 16-byte pieces). Checked: every global read lies
# in the operand's 16-byte aligned extent [floor16(first element), one past the last element) (nothing past the
# last problem's end), staging chunks inside the slot; the repack reads only chunks this slice copied and stores
# every piece once, inside the tile; and every tile element (Tile::offset, the layout the descriptors read:
# tests/test_kernels_compile_wgmma.py) is the operand's element, or 0 past M, N and the slice's K.
REPLAY = r"""
#include <cstdio>
#include <cstring>
#include <vector>
#include "hgemm_wgmma_flat_tc.cuh"

namespace F = autotune::wgmma_flat_detail;

// One operand of a batch in a byte image: stored sr x sc column-major per problem, leading dimension ld, problem p at
// element p * stride from a base pointer `off` halves past a 256-byte boundary.
struct Operand {
  unsigned long long base, lo, hi;  // pointer, its 16-byte segment, one past the last element (byte addresses)
  std::vector<unsigned short> img;  // halves from lo
  int sr, sc, ld;
  long long stride;
  Operand(int sr_, int sc_, int ld_, long long stride_, int batch, int off)
      : sr(sr_), sc(sc_), ld(ld_), stride(stride_) {
    base = 0x100000ull + 2ull * off;
    lo = base & ~15ull;
    const long long last = (long long)(batch - 1) * stride + (long long)(sc - 1) * ld + sr;  // elements
    hi = base + 2ull * last;
    img.assign((hi - lo) / 2, 0xFFFF);
    for (int p = 0; p < batch; ++p)
      for (int c = 0; c < sc; ++c)
        for (int r = 0; r < sr; ++r) img[(base - lo) / 2 + p * stride + (long long)c * ld + r] = at(p, r, c);
  }
  static unsigned short at(int p, int r, int c) { return 1 + (p * 7919 + r * 131 + c * 17) % 65000; }
};

// The repack's staging loads and tile stores on the host (the kernel's helpers are __host__ __device__).
struct Load {
  const unsigned char* st;
  const char* written;
  int chunks;
  int* bad;
  __host__ __device__ uint4 operator()(int c) const {
    uint4 v = make_uint4(0, 0, 0, 0);
    if (c < 0 || c >= chunks || !written[c]) {
      if ((*bad)++ < 3) printf("  read of staging chunk %d, not copied\n", c);
      return v;
    }
    memcpy(&v, st + 16 * c, 16);
    return v;
  }
};
struct Store {
  unsigned char* tile;
  char* stored;
  int bytes;
  int* bad;
  __host__ __device__ void operator()(unsigned off, uint4 v) const {
    if (off % 16 || off + 16 > (unsigned)bytes || stored[off / 16]++) {
      if ((*bad)++ < 3) printf("  piece stored at %u twice or outside the tile\n", off);
      return;
    }
    memcpy(tile + off, &v, 16);
  }
};

// One thread's walk (F::walk) checked against Runs::chunk: chunk q is the thread's, walked once, same g and bytes.
template <int R, int THREADS> struct Walked {
  const F::Runs* r;
  int t;
  char* walked;
  int* bad;
  __host__ __device__ void operator()(int q, unsigned long long g, int bytes) const {
    unsigned long long g0;
    int b0;
    if (q % THREADS != t || q < 0 || q >= r->chunks<R>() || walked[q]++ || !r->chunk<R>(q, g0, b0) || g0 != g ||
        b0 != bytes)
      if ((*bad)++ < 3) printf("  thread %d walked chunk %d (g %llx, %d bytes): not chunk's, or twice\n", t, q, g, bytes);
  }
};

long long stats[8];  // flat slices, run slices, chunks, partial chunks, shifts seen (bit mask), items, K-major
                     // slices of more than 64 K as one flat range (KS = 128 only), tiles

template <class T, class SG, int THREADS, class Expect> int replay(const F::Runs& r, const Operand& o, Expect expect) {
  constexpr int R = SG::R;
  int bad = 0;
  std::vector<unsigned char> st(SG::BYTES, 0xAB);
  std::vector<char> written(SG::BYTES / 16, 0);
  ++stats[r.flat ? 0 : 1];
  // the chunks every thread's walk copies, against chunk<R>: each at most once, with chunk's address and bytes
  std::vector<char> walked(r.chunks<R>(), 0);
  for (int t = 0; t < THREADS; ++t) F::walk<R, THREADS>(r, t, Walked<R, THREADS>{&r, t, walked.data(), &bad});
  for (int q = 0; q < r.chunks<R>(); ++q) {
    unsigned long long g;
    int bytes;
    if (!r.chunk<R>(q, g, bytes)) continue;
    if (!walked[q] && bad++ < 3) printf("  chunk %d: no thread walked it\n", q);
    ++stats[2];
    stats[3] += bytes < 16;
    if (g % 16 || bytes < 2 || bytes > 16 || bytes % 2 || g < o.lo || g + bytes > o.hi || 16 * (q + 1) > SG::BYTES) {
      if (bad++ < 3) printf("  chunk %d: g %llx bytes %d outside [%llx, %llx) or the slot\n", q, g, bytes, o.lo, o.hi);
      continue;
    }
    memset(&st[16 * q], 0, 16);
    memcpy(&st[16 * q], reinterpret_cast<const unsigned char*>(o.img.data()) + (g - o.lo), bytes);
    written[q] = 1;
  }
  std::vector<unsigned char> tile(T::BYTES, 0xCD);
  std::vector<char> stored(T::BYTES / 16, 0);
  for (int y = 0; y < r.yl; ++y) stats[4] |= 1ll << (r.head<R>(y) & 7);
  stats[5] += F::Split<T>::ITEMS;
  const Load load{st.data(), written.data(), SG::BYTES / 16, &bad};
  const Store store{tile.data(), stored.data(), T::BYTES, &bad};
  for (int q = 0; q < F::Split<T>::ITEMS; ++q) F::repack_item<T, R>(r, q, load, store);
  for (int y = 0; y < T::Y; ++y)
    for (int x = 0; x < T::X; ++x) {
      unsigned short got;
      memcpy(&got, &tile[T::offset(x, y)], 2);
      const unsigned short want = x < r.xl && y < r.yl ? expect(x, y) : 0;
      if (got != want && bad++ < 3) printf("  (%d, %d): %04x, want %04x\n", x, y, got, want);
    }
  ++stats[7];
  return bad;
}

// Every slice of every problem of one layout: A stored M x K (TRANS_A = 0) or K x M, B K x N or N x K, leading
// dimensions rows + pad, strides packed + gap, pointers off halves past a 256-byte boundary.
template <int TA_, int TB_, int BM, int BN, int KS, int SPAD, int SWZ>
int layout(int M, int N, int K, int padA, int padB, int gap, int offA, int offB, int batch) {
  using G = F::Geo<TA_, TB_, BM, BN, KS, 2, 1, SPAD, SWZ, 1>;
  const int ar = TA_ ? K : M, ac = TA_ ? M : K, br = TB_ ? N : K, bc = TB_ ? K : N;
  const int lda = ar + padA, ldb = br + padB;
  const Operand a(ar, ac, lda, (long long)ac * lda + gap, batch, offA);
  const Operand b(br, bc, ldb, (long long)bc * ldb + gap, batch, offB);
  int bad = 0;
  for (int p = 0; p < batch; ++p)
    for (int k0 = 0; k0 < K; k0 += KS) {
      const int kl = K - k0 < KS ? K - k0 : KS;
      const F::Runs ra = F::a_slice<TA_>(a.base, lda, a.stride, p, k0, kl, M);
      const F::Runs rb = F::b_slice<TB_>(b.base, ldb, b.stride, p, k0, kl, N);
      stats[6] += (TA_ == 1 && ra.flat && M > 1 && kl > 64) + (TB_ == 0 && rb.flat && N > 1 && kl > 64);
      // A(i, k): tile (x, y) = (i, k - k0) (TRANS_A = 0) or (k - k0, i); B(k, j): (k - k0, j) or (j, k - k0)
      bad += replay<typename G::TA, typename G::SA, G::THREADS>(ra, a, [&](int x, int y) {
        return TA_ == 0 ? Operand::at(p, x, k0 + y) : Operand::at(p, k0 + x, y);
      });
      bad += replay<typename G::TB, typename G::SB, G::THREADS>(rb, b, [&](int x, int y) {
        return TB_ == 0 ? Operand::at(p, k0 + x, y) : Operand::at(p, x, k0 + y);
      });
    }
  if (bad)
    printf("MISMATCH <%d, %d, %d, %d, %d, %d, %d> M %d N %d K %d pads %d %d gap %d offsets %d %d: %d\n", TA_, TB_, BM,
           BN, KS, SPAD, SWZ, M, N, K, padA, padB, gap, offA, offB, bad);
  return bad;
}

template <int TA_, int TB_, int BM, int BN, int KS, int SPAD, int SWZ> int check() {
  int bad = 0;
  const int ms[] = {BM, BM - 14, BM - 63, 1};
  const int ns[] = {BN, BN - 6 > 0 ? BN - 6 : 1, BN - 3 > 0 ? BN - 3 : 1, 1};
  const int ks[] = {1, 7, KS, KS + 5, 2 * KS + 13, 114};
  for (int m : ms)
    for (int n : ns)
      for (int k : ks) {
        bad += layout<TA_, TB_, BM, BN, KS, SPAD, SWZ>(m, n, k, 0, 0, 0, 0, 0, 3);  // packed
        bad += layout<TA_, TB_, BM, BN, KS, SPAD, SWZ>(m, n, k, 0, 0, 0, 3, 5, 2);  // packed, pointers off 16 bytes
        bad += layout<TA_, TB_, BM, BN, KS, SPAD, SWZ>(m, n, k, 1, 3, 0, 1, 0, 2);  // odd leading dimensions
        bad += layout<TA_, TB_, BM, BN, KS, SPAD, SWZ>(m, n, k, 8, 2, 7, 0, 7, 2);  // aligned pad, gaps, odd strides
      }
  return bad;
}
"""


@needs_nvcc
def test_copies_and_repack_replayed_on_the_host(tmp_path: Path) -> None:
    """For every shape and tile geometry of a representative set (both warpgroup counts; N = 8, 24, 40, 56, 104, 120,
    128; every K-slice, 16 to 128; interleaved padded and unpadded, swizzled), sizes up to the bounds and below them
    (M = BM, BM - 14, BM - 63, 1; N likewise; K = 1, 7, KS, KS + 5, 2 KS + 13, 114: with KS = 128, K = 114 is one
    slice, the packed K-major operands one flat range) and four layouts (packed; packed from pointers off a
    16-byte boundary; odd leading dimensions; padded with gaps between problems), the kernel's copy and repack
    functions give tiles holding exactly the operands' elements and zeros, reading nothing outside the operands'
    16-byte aligned extent. Both copy modes (one flat range; a range per run), partial chunks and all eight shifts
    occur, and so do K-major slices of more than 64 values of K copied as one flat range (KS = 128)."""
    geos = [(128, 120, 64, 0, 1), (128, 104, 16, 1, 0), (64, 24, 32, 1, 0), (128, 128, 32, 0, 0), (64, 8, 64, 0, 1)]
    geos += [(128, 40, 32, 1, 0), (64, 120, 16, 0, 0), (128, 112, 64, 1, 0)]
    geos += [(128, 120, 128, 1, 0), (128, 104, 128, 0, 0), (64, 56, 128, 1, 0)]  # KS = 128: K <= 128 in one slice
    calls = [
        f"bad += check<{ta}, {tb}, {g[0]}, {g[1]}, {g[2]}, {g[3]}, {g[4]}>();"
        for ta in (0, 1)
        for tb in (0, 1)
        for g in geos
    ]
    body = "\n  ".join(calls)
    cu = tmp_path / "replay.cu"
    cu.write_text(
        REPLAY + f"int main() {{\n  int bad = 0;\n  {body}\n"
        '  printf("flat %lld runs %lld chunks %lld partial %lld shifts %llx kflat %lld\\n", stats[0], stats[1], '
        "stats[2], stats[3], stats[4], stats[6]);\n"
        f'  printf("checked {len(calls)} geometries, %lld tiles, bad %d\\n", stats[7], bad);\n  return bad != 0;\n}}\n'
    )
    exe = tmp_path / "replay"
    cmd = ["nvcc", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", f"-I{KERNELS_DIR}", "-o", str(exe), str(cu)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "warning" not in r.stderr + r.stdout, (r.stderr + r.stdout)[-4000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and f"checked {len(calls)} geometries" in run.stdout, run.stdout[-4000:]
    assert "bad 0" in run.stdout, run.stdout[-4000:]
    m = re.search(r"flat (\d+) runs (\d+) chunks (\d+) partial (\d+) shifts ([0-9a-f]+) kflat (\d+)", run.stdout)
    assert m and all(int(m.group(i)) > 0 for i in (1, 2, 3, 4, 6)) and m.group(5) == "ff", run.stdout
