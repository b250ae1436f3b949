// TSM2 and ISM2: irregular-shaped GEMM (seed 001, Rivera, Chen et al., "ISM2: Optimizing
// Irregular-Shaped Matrix-Matrix Multiplication on GPUs").
//
//   C (M x N) = alpha * op(A) (M x K) * op(B) (K x N) + beta * C,   column-major, calling convention
//   `strided` of the project contract with batch = 1 (strides and batch are accepted and ignored).
//
// tsm2<T, TRANS_A, TRANS_B, T1, T2, T3, KS, RPT, BPF, AST>  (Alg. 4 of the paper, outer-product form)
//   A is large (M x K), B is tall and skinny (K x N, N <= 16 is the target).
//   T1  : rows of C per thread-block row = rows of the B tile that one k-slice consumes (paper t1)
//   T2  : columns of C each thread accumulates per pass (paper t2); N > T2 takes ceil(N / T2) passes,
//         each re-reading A, so T2 >= N reads A exactly once
//   T3  : elements of A each thread loads per step, prefetched one step ahead (paper t3)
//   KS  : k-slices per block (extension, KS = 1 is the paper's kernel). Block = T1 x KS threads; the
//         B tile is T1*KS rows; slice y sums its own k sub-range and the KS partial sums are added
//         through shared memory at the end (deterministic, no atomics). The paper launches M threads,
//         which is too few to keep an H100's memory system busy at M = 20480.
//   RPT : rows of C per thread (extension, RPT = 1 is the paper's kernel), strided by T1 so that
//         loads of A stay coalesced; each B value read from shared memory feeds RPT rows.
//   BPF : B prefetch (1 = paper: the next B tile waits in T2 registers per thread while the current one
//         is used; 0 = the tile is loaded between the two barriers of its own iteration, which frees those
//         registers; the prefetched first chunk of A stays in flight across the barriers either way).
//   AST : A pipeline stages (extension). 0 = the paper's register prefetch of the next T3 chunk. >= 2 = each
//         thread streams its chunks of A into a private AST-stage ring in shared memory with cp.async
//         (sm_80+; zero-fill past K), AST - 1 chunks ahead, so loads in flight cost no registers; the B
//         tile is then loaded at the start of each tile (BPF is ignored).
//   block = (T1, KS, 1), grid = (ceil(M / (T1 * RPT)), 1, 1), static shared memory
//   (T1*KS*T2 + AST*T3*RPT*T1*KS) elements.
//
// ism2<T, TRANS_A, TRANS_B, T1, T2, T3, TCF>  (Alg. 6 of the paper)
//   A is tall and skinny (M x K, K small), B is small (K x N). Launches M / TCF threads (thread-count
//   factor TCF): each thread walks TCF rows with a stride of the whole grid (coalesced), so that each
//   thread has enough work to hide latency.
//   block = (T1, 1, 1), grid = (ceil(M / (T1 * TCF)), 1, 1), static shared memory T1*T2 elements.
//
// Any M, N, K >= 1; leading dimensions larger than the matrix; beta == 0 never reads C. All four
// transposition shapes are correct; only TRANS_A == 0 gives coalesced loads of A.
#pragma once

namespace autotune {
namespace tsm2_detail {

template <typename T>
struct scalar_of {
  using type = T;  // fp32 and fp64: the scalar type is the element type
};

// Element (r, c) of op(X), X column-major with leading dimension ld.
template <int TRANS, typename T>
__device__ __forceinline__ T at(const T* __restrict__ X, int r, int c, int ld) {
  return TRANS ? X[(long long)c + (long long)r * ld] : X[(long long)r + (long long)c * ld];
}

template <typename T>
__device__ __forceinline__ void store_c(T* __restrict__ C, int row, int col, int ldc, T alpha, T beta,
                                        T sum) {
  const long long i = (long long)row + (long long)col * ldc;
  T out = alpha * sum;
  if (beta != T(0)) out += beta * C[i];  // beta == 0: C is not read (it may hold NaN)
  C[i] = out;
}

// Loads the T3-element chunk of op(A) starting at column k for the RPT rows of this thread.
// GUARD: columns >= K load 0 (the matching B rows are 0 in shared memory too).
template <int TRANS_A, int T3, int RPT, bool GUARD, typename T>
__device__ __forceinline__ void load_a_chunk(T (&dst)[RPT][T3], const T* __restrict__ A,
                                             const int (&rows)[RPT], int k, int K, int lda) {
#pragma unroll
  for (int j = 0; j < T3; ++j) {
#pragma unroll
    for (int r = 0; r < RPT; ++r) {
      if (GUARD) {
        dst[r][j] = (k + j < K) ? at<TRANS_A>(A, rows[r], k + j, lda) : T(0);
      } else {
        dst[r][j] = at<TRANS_A>(A, rows[r], k + j, lda);
      }
    }
  }
}

// acc[r][c] += a[r][j] * Bs[kk + j][c]: outer-product update (Alg. 2), B broadcast from shared memory.
template <int T2, int T3, int RPT, typename T>
__device__ __forceinline__ void fma_chunk(T (&acc)[RPT][T2], const T (&a)[RPT][T3],
                                          const T (*__restrict__ Bs)[T2], int kk) {
#pragma unroll
  for (int j = 0; j < T3; ++j) {
    T b[T2];
#pragma unroll
    for (int c = 0; c < T2; ++c) b[c] = Bs[kk + j][c];
#pragma unroll
    for (int r = 0; r < RPT; ++r) {
#pragma unroll
      for (int c = 0; c < T2; ++c) acc[r][c] = fma(a[r][j], b[c], acc[r][c]);
    }
  }
}

// One row of the B tile (tile row `krow` = column k of op(A)), columns p .. p+T2-1, 0 outside B.
template <int TRANS_B, int T2, typename T>
__device__ __forceinline__ void load_b_row(T (&dst)[T2], const T* __restrict__ B, int k, int p, int K,
                                           int N, int ldb) {
#pragma unroll
  for (int c = 0; c < T2; ++c) dst[c] = (k < K && p + c < N) ? at<TRANS_B>(B, k, p + c, ldb) : T(0);
}

// cp.async of one element into shared memory; !valid writes zeros and reads nothing.
template <typename T>
__device__ __forceinline__ void cp_async_elem(T* smem, const T* gmem, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_size = valid ? int(sizeof(T)) : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(gmem), "n"(int(sizeof(T))),
               "r"(src_size)
               : "memory");
#else
  *smem = valid ? *gmem : T(0);
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace tsm2_detail

template <typename T, int TRANS_A, int TRANS_B, int T1, int T2, int T3, int KS, int RPT, int BPF, int AST>
__global__ void __launch_bounds__(T1* KS)
    tsm2(int M, int N, int K, typename tsm2_detail::scalar_of<T>::type alpha, const T* __restrict__ A,
         int lda, long long strideA, const T* __restrict__ B, int ldb, long long strideB,
         typename tsm2_detail::scalar_of<T>::type beta, T* __restrict__ C, int ldc, long long strideC,
         int batch) {
  static_assert(T1 >= 1 && T2 >= 1 && T3 >= 1 && KS >= 1 && RPT >= 1, "tile sizes must be positive");
  static_assert(T1 % T3 == 0, "T3 must divide T1 (a slice walks its T1 rows of the B tile in steps of T3)");
  static_assert(AST == 0 || AST >= 2, "AST is 0 (register prefetch) or at least 2 pipeline stages");
  using namespace tsm2_detail;
  constexpr int BK = T1 * KS;    // rows of the B tile = threads per block
  constexpr int CPT = T1 / T3;   // steps per slice per tile
  __shared__ __align__(16) T Bs[BK][T2];  // row-major: one row is read as a vector (broadcast)
  __shared__ __align__(16) T As[AST > 0 ? AST * T3 * RPT * BK : 1];  // [stage][j][r][tid], AST > 0 only

  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int tid = ty * T1 + tx;
  int rows[RPT];   // rows of C this thread owns (clamped for loads; stores check row < M)
  int lrows[RPT];
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    rows[r] = blockIdx.x * (T1 * RPT) + r * T1 + tx;
    lrows[r] = rows[r] < M ? rows[r] : M - 1;
  }
  const int ntiles = (K + BK - 1) / BK;

  for (int p = 0; p < N; p += T2) {
    T acc[RPT][T2];
#pragma unroll
    for (int r = 0; r < RPT; ++r)
#pragma unroll
      for (int c = 0; c < T2; ++c) acc[r][c] = T(0);

    if (AST > 0) {
      // ---- cp.async pipeline of A: chunk q of this thread = tile q / CPT, step q % CPT
      auto issue = [&](int q) {
        const int st = q % (AST > 0 ? AST : 1);
        const int tq = q / CPT;
        const int k0 = tq * BK + ty * T1 + (q - tq * CPT) * T3;
        T* dst = &As[st * T3 * RPT * BK + tid];
        const long long step = TRANS_A ? 1 : (long long)lda;  // address step from column k to k + 1
#pragma unroll
        for (int r = 0; r < RPT; ++r) {
          const T* src = TRANS_A ? A + ((long long)k0 + (long long)lrows[r] * lda)
                                 : A + ((long long)lrows[r] + (long long)k0 * lda);
          if (k0 + T3 <= K) {
#pragma unroll
            for (int j = 0; j < T3; ++j, src += step) cp_async_elem(dst + (j * RPT + r) * BK, src, true);
          } else {
#pragma unroll
            for (int j = 0; j < T3; ++j, src += step) {
              const bool valid = k0 + j < K;
              cp_async_elem(dst + (j * RPT + r) * BK, valid ? src : A, valid);
            }
          }
        }
        cp_async_commit();
      };
#pragma unroll
      for (int q = 0; q < AST - 1; ++q) issue(q);
      for (int it = 0; it < ntiles; ++it) {
        __syncthreads();  // every slice is done reading the previous tile (or the reduction buffer)
        {
          T b[T2];
          load_b_row<TRANS_B, T2>(b, B, it * BK + tid, p, K, N, ldb);
#pragma unroll
          for (int c = 0; c < T2; ++c) Bs[tid][c] = b[c];
        }
        __syncthreads();
        const int kk0 = ty * T1;
#pragma unroll 1
        for (int s = 0; s < CPT; ++s) {
          const int q = it * CPT + s;
          cp_async_wait<(AST > 1 ? AST - 2 : 0)>();  // chunk q has landed (own copies only: no barrier)
          issue(q + AST - 1);                        // refills the stage chunk q - 1 used
          const T* src = &As[(q % (AST > 0 ? AST : 1)) * T3 * RPT * BK + tid];
#pragma unroll 2
          for (int j = 0; j < T3; ++j) {  // not fully unrolled: keeps T3 x T2 B values out of registers
            T bv[T2];
#pragma unroll
            for (int c = 0; c < T2; ++c) bv[c] = Bs[kk0 + s * T3 + j][c];
#pragma unroll
            for (int r = 0; r < RPT; ++r) {
              const T a = src[(j * RPT + r) * BK];
#pragma unroll
              for (int c = 0; c < T2; ++c) acc[r][c] = fma(a, bv[c], acc[r][c]);
            }
          }
        }
      }
      cp_async_wait<0>();  // the chunks issued past K (zero-fill) are drained before the stages are reused
    } else {
    T nb[T2];  // prefetched row of the next B tile (BPF = 1; unused and optimised away for BPF = 0)
    if (BPF) load_b_row<TRANS_B, T2>(nb, B, tid, p, K, N, ldb);
    T ca[RPT][T3];  // current chunk of A
    load_a_chunk<TRANS_A, T3, RPT, true>(ca, A, lrows, ty * T1, K, lda);

    for (int it = 0; it < ntiles; ++it) {
      __syncthreads();  // every slice is done reading the previous tile (or the reduction buffer)
      if (BPF) {
#pragma unroll
        for (int c = 0; c < T2; ++c) Bs[tid][c] = nb[c];
      } else {
        T b[T2];
        load_b_row<TRANS_B, T2>(b, B, it * BK + tid, p, K, N, ldb);
#pragma unroll
        for (int c = 0; c < T2; ++c) Bs[tid][c] = b[c];
      }
      __syncthreads();
      if (BPF && it + 1 < ntiles)
        load_b_row<TRANS_B, T2>(nb, B, (it + 1) * BK + tid, p, K, N, ldb);

      const int kbase = it * BK + ty * T1;  // first column of op(A) of this slice in this tile
      const int knext = kbase + BK;         // first column of this slice in the next tile
      const int kk0 = ty * T1;              // matching row of the B tile
      if ((it + 1) * BK <= K) {             // full tile: no guards except on the cross-tile prefetch
#pragma unroll 1
        for (int s = 0; s < CPT - 1; ++s) {
          T na[RPT][T3];
          load_a_chunk<TRANS_A, T3, RPT, false>(na, A, lrows, kbase + (s + 1) * T3, K, lda);
          fma_chunk<T2, T3, RPT>(acc, ca, Bs, kk0 + s * T3);
#pragma unroll
          for (int r = 0; r < RPT; ++r)
#pragma unroll
            for (int j = 0; j < T3; ++j) ca[r][j] = na[r][j];
        }
      } else {  // last, partial tile
#pragma unroll 1
        for (int s = 0; s < CPT - 1; ++s) {
          T na[RPT][T3];
          load_a_chunk<TRANS_A, T3, RPT, true>(na, A, lrows, kbase + (s + 1) * T3, K, lda);
          fma_chunk<T2, T3, RPT>(acc, ca, Bs, kk0 + s * T3);
#pragma unroll
          for (int r = 0; r < RPT; ++r)
#pragma unroll
            for (int j = 0; j < T3; ++j) ca[r][j] = na[r][j];
        }
      }
      {  // last step of the tile: prefetch the first chunk of the next tile (guarded)
        T na[RPT][T3];
        load_a_chunk<TRANS_A, T3, RPT, true>(na, A, lrows, knext, K, lda);
        fma_chunk<T2, T3, RPT>(acc, ca, Bs, kk0 + (CPT - 1) * T3);
#pragma unroll
        for (int r = 0; r < RPT; ++r)
#pragma unroll
          for (int j = 0; j < T3; ++j) ca[r][j] = na[r][j];
      }
    }
    }  // AST == 0

    if (KS == 1) {
#pragma unroll
      for (int r = 0; r < RPT; ++r) {
        if (rows[r] < M) {
#pragma unroll
          for (int c = 0; c < T2; ++c)
            if (p + c < N) store_c(C, rows[r], p + c, ldc, alpha, beta, acc[r][c]);
        }
      }
    } else {
      // Sum the KS partial results of each row through shared memory (the B tile buffer, BK*T2 elements).
      T* red = &Bs[0][0];
#pragma unroll
      for (int r = 0; r < RPT; ++r) {
        __syncthreads();
#pragma unroll
        for (int c = 0; c < T2; ++c) red[(ty * T2 + c) * T1 + tx] = acc[r][c];
        __syncthreads();
        for (int c = ty; c < T2; c += KS) {
          T sum = T(0);
#pragma unroll
          for (int s = 0; s < KS; ++s) sum += red[(s * T2 + c) * T1 + tx];
          if (rows[r] < M && p + c < N) store_c(C, rows[r], p + c, ldc, alpha, beta, sum);
        }
      }
    }
  }
}

template <typename T, int TRANS_A, int TRANS_B, int T1, int T2, int T3, int TCF>
__global__ void __launch_bounds__(T1)
    ism2(int M, int N, int K, typename tsm2_detail::scalar_of<T>::type alpha, const T* __restrict__ A,
         int lda, long long strideA, const T* __restrict__ B, int ldb, long long strideB,
         typename tsm2_detail::scalar_of<T>::type beta, T* __restrict__ C, int ldc, long long strideC,
         int batch) {
  static_assert(T1 >= 1 && T2 >= 1 && T3 >= 1 && TCF >= 1, "tile sizes must be positive");
  static_assert(T1 % T3 == 0, "T3 must divide T1 (steps of T3 walk the T1 rows of the B tile)");
  using namespace tsm2_detail;
  __shared__ __align__(16) T Bs[T1][T2];
  const int tx = threadIdx.x;
  const long long nthreads = (long long)gridDim.x * T1;  // M / TCF threads in all (Alg. 6)
  const long long row0 = (long long)blockIdx.x * T1 + tx;

  for (int p = 0; p < N; p += T2) {
    for (int kt = 0; kt < K; kt += T1) {
      __syncthreads();
      T b[T2];
      load_b_row<TRANS_B, T2>(b, B, kt + tx, p, K, N, ldb);
#pragma unroll
      for (int c = 0; c < T2; ++c) Bs[tx][c] = b[c];
      __syncthreads();
      const int klen = (K - kt < T1) ? (K - kt) : T1;
      const int nsteps = (klen + T3 - 1) / T3;
      const bool first = (kt == 0);

      // Stream of (row i, step s) pairs of this thread; the next step's chunk of A is loaded one step
      // ahead (paper prefetching), across row boundaries too.
      int lrow[1];
      long long row = row0;
      lrow[0] = (int)(row < M ? row : M - 1);
      T ca[1][T3];
      load_a_chunk<TRANS_A, T3, 1, true>(ca, A, lrow, kt, kt + klen, lda);
#pragma unroll 1
      for (int i = 0; i < TCF; ++i) {
        T acc[1][T2];
#pragma unroll
        for (int c = 0; c < T2; ++c) acc[0][c] = T(0);
        const long long nrow = row + nthreads;
        int nlrow[1];
        nlrow[0] = (int)(nrow < M ? nrow : M - 1);
#pragma unroll 1
        for (int s = 0; s < nsteps; ++s) {
          T na[1][T3];
          if (s + 1 < nsteps) {
            load_a_chunk<TRANS_A, T3, 1, true>(na, A, lrow, kt + (s + 1) * T3, kt + klen, lda);
          } else {
            load_a_chunk<TRANS_A, T3, 1, true>(na, A, nlrow, kt, kt + klen, lda);
          }
          fma_chunk<T2, T3, 1>(acc, ca, Bs, s * T3);
#pragma unroll
          for (int j = 0; j < T3; ++j) ca[0][j] = na[0][j];
        }
        if (row < M) {
#pragma unroll
          for (int c = 0; c < T2; ++c) {
            if (p + c < N) {
              if (first) {
                store_c(C, (int)row, p + c, ldc, alpha, beta, acc[0][c]);
              } else {  // later k tiles add to what the first tile wrote (same thread)
                const long long idx = row + (long long)(p + c) * ldc;
                C[idx] += alpha * acc[0][c];
              }
            }
          }
        }
        row = nrow;
        lrow[0] = nlrow[0];
      }
    }
  }
}

}  // namespace autotune
