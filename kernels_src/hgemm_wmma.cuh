// Batched HGEMM with WMMA tensor cores, the design of Abdelfattah, Tomov, Dongarra (shared/seeds/003_*):
// double-sided recursive blocking (BLK_M x BLK_N x BLK_K blocks for memory, TC_M x TC_N x TC_K fragments for
// math), a DIM_X x DIM_Y thread layout for global <-> shared transfers, several collaborative warps per block with
// round-robin assignment of the TC_M x TC_N sub-blocks of C, NSG problems (subgrids) per thread block, and zero
// padding of partial blocks so that any M, N, K >= 1 works.
//
// C = alpha * op(A) * op(B) + beta * C, column-major, fp16 in, fp32 accumulate, fp16 out, `strided` convention.
// Block = [DIM_X, DIM_Y, NSG]; grid = [ceil(M/BLK_M) * ceil(N/BLK_N) * ceil(batch/NSG), 1, 1]; the batch is walked by a
// grid-stride loop on grid.x, so batch counts above 65,535 work. beta == 0 never reads C.
#pragma once
#include <cuda_fp16.h>
#include <mma.h>

namespace autotune {
namespace wmma_detail {
template <bool B, class T, class F> struct cond { using type = T; };
template <class T, class F> struct cond<false, T, F> { using type = F; };
}  // namespace wmma_detail

template <int TRANS_A, int TRANS_B, int TC_M, int TC_N, int TC_K, int BLK_M, int BLK_N, int BLK_K, int DIM_X,
          int DIM_Y, int NSG>
__global__ void __launch_bounds__(DIM_X * DIM_Y * NSG)
hgemm_wmma(int M, int N, int K, float alpha, const __half* A, int lda, long long strideA, const __half* B, int ldb,
           long long strideB, float beta, __half* C, int ldc, long long strideC, int batch) {
  namespace wmma = nvcuda::wmma;
  static_assert((TC_M == 16 && TC_N == 16 && TC_K == 16) || (TC_M == 32 && TC_N == 8 && TC_K == 16) ||
                    (TC_M == 8 && TC_N == 32 && TC_K == 16),
                "WMMA fp16 shapes are (16,16,16), (32,8,16), (8,32,16)");
  static_assert(BLK_M % TC_M == 0 && BLK_N % TC_N == 0 && BLK_K % TC_K == 0, "TC_x must divide BLK_x");
  static_assert(BLK_M % DIM_X == 0 && BLK_N % DIM_X == 0 && BLK_K % DIM_X == 0 && BLK_M % DIM_Y == 0 &&
                    BLK_N % DIM_Y == 0 && BLK_K % DIM_Y == 0,
                "DIM_X and DIM_Y must divide every BLK_x");
  static_assert((DIM_X * DIM_Y) % 32 == 0, "DIM_X * DIM_Y must be a multiple of 32");
  constexpr int NWARPS = DIM_X * DIM_Y / 32;
  constexpr int TBM = BLK_M / TC_M, TBN = BLK_N / TC_N;
  constexpr int TC_BLOCKS = TBM * TBN;
  constexpr int NFRAG = (TC_BLOCKS + NWARPS - 1) / NWARPS;
  // Shared memory of one subgrid: sA[BLK_M][LDK] (k contiguous), sB[BLK_N][LDK] (k contiguous) during the main
  // loop, then sC[BLK_N][LDC] fp32 (column-major) for the write stage. Padding keeps WMMA's 32-byte alignment.
  constexpr int LDK = BLK_K + 8;
  constexpr int LDC = BLK_M + 4;
  constexpr int AB_BYTES = (BLK_M + BLK_N) * LDK * 2;
  constexpr int C_BYTES = BLK_N * LDC * 4;
  constexpr int SLICE = ((AB_BYTES > C_BYTES ? AB_BYTES : C_BYTES) + 127) / 128 * 128;
  __shared__ __align__(128) unsigned char smem_raw[NSG * SLICE];

  const int tx = threadIdx.x, ty = threadIdx.y, z = threadIdx.z;
  const int warp = (tx + ty * DIM_X) >> 5;
  __half* const sA = reinterpret_cast<__half*>(smem_raw + z * SLICE);
  __half* const sB = sA + BLK_M * LDK;
  float* const sC = reinterpret_cast<float*>(smem_raw + z * SLICE);
  const int tilesM = (M + BLK_M - 1) / BLK_M, tilesN = (N + BLK_N - 1) / BLK_N;
  const long long tiles = (long long)tilesM * tilesN;
  const long long work = tiles * ((batch + NSG - 1) / NSG);
  const __half zero = __float2half(0.0f);

  // Block ids run over (tile of C, group of NSG problems), the tiles of one problem side by side (they share
  // A and B rows/columns through L2); a grid-stride loop covers any grid size.
  for (long long lin = blockIdx.x; lin < work; lin += gridDim.x) {
    const int tile = static_cast<int>(lin % tiles);
    const int m0 = (tile % tilesM) * BLK_M, n0 = (tile / tilesM) * BLK_N;
    const long long b0 = lin / tiles * NSG;
    const bool live = b0 + z < batch;
    const long long b = live ? b0 + z : batch - 1;
    const __half* Ab = A + b * strideA;
    const __half* Bb = B + b * strideB;

    wmma::fragment<wmma::accumulator, TC_M, TC_N, TC_K, float> fC[NFRAG];
#pragma unroll
    for (int f = 0; f < NFRAG; ++f) wmma::fill_fragment(fC[f], 0.0f);

    for (int k0 = 0; k0 < K; k0 += BLK_K) {
      // read_global: the x threads run along the contiguous dimension of the stored matrix.
      if constexpr (TRANS_A == 0) {  // A stored M x K
#pragma unroll
        for (int iy = ty; iy < BLK_K; iy += DIM_Y)
#pragma unroll
          for (int ix = tx; ix < BLK_M; ix += DIM_X) {
            const int gm = m0 + ix, gk = k0 + iy;
            sA[ix * LDK + iy] = (gm < M && gk < K) ? Ab[(long long)gk * lda + gm] : zero;
          }
      } else {  // A stored K x M
#pragma unroll
        for (int iy = ty; iy < BLK_M; iy += DIM_Y)
#pragma unroll
          for (int ix = tx; ix < BLK_K; ix += DIM_X) {
            const int gk = k0 + ix, gm = m0 + iy;
            sA[iy * LDK + ix] = (gm < M && gk < K) ? Ab[(long long)gm * lda + gk] : zero;
          }
      }
      if constexpr (TRANS_B == 0) {  // B stored K x N
#pragma unroll
        for (int iy = ty; iy < BLK_N; iy += DIM_Y)
#pragma unroll
          for (int ix = tx; ix < BLK_K; ix += DIM_X) {
            const int gk = k0 + ix, gn = n0 + iy;
            sB[iy * LDK + ix] = (gn < N && gk < K) ? Bb[(long long)gn * ldb + gk] : zero;
          }
      } else {  // B stored N x K
#pragma unroll
        for (int iy = ty; iy < BLK_K; iy += DIM_Y)
#pragma unroll
          for (int ix = tx; ix < BLK_N; ix += DIM_X) {
            const int gn = n0 + ix, gk = k0 + iy;
            sB[ix * LDK + iy] = (gn < N && gk < K) ? Bb[(long long)gk * ldb + gn] : zero;
          }
      }
      __syncthreads();
      // tc_multiply: warps take the C sub-blocks round-robin; the cleanup is the `t < TC_BLOCKS` test.
#pragma unroll
      for (int f = 0; f < NFRAG; ++f) {
        const int t = warp + f * NWARPS;
        if (TC_BLOCKS % NWARPS == 0 || t < TC_BLOCKS) {
          const int i = (t % TBM) * TC_M, j = (t / TBM) * TC_N;
#pragma unroll
          for (int k = 0; k < BLK_K; k += TC_K) {
            wmma::fragment<wmma::matrix_a, TC_M, TC_N, TC_K, __half, wmma::row_major> fA;
            wmma::fragment<wmma::matrix_b, TC_M, TC_N, TC_K, __half, wmma::col_major> fB;
            wmma::load_matrix_sync(fA, sA + i * LDK + k, LDK);
            wmma::load_matrix_sync(fB, sB + j * LDK + k, LDK);
            wmma::mma_sync(fC[f], fA, fB, fC[f]);
          }
        }
      }
      __syncthreads();
    }
    // write stage: fragments -> sC (fp32), then the DIM_X x DIM_Y layout writes C with alpha and beta.
#pragma unroll
    for (int f = 0; f < NFRAG; ++f) {
      const int t = warp + f * NWARPS;
      if (TC_BLOCKS % NWARPS == 0 || t < TC_BLOCKS) {
        const int i = (t % TBM) * TC_M, j = (t / TBM) * TC_N;
        wmma::store_matrix_sync(sC + j * LDC + i, fC[f], LDC, wmma::mem_col_major);
      }
    }
    __syncthreads();
    if (live) {
      __half* Cb = C + b * strideC;
#pragma unroll
      for (int iy = ty; iy < BLK_N; iy += DIM_Y)
#pragma unroll
        for (int ix = tx; ix < BLK_M; ix += DIM_X) {
          const int gm = m0 + ix, gn = n0 + iy;
          if (gm < M && gn < N) {
            __half* p = Cb + (long long)gn * ldc + gm;
            float v = alpha * sC[iy * LDC + ix];
            if (beta != 0.0f) v += beta * __half2float(*p);
            *p = __float2half(v);
          }
        }
    }
    __syncthreads();
  }
}

}  // namespace autotune
