// gemm_naive: one thread per element of C. Simple, correct for every precision, transposition shape,
// size and batch count; the dispatch table's last-resort fallback and the runner's smoke-test kernel.
//
// Convention `strided` (column-major, BLAS semantics), see shared contract:
//   C_b = alpha * op(A_b) * op(B_b) + beta * C_b,  b = 0 .. batch-1,  X_b = X + b * strideX.
// Launch: block (BLOCK_X, BLOCK_Y, 1); grid (ceil(M / BLOCK_X), ceil(N / BLOCK_Y), min(batch, 65535)).
// Batches beyond grid.z are covered by a grid-stride loop over b. beta == 0 never reads C.
#pragma once
#include <cuda_fp16.h>

namespace autotune {
namespace naive_detail {

template <typename S, typename T> __device__ __forceinline__ S load_as(const T* p) { return static_cast<S>(*p); }
template <> __device__ __forceinline__ float load_as<float, __half>(const __half* p) { return __half2float(*p); }

template <typename T, typename S> __device__ __forceinline__ void store_from(T* p, S v) { *p = static_cast<T>(v); }
template <> __device__ __forceinline__ void store_from<__half, float>(__half* p, float v) { *p = __float2half_rn(v); }

}  // namespace naive_detail

template <typename T, typename S, int TRANS_A, int TRANS_B, int BLOCK_X, int BLOCK_Y>
__global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
gemm_naive(int M, int N, int K, S alpha,
           const T* __restrict__ A, int lda, long long strideA,
           const T* __restrict__ B, int ldb, long long strideB,
           S beta, T* __restrict__ C, int ldc, long long strideC, int batch)
{
    const int i = blockIdx.x * BLOCK_X + threadIdx.x;  // row of C
    const int j = blockIdx.y * BLOCK_Y + threadIdx.y;  // column of C
    if (i >= M || j >= N) return;
    for (long long b = blockIdx.z; b < batch; b += gridDim.z) {
        const T* Ab = A + b * strideA;
        const T* Bb = B + b * strideB;
        S acc = S(0);
        for (int p = 0; p < K; ++p) {
            // op(A)(i, p) and op(B)(p, j), column-major storage
            const T* a = TRANS_A ? Ab + p + static_cast<long long>(i) * lda : Ab + i + static_cast<long long>(p) * lda;
            const T* bp = TRANS_B ? Bb + j + static_cast<long long>(p) * ldb : Bb + p + static_cast<long long>(j) * ldb;
            acc += naive_detail::load_as<S>(a) * naive_detail::load_as<S>(bp);
        }
        T* c = C + b * strideC + i + static_cast<long long>(j) * ldc;
        S r = alpha * acc;
        if (beta != S(0)) r += beta * naive_detail::load_as<S>(c);
        naive_detail::store_from<T, S>(c, r);
    }
}

}  // namespace autotune
