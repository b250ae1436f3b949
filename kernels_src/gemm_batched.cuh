// MAGMA-style batched GEMM (seed 004: Abdelfattah et al., "Performance, design, and autotuning of
// batched GEMM for GPUs"), one device-side core behind three calling conventions:
//   gemm_batched      `strided`    fixed sizes, matrix b at A + b * strideA
//   gemm_batched_ptr  `ptr_array`  fixed sizes, matrix b at A[b]
//   gemm_vbatched     `vbatched`   variable sizes (arrays of M, N, K, lda, ldb, ldc), early termination
//
// C = alpha * op(A) * op(B) + beta * C, column-major, BLAS semantics. beta == 0 never reads C.
//
// Tuning parameters (template arguments):
//   DIM_X x DIM_Y      threads that compute one C tile (thread (tx, ty) owns the BLK_M/DIM_X x BLK_N/DIM_Y
//                      elements m = tx + i*DIM_X, n = ty + j*DIM_Y: register blocking, coalesced C access)
//   BLK_M x BLK_N      C tile of one problem; BLK_K = depth of one shared-memory stage
//   DIM_XA x DIM_YA    thread layout that reads the stored A tile (DIM_XA runs along the stored, contiguous
//                      dimension: M when A is not transposed, K when it is), likewise DIM_XB x DIM_YB for B
//   NSG                problems (sub-grids) per thread block; threadIdx.z selects the problem
// Launch: block (DIM_X, DIM_Y, NSG); grid (ceil(batch / NSG) * ceil(M / BLK_M) * ceil(N / BLK_N), 1, 1),
// tiles of one problem group adjacent (so a problem's A and B panels are re-read while still in L2), batch
// counts up to 2^31 / tiles. Dynamic shared memory: none (the tiles are static, ~ NSG * (BLK_K * (BLK_M + 1) +
// BLK_N * (BLK_K + 1)) elements).
//
// Pipeline (as in MAGMA): the first K stage is read into registers and stored to shared memory; then, for
// each further stage, the next stage is prefetched into registers while the current one is multiplied
// out of shared memory (double buffering through registers). Tile loads outside the matrix return zero,
// so any M, N, K >= 1 is handled; C stores outside the matrix are skipped.
#pragma once
#include <cuda_fp16.h>

#include "precision.cuh"

namespace autotune {
namespace batched_detail {

using precision::from_acc;
using precision::scalar_of;
using precision::to_acc;

template <typename T> __device__ __forceinline__ T zero() { return T(0); }
template <> __device__ __forceinline__ __half zero<__half>() { return __float2half_rn(0.0f); }

__host__ __device__ constexpr int cdiv(int a, int b) { return (a + b - 1) / b; }

// Registers that hold one stored tile (R contiguous rows x C columns) read by a DXL x DYL thread layout.
template <typename T, int R, int C, int DXL, int DYL>
struct TileRegs {
  static constexpr int NR = cdiv(R, DXL);
  static constexpr int NC = cdiv(C, DYL);
  T v[NC][NR];

  // Reads the tile at p (leading dimension ld); rows_left / cols_left: rows / columns of the matrix that
  // remain from the tile's corner (<= 0: nothing). Elements outside the matrix read as zero.
  __device__ __forceinline__ void load(const T* __restrict__ p, int ld, int rows_left, int cols_left,
                                       int lx, int ly) {
#pragma unroll
    for (int c = 0; c < NC; ++c) {
#pragma unroll
      for (int r = 0; r < NR; ++r) {
        const int rr = lx + r * DXL;
        const int cc = ly + c * DYL;
        const bool in_tile = (R % DXL == 0 || rr < R) && (C % DYL == 0 || cc < C);
        v[c][r] = (in_tile && rr < rows_left && cc < cols_left) ? p[rr + (long long)cc * ld] : zero<T>();
      }
    }
  }

  // Stores into shared memory s (row pitch P): TRANSPOSE == 0 writes s[cc][rr], else s[rr][cc].
  template <int TRANSPOSE, int P>
  __device__ __forceinline__ void store(T* s, int lx, int ly) const {
#pragma unroll
    for (int c = 0; c < NC; ++c) {
#pragma unroll
      for (int r = 0; r < NR; ++r) {
        const int rr = lx + r * DXL;
        const int cc = ly + c * DYL;
        if ((R % DXL == 0 || rr < R) && (C % DYL == 0 || cc < C)) {
          if (TRANSPOSE == 0) s[cc * P + rr] = v[c][r];
          else s[rr * P + cc] = v[c][r];
        }
      }
    }
  }
};

// One problem, one C tile (m0, n0). M, N, K: this problem's sizes, all zero when the thread's problem slot is
// empty (then nothing is read or written, but the thread still takes part in every barrier).
// VARIABLE == 0: every problem slot of the block runs k_loop stages (uniform K); VARIABLE == 1: the block
// runs as many stages as its largest problem needs (problems of one block may differ in K).
template <typename T, int TRANS_A, int TRANS_B, int DIM_X, int DIM_Y, int BLK_M, int BLK_N, int BLK_K,
          int DIM_XA, int DIM_YA, int DIM_XB, int DIM_YB, int NSG, int VARIABLE>
__device__ __forceinline__ void gemm_core(int M, int N, int K, int k_loop, typename scalar_of<T>::type alpha,
                                          const T* __restrict__ A, int lda, const T* __restrict__ B, int ldb,
                                          typename scalar_of<T>::type beta, T* __restrict__ C, int ldc,
                                          int m0, int n0) {
  using S = typename scalar_of<T>::type;
  static_assert(BLK_M % DIM_X == 0 && BLK_N % DIM_Y == 0, "register blocking: DIM_X | BLK_M, DIM_Y | BLK_N");
  static_assert(DIM_XA * DIM_YA == DIM_X * DIM_Y && DIM_XB * DIM_YB == DIM_X * DIM_Y,
                "the A and B reading layouts use all DIM_X * DIM_Y threads");
  constexpr int THR_M = BLK_M / DIM_X;
  constexpr int THR_N = BLK_N / DIM_Y;
  constexpr int PA = BLK_M + 1;  // sA[k][m]: op(A) tile, k-major
  constexpr int PB = BLK_K + 1;  // sB[n][k]: op(B) tile, n-major
  __shared__ T sA_all[NSG][BLK_K * PA];
  __shared__ T sB_all[NSG][BLK_N * PB];
  T* sA = sA_all[threadIdx.z];
  T* sB = sB_all[threadIdx.z];

  const int tx = threadIdx.x, ty = threadIdx.y;
  const int lid = tx + ty * DIM_X;
  const int lxa = lid % DIM_XA, lya = lid / DIM_XA;
  const int lxb = lid % DIM_XB, lyb = lid / DIM_XB;

  // Stored tiles: A is BLK_M x BLK_K (not transposed) or BLK_K x BLK_M; B is BLK_K x BLK_N or BLK_N x BLK_K.
  TileRegs<T, TRANS_A ? BLK_K : BLK_M, TRANS_A ? BLK_M : BLK_K, DIM_XA, DIM_YA> ra;
  TileRegs<T, TRANS_B ? BLK_N : BLK_K, TRANS_B ? BLK_K : BLK_N, DIM_XB, DIM_YB> rb;

  // Tile origins and the extents left: A element (m, k) is at m + k*lda (N) or k + m*lda (T).
  const T* pA = TRANS_A ? A + m0 * (long long)lda : A + m0;
  const T* pB = TRANS_B ? B + n0 : B + n0 * (long long)ldb;
  const long long stepA = TRANS_A ? BLK_K : (long long)BLK_K * lda;
  const long long stepB = TRANS_B ? (long long)BLK_K * ldb : BLK_K;
  int k_left = K;
  auto load_stage = [&]() {
    if (TRANS_A) ra.load(pA, lda, k_left, M - m0, lxa, lya);
    else ra.load(pA, lda, M - m0, k_left, lxa, lya);
    if (TRANS_B) rb.load(pB, ldb, N - n0, k_left, lxb, lyb);
    else rb.load(pB, ldb, k_left, N - n0, lxb, lyb);
  };

  S rC[THR_N][THR_M];
#pragma unroll
  for (int j = 0; j < THR_N; ++j)
#pragma unroll
    for (int i = 0; i < THR_M; ++i) rC[j][i] = S(0);

  auto multiply_stage = [&]() {
#pragma unroll
    for (int k = 0; k < BLK_K; ++k) {
      S a[THR_M], b[THR_N];
#pragma unroll
      for (int i = 0; i < THR_M; ++i) a[i] = to_acc(sA[k * PA + tx + i * DIM_X]);
#pragma unroll
      for (int j = 0; j < THR_N; ++j) b[j] = to_acc(sB[(ty + j * DIM_Y) * PB + k]);
#pragma unroll
      for (int j = 0; j < THR_N; ++j)
#pragma unroll
        for (int i = 0; i < THR_M; ++i) rC[j][i] += a[i] * b[j];
    }
  };

  load_stage();
  ra.template store<TRANS_A, PA>(sA, lxa, lya);
  rb.template store<TRANS_B, PB>(sB, lxb, lyb);
  __syncthreads();

  for (int kk = BLK_K;; kk += BLK_K) {
    const bool more = VARIABLE ? __syncthreads_or(kk < K) != 0 : kk < k_loop;
    if (!more) break;
    pA += stepA;
    pB += stepB;
    k_left -= BLK_K;
    load_stage();  // prefetch the next stage into registers ...
    multiply_stage();  // ... while this one is multiplied out of shared memory
    __syncthreads();
    ra.template store<TRANS_A, PA>(sA, lxa, lya);
    rb.template store<TRANS_B, PB>(sB, lxb, lyb);
    __syncthreads();
  }
  multiply_stage();

#pragma unroll
  for (int j = 0; j < THR_N; ++j) {
    const int n = n0 + ty + j * DIM_Y;
#pragma unroll
    for (int i = 0; i < THR_M; ++i) {
      const int m = m0 + tx + i * DIM_X;
      if (m < M && n < N) {
        T* c = C + m + n * (long long)ldc;
        S v = alpha * rC[j][i];
        if (beta != S(0)) v += beta * to_acc(*c);
        *c = from_acc<T>(v);
      }
    }
  }
}

// Decodes the block index into (problem slot base, tile m0, n0); tiles of one problem group are adjacent.
template <int BLK_M, int BLK_N, int NSG>
struct BlockPlace {
  long long problem;  // this thread's problem index (threadIdx.z included)
  int m0, n0;
  __device__ __forceinline__ BlockPlace(int max_m, int max_n) {
    const int tiles_m = cdiv(max_m, BLK_M);
    const int tiles_n = cdiv(max_n, BLK_N);
    const long long tiles = (long long)tiles_m * tiles_n;
    const long long bid = blockIdx.x;
    const long long group = bid / tiles;
    const int t = (int)(bid - group * tiles);
    m0 = (t % tiles_m) * BLK_M;
    n0 = (t / tiles_m) * BLK_N;
    problem = group * NSG + threadIdx.z;
  }
};

}  // namespace batched_detail

// Convention `strided`.
template <typename T, int TRANS_A, int TRANS_B, int DIM_X, int DIM_Y, int BLK_M, int BLK_N, int BLK_K,
          int DIM_XA, int DIM_YA, int DIM_XB, int DIM_YB, int NSG>
__global__ void __launch_bounds__(DIM_X * DIM_Y * NSG)
gemm_batched(int M, int N, int K, typename batched_detail::scalar_of<T>::type alpha, const T* A, int lda,
             long long strideA, const T* B, int ldb, long long strideB,
             typename batched_detail::scalar_of<T>::type beta, T* C, int ldc, long long strideC, int batch) {
  const batched_detail::BlockPlace<BLK_M, BLK_N, NSG> at(M, N);
  const bool has = at.problem < batch;
  const long long b = has ? at.problem : 0;
  batched_detail::gemm_core<T, TRANS_A, TRANS_B, DIM_X, DIM_Y, BLK_M, BLK_N, BLK_K, DIM_XA, DIM_YA, DIM_XB,
                            DIM_YB, NSG, 0>(has ? M : 0, has ? N : 0, has ? K : 0, K, alpha, A + b * strideA,
                                            lda, B + b * strideB, ldb, beta, C + b * strideC, ldc, at.m0, at.n0);
}

// Convention `ptr_array`.
template <typename T, int TRANS_A, int TRANS_B, int DIM_X, int DIM_Y, int BLK_M, int BLK_N, int BLK_K,
          int DIM_XA, int DIM_YA, int DIM_XB, int DIM_YB, int NSG>
__global__ void __launch_bounds__(DIM_X * DIM_Y * NSG)
gemm_batched_ptr(int M, int N, int K, typename batched_detail::scalar_of<T>::type alpha, const T* const* A,
                 int lda, const T* const* B, int ldb, typename batched_detail::scalar_of<T>::type beta,
                 T* const* C, int ldc, int batch) {
  const batched_detail::BlockPlace<BLK_M, BLK_N, NSG> at(M, N);
  const bool has = at.problem < batch;
  const long long b = has ? at.problem : 0;
  batched_detail::gemm_core<T, TRANS_A, TRANS_B, DIM_X, DIM_Y, BLK_M, BLK_N, BLK_K, DIM_XA, DIM_YA, DIM_XB,
                            DIM_YB, NSG, 0>(has ? M : 0, has ? N : 0, has ? K : 0, K, alpha, A[b], lda, B[b],
                                            ldb, beta, C[b], ldc, at.m0, at.n0);
}

// Convention `vbatched`: the grid is sized by max_m / max_n; a block whose tile lies outside every one of
// its problems leaves at once, and a problem slot without work (tile outside its matrix, or past the batch)
// neither reads nor writes (early termination, ETM).
template <typename T, int TRANS_A, int TRANS_B, int DIM_X, int DIM_Y, int BLK_M, int BLK_N, int BLK_K,
          int DIM_XA, int DIM_YA, int DIM_XB, int DIM_YB, int NSG>
__global__ void __launch_bounds__(DIM_X * DIM_Y * NSG)
gemm_vbatched(const int* M, const int* N, const int* K, typename batched_detail::scalar_of<T>::type alpha,
              const T* const* A, const int* lda, const T* const* B, const int* ldb,
              typename batched_detail::scalar_of<T>::type beta, T* const* C, const int* ldc, int batch,
              int max_m, int max_n, int max_k) {
  (void)max_k;
  const batched_detail::BlockPlace<BLK_M, BLK_N, NSG> at(max_m, max_n);
  const long long b = at.problem;
  int m = 0, n = 0, k = 0;
  if (b < batch) {
    m = M[b];
    n = N[b];
    k = K[b];
  }
  const bool has = at.m0 < m && at.n0 < n && k > 0;
  if (__syncthreads_or(has) == 0) return;  // ETM: the whole block has no work
  if (!has) m = n = k = 0;
  const long long bb = has ? b : 0;
  batched_detail::gemm_core<T, TRANS_A, TRANS_B, DIM_X, DIM_Y, BLK_M, BLK_N, BLK_K, DIM_XA, DIM_YA, DIM_XB,
                            DIM_YB, NSG, 1>(m, n, k, 0, alpha, has ? A[bb] : nullptr, has ? lda[bb] : 1,
                                            has ? B[bb] : nullptr, has ? ldb[bb] : 1, beta,
                                            has ? C[bb] : nullptr, has ? ldc[bb] : 1, at.m0, at.n0);
}

}  // namespace autotune
