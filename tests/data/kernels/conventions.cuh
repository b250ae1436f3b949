// Test-only one-thread-per-element kernels for the `ptr_array` and `vbatched` calling conventions, to
// check the argument tuples that autotune/launch.py builds. Launch: block (BX, BY), grid
// (ceil(max_m / BX), ceil(max_n / BY), min(batch, 65535)).
#pragma once
#include <cuda_fp16.h>

namespace autotune_test {

template <typename S, typename T> __device__ __forceinline__ S ld(const T* p) { return static_cast<S>(*p); }
template <> __device__ __forceinline__ float ld<float, __half>(const __half* p) { return __half2float(*p); }
template <typename T, typename S> __device__ __forceinline__ void st(T* p, S v) { *p = static_cast<T>(v); }
template <> __device__ __forceinline__ void st<__half, float>(__half* p, float v) { *p = __float2half_rn(v); }

template <typename T, typename S, int TRANS_A, int TRANS_B>
__device__ void element(int i, int j, int K, S alpha, const T* A, int lda, const T* B, int ldb, S beta, T* C, int ldc)
{
    S acc = S(0);
    for (int p = 0; p < K; ++p) {
        const T* a = TRANS_A ? A + p + static_cast<long long>(i) * lda : A + i + static_cast<long long>(p) * lda;
        const T* b = TRANS_B ? B + j + static_cast<long long>(p) * ldb : B + p + static_cast<long long>(j) * ldb;
        acc += ld<S>(a) * ld<S>(b);
    }
    T* c = C + i + static_cast<long long>(j) * ldc;
    S r = alpha * acc;
    if (beta != S(0)) r += beta * ld<S>(c);
    st<T, S>(c, r);
}

template <typename T, typename S, int TRANS_A, int TRANS_B>
__global__ void gemm_ptr(int M, int N, int K, S alpha, const T* const* A, int lda, const T* const* B, int ldb,
                         S beta, T* const* C, int ldc, int batch)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= M || j >= N) return;
    for (int b = blockIdx.z; b < batch; b += gridDim.z)
        element<T, S, TRANS_A, TRANS_B>(i, j, K, alpha, A[b], lda, B[b], ldb, beta, C[b], ldc);
}

template <typename T, typename S, int TRANS_A, int TRANS_B>
__global__ void gemm_vbatched(const int* M, const int* N, const int* K, S alpha, const T* const* A, const int* lda,
                              const T* const* B, const int* ldb, S beta, T* const* C, const int* ldc, int batch,
                              int max_m, int max_n, int max_k)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y;
    for (int b = blockIdx.z; b < batch; b += gridDim.z) {
        if (i >= M[b] || j >= N[b]) continue;  // early termination for smaller problems
        element<T, S, TRANS_A, TRANS_B>(i, j, K[b], alpha, A[b], lda[b], B[b], ldb[b], beta, C[b], ldc[b]);
    }
}

}  // namespace autotune_test
