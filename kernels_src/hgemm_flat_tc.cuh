// Tensor-core batched HGEMM for small and odd sizes (M, N, K <= 128), built for memory bandwidth.
//
// Why: at these sizes a batched GEMM moves far more bytes than it computes, and with packed batches of odd-sized
// matrices no matrix starts on a 16-byte boundary, so tile loaders that need aligned rows (cp.async, ldmatrix
// straight from the global layout) fall back to 2-byte loads and lose 2-3x. This kernel never looks at the
// matrix layout while moving data:
//
//   1. Flat copy. A block handles groups of PPB consecutive problems. When an operand is packed (ld equal to the
//      stored rows and stride equal to the matrix size, or batch == 1), the group's A (B) is one contiguous range;
//      the block copies the 16-byte aligned superset of that range into a flat shared buffer with cp.async
//      (16-byte chunks, no registers held, everything in flight at once). The superset's extra bytes lie in the
//      same 16-byte segments as the range's first and last elements, so they are mapped memory; they are never
//      used. A non-packed operand is gathered element by element straight into step 2's layout (slow path).
//   2. Repack. The block rewrites each problem of the group, 16 bytes at a time (32-bit word loads and a funnel
//      shift where a column does not start on a 16-byte boundary), from the flat buffer into a zero-padded tile whose
//      rows are 16-byte aligned and padded by 8 halves (conflict-free ldmatrix): the operand keeps the orientation
//      it has in memory (A: rows = columns of the stored matrix), so the repack reads and writes consecutive
//      halves across a warp, and the tile is read by ldmatrix or ldmatrix.trans as the shape needs. The flat
//      buffer is then free, and the copy of the block's next group starts at once, in flight during the
//      tensor-core work, the epilogue and the store of C.
//   3. Tensor cores. Warps take (problem, warp tile) items in turn; a warp tile is WM x WN blocks of 16 x 16 of C,
//      computed with mma.sync.m16n8k16 (fp16 in, fp32 accumulate) over K in steps of 16 (zero padded).
//   4. C (CDIRECT = 0). Each warp writes alpha * acc (+ beta * C) as fp16 into a flat shared copy of the
//      group's C, in the global layout, and the block stores it with 16-byte stores (element stores at the two
//      ragged ends; nothing outside the matrices is written). beta == 0 never reads C; beta != 0 copies the group's C in
//      first (packed) or reads it element by element (non-packed C is written element by element as well).
//
// C = alpha * op(A) * op(B) + beta * C, column-major, BLAS semantics, `strided` convention; fp16 A, B, C with fp32
// alpha, beta and accumulation. Any M, N, K >= 1: sizes above the compile-time bounds take a correct
// one-thread-per-element path. Any batch count (grid-stride loop over groups, 64-bit offsets).
//
// Tuning parameters (template arguments):
//   BM, BN, BK  compile-time bounds of M, N, K (size the shared buffers; tiles are padded to 16)
//   WM, WN      warp tile: WM x WN blocks of 16 x 16 of C (WM * WN * 8 fp32 accumulators per thread)
//   NWARPS      warps per block
//   PPB         problems per group
//   STAGES      1 or 2 flat buffers of A and B (2: the next group's copy is in flight during the repack too)
//   CDIRECT     0: C goes out through the flat shared copy (step 4); 1: each warp writes its fp16 C elements
//               straight to global memory (no flat C: less shared memory per block, more blocks per SM)
// Launch: block (32 * NWARPS, 1, 1); grid (g, 1, 1) for any g >= 1; dynamic shared memory
// hgemm_flat_tc_smem_bytes<...>() bytes (spaces/hgemm_flat_tc.yaml computes the same; a launch with less traps).
#pragma once
#include <cuda_fp16.h>

#include "common.cuh"

namespace autotune {
namespace flat_tc_detail {

using common::cdiv;
using common::misalign;
using ptx::cp_async16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::ldmatrix_x4;
using ptx::mma16816;
using ptx::st_shared_v4;

// Compile-time geometry of one instance.
template <int TRANS_A, int TRANS_B, int BM, int BN, int BK, int WM, int WN, int NWARPS, int PPB, int STAGES, int CDIRECT>
struct Geo {
  static constexpr int THREADS = 32 * NWARPS;
  static constexpr int MP = cdiv(BM, 16 * WM) * 16 * WM;  // padded M, N, K
  static constexpr int NP = cdiv(BN, 16 * WN) * 16 * WN;
  static constexpr int KP = cdiv(BK, 16) * 16;
  // Padded tiles: R rows of L halves (row stride L + 8). A keeps the stored orientation: NN/NT stores A as
  // M x K column-major, so the tile's rows are k and its rows hold M consecutive i (read with ldmatrix.trans).
  static constexpr int A_R = TRANS_A == 0 ? KP : MP, A_L = TRANS_A == 0 ? MP : KP, A_LD = A_L + 8;
  static constexpr int B_R = TRANS_B == 0 ? NP : KP, B_L = TRANS_B == 0 ? KP : NP, B_LD = B_L + 8;
  static constexpr int A_TILE = A_R * A_LD, B_TILE = B_R * B_LD;  // halves
  // Flat buffers in 16-byte chunks: a range of n halves starting mis halves past a 16-byte boundary covers
  // cdiv(mis + n, 8) <= cdiv(n + 7, 8) chunks.
  static constexpr int QA = cdiv(PPB * BM * BK + 7, 8), QB = cdiv(PPB * BK * BN + 7, 8);
  static constexpr int QC = CDIRECT ? 0 : cdiv(PPB * BM * BN + 7, 8);  // no flat C when C goes out directly
  static constexpr int SMEM = 16 * (STAGES * (QA + QB) + QC) + 2 * PPB * (A_TILE + B_TILE);
  static constexpr int IM = MP / (16 * WM), IN = NP / (16 * WN);  // warp tiles per problem
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

// Gather the np matrices of a group that is not packed straight from global memory into their padded tiles (tile
// stride TILE halves, row stride LD): matrix p is stored sr x sc column-major at src + p * pstride with leading
// dimension ld; tile row c gets column c, tile column r its row r. Only the stored elements are written: the rest
// of every tile was zeroed once and stays zero (every group has the same sizes). Threads take pairs of halves
// along a column, consecutive threads consecutive pairs (the last pair of an odd column writes a zero into the
// padding). Packed operands take repack_flat instead.
template <int TILE, int LD, int THREADS>
__device__ __forceinline__ void repack(__half* tile, const __half* src, long long pstride, int sr, int sc,
                                       long long ld, int np, FastDiv pairs_per_col, FastDiv cols, int t) {
  const int hp = pairs_per_col.d;
  const int total = np * sc * hp;
  const __half zero = __float2half(0.0f);
#pragma unroll 4
  for (int d = t; d < total; d += THREADS) {
    const int q = pairs_per_col(d);  // column over the group: p * sc + c
    const int r = (d - q * hp) * 2;
    const int p = cols(q);
    const int c = q - p * sc;
    const __half* e = src + p * pstride + c * ld + r;
    __half2 v;
    v.x = e[0];
    v.y = r + 1 < sr ? e[1] : zero;
    *reinterpret_cast<__half2*>(tile + p * TILE + c * LD + r) = v;
  }
}

// How a block's threads split the packed repack of one operand (stored sr x sc per problem): each tile row (stored
// column) is cpc = ceil(sr / 8) chunks of 8 halves; thread t always copies chunk t % cpc of every step-th column,
// from column t / cpc on (step = THREADS / cpc; the THREADS % cpc threads left over idle). Built once per launch:
// the loop over a group's columns then does no division but the one that splits the column index into
// (problem, column).
struct ChunkMap {
  int step, q0, r, n;  // columns per pass, this thread's first column, its chunk's first row, rows inside it
  unsigned mask[4];    // the words of the chunk inside the column (the rest lands in the tile's zero padding)
  template <int THREADS> __device__ __forceinline__ static ChunkMap make(int sr, int t) {
    ChunkMap m;
    const int cpc = (sr + 7) >> 3;
    m.step = THREADS / cpc;
    m.q0 = t / cpc;
    m.r = (t - m.q0 * cpc) * 8;
    m.n = min(8, sr - m.r);
#pragma unroll
    for (int i = 0; i < 4; ++i) m.mask[i] = 2 * i + 1 < m.n ? 0xFFFFFFFFu : (2 * i < m.n ? 0x0000FFFFu : 0u);
    return m;
  }
};

// Copy the np packed matrices of a group from its flat buffer into their padded tiles, one 16-byte chunk of a tile
// row (8 halves of a stored column) per step. Matrix p is stored sr x sc column-major and packed, so element (r, c)
// of matrix p sits at half mis + (p * sc + c) * sr + r of the flat buffer (mis: the group's misalignment). A chunk
// is read as the 32-bit words that hold it and, when it starts on an odd half, shifted down by one half (a 16-bit
// funnel shift per word); halves past the column's end are zeroed (they land in the tile's padding, which must
// stay zero for K). When every column starts on a 16-byte boundary it is a plain 16-byte copy.
// The flat kernel at 64^3 was issue-bound on the element-pair repack (ncu, results/profiles_h100).
template <int TILE, int LD>
__device__ __forceinline__ void repack_flat(__half* tile, const __half* flat, int mis, int sr, int sc, int np,
                                            FastDiv cols, const ChunkMap& m) {
  if (m.q0 >= m.step) return;  // a left-over thread
  const int total = np * sc;     // columns over the group: q = p * sc + c
  const uint4* const f4 = reinterpret_cast<const uint4*>(flat);
  if ((sr & 7) == 0 && mis == 0) {  // every column 16-byte aligned (uniform branch)
#pragma unroll 4
    for (int q = m.q0; q < total; q += m.step) {
      const int p = cols(q);
      const uint4 v = f4[(q * sr + m.r) >> 3];
      st_shared_v4(tile + p * TILE + (q - p * sc) * LD + m.r, v.x, v.y, v.z, v.w);
    }
    return;
  }
  // Unaligned columns: the chunk's halves s .. s + n - 1 lie in the 32-bit words s / 2 .. (s + n - 1) / 2 of the
  // flat buffer; read those words (4, or 5 when s is odd) and, when s is odd, shift each pair down by one half.
  // Only words holding halves of the column are read (never past the copied range).
  const unsigned* const f1 = reinterpret_cast<const unsigned*>(flat);
  const int ds = m.step * sr;
#pragma unroll 2
  for (int q = m.q0, s = mis + m.q0 * sr + m.r; q < total; q += m.step, s += ds) {
    const int p = cols(q);
    const int odd = s & 1;
    const unsigned* const x = f1 + (s >> 1);
    const int words = (odd + m.n + 1) >> 1;  // 1 .. 5
    unsigned w[5];
#pragma unroll
    for (int i = 0; i < 5; ++i) w[i] = i < words ? x[i] : 0u;
    unsigned o[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) o[i] = __funnelshift_r(w[i], w[i + 1], odd * 16) & m.mask[i];
    st_shared_v4(tile + p * TILE + (q - p * sc) * LD + m.r, o[0], o[1], o[2], o[3]);
  }
}

template <int TRANS_A, int TRANS_B, int BM, int BN, int BK, int WM, int WN, int NWARPS, int PPB, int STAGES, int CDIRECT>
__device__ __forceinline__ void run(int M, int N, int K, float alpha, const __half* A, int lda, long long strideA,
                                    const __half* B, int ldb, long long strideB, float beta, __half* C, int ldc,
                                    long long strideC, int batch, unsigned char* smem) {
  using G = Geo<TRANS_A, TRANS_B, BM, BN, BK, WM, WN, NWARPS, PPB, STAGES, CDIRECT>;
  constexpr int THREADS = G::THREADS;
  // Shared memory: STAGES flat buffers of A and B, the flat C, the padded tiles.
  __half* const flat0 = reinterpret_cast<__half*>(smem);
  __half* const flatC = flat0 + STAGES * 8 * (G::QA + G::QB);
  __half* const tileA = flatC + 8 * G::QC;
  __half* const tileB = tileA + PPB * G::A_TILE;

  const int MK = M * K, KN = K * N, MN = M * N;
  const int ar = TRANS_A == 0 ? M : K, ac = TRANS_A == 0 ? K : M;  // stored A: ar x ac
  const int br = TRANS_B == 0 ? K : N, bc = TRANS_B == 0 ? N : K;  // stored B: br x bc
  const bool packA = lda == ar && (strideA == (long long)MK || batch == 1);
  const bool packB = ldb == br && (strideB == (long long)KN || batch == 1);
  const bool packC = !CDIRECT && ldc == M && (strideC == (long long)MN || batch == 1);  // CDIRECT: element stores
  const bool readC = beta != 0.0f;

  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const long long ngroups = ((long long)batch + PPB - 1) / PPB;

  // cp.async the aligned superset of a packed operand's group into a flat buffer.
  auto copy_flat = [&](__half* flat, const __half* g, int n) {
    const __half* base = g - misalign(g);
    const int chunks = (misalign(g) + n + 7) >> 3;
    for (int q = t; q < chunks; q += THREADS) cp_async16(flat + 8 * q, base + 8 * q);
  };
  auto flat_a = [&](int stage) { return flat0 + stage * 8 * (G::QA + G::QB); };
  auto flat_b = [&](int stage) { return flat0 + stage * 8 * (G::QA + G::QB) + 8 * G::QA; };
  auto issue = [&](long long grp, int stage) {
    const long long p0 = grp * PPB;
    const int np = static_cast<int>(min((long long)PPB, (long long)batch - p0));
    if (packA) copy_flat(flat_a(stage), A + p0 * MK, np * MK);
    if (packB) copy_flat(flat_b(stage), B + p0 * KN, np * KN);
  };

  // Zero every tile once: the repacks write only the stored elements (the barrier of the first group orders it).
  for (int i = t; i < PPB * (G::A_TILE + G::B_TILE) / 2; i += THREADS) reinterpret_cast<unsigned*>(tileA)[i] = 0u;
  const FastDiv hpA((ar + 1) / 2), colsA(ac), hpB((br + 1) / 2), colsB(bc);
  const ChunkMap cmA = ChunkMap::make<THREADS>(ar, t), cmB = ChunkMap::make<THREADS>(br, t);

  // STAGES == 1: the copy of the next group starts once this group is repacked (its flat buffer is free).
  // STAGES == 2: it starts before this group is repacked, into the other buffer (in flight during the repack too).
  long long grp = blockIdx.x;
  if (grp < ngroups) issue(grp, 0);
  cp_async_commit();
  for (int it = 0; grp < ngroups; grp += gridDim.x, ++it) {
    const long long p0 = grp * PPB;
    const int np = static_cast<int>(min((long long)PPB, (long long)batch - p0));
    const int stage = STAGES == 2 ? (it & 1) : 0;
    const bool more = grp + gridDim.x < ngroups;
    if (STAGES == 2) {
      if (more) issue(grp + gridDim.x, stage ^ 1);  // that buffer was repacked in the previous iteration
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // this group's flat copies have landed; the previous group's C is stored

    // Repack (or gather) every problem of the group into its padded tiles.
    if (packA)
      repack_flat<G::A_TILE, G::A_LD>(tileA, flat_a(stage), misalign(A + p0 * MK), ar, ac, np, colsA, cmA);
    else
      repack<G::A_TILE, G::A_LD, THREADS>(tileA, A + p0 * strideA, strideA, ar, ac, lda, np, hpA, colsA, t);
    if (packB)
      repack_flat<G::B_TILE, G::B_LD>(tileB, flat_b(stage), misalign(B + p0 * KN), br, bc, np, colsB, cmB);
    else
      repack<G::B_TILE, G::B_LD, THREADS>(tileB, B + p0 * strideB, strideB, br, bc, ldb, np, hpB, colsB, t);
    __half* const gc = C + p0 * MN;  // packed C: the group's range
    const int offC = packC ? misalign(gc) : 0;
    if (readC && packC) copy_flat(flatC, gc, np * MN);
    cp_async_commit();
    __syncthreads();  // tiles complete; this group's flat buffer is free
    if (STAGES == 1) {
      if (more) issue(grp + gridDim.x, 0);  // in flight during the math and the store of C
      cp_async_commit();
      if (readC && packC) cp_async_wait<1>();  // C's copy (the group before the one just issued)
    } else if (readC && packC) {
      cp_async_wait<0>();  // C's copy is the newest group
    }
    if (readC && packC) __syncthreads();

    // Tensor-core work: items (problem, warp tile).
    const int items = np * G::IM * G::IN;
    const int gq = lane >> 2, tq = lane & 3;  // fragment row group and thread in group
    const int mi = lane >> 3, mr = lane & 7;  // ldmatrix: matrix and row this lane addresses
#pragma unroll 1
    for (int item = warp; item < items; item += NWARPS) {
      const int p = item / (G::IM * G::IN);
      const int w = item - p * (G::IM * G::IN);
      const int i0 = (w % G::IM) * 16 * WM, j0 = (w / G::IM) * 16 * WN;
      const __half* ta = tileA + p * G::A_TILE;
      const __half* tb = tileB + p * G::B_TILE;
      float acc[WM][2 * WN][4];
#pragma unroll
      for (int a = 0; a < WM; ++a)
#pragma unroll
        for (int b = 0; b < 2 * WN; ++b)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[a][b][e] = 0.0f;
#pragma unroll
      for (int k0 = 0; k0 < G::KP; k0 += 16) {
        unsigned fa[WM][4], fb[WN][4];
#pragma unroll
        for (int a = 0; a < WM; ++a) {
          const int i = i0 + 16 * a;
          if constexpr (TRANS_A == 0)  // tile rows k, columns i: transpose while loading
            ldmatrix_x4<true>(fa[a], ta + (k0 + mr + (mi >> 1) * 8) * G::A_LD + i + (mi & 1) * 8);
          else
            ldmatrix_x4<false>(fa[a], ta + (i + mr + (mi & 1) * 8) * G::A_LD + k0 + (mi >> 1) * 8);
        }
#pragma unroll
        for (int b = 0; b < WN; ++b) {
          const int j = j0 + 16 * b;  // two n8 tiles: registers 0, 1 for j .. j + 7 and 2, 3 for j + 8 .. j + 15
          if constexpr (TRANS_B == 0)  // tile rows j, columns k
            ldmatrix_x4<false>(fb[b], tb + (j + mr + (mi >> 1) * 8) * G::B_LD + k0 + (mi & 1) * 8);
          else  // tile rows k, columns j
            ldmatrix_x4<true>(fb[b], tb + (k0 + mr + (mi & 1) * 8) * G::B_LD + j + (mi >> 1) * 8);
        }
#pragma unroll
        for (int a = 0; a < WM; ++a)
#pragma unroll
          for (int b = 0; b < WN; ++b) {
            mma16816(acc[a][2 * b], fa[a], fb[b][0], fb[b][1]);
            mma16816(acc[a][2 * b + 1], fa[a], fb[b][2], fb[b][3]);
          }
      }
      // Epilogue: accumulator e of n8 tile b holds (i0 + 16a + gq + 8 (e >> 1), j0 + 8b + 2tq + (e & 1)).
      const long long pg = p0 + p;
      const int ib = i0 + gq, jb = j0 + 2 * tq;
      // beta == 0 (the common case): no beta or layout branch per element; c0 is element (ib, jb) of C in the
      // flat shared copy (column stride M) or, CDIRECT, in global memory (column stride ldc).
      auto store_c = [&](__half* c0, int ldo) {
#pragma unroll
        for (int a = 0; a < WM; ++a)
#pragma unroll
          for (int b = 0; b < 2 * WN; ++b) {
            if (i0 + 16 * a >= M || j0 + 8 * b >= N) continue;  // an n8 tile of the padding (warp-uniform)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int di = 16 * a + 8 * (e >> 1), dj = 8 * b + (e & 1);
              if (ib + di < M && jb + dj < N) c0[di + dj * ldo] = __float2half_rn(alpha * acc[a][b][e]);
            }
          }
      };
      if (!readC) {
        if constexpr (CDIRECT) {
          store_c(C + pg * strideC + (long long)jb * ldc + ib, ldc);
          continue;
        } else if (packC) {
          store_c(flatC + offC + p * MN + ib + jb * M, M);
          continue;
        }
      }
#pragma unroll
      for (int a = 0; a < WM; ++a)
#pragma unroll
        for (int b = 0; b < 2 * WN; ++b)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int i = i0 + 16 * a + gq + 8 * (e >> 1), j = j0 + 8 * b + 2 * tq + (e & 1);
            if (i < M && j < N) {
              float v = alpha * acc[a][b][e];
              if (packC) {
                __half* c = flatC + offC + p * MN + i + j * M;
                if (readC) v += beta * __half2float(*c);
                *c = __float2half_rn(v);
              } else {
                __half* c = C + pg * strideC + (long long)j * ldc + i;
                if (readC) v += beta * __half2float(*c);
                *c = __float2half_rn(v);
              }
            }
          }
    }
    __syncthreads();  // the group's C is complete in shared memory

    if (packC) {  // 16-byte stores of the full chunks, element stores at the ragged ends
      const int n = np * MN;
      const int span = offC + n;
      for (int q = t; q < (span + 7) >> 3; q += THREADS) {
        const int lo = 8 * q;
        if (lo >= offC && lo + 8 <= span) {
          __stcs(reinterpret_cast<uint4*>(gc + (lo - offC)), *reinterpret_cast<const uint4*>(flatC + lo));
        } else {
          for (int s = max(lo, offC); s < min(lo + 8, span); ++s) gc[s - offC] = flatC[s];
        }
      }
    }
  }
  cp_async_wait<0>();  // nothing left in flight when the block exits
}

}  // namespace flat_tc_detail

// Dynamic shared memory an instance needs, bytes.
template <int TRANS_A, int TRANS_B, int BM, int BN, int BK, int WM, int WN, int NWARPS, int PPB, int STAGES, int CDIRECT>
__host__ __device__ constexpr int hgemm_flat_tc_smem_bytes() {
  return flat_tc_detail::Geo<TRANS_A, TRANS_B, BM, BN, BK, WM, WN, NWARPS, PPB, STAGES, CDIRECT>::SMEM;
}

template <int TRANS_A, int TRANS_B, int BM, int BN, int BK, int WM, int WN, int NWARPS, int PPB, int STAGES, int CDIRECT>
__global__ void __launch_bounds__(32 * NWARPS)
hgemm_flat_tc(int M, int N, int K, float alpha, const __half* A, int lda, long long strideA, const __half* B, int ldb,
              long long strideB, float beta, __half* C, int ldc, long long strideC, int batch) {
  static_assert(BM >= 1 && BN >= 1 && BK >= 1, "bounds must be positive");
  static_assert(WM >= 1 && WN >= 1 && NWARPS >= 1 && NWARPS <= 32 && PPB >= 1, "bad warp tile, warps or group");
  extern __shared__ __align__(16) unsigned char flat_tc_smem[];
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
  if (dyn < static_cast<unsigned>(hgemm_flat_tc_smem_bytes<TRANS_A, TRANS_B, BM, BN, BK, WM, WN, NWARPS, PPB, STAGES, CDIRECT>()))
    __trap();  // launched with too little dynamic shared memory: fail loudly, never corrupt
  flat_tc_detail::run<TRANS_A, TRANS_B, BM, BN, BK, WM, WN, NWARPS, PPB, STAGES, CDIRECT>(
      M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch, flat_tc_smem);
}

}  // namespace autotune
