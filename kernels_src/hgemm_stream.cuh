// Tensor-core batched HGEMM for the memory-bound sizes (M, N, K up to the bounds, built for n = 33..128): a
// persistent grid that streams problems through a ring of shared-memory slots.
//
// Why: a batched GEMM at these sizes moves more bytes than it computes, so it runs at the speed of its loads, and a
// block that loads a problem, computes it and then loads the next leaves the memory idle in between (the flat
// kernel at n = 65 and 113 and the mma ladder at 128 reached 49-76 % of DRAM bandwidth). Here every block keeps
// STAGES - 1 groups of problems in flight at all times:
//
//   1. Ring. A block walks groups of PPB consecutive problems (group g = blockIdx.x + it * gridDim.x). Shared memory
//      holds STAGES slots; a slot holds the padded tiles of A and B of one group. Right after the barrier that
//      opens group it, the block issues the copies of group it + STAGES - 1 into the slot group it - 1 has just
//      left, so they are in flight during this group's fix-up, math and stores.
//   2. Copies straight into the tiles, one stored column per tile row (A: rows = the columns of the stored matrix,
//      the operand keeps its orientation in memory). Each stored column is copied as the 16-byte aligned superset of
//      its elements (the extra bytes lie in the same 16-byte segments as the column's first and last elements, so
//      they are mapped memory): BULK = 0 with cp.async 16 bytes per thread (no registers held), BULK = 1 with one
//      cp.async.bulk per column completing on the slot's mbarrier (one instruction per column). A tile row is an
//      odd number of 16-byte chunks long, so the 8 rows one ldmatrix phase reads lie in 8 different bank groups
//      (ldmatrix and ldmatrix.trans conflict-free at every n, where the flat column-major layout has 8-way
//      conflicts at n = 64 and 128).
//   3. Fix-up (only where a column does not start on a 16-byte boundary or its length is not a multiple of 8, e.g.
//      every n % 8 != 0 of a packed batch): each tile row is shifted in place by its column's misalignment (a warp
//      per row set: two 16-byte loads, selects and funnel shifts, one 16-byte store per chunk) and zeroed past the
//      column's length (K must be zero padded). A packed batch with n % 8 == 0 takes no fix-up: no repack at all.
//   4. Tensor cores compute C^T = op(B)^T op(A)^T with mma.sync.m16n8k16 (fp16 in, fp32 accumulate): warps take
//      (problem, warp tile) items in turn; a warp tile is WN x WM blocks of 16 x 16 of C^T (N x M), so a thread's
//      accumulator pairs run along i, contiguous in column-major C.
//   5. C straight from the accumulators: alpha * acc as half2 (4-byte) stores where C's columns are 4-byte aligned,
//      element stores otherwise; beta == 0 never reads C.
//
// C = alpha * op(A) * op(B) + beta * C, column-major, BLAS semantics, `strided` convention; fp16 A, B, C with fp32
// alpha, beta and accumulation. Any M, N, K >= 1 (sizes above the bounds take a correct one-thread-per-element
// path), any layout (leading dimensions, strides and alignments: the fix-up takes any misalignment), any batch.
//
// Tuning parameters (template arguments):
//   BM, BN, BK  compile-time bounds of M, N, K (size the slots; tiles are padded to the warp tiles and to 16 in K)
//   WM, WN      warp tile: WM blocks of 16 along M by WN blocks of 16 along N (WM * WN * 8 accumulators a thread)
//   NWARPS      warps per block
//   PPB         problems per group (per slot)
//   STAGES      slots in the ring (>= 2): STAGES - 1 groups in flight during the work on one
//   BULK        0: cp.async 16 bytes per thread (commit/wait groups); 1: cp.async.bulk per column + mbarrier
// Launch: block (32 * NWARPS, 1, 1); grid (g, 1, 1) for any g >= 1 (persistent: about the resident blocks);
// dynamic shared memory hgemm_stream_smem_bytes<...>() bytes (spaces/hgemm_stream.yaml computes the same; a launch
// with less traps).
#pragma once
#include <cuda_fp16.h>

#include "common.cuh"

namespace autotune {
namespace stream_detail {

using common::cdiv;
using addr_t = unsigned long long;     // a global address (no <stdint.h>: NVRTC has no C library headers)
using barrier_t = unsigned long long;  // an mbarrier object in shared memory
using ptx::cp_async16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::ldmatrix_x4;
using ptx::mma16816;
using ptx::smem_u32;
using ptx::st_shared_v4;

__host__ __device__ constexpr int odd_up(int x) { return x | 1; }
__host__ __device__ constexpr int imax(int a, int b) { return a > b ? a : b; }

// Compile-time geometry of one instance. IP, JP, KP: padded M, N, K. A tile row holds one stored column; its length
// in 16-byte chunks is odd (conflict-free ldmatrix) and covers both the padded extent the math reads and a column's
// 16-byte superset (at most cdiv(bound + 7, 8) chunks).
template <int TA, int TB, int BM, int BN, int BK, int WM, int WN, int NWARPS, int PPB, int STAGES, int BULK>
struct Geo {
  static constexpr int THREADS = 32 * NWARPS;
  static constexpr int IP = cdiv(BM, 16 * WM) * 16 * WM;
  static constexpr int JP = cdiv(BN, 16 * WN) * 16 * WN;
  static constexpr int KP = cdiv(BK, 16) * 16;
  static constexpr int CI = odd_up(imax(IP / 8, cdiv(BM + 7, 8)));  // chunks of a row along M, N, K
  static constexpr int CJ = odd_up(imax(JP / 8, cdiv(BN + 7, 8)));
  static constexpr int CK = odd_up(imax(KP / 8, cdiv(BK + 7, 8)));
  // A stored M x K (TA = 0): tile rows k, each M long; stored K x M (TA = 1): rows i, each K long. B likewise.
  static constexpr int A_CPR = TA == 0 ? CI : CK, A_ROWS = TA == 0 ? KP : IP;
  static constexpr int B_CPR = TB == 0 ? CK : CJ, B_ROWS = TB == 0 ? JP : KP;
  static constexpr int A_LD = 8 * A_CPR, B_LD = 8 * B_CPR;  // halves
  static constexpr int A_TILE = A_ROWS * A_LD, B_TILE = B_ROWS * B_LD;
  static constexpr int SLOT = PPB * (A_TILE + B_TILE);  // halves
  static constexpr int SMEM = 2 * STAGES * SLOT + (BULK ? 8 * STAGES : 0);
  static constexpr int II = IP / (16 * WM), JJ = JP / (16 * WN);  // warp tiles per problem along M and N
};

// x / d by a multiply-high: exact for the x < 2^20 and d <= 2^12 used here (x * (m * d - 2^32) < 2^32).
struct FastDiv {
  unsigned m;
  int d;
  __device__ __forceinline__ explicit FastDiv(int d_) : m(d_ > 1 ? static_cast<unsigned>(0xFFFFFFFFu / d_ + 1) : 0u), d(d_) {}
  __device__ __forceinline__ int operator()(int x) const {
    return d > 1 ? static_cast<int>(__umulhi(static_cast<unsigned>(x), m)) : x;
  }
};

// One operand as stored: sc columns of sr halves, column c of problem p at p * stride + c * ld.
struct Operand {
  const __half* p;
  long long ld, stride;
  int sr, sc;
  FastDiv cols;  // splits a column index over a group into (problem, column)
  bool fix;      // some column is misaligned or its length is not a multiple of 8: rows need the fix-up
  __device__ __forceinline__ Operand(const __half* p_, int ld_, long long stride_, int sr_, int sc_, int batch)
      : p(p_), ld(ld_), stride(stride_), sr(sr_), sc(sc_), cols(sc_),
        fix(!((reinterpret_cast<addr_t>(p_) & 15) == 0 && ld_ % 8 == 0 && (batch == 1 || stride_ % 8 == 0) &&
              sr_ % 8 == 0)) {}
  // Address of column c of problem `prob`.
  __device__ __forceinline__ addr_t column(long long prob, int c) const {
    return reinterpret_cast<addr_t>(p + prob * stride + static_cast<long long>(c) * ld);
  }
};

// ---------------------------------------------------------------------------------------------- mbarrier, bulk
__device__ __forceinline__ void mbar_init(barrier_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
// Generic-proxy writes of shared memory before the async proxy (the bulk copies) writes it again.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void mbar_expect_tx(barrier_t* bar, unsigned bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(barrier_t* bar) {
  asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(barrier_t* bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
// bytes (a multiple of 16) from 16-byte aligned global memory to 16-byte aligned shared memory, completing on bar.
__device__ __forceinline__ void bulk_copy(void* dst, addr_t src, unsigned bytes, barrier_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}

// ------------------------------------------------------------------------------------------------------ copies
// cp.async the 16-byte supersets of the np * sc columns of a group into their tile rows (tile stride TILE, row
// stride LD halves). Thread t copies chunk q = t % cpc of every step-th column from column t / cpc on
// (cpc = the most chunks a column can span, step = THREADS / cpc; left-over threads idle).
template <int TILE, int LD, int THREADS>
__device__ __forceinline__ void copy_async(__half* tile, const Operand& o, long long p0, int np, int t) {
  const int cpc = (o.sr + 14) >> 3;  // cdiv(7 + sr, 8)
  const int step = THREADS / cpc;
  const int first = t / cpc, q = t - first * cpc;
  if (first >= step || o.sr == 0) return;  // a left-over thread; K = 0 (nothing of B or A is read)
  const int total = np * o.sc;
#pragma unroll 2
  for (int col = first; col < total; col += step) {
    const int p = o.cols(col);
    const int c = col - p * o.sc;
    const addr_t a = o.column(p0 + p, c);
    const int r = static_cast<int>(a & 15) >> 1;
    if (q < ((r + o.sr + 7) >> 3))
      cp_async16(tile + p * TILE + c * LD + 8 * q, reinterpret_cast<const void*>((a & ~addr_t(15)) + 16 * q));
  }
}

// One cp.async.bulk per column (thread t takes columns t, t + THREADS, ...), each announced to the slot's mbarrier
// before it is issued; the caller arrives once per thread afterwards.
template <int TILE, int LD, int THREADS>
__device__ __forceinline__ void copy_bulk(__half* tile, const Operand& o, long long p0, int np, int t, barrier_t* bar) {
  const int total = o.sr ? np * o.sc : 0;  // K = 0: nothing is read
  for (int col = t; col < total; col += THREADS) {
    const int p = o.cols(col);
    const int c = col - p * o.sc;
    const addr_t a = o.column(p0 + p, c);
    const int r = static_cast<int>(a & 15) >> 1;
    const unsigned bytes = 16u * static_cast<unsigned>((r + o.sr + 7) >> 3);
    if (bytes) {
      mbar_expect_tx(bar, bytes);
      bulk_copy(tile + p * TILE + c * LD, a & ~addr_t(15), bytes, bar);
    }
  }
}

// Shift every tile row of a group in place by its column's misalignment r (halves) and zero it past the column's
// length: out[x] = raw[x + r] for x < sr, 0 for sr <= x < 8 * CPR. A warp takes RPP = 32 / CPR rows at a time, lane
// (rr, q) chunk q of row rr: it reads raw chunks q and q + 1, and writes chunk q after the warp has read all of
// them. Rows are a warp's own, so no block barrier is needed inside.
template <int TILE, int CPR, int NWARPS>
__device__ __forceinline__ void fixup(__half* tile, const Operand& o, long long p0, int np, int warp, int lane) {
  constexpr int RPP = 32 / CPR;
  const int rr = lane / CPR, q = lane - (lane / CPR) * CPR;
  const int total = np * o.sc;
  for (int base = warp * RPP; base < total; base += NWARPS * RPP) {
    const int row = base + rr;
    const bool act = rr < RPP && row < total;
    uint4 lo = make_uint4(0u, 0u, 0u, 0u), hi = lo;
    int r = 0;
    __half* rowp = tile;
    if (act) {
      const int p = o.cols(row);
      const int c = row - p * o.sc;
      r = static_cast<int>(o.column(p0 + p, c) & 15) >> 1;
      rowp = tile + p * TILE + c * (8 * CPR);
      lo = *reinterpret_cast<const uint4*>(rowp + 8 * q);
      if (q + 1 < CPR) hi = *reinterpret_cast<const uint4*>(rowp + 8 * q + 8);
    }
    __syncwarp();
    if (act) {
      const unsigned w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      const int d = r >> 1, sh = (r & 1) * 16;
      unsigned s[5];
#pragma unroll
      for (int k = 0; k < 5; ++k) s[k] = d == 0 ? w[k] : d == 1 ? w[k + 1] : d == 2 ? w[k + 2] : w[k + 3];
      unsigned out[4];
      const int left = o.sr - 8 * q;  // halves of the column from this chunk's first on
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const unsigned v = __funnelshift_r(s[k], s[k + 1], sh);
        const int n = left - 2 * k;
        out[k] = n >= 2 ? v : (n == 1 ? (v & 0xFFFFu) : 0u);
      }
      st_shared_v4(rowp + 8 * q, out[0], out[1], out[2], out[3]);
    }
  }
}

__device__ __forceinline__ void store_half2(__half* p, float a, float b) {
  *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
}

template <int TA, int TB, int BM, int BN, int BK, int WM, int WN, int NWARPS, int PPB, int STAGES, int BULK>
__device__ __forceinline__ void run(int M, int N, int K, float alpha, const __half* A, int lda, long long strideA,
                                    const __half* B, int ldb, long long strideB, float beta, __half* C, int ldc,
                                    long long strideC, int batch, unsigned char* smem) {
  using G = Geo<TA, TB, BM, BN, BK, WM, WN, NWARPS, PPB, STAGES, BULK>;
  constexpr int THREADS = G::THREADS;
  __half* const slots = reinterpret_cast<__half*>(smem);
  barrier_t* const bars = reinterpret_cast<barrier_t*>(smem + 2 * STAGES * G::SLOT);
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;

  const Operand oa(A, lda, strideA, TA == 0 ? M : K, TA == 0 ? K : M, batch);
  const Operand ob(B, ldb, strideB, TB == 0 ? K : N, TB == 0 ? N : K, batch);
  const bool fix = oa.fix || ob.fix;
  const bool readC = beta != 0.0f;
  // half2 stores: every (i even, j) of every problem 4-byte aligned
  const bool c4 = (reinterpret_cast<addr_t>(C) & 3) == 0 && ldc % 2 == 0 && (batch == 1 || strideC % 2 == 0);
  const long long ngroups = ((long long)batch + PPB - 1) / PPB;

  // Zero every slot once: copies and fix-ups write only the stored rows, so the padding stays zero.
  for (int i = t; i < STAGES * G::SLOT / 8; i += THREADS) st_shared_v4(slots + 8 * i, 0u, 0u, 0u, 0u);
  if constexpr (BULK) {
    if (t == 0)
      for (int s = 0; s < STAGES; ++s) mbar_init(bars + s, THREADS);
    fence_mbar_init();
    fence_proxy_async();
  }
  __syncthreads();

  // Issue the copies of the block's it-th group into slot s (nothing past the last group; BULK = 0 always commits,
  // so that wait_group counts groups).
  auto issue = [&](long long it, int s) {
    const long long g = blockIdx.x + it * gridDim.x;
    if (g < ngroups) {
      const long long p0 = g * PPB;
      const int np = static_cast<int>(min((long long)PPB, (long long)batch - p0));
      __half* const ta = slots + s * G::SLOT;
      __half* const tb = ta + PPB * G::A_TILE;
      if constexpr (BULK) {
        copy_bulk<G::A_TILE, G::A_LD, THREADS>(ta, oa, p0, np, t, bars + s);
        copy_bulk<G::B_TILE, G::B_LD, THREADS>(tb, ob, p0, np, t, bars + s);
        mbar_arrive(bars + s);
      } else {
        copy_async<G::A_TILE, G::A_LD, THREADS>(ta, oa, p0, np, t);
        copy_async<G::B_TILE, G::B_LD, THREADS>(tb, ob, p0, np, t);
      }
    }
    if constexpr (!BULK) cp_async_commit();
  };

#pragma unroll 1
  for (int s = 0; s < STAGES - 1; ++s) issue(s, s);

  const int gq = lane >> 2, tq = lane & 3;  // fragment row group and thread in group
  const int mi = lane >> 3, mr = lane & 7;  // ldmatrix: matrix and row this lane addresses
  int slot = 0;
  unsigned phase = 0;
#pragma unroll 1
  for (long long it = 0;; ++it) {
    const long long g = blockIdx.x + it * gridDim.x;
    if (g >= ngroups) break;
    const long long p0 = g * PPB;
    const int np = static_cast<int>(min((long long)PPB, (long long)batch - p0));
    if constexpr (BULK)
      mbar_wait(bars + slot, phase);
    else
      cp_async_wait<STAGES - 2>();
    __syncthreads();  // this group's copies have landed (all threads'); the previous group's math is done
    issue(it + STAGES - 1, slot == 0 ? STAGES - 1 : slot - 1);  // into the slot the previous group left

    __half* const ta = slots + slot * G::SLOT;
    __half* const tb = ta + PPB * G::A_TILE;
    if (fix) {
      if (oa.fix) fixup<G::A_TILE, G::A_CPR, NWARPS>(ta, oa, p0, np, warp, lane);
      if (ob.fix) fixup<G::B_TILE, G::B_CPR, NWARPS>(tb, ob, p0, np, warp, lane);
      if constexpr (BULK) fence_proxy_async();  // the slot is overwritten by bulk copies later
      __syncthreads();
    }

    // Tensor-core work: items (problem, warp tile) of C^T; X = op(B)^T (rows j), Y = op(A)^T (columns i).
    const int items = np * G::II * G::JJ;
#pragma unroll 1
    for (int item = warp; item < items; item += NWARPS) {
      const int p = item / (G::II * G::JJ);
      const int w = item - p * (G::II * G::JJ);
      const int i0 = (w % G::II) * 16 * WM, j0 = (w / G::II) * 16 * WN;
      const __half* const xa = ta + p * G::A_TILE;
      const __half* const xb = tb + p * G::B_TILE;
      float acc[WN][2 * WM][4];
#pragma unroll
      for (int b = 0; b < WN; ++b)
#pragma unroll
        for (int a = 0; a < 2 * WM; ++a)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[b][a][e] = 0.0f;
#pragma unroll
      for (int k0 = 0; k0 < G::KP; k0 += 16) {
        unsigned fx[WN][4], fy[WM][4];
#pragma unroll
        for (int b = 0; b < WN; ++b) {
          const int j = j0 + 16 * b;
          if constexpr (TB == 0)  // tile rows j, each k contiguous
            ldmatrix_x4<false>(fx[b], xb + (j + mr + (mi & 1) * 8) * G::B_LD + k0 + (mi >> 1) * 8);
          else  // tile rows k, each j contiguous
            ldmatrix_x4<true>(fx[b], xb + (k0 + mr + (mi >> 1) * 8) * G::B_LD + j + (mi & 1) * 8);
        }
#pragma unroll
        for (int a = 0; a < WM; ++a) {
          const int i = i0 + 16 * a;  // two n8 tiles: registers 0, 1 for i .. i + 7 and 2, 3 for i + 8 .. i + 15
          if constexpr (TA == 0)  // tile rows k, each i contiguous
            ldmatrix_x4<true>(fy[a], xa + (k0 + mr + (mi & 1) * 8) * G::A_LD + i + (mi >> 1) * 8);
          else  // tile rows i, each k contiguous
            ldmatrix_x4<false>(fy[a], xa + (i + mr + (mi >> 1) * 8) * G::A_LD + k0 + (mi & 1) * 8);
        }
#pragma unroll
        for (int b = 0; b < WN; ++b)
#pragma unroll
          for (int a = 0; a < WM; ++a) {
            mma16816(acc[b][2 * a], fx[b], fy[a][0], fy[a][1]);
            mma16816(acc[b][2 * a + 1], fx[b], fy[a][2], fy[a][3]);
          }
      }
      // Epilogue: accumulator e of (b, a) holds C^T (j0 + 16b + gq + 8 (e >> 1), i0 + 8a + 2tq + (e & 1)).
      __half* const cp = C + (p0 + p) * strideC;
#pragma unroll
      for (int b = 0; b < WN; ++b)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int j = j0 + 16 * b + gq + 8 * h;
          if (j >= N) continue;
          __half* const cj = cp + (long long)j * ldc;
#pragma unroll
          for (int a = 0; a < 2 * WM; ++a) {
            const int i = i0 + 8 * a + 2 * tq;
            if (i0 + 8 * a >= M) continue;  // an n8 tile of the padding (warp-uniform)
            float v0 = alpha * acc[b][a][2 * h], v1 = alpha * acc[b][a][2 * h + 1];
            if (!readC && c4) {
              if (i + 1 < M)
                store_half2(cj + i, v0, v1);
              else if (i < M)
                cj[i] = __float2half_rn(v0);
            } else {
              if (i < M) {
                if (readC) v0 += beta * __half2float(cj[i]);
                cj[i] = __float2half_rn(v0);
              }
              if (i + 1 < M) {
                if (readC) v1 += beta * __half2float(cj[i + 1]);
                cj[i + 1] = __float2half_rn(v1);
              }
            }
          }
        }
    }
    if (++slot == STAGES) {
      slot = 0;
      phase ^= 1u;
    }
  }
  if constexpr (!BULK) cp_async_wait<0>();  // nothing left in flight when the block exits
}

}  // namespace stream_detail

// Dynamic shared memory an instance needs, bytes.
template <int TRANS_A, int TRANS_B, int BM, int BN, int BK, int WM, int WN, int NWARPS, int PPB, int STAGES, int BULK>
__host__ __device__ constexpr int hgemm_stream_smem_bytes() {
  return stream_detail::Geo<TRANS_A, TRANS_B, BM, BN, BK, WM, WN, NWARPS, PPB, STAGES, BULK>::SMEM;
}

template <int TRANS_A, int TRANS_B, int BM, int BN, int BK, int WM, int WN, int NWARPS, int PPB, int STAGES, int BULK>
__global__ void __launch_bounds__(32 * NWARPS, 1)
hgemm_stream(int M, int N, int K, float alpha, const __half* A, int lda, long long strideA, const __half* B, int ldb,
             long long strideB, float beta, __half* C, int ldc, long long strideC, int batch) {
  static_assert(BM >= 1 && BN >= 1 && BK >= 1, "bounds must be positive");
  static_assert(BM <= 248 && BN <= 248 && BK <= 248, "a tile row is at most 32 chunks (one warp fixes a row)");
  static_assert(WM >= 1 && WN >= 1 && NWARPS >= 1 && NWARPS <= 32 && PPB >= 1, "bad warp tile, warps or group");
  static_assert(PPB * (BM > BN ? (BM > BK ? BM : BK) : (BN > BK ? BN : BK)) <= 4096, "columns of a group < 2^12");
  static_assert(STAGES >= 2 && STAGES <= 16, "the ring needs at least two slots");
  static_assert(BULK == 0 || BULK == 1, "BULK is 0 or 1");
  extern __shared__ __align__(16) unsigned char stream_smem[];
  if (M <= 0 || N <= 0 || batch <= 0) return;  // uniform: no thread reaches a barrier
  if (M > BM || N > BN || K > BK) {
    // Above the compile-time bounds: one thread per element of C, straight from global memory (no barriers).
    common::gemm_per_element<TRANS_A, TRANS_B, __half>(M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc,
                                                       strideC, batch, (long long)blockIdx.x * blockDim.x + threadIdx.x,
                                                       (long long)gridDim.x * blockDim.x);
    return;
  }
  unsigned dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  if (dyn < static_cast<unsigned>(hgemm_stream_smem_bytes<TRANS_A, TRANS_B, BM, BN, BK, WM, WN, NWARPS, PPB, STAGES, BULK>()))
    __trap();  // launched with too little dynamic shared memory: fail loudly, never corrupt
  stream_detail::run<TRANS_A, TRANS_B, BM, BN, BK, WM, WN, NWARPS, PPB, STAGES, BULK>(
      M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch, stream_smem);
}

}  // namespace autotune
