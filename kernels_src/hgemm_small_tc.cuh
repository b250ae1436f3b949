// magma-small-v2 (shared/seeds/003_*, Section VII-B, Figures 9 and 10): several independent tiny GEMMs in one
// tensor-core operation. With M, N small, a 16 x TC_N x 16 tensor-core operation (one or two
// mma.sync.m16n8k16) multiplies G = min(16 / M, TC_N / N) problems at once: the op(A_i) are stacked along the rows
// of the A operand (a block column of width K), the op(B_i) side by side along the columns of the B operand (a
// block row of height K), and C_i is the i-th diagonal M x N block of the product (the rest is discarded).
// K is walked in steps of 16 (zero padded), so K only has to fit the shared-memory chunk (K <= KMAX).
//
// Memory side (these sizes are bound by memory traffic): a thread block handles a chunk of P consecutive problems,
// as many as its shared buffers hold (sized for NWARPS * GPW tensor-core operations at K = KMAX; a multiple of G). When the batch is packed (lda equal to the stored rows, stride equal to the matrix size),
// the chunk of A (B, C) is one contiguous run of memory that the block copies with coalesced 16-byte cp.async
// (the 16-byte aligned superset of the run; the bytes around it lie in the same 16-byte segments, so in mapped
// memory) into shared memory, and C is written back the same way (16-byte stores, element stores at the two
// ragged ends). Unpacked batches are gathered element by element. Problems outside the kernel's domain
// (M > 16, N > TC_N or K > KMAX) take a plain one-thread-per-element path: correct, not fast.
//
// C = alpha * op(A) * op(B) + beta * C, column-major, `strided` convention, block = [32*NWARPS, 1, 1],
// grid-stride over chunks on grid.x (any grid size and any batch count work). beta == 0 never reads C.
#pragma once
#include <cuda_fp16.h>

#include "common.cuh"

namespace autotune {
namespace small_tc_detail {

using ptx::cp_async16;
using ptx::mma16816;
__device__ __forceinline__ void cp_async_commit_wait_all() {
  ptx::cp_async_commit();
  ptx::cp_async_wait<0>();
}
__device__ __forceinline__ unsigned pack2(__half lo, __half hi) {
  return static_cast<unsigned>(__half_as_ushort(lo)) | (static_cast<unsigned>(__half_as_ushort(hi)) << 16);
}

// Bring elements [e0, e1) of the batch of matrices `g` (each `rows` x `cols`, leading dimension ld, stride
// `stride`; element e = p * rows * cols + r + c * rows) into s. Returns the shared offset of element e0.
// packed: one contiguous run, copied as its 16-byte aligned superset; otherwise gathered element by element.
template <int NT>
__device__ __forceinline__ int load_chunk(__half* s, const __half* g, long long e0, long long e1, int rows, int cols,
                                          long long ld, long long stride, bool packed, int tid) {
  if (packed) {
    const unsigned long long a0 = reinterpret_cast<unsigned long long>(g + e0);
    const unsigned long long al = a0 & ~15ull;
    const int head = static_cast<int>((a0 - al) >> 1);
    const long long n = head + (e1 - e0);
    const int chunks = static_cast<int>((n + 7) >> 3);
    const char* src = reinterpret_cast<const char*>(al);
    for (int i = tid; i < chunks; i += NT) cp_async16(s + 8 * i, src + 16 * i);
    cp_async_commit_wait_all();
    return head;
  }
  const int mat = rows * cols;
  const int n = static_cast<int>(e1 - e0);
  const long long p0 = e0 / mat;
  for (int f = tid; f < n; f += NT) {
    const int p = f / mat, e = f % mat;
    s[f] = g[(p0 + p) * stride + (long long)(e / rows) * ld + (e % rows)];
  }
  return 0;
}

}  // namespace small_tc_detail

template <int TRANS_A, int TRANS_B, int NWARPS, int GPW, int TC_N, int KMAX>
__global__ void __launch_bounds__(32 * NWARPS)
hgemm_small_tc(int M, int N, int K, float alpha, const __half* A, int lda, long long strideA, const __half* B,
               int ldb, long long strideB, float beta, __half* C, int ldc, long long strideC, int batch) {
  using namespace small_tc_detail;
  static_assert(TC_N == 8 || TC_N == 16, "TC_N is 8 (one m16n8k16) or 16 (two)");
  static_assert(KMAX % 16 == 0, "KMAX must be a multiple of 16");
  constexpr int NT = 32 * NWARPS;
  constexpr int GROUPS = NWARPS * GPW;            // tensor-core operations the buffers are sized for
  constexpr int CAP_A = GROUPS * 16 * KMAX + 16;  // G*M <= 16
  constexpr int CAP_B = GROUPS * TC_N * KMAX + 16;
  constexpr int CAP_C = GROUPS * 16 * TC_N + 16;
  __shared__ __align__(16) __half sA[CAP_A];
  __shared__ __align__(16) __half sB[CAP_B];
  __shared__ __align__(16) __half sC[CAP_C];

  const int tid = threadIdx.x;
  const bool fast = M <= 16 && N <= TC_N && K <= KMAX;
  if (!fast) {  // out of domain: one thread per element of C
    common::gemm_per_element<TRANS_A, TRANS_B, __half>(M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc,
                                                       strideC, batch, (long long)blockIdx.x * NT + tid,
                                                       (long long)gridDim.x * NT);
    return;
  }

  const int G = min(16 / M, TC_N / N);  // problems per tensor-core operation
  const int MK = M * K, KN = K * N, MN = M * N;
  // Problems per chunk: as many as the shared buffers hold, a multiple of G (>= GROUPS * G since G*M <= 16,
  // G*N <= TC_N and K <= KMAX). Host side: grid.x = ceil(batch / P), the same formula (spaces/hgemm_small_tc.yaml).
  const int P = min(min((CAP_A - 16) / MK, (CAP_B - 16) / KN), (CAP_C - 16) / MN) / G * G;
  // Stored shapes: A is M x K (TRANS_A == 0) or K x M; B is K x N or N x K.
  const int ar = TRANS_A == 0 ? M : K, ac = TRANS_A == 0 ? K : M;
  const int br = TRANS_B == 0 ? K : N, bc = TRANS_B == 0 ? N : K;
  const bool packA = lda == ar && (strideA == (long long)MK || batch == 1);
  const bool packB = ldb == br && (strideB == (long long)KN || batch == 1);
  const bool packC = ldc == M && (strideC == (long long)MN || batch == 1);

  const int lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  // Rows of the A operand this thread holds (g and g + 8): problem index and row inside the problem.
  const int rA0 = g / M, mA0 = g % M, rA1 = (g + 8) / M, mA1 = (g + 8) % M;
  const bool vA0 = rA0 < G, vA1 = rA1 < G;

  for (long long p0 = (long long)blockIdx.x * P; p0 < batch; p0 += (long long)gridDim.x * P) {
    const long long p1 = p0 + P < batch ? p0 + P : batch;
    const int np = static_cast<int>(p1 - p0);
    __syncthreads();  // the previous chunk's C is written out
    const int hA = load_chunk<NT>(sA, A, p0 * MK, p1 * MK, ar, ac, lda, strideA, packA, tid);
    const int hB = load_chunk<NT>(sB, B, p0 * KN, p1 * KN, br, bc, ldb, strideB, packB, tid);
    int hC = 0;
    if (beta != 0.0f) hC = load_chunk<NT>(sC, C, p0 * MN, p1 * MN, M, N, ldc, strideC, packC, tid);
    else if (packC) hC = static_cast<int>((reinterpret_cast<unsigned long long>(C + p0 * MN) & 15) >> 1);
    __syncthreads();

    const int ngroups = (np + G - 1) / G;
    for (int grp = warp; grp < ngroups; grp += NWARPS) {
      const int pg = grp * G;  // first problem of this group (chunk-relative)
      float acc[TC_N / 8][4];
#pragma unroll
      for (int h = 0; h < TC_N / 8; ++h)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[h][e] = 0.0f;
      for (int k0 = 0; k0 < K; k0 += 16) {
        // op(A_p)(m, k) of problem p, zero outside.
        auto a_at = [&](bool v, int r, int m, int k) -> __half {
          const int p = pg + r;
          if (!v || k >= K || p >= np) return __float2half(0.0f);
          return sA[hA + p * MK + (TRANS_A == 0 ? m + k * M : k + m * K)];
        };
        const int ka = k0 + 2 * t4;
        unsigned a[4];
        a[0] = pack2(a_at(vA0, rA0, mA0, ka), a_at(vA0, rA0, mA0, ka + 1));
        a[1] = pack2(a_at(vA1, rA1, mA1, ka), a_at(vA1, rA1, mA1, ka + 1));
        a[2] = pack2(a_at(vA0, rA0, mA0, ka + 8), a_at(vA0, rA0, mA0, ka + 9));
        a[3] = pack2(a_at(vA1, rA1, mA1, ka + 8), a_at(vA1, rA1, mA1, ka + 9));
#pragma unroll
        for (int h = 0; h < TC_N / 8; ++h) {
          const int col = g + 8 * h, j = col / N, n = col % N;
          const bool v = j < G && pg + j < np;
          auto b_at = [&](int k) -> __half {
            if (!v || k >= K) return __float2half(0.0f);
            return sB[hB + (pg + j) * KN + (TRANS_B == 0 ? k + n * K : n + k * N)];
          };
          mma16816(acc[h], a, pack2(b_at(ka), b_at(ka + 1)), pack2(b_at(ka + 8), b_at(ka + 9)));
        }
      }
      // Keep the diagonal blocks: accumulator (row, col) belongs to C_i when row / M == col / N == i.
#pragma unroll
      for (int h = 0; h < TC_N / 8; ++h)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = g + (e >> 1) * 8, col = 8 * h + 2 * t4 + (e & 1);
          const int i = row / M, j = col / N;
          const int p = pg + i;
          if (i == j && i < G && p < np) {
            __half* c = sC + hC + p * MN + (row % M) + (col % N) * M;
            float v = alpha * acc[h][e];
            if (beta != 0.0f) v += beta * __half2float(*c);
            *c = __float2half(v);
          }
        }
    }
    __syncthreads();
    // Write the chunk of C.
    const long long e0 = p0 * MN;
    const int n = np * MN;
    if (packC) {
      __half* cg = C + e0;  // element i of the chunk lives at sC[hC + i]
      const int span = hC + n;
      for (int q = tid; q < (span + 7) / 8; q += NT) {
        const int lo = 8 * q;
        if (lo >= hC && lo + 8 <= span) {
          *reinterpret_cast<uint4*>(cg + (lo - hC)) = *reinterpret_cast<const uint4*>(sC + lo);
        } else {
          for (int s = lo; s < lo + 8; ++s)
            if (s >= hC && s < span) cg[s - hC] = sC[s];
        }
      }
    } else {
      for (int f = tid; f < n; f += NT) {
        const int p = f / MN, e = f % MN;
        C[(p0 + p) * strideC + (long long)(e / M) * ldc + (e % M)] = sC[f];
      }
    }
  }
}

}  // namespace autotune
