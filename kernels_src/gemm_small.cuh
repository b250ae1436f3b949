// Batched GEMM for very small matrices: magma-small-v3 (seed 003, section VII-C; after Masliah et al. 2016).
// No tensor cores: one thread per element of C, A and B staged in shared memory, C accumulated in a
// register, loops fully unrolled over compile-time bounds, NSG problems per thread block.
//
// C = alpha * op(A) * op(B) + beta * C, column-major, BLAS semantics; convention `strided`. beta == 0 never
// reads C.
//
// Tuning parameters (template arguments):
//   BLK_M, BLK_N  compile-time bounds of one C tile: a problem gets BLK_M * BLK_N threads, one per element
//                 (the paper's N x N thread configuration, generalised to rectangles)
//   BLK_K         compile-time depth of the staged A and B panels (the unrolled inner loop)
//   NSG           problems per thread block (threadIdx.y selects the problem)
// Launch: block (BLK_M * BLK_N, NSG, 1); grid (ceil(batch / NSG), 1, 1); no dynamic shared memory.
//
// Sizes: the fast path is M <= BLK_M, N <= BLK_N, K <= BLK_K (one tile, one stage, everything unrolled);
// larger sizes stay correct (C tiles and K stages are looped over at run time), only slower. The threads
// of a tile are mapped onto the actual mt x nt extent (t -> (t % mt, t / mt)), so an instance with bounds
// above the problem keeps its C stores contiguous; global reads walk the stored matrix in memory order.
#pragma once
#include <cuda_fp16.h>

#include "precision.cuh"

namespace autotune {
namespace small_detail {

using precision::from_acc;
using precision::scalar_of;
using precision::to_acc;

__host__ __device__ constexpr int cdiv(int a, int b) { return (a + b - 1) / b; }

// Copies the stored tile (rows x cols, contiguous along rows, leading dimension ld) into shared memory as
// s[c * pitch + r] (TRANSPOSE == 0) or s[r * pitch + c] (TRANSPOSE == 1), walking it in memory order with
// P threads. FULL_R x FULL_C is the largest tile (compile-time, so the loops unroll); a full tile, the
// common case, takes the path where the index arithmetic divides by a constant.
template <typename T, int P, int FULL_R, int FULL_C, int TRANSPOSE>
__device__ __forceinline__ void stage(const T* __restrict__ g, int ld, int rows, int cols, T* s, int pitch,
                                      int t) {
  if (rows == FULL_R && cols == FULL_C) {
    constexpr int L = cdiv(FULL_R * FULL_C, P);
    T v[L];
#pragma unroll
    for (int l = 0; l < L; ++l) {
      const int e = t + l * P;
      if ((FULL_R * FULL_C) % P == 0 || e < FULL_R * FULL_C) v[l] = g[e % FULL_R + (long long)(e / FULL_R) * ld];
    }
#pragma unroll
    for (int l = 0; l < L; ++l) {
      const int e = t + l * P;
      if ((FULL_R * FULL_C) % P == 0 || e < FULL_R * FULL_C) {
        const int r = e % FULL_R, c = e / FULL_R;
        if (TRANSPOSE == 0) s[c * pitch + r] = v[l];
        else s[r * pitch + c] = v[l];
      }
    }
    return;
  }
  constexpr int L = cdiv(FULL_R * FULL_C, P);
  const int count = rows * cols;
  T v[L];
#pragma unroll
  for (int l = 0; l < L; ++l) {
    const int e = t + l * P;
    if (e < count) v[l] = g[e % rows + (long long)(e / rows) * ld];
  }
#pragma unroll
  for (int l = 0; l < L; ++l) {
    const int e = t + l * P;
    if (e < count) {
      const int r = e % rows, c = e / rows;
      if (TRANSPOSE == 0) s[c * pitch + r] = v[l];
      else s[r * pitch + c] = v[l];
    }
  }
}

}  // namespace small_detail

template <typename T, int TRANS_A, int TRANS_B, int BLK_M, int BLK_N, int BLK_K, int NSG>
__global__ void __launch_bounds__(BLK_M * BLK_N * NSG)
gemm_small(int M, int N, int K, typename small_detail::scalar_of<T>::type alpha, const T* A, int lda,
           long long strideA, const T* B, int ldb, long long strideB,
           typename small_detail::scalar_of<T>::type beta, T* C, int ldc, long long strideC, int batch) {
  using S = typename small_detail::scalar_of<T>::type;
  constexpr int P = BLK_M * BLK_N;  // threads per problem
  constexpr int PA = BLK_M;         // sA[k][i]: op(A) panel, k-major
  constexpr int PB = BLK_K + 1;     // sB[j][k]: op(B) panel, j-major (padded against bank conflicts)
  __shared__ T sA_all[NSG][BLK_K * PA];
  __shared__ T sB_all[NSG][BLK_N * PB];
  T* sA = sA_all[threadIdx.y];
  T* sB = sB_all[threadIdx.y];

  const int t = threadIdx.x;
  const long long b = (long long)blockIdx.x * NSG + threadIdx.y;
  const bool has = b < batch;  // an empty problem slot still takes part in every barrier
  const T* a = A + (has ? b : 0) * strideA;
  const T* bm = B + (has ? b : 0) * strideB;
  T* c = C + (has ? b : 0) * strideC;

  bool first = true;
  for (int i0 = 0; i0 < M; i0 += BLK_M) {
    const int mt = min(BLK_M, M - i0);
    for (int j0 = 0; j0 < N; j0 += BLK_N) {
      const int nt = min(BLK_N, N - j0);
      // this thread's element of the mt x nt tile (valid if tj < nt); constant divisor for a full tile
      const int ti = mt == BLK_M ? t % BLK_M : t % mt;
      const int tj = mt == BLK_M ? t / BLK_M : t / mt;
      S acc = S(0);
      for (int k0 = 0; k0 < K; k0 += BLK_K) {
        const int kt = min(BLK_K, K - k0);
        if (!first) __syncthreads();  // the previous stage has been consumed
        first = false;
        if (has) {
          if (TRANS_A == 0)  // stored mt x kt at (i0, k0)
            small_detail::stage<T, P, BLK_M, BLK_K, 0>(a + i0 + k0 * (long long)lda, lda, mt, kt, sA, PA, t);
          else  // stored kt x mt at (k0, i0)
            small_detail::stage<T, P, BLK_K, BLK_M, 1>(a + k0 + i0 * (long long)lda, lda, kt, mt, sA, PA, t);
          if (TRANS_B == 0)  // stored kt x nt at (k0, j0)
            small_detail::stage<T, P, BLK_K, BLK_N, 0>(bm + k0 + j0 * (long long)ldb, ldb, kt, nt, sB, PB, t);
          else  // stored nt x kt at (j0, k0)
            small_detail::stage<T, P, BLK_N, BLK_K, 1>(bm + j0 + k0 * (long long)ldb, ldb, nt, kt, sB, PB, t);
        }
        __syncthreads();
        if (tj < nt) {
#pragma unroll
          for (int k = 0; k < BLK_K; ++k)
            if (k < kt) acc += small_detail::to_acc(sA[k * PA + ti]) * small_detail::to_acc(sB[tj * PB + k]);
        }
      }
      if (has && tj < nt) {
        T* p = c + (i0 + ti) + (j0 + tj) * (long long)ldc;
        S v = alpha * acc;
        if (beta != S(0)) v += beta * small_detail::to_acc(*p);
        *p = small_detail::from_acc<T>(v);
      }
    }
  }
}

}  // namespace autotune
