// hgemm_wgmma_tc (kernels_src/hgemm_wgmma_tc.cuh: Hopper wgmma, sm_90a) with a staged flat copy for operands whose
// columns are not 16-byte aligned (packed sizes that are not multiples of 8, odd leading dimensions).
//
// Why: hgemm_wgmma_tc copies each stored column of a K-slice straight into wgmma's canonical layout, with the widest
// cp.async the columns' alignment allows. Where they are 16-byte aligned it reaches 0.90 of the HBM roofline on an
// H100 (fp16 NN n = 120, 128); where they are not it falls back to 8- or 4-byte cp.async (even n not a multiple of
// 8) or synchronous shifted loads (odd n) and drops to 0.49 and 0.52 (n = 113, 114; cuBLAS 0.57 and 0.76). This
// kernel copies such operands with 16-byte cp.async whatever their alignment, into a staging buffer, and repacks
// them into the same tiles from shared memory. The GPU tier (tests/gpu/test_hgemm_wgmma_flat.py) and
// scripts/check_wgmma.py --space hgemm_wgmma_flat_tc check it (first run on an H100: results/wgmma_flat_h100).
//
// Everything but the copies is hgemm_wgmma_tc's (this file includes it: the Tile layouts, the descriptors, the wgmma
// specializations, the ring's unit order, the epilogue; read its opening comment first). C = alpha * op(A) * op(B) +
// beta * C, column-major, `strided` convention, fp16 in and out, fp32 accumulation; any M, N, K, batch and layout.
//
// 0. Which path, per launch (uniform): M > BM, N > BN or K < 1: the per-element path. Else, when both operands'
//    columns are 16-byte aligned (hgemm_wgmma_tc's copy_width == 8 for A and B: pointer, leading dimension and batch
//    stride), hgemm_wgmma_tc's own ring (wgmma_detail::run, unchanged: no staging there is faster). Otherwise the
//    staged path below, for both operands (the aligned one's repack is then a plain 16-byte copy).
// 1. Runs. One operand's K-slice (k0 = s * KS, kl = min(KS, K - k0) values of K) is, in its stored orientation
//    (X contiguous, as in hgemm_wgmma_tc), yl runs of xl halves, run y at src + y * ld:
//      A stored M x K (TRANS_A = 0): run y = column k0 + y of A,        xl = M,  yl = kl, src = a + k0 * lda
//      A stored K x M (TRANS_A = 1): run y = rows k0.. of column y,    xl = kl, yl = M,  src = a + k0
//      B stored K x N (TRANS_B = 0): run y = rows k0.. of column y,    xl = kl, yl = N,  src = b + k0
//      B stored N x K (TRANS_B = 1): run y = column k0 + y of B,        xl = N,  yl = kl, src = b + k0 * ldb
//    The slice is ONE contiguous range of yl * xl halves exactly when ld == xl (or yl == 1): A in NN/NT with
//    lda == M (every slice: KS columns of A are KS * M consecutive halves), B in NT/TT with ldb == N, and the
//    K-major operands (A in TN/TT, B in NN/TN) when the whole K fits one slice (K <= KS and ld == K: the whole
//    problem's operand is one range). Other K-major slices are yl runs of kl halves, ld apart (B in NN: N runs).
//    KS = 128 makes the packed K-major operands one range for every K <= 128 (B in NN at n = 98..128: one range of
//    n * n halves instead of two slices of n runs each at KS = 64), at the cost of staging slots of Y runs of R = 17
//    chunks (Stage<128, Y>) and tiles 128 deep in K: at BM = 128, BN >= 96 only TILES = 1, STAGES = 2 fits the
//    227 KB (the space's max_smem; BN >= 120 with CDIRECT = 1 only), one block per SM. KS = 128 is correct on an
//    H100 and slower there than KS <= 64 at every size tried (results/wgmma_ks128_h100).
// 2. Staged copy (Runs::chunk). Flat: the 16-byte chunks from the 16-byte aligned address at or below the range's
//    start up to its end, chunk q into staging chunk q. Runs: run y's chunks likewise into staging chunks R y ..
//    R y + R - 1 (R = 2 ((X + 8) / 16) + 1 >= X / 8 + 1: the most chunks a run of X halves covers, rounded up to
//    odd so that the repack's reads of eight consecutive runs fall in eight different 16-byte bank groups). Every
//    chunk is one cp.async.cg of 16 bytes reading only `bytes` of them (src-size: the bytes up to the end of its
//    range or run, the rest zero-filled), so no byte past a range's end is ever read, and nothing past the last
//    problem's end. The head bytes before a range's start (in the same 16-byte segment) belong to the previous
//    column or problem, or lie before the operand's first element in the segment that holds it (a 16-byte segment
//    never straddles an allocation: CUDA's allocations start on 256-byte boundaries); they are read, never used.
//    Where a run's staging chunks exceed the chunks it covers, those are not copied (and never read).
// 3. Repack (segment). Element (x, y) of the slice is staging half head(y) + x, head(y) = mis + y * xl (flat: mis =
//    the range start's misalignment in halves) or 8 R y + mis_y (runs: mis_y = (mis + y * ld) mod 8, run y's own).
//    A thread takes P consecutive 16-byte pieces of one tile row y (x = x0 .. x0 + 8 P - 1): it loads the P + 1
//    aligned staging chunks that hold their valid halves (only those: a chunk holding none is never read, so nothing
//    outside what this slice copied), shifts them down by head(y) + x0 mod 8 halves with selects and funnel shifts
//    (no indexing by a runtime value: no local memory), zeroes every half past xl, and stores each piece with one
//    16-byte st.shared at Tile::offset(x, y) (hgemm_wgmma_tc's interleaved or 128-byte swizzled layout). Rows y >=
//    yl and pieces past xl are stored as zeros: every element of the tile (every byte the descriptors address; the
//    slab padding of SPAD = 1 is never read) is rewritten for every unit, so the padding past M, N and kl that
//    wgmma's k-steps multiply is zero (the last slice of a problem zeroes K past kl; a previous problem's or
//    slice's values never survive). Threads take rows fastest: eight consecutive threads read chunks of eight
//    consecutive runs (runs: R y + c, R odd, no bank conflicts; flat: xl / 8 chunks apart, mostly distinct) and
//    write 16-byte pieces 16 bytes apart (interleaved: consecutive y are consecutive 16 bytes of a slab; swizzled:
//    one 128-byte row each, its chunk XOR y: distinct bank groups).
// 4. Pipeline: STAGES staging slots (raw bytes, unit v in slot v % STAGES) and TILES sets of A and B tiles (unit v in
//    set v % TILES); a space parameter, as neither is better on paper:
//      TILES = 2: the repack of unit u + 1 runs on the CUDA cores while the tensor cores multiply unit u (a second
//                 tile set: more shared memory). Iteration u: wgmmas of u (set u % 2), commit; cp.async of unit
//                 u + STAGES into slot u % STAGES; wait_group STAGES - 1 (unit u + 1 landed, this thread's part);
//                 barrier [a]; repack u + 1 into set (u + 1) % 2; fence.proxy.async; wgmma.wait_group 0;
//                 epilogue of u if last slice; barrier [b].
//      TILES = 1: repack right before use (one tile set, so larger KS or STAGES fit two blocks per SM). Iteration
//                 u: wait_group STAGES - 1 (unit u landed); barrier [a]; repack u; fence.proxy.async; barrier [b];
//                 wgmmas of u, commit; cp.async of unit u + STAGES into slot u % STAGES; wgmma.wait_group 0;
//                 epilogue of u if last slice.
//    Either way every staging slot is loading while the block repacks and multiplies (STAGES - 1 to STAGES units in
//    flight, against STAGES - 1 in hgemm_wgmma_tc), as a slot is free once its repack is done, not after its wgmmas.
//    Why each step is safe:
//    - Staging RAW: a unit's cp.async are one commit group; wait_group leaves STAGES - 1 younger groups pending
//      (one group per unit, committed even when empty; TILES = 2 waits after committing unit u + STAGES, so unit
//      u + 1 is done; TILES = 1 at the top of iteration u, STAGES + u groups committed, so unit u), then barrier [a]
//      makes every thread's copies visible to the repack's loads (generic proxy both: no proxy fence needed).
//    - Staging WAR: slot u % STAGES is refilled only after a barrier that follows every thread's repack of unit u
//      (TILES = 2: [b] of iteration u - 1, or the prologue's; TILES = 1: [b] of iteration u).
//    - Tile RAW across proxies: the repack's st.shared are generic-proxy writes and wgmma reads through the async
//      proxy, so each thread issues fence.proxy.async after its repack stores, then a barrier ([b]) precedes the
//      wgmmas (as hgemm_wgmma_tc does after its cp.async).
//    - Tile WAR: a set is rewritten only after every warpgroup's wgmma.wait_group 0 of the unit that last read it
//      and a barrier (TILES = 2: set (u + 1) % 2 was read by unit u - 1, waited for before [b] of iteration u - 1;
//      TILES = 1: unit u - 1, waited for before [a] of iteration u).
//    - The shared C (CDIRECT = 0) has its own region; the epilogue's barrier orders its writes and reads, and it is
//      written again only at the next problem's last slice, two barriers later.
//    - Every barrier is reached by all threads: the loop bounds, the last-slice test and "unit exists" are uniform.
//    - wgmma's .aligned instructions run with converged warps: wgmma.fence and the wgmmas right after a barrier,
//      wgmma.wait_group after __syncwarp (the copies' and the repack's loops diverge).
//
// Tuning parameters (template arguments): hgemm_wgmma_tc's BM, BN, KS, SPAD, SWZ, CDIRECT (the tiles, the wgmma, C;
// KS 16, 32, 64 or 128), and
//   STAGES   staging slots of the staged path (>= 2), and the ring stages of the aligned path
//   TILES    1 or 2 tile sets (section 4)
// Launch: block (2 * BM, 1, 1); grid (g, 1, 1) for any g >= 1; dynamic shared memory
// hgemm_wgmma_flat_tc_smem_bytes<...>() bytes: the larger of the two paths' (a launch with less traps). sm_90a only.
#pragma once
#include "hgemm_wgmma_tc.cuh"

namespace autotune {
namespace wgmma_flat_detail {

using common::cdiv;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::smem_u32;
using wgmma_detail::fence_operand;
using wgmma_detail::fence_proxy_async;
using wgmma_detail::Mma;
using wgmma_detail::st_shared_v4;
using wgmma_detail::wgmma_commit;
using wgmma_detail::wgmma_fence;
using wgmma_detail::epilogue;
using wgmma_detail::wgmma_wait;

// ------------------------------------------------------------------------------------------------- runs
// Staging of one operand's K-slice of at most Y_ runs of at most X_ halves: Y_ runs of R 16-byte chunks (section 2).
// A flat range of Y_ * X_ halves needs at most Y_ * X_ / 8 + 1 <= Y_ * R chunks.
template <int X_, int Y_> struct Stage {
  static constexpr int R = 2 * ((X_ + 8) / 16) + 1;
  static constexpr int BYTES = 16 * Y_ * R;
};

// One operand's K-slice as yl runs of xl halves, run y at byte address a0 + 2 * ld * y (section 1); host too (the
// nvcc tier replays the copies and the repack on the host against every layout: tests/test_kernels_compile_wgmma_flat.py).
struct Runs {
  unsigned long long a0;  // byte address of element (0, 0)
  long long ld;           // halves from one run to the next
  int xl, yl;
  bool flat;  // the slice is one contiguous range of yl * xl halves
  int mis;    // a0's misalignment to 16 bytes, in halves

  __host__ __device__ __forceinline__ Runs(unsigned long long a, long long ld_, int xl_, int yl_)
      : a0(a), ld(ld_), xl(xl_), yl(yl_), flat(ld_ == xl_ || yl_ == 1), mis(static_cast<int>((a >> 1) & 7)) {}

  // Staging chunks the copy walks (some of them skipped where runs cover fewer than R).
  template <int R> __host__ __device__ __forceinline__ int chunks() const {
    if (flat) return static_cast<int>((a0 + 2ull * yl * xl - (a0 & ~15ull) + 15) >> 4);
    return yl * R;
  }
  // Staging chunk q: false where it holds nothing; else the global 16-byte aligned byte address g and the bytes
  // (2..16) of it that lie inside the range or run (the rest is zero-filled, never read from global memory).
  template <int R> __host__ __device__ __forceinline__ bool chunk(int q, unsigned long long& g, int& bytes) const {
    unsigned long long start = a0, end;
    int c = q;
    if (flat) {
      end = a0 + 2ull * yl * xl;
    } else {
      const int y = q / R;
      c = q - y * R;
      start = a0 + 2ull * static_cast<unsigned long long>(ld * y);
      end = start + 2ull * xl;
    }
    g = (start & ~15ull) + 16ull * c;
    if (g >= end) return false;
    bytes = end - g < 16 ? static_cast<int>(end - g) : 16;
    return true;
  }
  // Staging half of element (0, y) (section 3).
  template <int R> __host__ __device__ __forceinline__ int head(int y) const {
    return flat ? mis + y * xl : 8 * R * y + ((mis + y * static_cast<int>(ld & 7)) & 7);
  }
};

// Problem pg's slice k0.. (kl values of K) of A and of B as runs (section 1's table); byte addresses, host too.
template <int TRANS_A>
__host__ __device__ __forceinline__ Runs a_slice(unsigned long long A, int lda, long long strideA, long long pg, int k0,
                                                 int kl, int M) {
  const unsigned long long a = A + 2ull * static_cast<unsigned long long>(pg * strideA);
  return TRANS_A == 0 ? Runs(a + 2ull * static_cast<unsigned long long>((long long)k0 * lda), lda, M, kl)
                      : Runs(a + 2ull * k0, lda, kl, M);
}
template <int TRANS_B>
__host__ __device__ __forceinline__ Runs b_slice(unsigned long long B, int ldb, long long strideB, long long pg, int k0,
                                                 int kl, int N) {
  const unsigned long long b = B + 2ull * static_cast<unsigned long long>(pg * strideB);
  return TRANS_B == 0 ? Runs(b + 2ull * k0, ldb, kl, N)
                      : Runs(b + 2ull * static_cast<unsigned long long>((long long)k0 * ldb), ldb, N, kl);
}

// The P 16-byte pieces x0 .. x0 + 8 P - 1 of tile row y (section 3): load(c) returns staging chunk c (called only
// for chunks holding a valid half of them); halves past xl and rows past yl are zeros. Host too.
template <int R, int P, class Load>
__host__ __device__ __forceinline__ void segment(const Runs& r, int y, int x0, Load load, uint4 (&out)[P]) {
  int nv = y < r.yl ? r.xl - x0 : 0;  // valid halves from x0 on
  nv = nv < 0 ? 0 : (nv > 8 * P ? 8 * P : nv);
  const int h = r.template head<R>(y) + x0, s = h & 7, c0 = h >> 3;
  unsigned w[4 * P + 4];
#pragma unroll
  for (int j = 0; j <= P; ++j) {
    const uint4 v = nv > 0 && 8 * j < s + nv ? load(c0 + j) : make_uint4(0u, 0u, 0u, 0u);
    w[4 * j] = v.x, w[4 * j + 1] = v.y, w[4 * j + 2] = v.z, w[4 * j + 3] = v.w;
  }
  const int q = s >> 1;  // whole words to drop, then one half more when s is odd
  unsigned v[4 * P + 1];
#pragma unroll
  for (int e = 0; e <= 4 * P; ++e) v[e] = q == 0 ? w[e] : q == 1 ? w[e + 1] : q == 2 ? w[e + 2] : w[e + 3];
  if (s & 1) {
#pragma unroll
    for (int e = 0; e < 4 * P; ++e) v[e] = (v[e] >> 16) | (v[e + 1] << 16);
  }
  if (nv < 8 * P) {  // a ragged end (or nothing): zero the halves from nv on
#pragma unroll
    for (int e = 0; e < 4 * P; ++e) v[e] &= (2 * e < nv ? 0xFFFFu : 0u) | (2 * e + 1 < nv ? 0xFFFF0000u : 0u);
  }
#pragma unroll
  for (int i = 0; i < P; ++i) out[i] = make_uint4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
}

// How a block's threads split the repack of tile T: item q is P consecutive pieces (up to 4: P + 1 chunk loads for
// P pieces, at most the tile row's) of row y = q mod Y, from x0 = 8 P (q / Y) on (rows fastest, section 3).
template <class T> struct Split {
  static constexpr int CX = T::X / 8, P = CX >= 4 ? 4 : CX, SEGS = cdiv(CX, P), ITEMS = T::Y * SEGS;
};
// Item q of the repack of tile T: store(offset, piece) at Tile::offset of each of its pieces (host too).
template <class T, int R, class Load, class Store>
__host__ __device__ __forceinline__ void repack_item(const Runs& r, int q, Load load, Store store) {
  using S = Split<T>;
  const int sg = q / T::Y, y = q - sg * T::Y, x0 = 8 * S::P * sg;
  uint4 out[S::P];
  segment<R, S::P>(r, y, x0, load, out);
#pragma unroll
  for (int i = 0; i < S::P; ++i)
    if (S::CX % S::P == 0 || x0 + 8 * i < T::X) store(T::offset(x0 + 8 * i, y), out[i]);
}

// ------------------------------------------------------------------------------------------------ device
__device__ __forceinline__ void cp_async_16(unsigned dst, unsigned long long src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ uint4 ld_shared_v4(unsigned a) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a)
               : "memory");
  return v;
}

// The chunks thread t of THREADS copies of one slice (section 2): copy(q, g, bytes) for each staging chunk q = t,
// t + THREADS, ... that holds something, with chunk<R>(q)'s g and bytes, walked incrementally (no division or 64-bit
// multiply per chunk: the copy loop issued more instructions than the copies' bytes allow). Host too (the nvcc tier
// checks it against chunk<R> for every thread).
template <int R, int THREADS, class Copy>
__host__ __device__ __forceinline__ void walk(const Runs& r, int t, Copy copy) {
  if (r.flat) {
    const unsigned long long lo = r.a0 & ~15ull, end = r.a0 + 2ull * r.yl * r.xl;
    const int total = static_cast<int>((end - lo + 15) >> 4);
#pragma unroll 1
    for (int q = t; q < total; q += THREADS) {
      const unsigned long long g = lo + 16ull * q, left = end - g;
      copy(q, g, left < 16 ? static_cast<int>(left) : 16);
    }
    return;
  }
  constexpr int DY = THREADS / R, DC = THREADS % R;  // q += THREADS: run y += DY, chunk c += DC (carry into y)
  const unsigned long long run_bytes = 2ull * static_cast<unsigned long long>(r.ld);
  int y = t / R, c = t - y * R;
  unsigned long long start = r.a0 + run_bytes * y;
  const unsigned long long step = run_bytes * DY;
  const int total = r.yl * R;
#pragma unroll 1
  for (int q = t; q < total; q += THREADS) {
    const unsigned long long g = (start & ~15ull) + 16ull * c, end = start + 2ull * r.xl;
    if (g < end) copy(q, g, end - g < 16 ? static_cast<int>(end - g) : 16);
    start += step;
    c += DC;
    if (c >= R) {
      c -= R;
      start += run_bytes;
    }
  }
}

// The staged copy of one slice into the staging buffer at shared address st (section 2).
template <int R, int THREADS> __device__ __forceinline__ void stage(unsigned st, const Runs& r, int t) {
  walk<R, THREADS>(r, t, [&](int q, unsigned long long g, int bytes) { cp_async_16(st + 16 * q, g, bytes); });
}

// The repack of one slice from the staging buffer at st into tile T at shared address tile (section 3).
template <class T, int R, int THREADS>
__device__ __forceinline__ void repack(unsigned tile, unsigned st, const Runs& r, int t) {
#pragma unroll 1
  for (int q = t; q < Split<T>::ITEMS; q += THREADS)
    repack_item<T, R>(
        r, q, [&](int c) { return ld_shared_v4(st + 16 * c); },
        [&](unsigned off, uint4 v) { st_shared_v4(tile + off, v); });
}

// Compile-time geometry: hgemm_wgmma_tc's tiles (G) plus the staging slots (section 4).
template <int TRANS_A, int TRANS_B, int BM, int BN, int KS, int STAGES, int TILES, int SPAD, int SWZ, int CDIRECT>
struct Geo {
  using G = wgmma_detail::Geo<TRANS_A, TRANS_B, BM, BN, KS, STAGES, SPAD, SWZ, CDIRECT>;
  using TA = typename G::TA;
  using TB = typename G::TB;
  using SA = Stage<TRANS_A == 0 ? BM : KS, TRANS_A == 0 ? KS : BM>;  // A: X = M, Y = K | X = K, Y = M
  using SB = Stage<TRANS_B == 0 ? KS : BN, TRANS_B == 0 ? BN : KS>;  // B: X = K, Y = N | X = N, Y = K
  static constexpr int THREADS = G::THREADS;
  static constexpr int SET = TA::BYTES + TB::BYTES;    // one tile set (multiples of 1024 with SWZ)
  static constexpr int SLOT = SA::BYTES + SB::BYTES;   // one staging slot (a multiple of 16)
  static constexpr int STAGED = G::LEAD + TILES * SET + STAGES * SLOT + 16 * G::QC;
  static constexpr int SMEM = STAGED > G::SMEM ? STAGED : G::SMEM;  // the larger of the two paths
};

// ------------------------------------------------------------------------------------------------- main
// The staged path (M <= BM, N <= BN, K >= 1; sections 1-4).
template <int TRANS_A, int TRANS_B, int BM, int BN, int KS, int STAGES, int TILES, int SPAD, int SWZ, int CDIRECT>
__device__ __forceinline__ void run(int M, int N, int K, float alpha, const __half* A, int lda, long long strideA,
                                    const __half* B, int ldb, long long strideB, float beta, __half* C, int ldc,
                                    long long strideC, int batch, unsigned char* smem) {
  using F = Geo<TRANS_A, TRANS_B, BM, BN, KS, STAGES, TILES, SPAD, SWZ, CDIRECT>;
  using TA = typename F::TA;
  using TB = typename F::TB;
  constexpr int THREADS = F::THREADS, RA = F::SA::R, RB = F::SB::R;
  const unsigned base = smem_u32(smem);
  const unsigned lead = SWZ ? ((base + 1023u) & ~1023u) - base : 0u;  // swizzle atoms on 1024-byte boundaries
  const unsigned sets = base + lead;                                   // TILES tile sets, then STAGES slots
  const unsigned slots = sets + TILES * F::SET;
  __half* const sC = reinterpret_cast<__half*>(smem + lead + TILES * F::SET + STAGES * F::SLOT);

  const bool packC = !CDIRECT && beta == 0.0f && ldc == M && (strideC == (long long)M * N || batch == 1);
  const int KT = (K + KS - 1) / KS;
  const int t = threadIdx.x, wg = t >> 7;
  const unsigned long long gA = reinterpret_cast<unsigned long long>(A), gB = reinterpret_cast<unsigned long long>(B);
  auto slices = [&](long long pg, int s, Runs& ra, Runs& rb) {
    const int k0 = s * KS, kl = min(KS, K - k0);
    ra = a_slice<TRANS_A>(gA, lda, strideA, pg, k0, kl, M);
    rb = b_slice<TRANS_B>(gB, ldb, strideB, pg, k0, kl, N);
  };

  // Next unit to copy (problem ip, slice is, slot islot) and to repack (rp, rs, slot rslot, set rset).
  long long ip = blockIdx.x, rp = blockIdx.x;
  int is = 0, islot = 0, rs = 0, rslot = 0, rset = 0;
  auto issue = [&]() {
    if (ip < batch) {
      Runs ra(0, 0, 0, 0), rb(0, 0, 0, 0);
      slices(ip, is, ra, rb);
      const unsigned sa = slots + islot * F::SLOT;
      stage<RA, THREADS>(sa, ra, t);
      stage<RB, THREADS>(sa + F::SA::BYTES, rb, t);
    }
    cp_async_commit();  // one group per unit, even when empty (the waits count units)
    if (++is == KT) {
      is = 0;
      ip += gridDim.x;
    }
    if (++islot == STAGES) islot = 0;
  };
  auto repack_next = [&]() {
    if (rp < batch) {
      Runs ra(0, 0, 0, 0), rb(0, 0, 0, 0);
      slices(rp, rs, ra, rb);
      const unsigned sa = slots + rslot * F::SLOT, ta = sets + rset * F::SET;
      repack<TA, RA, THREADS>(ta, sa, ra, t);
      repack<TB, RB, THREADS>(ta + TA::BYTES, sa + F::SA::BYTES, rb, t);
    }
    fence_proxy_async();  // this thread's repack stores, visible to wgmma (async proxy)
    if (++rs == KT) {
      rs = 0;
      rp += gridDim.x;
    }
    if (++rslot == STAGES) rslot = 0;
    if (++rset == TILES) rset = 0;
  };

#pragma unroll 1
  for (int s = 0; s < STAGES; ++s) issue();  // units 0 .. STAGES - 1
  if constexpr (TILES == 2) {
    cp_async_wait<STAGES - 1>();  // unit 0 landed (this thread's copies)
    __syncthreads();              // ... every thread's
    repack_next();                // unit 0 into set 0
    __syncthreads();              // set 0 complete for the wgmmas; slot 0 free
  }

  float acc[BN / 2];
#pragma unroll
  for (int r = 0; r < BN / 2; ++r) acc[r] = 0.0f;
  long long pg = blockIdx.x;
  int cs = 0, cset = 0;
#pragma unroll 1
  while (pg < batch) {
    if constexpr (TILES == 1) {
      cp_async_wait<STAGES - 1>();  // unit u landed (this thread's copies)
      __syncthreads();              // [a] every thread's; every warpgroup's wgmmas of u - 1 are complete
      repack_next();                // unit u into the one set
      __syncthreads();              // [b] the set complete for the wgmmas; slot u % STAGES free
    }
    const unsigned ta = sets + cset * F::SET, tb = ta + TA::BYTES;
#pragma unroll
    for (int r = 0; r < BN / 2; ++r) fence_operand(acc[r]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KS / 16; ++kk) {
      const unsigned long long da = wgmma_detail::a_descriptor<TRANS_A, TA, SWZ>(ta, wg, kk);
      const unsigned long long db = wgmma_detail::b_descriptor<TRANS_B, TB, SWZ>(tb, kk);
      Mma<BN, TRANS_A == 0 ? 1 : 0, TRANS_B>::run(acc, da, db, cs > 0 || kk > 0);
    }
    wgmma_commit();
    issue();  // unit u + STAGES into slot u % STAGES (its repack preceded barrier [b]), while the tensor cores work
    if constexpr (TILES == 2) {
      cp_async_wait<STAGES - 1>();  // unit u + 1 landed (this thread's copies)
      __syncthreads();              // [a] every thread's
      repack_next();                // unit u + 1 into the other set, while the tensor cores work on u
    }
    __syncwarp();  // (the copies' and the repack's loops diverge; wgmma.wait_group is .aligned)
    wgmma_wait<0>();
#pragma unroll
    for (int r = 0; r < BN / 2; ++r) fence_operand(acc[r]);
    if (cs == KT - 1)  // the problem's last slice (uniform)
      epilogue<BN>(acc, M, N, alpha, beta, C, ldc, strideC, pg, packC, sC, t, THREADS);
    if constexpr (TILES == 2) __syncthreads();  // [b] set (u + 1) % 2 complete; slot (u + 1) % STAGES free
    if (++cs == KT) {
      cs = 0;
      pg += gridDim.x;
    }
    if (++cset == TILES) cset = 0;
  }
  cp_async_wait<0>();  // nothing left in flight when the block exits
}

}  // namespace wgmma_flat_detail

// Dynamic shared memory an instance needs, bytes.
template <int TRANS_A, int TRANS_B, int BM, int BN, int KS, int STAGES, int TILES, int SPAD, int SWZ, int CDIRECT>
__host__ __device__ constexpr int hgemm_wgmma_flat_tc_smem_bytes() {
  return wgmma_flat_detail::Geo<TRANS_A, TRANS_B, BM, BN, KS, STAGES, TILES, SPAD, SWZ, CDIRECT>::SMEM;
}

// At least 512 resident threads per SM: registers capped at 128 per thread (the space's blocks_per_sm assumes it).
template <int TRANS_A, int TRANS_B, int BM, int BN, int KS, int STAGES, int TILES, int SPAD, int SWZ, int CDIRECT>
__global__ void __launch_bounds__(2 * BM, 512 / (2 * BM))
    hgemm_wgmma_flat_tc(int M, int N, int K, float alpha, const __half* A, int lda, long long strideA, const __half* B,
                        int ldb, long long strideB, float beta, __half* C, int ldc, long long strideC, int batch) {
  static_assert(BM == 64 || BM == 128, "BM is 64 or 128: one or two warpgroups of 64 rows");
  static_assert(BN >= 8 && BN <= 128 && BN % 8 == 0, "BN (wgmma's N) is a multiple of 8 up to 128");
  static_assert(KS >= 16 && KS <= 128 && KS % 16 == 0,
                "KS is a multiple of 16 (wgmma's K) up to 128 (the range the nvcc tier's host checks replay)");
  static_assert(STAGES >= 2 && STAGES <= 8, "at least two staging slots (the aligned path's ring stages too)");
  static_assert(TILES == 1 || TILES == 2, "one or two tile sets");
  static_assert(SPAD == 0 || SPAD == 1, "SPAD is 0 or 1");
  static_assert(SWZ == 0 || (SWZ == 1 && KS == 64 && SPAD == 0), "SWZ = 1 (128-byte swizzle) takes KS = 64, SPAD = 0");
  static_assert(CDIRECT == 0 || CDIRECT == 1, "CDIRECT is 0 or 1");
  constexpr int SMEM = hgemm_wgmma_flat_tc_smem_bytes<TRANS_A, TRANS_B, BM, BN, KS, STAGES, TILES, SPAD, SWZ, CDIRECT>();
  static_assert(SMEM <= 227 * 1024, "over the 227 KB of shared memory a block may have");
  extern __shared__ __align__(1024) unsigned char wgmma_flat_tc_smem[];
  if (M <= 0 || N <= 0 || batch <= 0) return;  // uniform: no thread reaches a barrier
  if (M > BM || N > BN || K < 1) {
    common::gemm_per_element<TRANS_A, TRANS_B, __half>(M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc,
                                                       strideC, batch, (long long)blockIdx.x * blockDim.x + threadIdx.x,
                                                       (long long)gridDim.x * blockDim.x);
    return;
  }
  unsigned dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  if (dyn < static_cast<unsigned>(SMEM)) __trap();  // launched with too little dynamic shared memory: fail loudly
  if (wgmma_detail::copy_width(A, lda, strideA, batch) == 8 && wgmma_detail::copy_width(B, ldb, strideB, batch) == 8)
    wgmma_detail::run<TRANS_A, TRANS_B, BM, BN, KS, STAGES, SPAD, SWZ, CDIRECT>(
        M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch, wgmma_flat_tc_smem);
  else
    wgmma_flat_detail::run<TRANS_A, TRANS_B, BM, BN, KS, STAGES, TILES, SPAD, SWZ, CDIRECT>(
        M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch, wgmma_flat_tc_smem);
}

}  // namespace autotune
