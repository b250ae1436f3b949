// Batched GEMM for tiny matrices (M, N, K <= 32), built for memory bandwidth. No tensor cores.
// At these sizes a batched GEMM is a copy: every element of A and B is read once and C written once, and the
// flops are few. What limits a kernel is the bytes it keeps in flight and the index work per problem, so this
// kernel moves data the way a copy kernel does:
//
//   * A thread block handles groups of PPB consecutive problems. When an operand is packed (ld equal to the
//     stored rows and stride equal to the stored matrix size, or batch == 1), the group's A (B, C) is one
//     contiguous range of memory. The block copies it with flat, coalesced 16-byte loads (uint4) into shared
//     memory, keeping the range's 16-byte misalignment (mis elements) as an offset in shared memory, so the
//     16-byte chunks of global and shared memory coincide; the one or two chunks at the ragged ends of the
//     range are read element by element (nothing outside the range is ever touched). A non-packed operand (ld
//     above the stored rows, gaps between matrices) is gathered element by element into the same shared layout.
//   * Each thread computes an RM x RN micro-tile of one problem's C (RM = BM: whole columns, RN = BN: whole rows,
//     both: one problem per thread, RM = RN = 1: one element per thread) from shared memory, loops fully unrolled
//     over the compile-time bounds, writes it into a shared copy of the group's C, and the block stores that copy
//     with flat 16-byte stores (C read flat first when beta != 0; beta == 0 never reads C).
//   * The grid is capped; blocks loop over groups (grid stride). STAGES == 2 issues the global loads of the
//     block's next group into registers before computing the current one, so memory traffic stays in flight
//     during the compute and the C store.
//
// C = alpha * op(A) * op(B) + beta * C, column-major, BLAS semantics; convention `strided`. 64-bit offsets
// everywhere a problem index meets a stride; any batch count up to 2^31 - 1.
//
// Tuning parameters (template arguments):
//   BM, BN, BK  compile-time bounds of M, N, K. M == BM, N == BN, K == BK runs a path where every index is a
//               constant; smaller sizes run the same code with run-time sizes and guards; a size above its bound
//               takes a plain one-thread-per-element path straight from global memory (correct, slow). The space
//               goes up to 32; nothing here depends on it, but a group of PPB problems must fit 48 KB of static
//               shared memory (fp64 32 x 32 x 32 is 24 KB of A, B and C: PPB = 1).
//   RM, RN      rows and columns of C per thread (the work split); TPM = ceil(BM / RM) x TPN = ceil(BN / RN)
//               threads share a problem, thread (ti, tj) owns rows ti + TPM * ii and columns tj + TPN * jj.
//   THREADS     threads per block (a multiple of 32)
//   PPB         problems per group (what one block stages in shared memory at a time)
//   STAGES      1: load, compute, store one group at a time; 2: prefetch the next group into registers
// Launch: block (THREADS, 1, 1); grid (min(ceil(batch / PPB), cap), 1, 1) for any cap >= 1 (grid stride);
// no dynamic shared memory; static shared memory 16 * (chunks of A + B + C) bytes, see spaces/gemm_tiny_simt.yaml.
#pragma once
#include <cuda_fp16.h>

#include "common.cuh"
#include "precision.cuh"

namespace autotune {
namespace tiny_detail {

using precision::from_acc;
using precision::scalar_of;
using precision::to_acc;

using common::cdiv;

template <int BYTES> struct raw;
template <> struct raw<2> { using type = unsigned short; };
template <> struct raw<4> { using type = unsigned int; };
template <> struct raw<8> { using type = unsigned long long; };

using common::misalign;

// A block holds the elements [0, n) of a contiguous range g in shared memory at element mis + f, where
// mis = misalign(g): chunk q (16 bytes) of the shared buffer then holds the elements q * VEC - mis ... of the
// range, and the same elements form a 16-byte aligned chunk in global memory. The full chunks [q0, qe) move as
// uint4; the at most VEC - 1 elements before the first full chunk (head) and after the last (tail) move one
// element per thread (threads 0 .. nr - 1 < 2 * VEC - 1 <= 15). Nothing outside the range is read or written.
template <typename T>
struct Span {
  static constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  int q0, qe;  // full chunks
  int h;       // head elements [0, h)
  int ts;      // tail elements [ts, n)
  int nr;      // ragged elements: head + tail
  __device__ __forceinline__ Span(int mis, int n) {
    q0 = mis == 0 ? 0 : 1;
    h = min(n, mis == 0 ? 0 : VEC - mis);
    qe = max(q0, (mis + n) / VEC);
    ts = max(h, qe * VEC - mis);
    nr = h + max(0, n - ts);
  }
  // range element of ragged slot r < nr
  __device__ __forceinline__ int ragged(int r) const { return r < h ? r : ts + (r - h); }
};

// A range in flight: thread t holds full chunks q0 + t + l * THREADS (l < L) and ragged slot t.
// Q bounds the chunk count at compile time (mis + n <= Q * VEC).
template <typename T, int THREADS, int Q>
struct Chunks {
  using R = typename raw<sizeof(T)>::type;
  static constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  static constexpr int L = cdiv(Q, THREADS);
  uint4 v[L];
  R x;

  __device__ __forceinline__ void load(const T* g, int mis, int n, int t) {
    const Span<T> sp(mis, n);
#pragma unroll
    for (int l = 0; l < L; ++l) {
      const int q = sp.q0 + t + l * THREADS;
      if (q < sp.qe) v[l] = __ldcs(reinterpret_cast<const uint4*>(g + (q * VEC - mis)));
    }
    if (t < sp.nr) x = reinterpret_cast<const R*>(g)[sp.ragged(t)];
  }

  __device__ __forceinline__ void store(uint4* s, int mis, int n, int t) const {
    const Span<T> sp(mis, n);
#pragma unroll
    for (int l = 0; l < L; ++l) {
      const int q = sp.q0 + t + l * THREADS;
      if (q < sp.qe) s[q] = v[l];
    }
    if (t < sp.nr) reinterpret_cast<R*>(s)[mis + sp.ragged(t)] = x;
  }
};

// Write elements [0, n) of a contiguous range g from the shared layout above (element f at shared mis + f).
template <typename T, int THREADS, int Q>
__device__ __forceinline__ void store_range(T* g, const uint4* s, int mis, int n, int t) {
  using R = typename raw<sizeof(T)>::type;
  constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  constexpr int L = cdiv(Q, THREADS);
  const Span<T> sp(mis, n);
#pragma unroll
  for (int l = 0; l < L; ++l) {
    const int q = sp.q0 + t + l * THREADS;
    if (q < sp.qe) __stcs(reinterpret_cast<uint4*>(g + (q * VEC - mis)), s[q]);
  }
  if (t < sp.nr) {
    const int e = sp.ragged(t);
    reinterpret_cast<R*>(g)[e] = reinterpret_cast<const R*>(s)[mis + e];
  }
}

// Non-packed operand: problems p0 .. p0 + np - 1, each stored rows x cols with leading dimension ld, gathered
// into s as if packed (element f = p * rows * cols + r + c * rows at s[f]).
template <typename T, int THREADS>
__device__ __forceinline__ void gather(T* s, const T* g, long long p0, int np, int rows, int cols, int ld,
                                       long long stride, int t) {
  const int mat = rows * cols;
  const int n = np * mat;
#pragma unroll 1  // a slow path: few registers, so that it does not set the kernel's register count
  for (int f = t; f < n; f += THREADS) {
    const int p = f / mat, e = f - p * mat;
    const int c = e / rows, r = e - c * rows;
    s[f] = g[(p0 + p) * stride + (long long)c * ld + r];
  }
}

// The reverse of gather, for C.
template <typename T, int THREADS>
__device__ __forceinline__ void scatter(T* g, const T* s, long long p0, int np, int rows, int cols, int ld,
                                        long long stride, int t) {
  const int mat = rows * cols;
  const int n = np * mat;
#pragma unroll 1  // a slow path: few registers, so that it does not set the kernel's register count
  for (int f = t; f < n; f += THREADS) {
    const int p = f / mat, e = f - p * mat;
    const int c = e / rows, r = e - c * rows;
    g[(p0 + p) * stride + (long long)c * ld + r] = s[f];
  }
}

// The in-bounds path (M <= BM, N <= BN, K <= BK). EXACT: M == BM, N == BN, K == BK, every size a constant.
// Every thread of the block runs the same group loop (the group index is uniform), so every thread reaches
// every barrier, threads without a problem in a partial last group included.
template <bool EXACT, typename T, int TRANS_A, int TRANS_B, int BM, int BN, int BK, int RM, int RN, int THREADS,
          int PPB, int STAGES, int QA, int QB, int QC>
__device__ __forceinline__ void run(int M_, int N_, int K_, typename scalar_of<T>::type alpha, const T* A, int lda,
                                    long long strideA, const T* B, int ldb, long long strideB,
                                    typename scalar_of<T>::type beta, T* C, int ldc, long long strideC, int batch,
                                    uint4* sA, uint4* sB, uint4* sC) {
  using S = typename scalar_of<T>::type;
  constexpr int TPM = cdiv(BM, RM), TPN = cdiv(BN, RN);  // threads per problem along rows and columns
  constexpr int XM = cdiv(BM, TPM), XN = cdiv(BN, TPN);  // rows and columns per thread (<= RM, RN)
  constexpr int TPP = TPM * TPN;
  constexpr int WI = cdiv(PPB * TPP, THREADS);  // work items (micro-tiles) per thread per group
  constexpr bool FULL_M = TPM * XM == BM, FULL_N = TPN * XN == BN;  // no thread row / column beyond the bound

  const int M = EXACT ? BM : M_;
  const int N = EXACT ? BN : N_;
  const int K = EXACT ? BK : K_;
  const int MK = M * K, KN = K * N, MN = M * N;
  const int ar = TRANS_A == 0 ? M : K, ac = TRANS_A == 0 ? K : M;  // stored A: ar x ac
  const int br = TRANS_B == 0 ? K : N, bc = TRANS_B == 0 ? N : K;  // stored B: br x bc
  const bool packA = lda == ar && (strideA == (long long)MK || batch == 1);
  const bool packB = ldb == br && (strideB == (long long)KN || batch == 1);
  const bool packC = ldc == M && (strideC == (long long)MN || batch == 1);
  const bool readC = beta != S(0);

  const int t = threadIdx.x;
  const long long ngroups = ((long long)batch + PPB - 1) / PPB;
  T* const sAe = reinterpret_cast<T*>(sA);
  T* const sBe = reinterpret_cast<T*>(sB);
  T* const sCe = reinterpret_cast<T*>(sC);

  Chunks<T, THREADS, QA> ca;
  Chunks<T, THREADS, QB> cb;
  // Issue the global loads of the packed operands of group g into registers.
  auto issue = [&](long long g) {
    const long long p0 = g * PPB;
    const int np = static_cast<int>(min((long long)PPB, (long long)batch - p0));
    if (packA) {
      const T* ga = A + p0 * MK;
      ca.load(ga, misalign(ga), np * MK, t);
    }
    if (packB) {
      const T* gb = B + p0 * KN;
      cb.load(gb, misalign(gb), np * KN, t);
    }
  };

  long long g = blockIdx.x;
  if (STAGES == 2 && g < ngroups) issue(g);
  for (; g < ngroups; g += gridDim.x) {
    const long long p0 = g * PPB;
    const int np = static_cast<int>(min((long long)PPB, (long long)batch - p0));
    T* const gc = packC ? C + p0 * MN : C;
    const int offC = packC ? misalign(gc) : 0;
    Chunks<T, THREADS, QC> cc;
    if (readC && packC) cc.load(gc, offC, np * MN, t);
    if (STAGES == 1) issue(g);
    __syncthreads();  // the previous group is computed and stored: the shared buffers are free

    int offA = 0, offB = 0;
    if (packA) {
      offA = misalign(A + p0 * MK);
      ca.store(sA, offA, np * MK, t);
    } else {
      gather<T, THREADS>(sAe, A, p0, np, ar, ac, lda, strideA, t);
    }
    if (packB) {
      offB = misalign(B + p0 * KN);
      cb.store(sB, offB, np * KN, t);
    } else {
      gather<T, THREADS>(sBe, B, p0, np, br, bc, ldb, strideB, t);
    }
    if (readC) {
      if (packC) cc.store(sC, offC, np * MN, t);
      else gather<T, THREADS>(sCe, C, p0, np, M, N, ldc, strideC, t);
    }
    __syncthreads();
    if (STAGES == 2 && g + gridDim.x < ngroups) issue(g + gridDim.x);  // in flight during compute and store

    const T* const a_s = sAe + offA;
    const T* const b_s = sBe + offB;
    T* const c_s = sCe + offC;
#pragma unroll 1
    for (int r = 0; r < WI; ++r) {
      const int w = t + r * THREADS;
      const int p = w / TPP;  // constant divisor
      if (p < np) {           // p < np <= PPB, so w < PPB * TPP
        const int tile = w - p * TPP;
        const int ti = tile % TPM, tj = tile / TPM;
        const T* a = a_s + p * MK;
        const T* b = b_s + p * KN;
        T* c = c_s + p * MN;
        S acc[XM][XN];
#pragma unroll
        for (int ii = 0; ii < XM; ++ii)
#pragma unroll
          for (int jj = 0; jj < XN; ++jj) acc[ii][jj] = S(0);
#pragma unroll
        for (int k = 0; k < BK; ++k) {
          if (EXACT || k < K) {
            S av[XM], bv[XN];
#pragma unroll
            for (int ii = 0; ii < XM; ++ii) {
              const int i = ti + TPM * ii;
              av[ii] = ((EXACT && FULL_M) || i < M) ? to_acc(a[TRANS_A == 0 ? i + k * M : k + i * K]) : S(0);
            }
#pragma unroll
            for (int jj = 0; jj < XN; ++jj) {
              const int j = tj + TPN * jj;
              bv[jj] = ((EXACT && FULL_N) || j < N) ? to_acc(b[TRANS_B == 0 ? k + j * K : j + k * N]) : S(0);
            }
#pragma unroll
            for (int ii = 0; ii < XM; ++ii)
#pragma unroll
              for (int jj = 0; jj < XN; ++jj) acc[ii][jj] += av[ii] * bv[jj];
          }
        }
#pragma unroll
        for (int ii = 0; ii < XM; ++ii) {
#pragma unroll
          for (int jj = 0; jj < XN; ++jj) {
            const int i = ti + TPM * ii, j = tj + TPN * jj;
            if (((EXACT && FULL_M) || i < M) && ((EXACT && FULL_N) || j < N)) {
              T* cp = c + i + j * M;
              S v = alpha * acc[ii][jj];
              if (readC) v += beta * to_acc(*cp);
              *cp = from_acc<T>(v);
            }
          }
        }
      }
    }
    __syncthreads();  // the group's C is complete in shared memory

    if (packC) store_range<T, THREADS, QC>(gc, sC, offC, np * MN, t);
    else scatter<T, THREADS>(C, sCe, p0, np, M, N, ldc, strideC, t);
  }
}

}  // namespace tiny_detail

template <typename T, int TRANS_A, int TRANS_B, int BM, int BN, int BK, int RM, int RN, int THREADS, int PPB,
          int STAGES>
__global__ void __launch_bounds__(THREADS)
gemm_tiny(int M, int N, int K, typename tiny_detail::scalar_of<T>::type alpha, const T* A, int lda,
          long long strideA, const T* B, int ldb, long long strideB, typename tiny_detail::scalar_of<T>::type beta,
          T* C, int ldc, long long strideC, int batch) {
  using S = typename tiny_detail::scalar_of<T>::type;
  static_assert(BM >= 1 && BN >= 1 && BK >= 1, "bounds must be positive");
  static_assert(1 <= RM && RM <= BM && 1 <= RN && RN <= BN, "a thread's micro-tile must fit the bounds");
  static_assert(THREADS >= 32 && THREADS % 32 == 0 && THREADS <= 1024, "THREADS: whole warps, at most 1024");
  static_assert(PPB >= 1, "at least one problem per group");
  static_assert(STAGES == 1 || STAGES == 2, "STAGES is 1 or 2");
  constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  constexpr int QA = tiny_detail::cdiv(PPB * BM * BK + VEC - 1, VEC);  // + VEC - 1: the range's misalignment
  constexpr int QB = tiny_detail::cdiv(PPB * BK * BN + VEC - 1, VEC);
  constexpr int QC = tiny_detail::cdiv(PPB * BM * BN + VEC - 1, VEC);
  static_assert(16 * (QA + QB + QC) <= 48 * 1024, "static shared memory is limited to 48 KB");
  __shared__ uint4 sA[QA];
  __shared__ uint4 sB[QB];
  __shared__ uint4 sC[QC];

  if (M <= 0 || N <= 0 || batch <= 0) return;  // uniform: no thread reaches a barrier
  if (M > BM || N > BN || K > BK) {
    // Above the compile-time bounds: one thread per element of C, straight from global memory (no barriers).
    common::gemm_per_element<TRANS_A, TRANS_B, T>(M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc,
                                                  strideC, batch, (long long)blockIdx.x * THREADS + threadIdx.x,
                                                  (long long)gridDim.x * THREADS);
    return;
  }
  if (M == BM && N == BN && K == BK)
    tiny_detail::run<true, T, TRANS_A, TRANS_B, BM, BN, BK, RM, RN, THREADS, PPB, STAGES, QA, QB, QC>(
        M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch, sA, sB, sC);
  else
    tiny_detail::run<false, T, TRANS_A, TRANS_B, BM, BN, BK, RM, RN, THREADS, PPB, STAGES, QA, QB, QC>(
        M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch, sA, sB, sC);
}

}  // namespace autotune
