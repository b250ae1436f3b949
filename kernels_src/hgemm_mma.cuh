// Tensor-core batched HGEMM, "the ladder" of the WMMA/mma.sync worklog (shared/seeds/002_*) as one family.
//
// C = alpha * op(A) * op(B) + beta * C, column-major, fp16 in, fp32 accumulate, fp16 out, `strided` convention.
// RUNG selects the step of the ladder (all rungs stage A and B tiles in shared memory):
//   1: one 16x16x16 WMMA accumulator tile per warp, synchronous global->shared loads
//   2: several WMMA accumulator tiles per warp (warp tile (BM/WM) x (BN/WN)), synchronous loads
//   3: rung 2 + cp.async multi-stage (STAGES >= 2) global->shared pipeline
//   4: raw mma.sync.aligned.m16n8k16 + ldmatrix(.trans) from XOR-swizzled shared memory, cp.async pipeline
// NSG independent problems per thread block (block = [32*WM*WN, NSG, 1]); blocks walk
// (tile, problem group) pairs in a grid-stride loop on grid.x, so any batch count works (grid = [ceil(M/BM) * ceil(N/BN) * ceil(batch/NSG), 1, 1]).
// Partial tiles are zero-padded, so any M, N, K >= 1 works. The cp.async / 16-byte paths are taken only when
// lda, ldb, strideA, strideB are multiples of 8 and A, B are 16-byte aligned (checked at run time); otherwise
// the same pipeline is fed by element-wise loads. beta == 0 never reads C.
#pragma once
#include <cuda_fp16.h>
#include <mma.h>

#include "common.cuh"

namespace autotune {
namespace mma_detail {

template <bool B, class T, class F> struct cond { using type = T; };
template <class T, class F> struct cond<false, T, F> { using type = F; };

using ptx::cp_async16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::ldmatrix_x4;
using ptx::mma16816;
using ptx::smem_u32;

// A shared-memory tile of R rows, each L contiguous halves. SWZ: rows of exactly L halves with the 16-byte chunk
// index XORed by the row (conflict-free ldmatrix and cp.async); otherwise rows padded by 8 halves (WMMA-friendly).
template <int R, int L, bool SWZ> struct Tile {
  static constexpr int CH = L / 8;
  static constexpr int LD = SWZ ? L : L + 8;
  static constexpr int ELEMS = R * LD;
  static constexpr int S = CH < 8 ? CH : 8;
  static constexpr int G = CH < 8 ? 8 / CH : 1;
  __device__ __forceinline__ static int off(int row, int col) {
    if constexpr (SWZ) {
      const int ch = (col >> 3) ^ ((row / G) % S);
      return row * L + (ch << 3) + (col & 7);
    } else {
      return row * LD + col;
    }
  }
};

// Copy the tile whose element (r, c) is g[r*ld + c], valid when r < rows and c < cols, zero elsewhere.
// ASYNC: 16-byte cp.async with zero fill (needs g + r*ld + c 16-byte aligned for c % 8 == 0).
// Otherwise: synchronous; 16-byte loads where `vec` says the addresses are aligned, element loads elsewhere.
template <class TL, int NT, bool ASYNC>
__device__ __forceinline__ void load_tile(__half* s, const __half* g, long long ld, int rows, int cols, int tid,
                                          bool vec) {
  constexpr int CHUNKS = TL::ELEMS / TL::LD * TL::CH;
#pragma unroll
  for (int i0 = 0; i0 < CHUNKS; i0 += NT) {
    const int i = i0 + tid;
    if (CHUNKS % NT != 0 && i >= CHUNKS) break;
    const int r = i / TL::CH, c = (i % TL::CH) * 8;
    __half* dst = s + TL::off(r, c);
    int n = cols - c;
    n = r < rows ? (n < 0 ? 0 : (n > 8 ? 8 : n)) : 0;
    const __half* src = g + r * ld + c;
    if constexpr (ASYNC) {
      cp_async16(dst, n > 0 ? src : g, 2 * n);
    } else if (vec && n == 8) {
      *reinterpret_cast<uint4*>(dst) = __ldg(reinterpret_cast<const uint4*>(src));
    } else {
      __align__(16) __half v[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = j < n ? src[j] : __float2half(0.0f);
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(v);
    }
  }
}

}  // namespace mma_detail

// Launch bounds: at least 512 resident threads per SM (caps registers at 128 per thread).
template <int TRANS_A, int TRANS_B, int RUNG, int BM, int BN, int BK, int WM, int WN, int STAGES, int NSG>
__global__ void __launch_bounds__(32 * WM * WN * NSG, (512 / (32 * WM * WN * NSG)) > 0 ? 512 / (32 * WM * WN * NSG) : 1)
hgemm_mma(int M, int N, int K, float alpha, const __half* A, int lda, long long strideA, const __half* B, int ldb,
          long long strideB, float beta, __half* C, int ldc, long long strideC, int batch) {
  using namespace mma_detail;
  namespace wmma = nvcuda::wmma;
  constexpr int NWARPS = WM * WN;
  constexpr int NT = 32 * NWARPS;
  constexpr int WTM = BM / WM;  // warp tile: C rows
  constexpr int WTN = BN / WN;  // warp tile: C columns
  constexpr bool SWZ = RUNG == 4;
  static_assert(RUNG >= 1 && RUNG <= 4, "RUNG is 1..4");
  static_assert(BM % WM == 0 && BN % WN == 0 && WTM % 16 == 0 && WTN % 16 == 0, "warp tile must be 16-multiples");
  static_assert(BK % 16 == 0, "BK must be a multiple of 16");
  static_assert(RUNG != 1 || (WTM == 16 && WTN == 16), "rung 1 has one 16x16 tile per warp");
  static_assert(RUNG >= 3 ? STAGES >= 2 : STAGES == 1, "rungs 1-2 are single-stage, 3-4 pipelined");
  // A tile holds op(A)[m0:m0+BM, k0:k0+BK] in the global storage order; B tile likewise for op(B).
  using TA = typename cond<TRANS_A == 0, Tile<BK, BM, SWZ>, Tile<BM, BK, SWZ>>::type;
  using TB = typename cond<TRANS_B == 0, Tile<BN, BK, SWZ>, Tile<BK, BN, SWZ>>::type;
  constexpr int STAGE_ELEMS = TA::ELEMS + TB::ELEMS;
  constexpr int PIPE_BYTES = STAGES * STAGE_ELEMS * 2;
  constexpr int SCRATCH_BYTES = RUNG <= 3 ? NWARPS * 16 * 16 * 4 : 0;  // WMMA epilogue, aliases the pipeline
  constexpr int SLICE_BYTES = ((PIPE_BYTES > SCRATCH_BYTES ? PIPE_BYTES : SCRATCH_BYTES) + 127) / 128 * 128;
  __shared__ __align__(128) unsigned char smem_raw[NSG * SLICE_BYTES];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int z = threadIdx.y;
  __half* const sbase = reinterpret_cast<__half*>(smem_raw + z * SLICE_BYTES);
  const int tilesM = (M + BM - 1) / BM, tilesN = (N + BN - 1) / BN;
  const long long tiles = (long long)tilesM * tilesN;
  const long long work = tiles * ((batch + NSG - 1) / NSG);
  const bool small_work = work + gridDim.x < 0xffffffffll;
  const int wm = warp % WM, wn = warp / WM;
  const int KT = (K + BK - 1) / BK;
  const bool vec = ((lda | ldb) & 7) == 0 && ((strideA | strideB) & 7) == 0 &&
                   (reinterpret_cast<unsigned long long>(A) & 15) == 0 &&
                   (reinterpret_cast<unsigned long long>(B) & 15) == 0;
  const bool cvec = (ldc & 1) == 0 && (strideC & 1) == 0 && (reinterpret_cast<unsigned long long>(C) & 3) == 0;

  // Block ids run over (tile of C, group of NSG problems), the tiles of one problem side by side (they share
  // A and B rows/columns through L2); a grid-stride loop covers any grid size.
  for (long long lin = blockIdx.x; lin < work; lin += gridDim.x) {
    int tile;
    long long b0;
    if (small_work) {  // 32-bit division where the work fits (64-bit division is a long instruction sequence)
      const unsigned ul = static_cast<unsigned>(lin), ut = static_cast<unsigned>(tiles);
      tile = static_cast<int>(ul % ut);
      b0 = static_cast<long long>(ul / ut) * NSG;
    } else {
      tile = static_cast<int>(lin % tiles);
      b0 = lin / tiles * NSG;
    }
    const int m0 = (tile % tilesM) * BM, n0 = (tile / tilesM) * BN;
    const bool live = b0 + z < batch;
    const long long b = live ? b0 + z : batch - 1;
    const __half* Ab = A + b * strideA;
    const __half* Bb = B + b * strideB;

    auto load_stage = [&](int kt, int slot, bool async) {
      __half* sA = sbase + slot * STAGE_ELEMS;
      __half* sB = sA + TA::ELEMS;
      const int k0 = kt * BK;
      const __half* ga = TRANS_A == 0 ? Ab + (long long)k0 * lda + m0 : Ab + (long long)m0 * lda + k0;
      const int ar = TRANS_A == 0 ? K - k0 : M - m0, ac = TRANS_A == 0 ? M - m0 : K - k0;
      const __half* gb = TRANS_B == 0 ? Bb + (long long)n0 * ldb + k0 : Bb + (long long)k0 * ldb + n0;
      const int br = TRANS_B == 0 ? N - n0 : K - k0, bc = TRANS_B == 0 ? K - k0 : N - n0;
      if (async) {
        load_tile<TA, NT, true>(sA, ga, lda, ar, ac, tid, vec);
        load_tile<TB, NT, true>(sB, gb, ldb, br, bc, tid, vec);
      } else {
        load_tile<TA, NT, false>(sA, ga, lda, ar, ac, tid, vec);
        load_tile<TB, NT, false>(sB, gb, ldb, br, bc, tid, vec);
      }
    };

    if constexpr (RUNG <= 3) {
      // ---------------- WMMA rungs ----------------
      constexpr int FM = WTM / 16, FN = WTN / 16;
      using LA = typename cond<TRANS_A == 0, wmma::col_major, wmma::row_major>::type;
      using LB = typename cond<TRANS_B == 0, wmma::col_major, wmma::row_major>::type;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

      auto compute = [&](int slot) {
        const __half* sA = sbase + slot * STAGE_ELEMS;
        const __half* sB = sA + TA::ELEMS;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, LA> fa[FM];
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, LB> fb[FN];
#pragma unroll
          for (int i = 0; i < FM; ++i) {
            const int m = wm * WTM + i * 16;
            wmma::load_matrix_sync(fa[i], sA + (TRANS_A == 0 ? TA::off(kk, m) : TA::off(m, kk)), TA::LD);
          }
#pragma unroll
          for (int j = 0; j < FN; ++j) {
            const int n = wn * WTN + j * 16;
            wmma::load_matrix_sync(fb[j], sB + (TRANS_B == 0 ? TB::off(n, kk) : TB::off(kk, n)), TB::LD);
          }
#pragma unroll
          for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
      };

      if constexpr (STAGES == 1) {
        for (int kt = 0; kt < KT; ++kt) {
          __syncthreads();
          load_stage(kt, 0, false);
          __syncthreads();
          compute(0);
        }
      } else {
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
          if (s < KT) load_stage(s, s, vec);
          cp_async_commit();
        }
        for (int kt = 0; kt < KT; ++kt) {
          cp_async_wait<STAGES - 2>();
          __syncthreads();
          const int nk = kt + STAGES - 1;
          if (nk < KT) load_stage(nk, nk % STAGES, vec);
          cp_async_commit();
          compute(kt % STAGES);
        }
        cp_async_wait<0>();
      }
      __syncthreads();
      // Epilogue: each warp parks one 16x16 fp32 tile at a time in its scratch and writes it with alpha/beta.
      float* scratch = reinterpret_cast<float*>(sbase) + warp * 256;
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) {
          wmma::store_matrix_sync(scratch, acc[i][j], 16, wmma::mem_col_major);
          __syncwarp();
          const int mb = m0 + wm * WTM + i * 16, nb = n0 + wn * WTN + j * 16;
          if (live) {
            __half* Cb = C + b * strideC;
#pragma unroll
            for (int e = lane; e < 256; e += 32) {
              const int gm = mb + (e & 15), gn = nb + (e >> 4);
              if (gm < M && gn < N) {
                __half* p = Cb + (long long)gn * ldc + gm;
                float v = alpha * scratch[e];
                if (beta != 0.0f) v += beta * __half2float(*p);
                *p = __float2half(v);
              }
            }
          }
          __syncwarp();
        }
      __syncthreads();
    } else {
      // ---------------- raw mma.sync rung ----------------
      // Computed transposed: D (C columns x C rows) = op(B)^T op(A)^T, so that the two accumulators a thread holds
      // side by side are neighbours along M, i.e. contiguous in column-major C (one half2 store).
      constexpr int FN = WTN / 16;  // mma M-dimension tiles (C columns)
      constexpr int FM = WTM / 8;   // mma N-dimension tiles (C rows)
      float acc[FN][FM][4];
#pragma unroll
      for (int i = 0; i < FN; ++i)
#pragma unroll
        for (int j = 0; j < FM; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
      const int q = lane >> 3, r8 = lane & 7;

      auto compute = [&](int slot) {
        const __half* sA = sbase + slot * STAGE_ELEMS;
        const __half* sB = sA + TA::ELEMS;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
          unsigned pf[FN][4];
          unsigned qf[FM][2];
#pragma unroll
          for (int i = 0; i < FN; ++i) {
            const int n = wn * WTN + i * 16;
            const int off = TRANS_B == 0 ? TB::off(n + r8 + (q & 1) * 8, kk + (q >> 1) * 8)
                                         : TB::off(kk + (q >> 1) * 8 + r8, n + (q & 1) * 8);
            ldmatrix_x4<TRANS_B != 0>(pf[i], sB + off);
          }
#pragma unroll
          for (int j = 0; j < FM / 2; ++j) {
            const int m = wm * WTM + j * 16;
            const int off = TRANS_A != 0 ? TA::off(m + r8 + (q >> 1) * 8, kk + (q & 1) * 8)
                                         : TA::off(kk + (q & 1) * 8 + r8, m + (q >> 1) * 8);
            unsigned t[4];
            ldmatrix_x4<TRANS_A == 0>(t, sA + off);
            qf[2 * j][0] = t[0];
            qf[2 * j][1] = t[1];
            qf[2 * j + 1][0] = t[2];
            qf[2 * j + 1][1] = t[3];
          }
#pragma unroll
          for (int i = 0; i < FN; ++i)
#pragma unroll
            for (int j = 0; j < FM; ++j) mma16816(acc[i][j], pf[i], qf[j][0], qf[j][1]);
        }
      };

#pragma unroll
      for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) load_stage(s, s, vec);
        cp_async_commit();
      }
      for (int kt = 0; kt < KT; ++kt) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const int nk = kt + STAGES - 1;
        if (nk < KT) load_stage(nk, nk % STAGES, vec);
        cp_async_commit();
        compute(kt % STAGES);
      }
      cp_async_wait<0>();
      if (live) {
        __half* Cb = C + b * strideC;
        const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
        for (int i = 0; i < FN; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int gn = n0 + wn * WTN + i * 16 + g + 8 * h;
            if (gn >= N) continue;
#pragma unroll
            for (int j = 0; j < FM; ++j) {
              const int gm = m0 + wm * WTM + j * 8 + 2 * t4;
              __half* p = Cb + (long long)gn * ldc + gm;
              float v0 = alpha * acc[i][j][2 * h], v1 = alpha * acc[i][j][2 * h + 1];
              if (cvec && gm + 1 < M) {
                if (beta != 0.0f) {
                  const float2 c = __half22float2(*reinterpret_cast<const __half2*>(p));
                  v0 += beta * c.x;
                  v1 += beta * c.y;
                }
                *reinterpret_cast<__half2*>(p) = __floats2half2_rn(v0, v1);
              } else {
                if (gm < M) p[0] = __float2half(beta != 0.0f ? v0 + beta * __half2float(p[0]) : v0);
                if (gm + 1 < M) p[1] = __float2half(beta != 0.0f ? v1 + beta * __half2float(p[1]) : v1);
              }
            }
          }
      }
      __syncthreads();
    }
  }
}

}  // namespace autotune
