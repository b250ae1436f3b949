// Test-only kernels with the `strided` signature of gemm_naive, each broken on purpose, to show that
// the runner records failures and goes on. Never part of a space under spaces/.
#pragma once
#include <cuda_fp16.h>

namespace autotune_test {

// Writes through a wild pointer: the launch fails with an illegal address and poisons the context.
template <typename T, typename S, int TRANS_A, int TRANS_B>
__global__ void gemm_fault(int M, int N, int K, S alpha, const T* A, int lda, long long strideA,
                           const T* B, int ldb, long long strideB, S beta, T* C, int ldc, long long strideC, int batch)
{
    T* wild = C + (1LL << 40) + threadIdx.x;
    *wild = C[0];
}

// Never returns (spins on the GPU clock): the watchdog must kill the worker.
template <typename T, typename S, int TRANS_A, int TRANS_B>
__global__ void gemm_hang(int M, int N, int K, S alpha, const T* A, int lda, long long strideA,
                          const T* B, int ldb, long long strideB, S beta, T* C, int ldc, long long strideC, int batch)
{
    long long t0 = clock64();
    while (clock64() - t0 >= 0) {
    }
}

// Computes every element but drops the last term of each dot product: verification must catch it.
template <typename T, typename S, int TRANS_A, int TRANS_B>
__global__ void gemm_wrong(int M, int N, int K, S alpha, const T* A, int lda, long long strideA,
                           const T* B, int ldb, long long strideB, S beta, T* C, int ldc, long long strideC, int batch)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= M || j >= N) return;
    for (long long b = blockIdx.z; b < batch; b += gridDim.z) {
        S acc = S(0);
        for (int p = 0; p + 1 < K; ++p)
            acc += static_cast<S>(A[b * strideA + i + static_cast<long long>(p) * lda]) *
                   static_cast<S>(B[b * strideB + p + static_cast<long long>(j) * ldb]);
        C[b * strideC + i + static_cast<long long>(j) * ldc] = static_cast<T>(alpha * acc);
    }
}

// Does not compile: the compile error must be recorded with its log, the sweep goes on.
template <typename T, typename S, int TRANS_A, int TRANS_B>
__global__ void gemm_broken(int M, int N, int K, S alpha, const T* A, int lda, long long strideA,
                            const T* B, int ldb, long long strideB, S beta, T* C, int ldc, long long strideC, int batch)
{
    static_assert(sizeof(T) == 0, "gemm_broken never compiles");
}

}  // namespace autotune_test
