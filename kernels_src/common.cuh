// Building blocks shared by the kernel templates:
//   common::cdiv              ceiling division (compile-time geometry)
//   common::misalign          how many elements a pointer lies past a 16-byte boundary
//   common::gemm_per_element  the one-thread-per-element GEMM a bounded kernel runs above its compile-time bounds
//   ptx::*                    the sm_80+ instructions of the tensor-core families: cp.async (16 bytes, optionally
//                             zero-filled), commit/wait groups, ldmatrix x4 (plain or transposed), mma.sync
//                             m16n8k16 (fp16 in, fp32 accumulate), 16-byte shared stores
#pragma once
#include <cuda_fp16.h>

#include "precision.cuh"

namespace autotune {
namespace common {

__host__ __device__ constexpr int cdiv(int a, int b) { return (a + b - 1) / b; }

// Misalignment of p to 16 bytes, in elements (T* is always aligned to sizeof(T)).
template <typename T> __device__ __forceinline__ int misalign(const T* p) {
  return static_cast<int>((reinterpret_cast<unsigned long long>(p) & 15ull) / sizeof(T));
}

// C = alpha * op(A) * op(B) + beta * C for every problem of the batch, one thread per element of C, straight from
// global memory (no shared memory, no barriers: any thread may return early). Threads start at element `first` and
// step by `step` (a grid-stride loop over batch * M * N elements, 64-bit). beta == 0 never reads C. Correct for any
// size and layout; slow. S (float for fp16) is the type of alpha, beta and the accumulator.
template <int TRANS_A, int TRANS_B, typename T>
__device__ void gemm_per_element(int M, int N, int K, typename precision::scalar_of<T>::type alpha, const T* A, int lda,
                                 long long strideA, const T* B, int ldb, long long strideB,
                                 typename precision::scalar_of<T>::type beta, T* C, int ldc, long long strideC,
                                 int batch, long long first, long long step) {
  using S = typename precision::scalar_of<T>::type;
  const long long mn = (long long)M * N;
  const long long total = (long long)batch * mn;
  for (long long idx = first; idx < total; idx += step) {
    const long long p = idx / mn;
    const long long e = idx - p * mn;
    const int i = static_cast<int>(e % M), j = static_cast<int>(e / M);
    const T* a = A + p * strideA;
    const T* b = B + p * strideB;
    S s = S(0);
#pragma unroll 1
    for (int k = 0; k < K; ++k) {
      const S x = precision::to_acc(TRANS_A == 0 ? a[(long long)k * lda + i] : a[(long long)i * lda + k]);
      const S y = precision::to_acc(TRANS_B == 0 ? b[(long long)j * ldb + k] : b[(long long)k * ldb + j]);
      s += x * y;
    }
    T* cp = C + p * strideC + (long long)j * ldc + i;
    S v = alpha * s;
    if (beta != S(0)) v += beta * precision::to_acc(*cp);
    *cp = precision::from_acc<T>(v);
  }
}

}  // namespace common

namespace ptx {

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// 16 bytes global -> shared, bypassing L1.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(smem)), "l"(gmem));
}
// The same, reading only the first src_bytes (0..16) and zero-filling the rest.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Wait until at most N committed groups of this thread are still in flight.
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
// Four 8 x 8 matrices of halves; lane l addresses row l % 8 of matrix l / 8.
template <bool TRANS> __device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  if constexpr (TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
  }
}
// d += a * b on a 16 x 8 x 16 tile: fp16 fragments, fp32 accumulators.
__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void st_shared_v4(void* p, unsigned x, unsigned y, unsigned z, unsigned w) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_u32(p)), "r"(x), "r"(y), "r"(z), "r"(w));
}

}  // namespace ptx
}  // namespace autotune
