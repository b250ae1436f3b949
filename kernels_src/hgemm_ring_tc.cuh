// Tensor-core batched HGEMM for memory-bound sizes (M, N <= 128, any K) whose columns are aligned: a persistent
// block streams K-slices of its problems through a ring of small shared-memory stages.
//
// Why: the flat kernel (hgemm_flat_tc.cuh) holds a whole problem twice in shared memory (a flat copy and its padded
// tiles): about 127 KB at n = 113..128, one block of 8 warps per SM, latency-bound (ncu: 12.5% occupancy, DRAM
// 49%, results/profiles_h100). When every stored column starts on a VEC-byte boundary (packed problems whose
// sizes are multiples of VEC / 2 halves: n % 8 == 0 for VEC = 16, even n for VEC = 4) there is nothing to repack:
// cp.async can write each column straight into a padded tile. Copying a problem KS values of K at a time then
// needs only STAGES slices of shared memory (3 stages of 32 at n = 128: 51 KB), so two blocks fit on an SM, and
// the ring runs across problem boundaries: the first slices of a block's next problem are in flight during the
// last slices, the epilogue and the C stores of the current one (hgemm_mma refills its pipeline per problem).
//
//   1. Ring. A block takes problems blockIdx.x, blockIdx.x + gridDim.x, ...; unit u is slice u % KT of the
//      block's problem u / KT (KT = ceil(K / KS)). After the barrier that opens unit u the block issues unit
//      u + STAGES - 1 into the stage unit u - 1 has just left (one cp.async group per unit, committed even when
//      empty, so wait_group counts units).
//   2. Copies straight into padded tiles: the operand keeps its stored orientation (as in the flat kernel, A of
//      NN is stored M x K, so a slice is KS tile rows of M halves), rows padded by 8 halves (conflict-free
//      ldmatrix). Every VEC-byte piece of a slice is written by a cp.async each time, with zero fill where the
//      piece lies past M, N or K, so padding is zero without a separate pass.
//   3. Tensor cores. Warp w owns the warp tiles w, w + NWARPS, ... (IPW of them) of the problem's C for the whole
//      problem: WM x WN blocks of 16 x 16 each, accumulated in registers over the slices with mma.sync.m16n8k16
//      (fp16 in, fp32 accumulate); k-steps past K in the last slice are skipped.
//   4. C (CDIRECT = 0): after the last slice each warp writes alpha * acc as fp16 into a shared copy of the
//      problem's C in its global layout and the block stores it with 16-byte streaming stores (element stores at
//      the two ragged ends), as the flat kernel does. CDIRECT = 1: element stores from the accumulators (no
//      shared C). beta != 0 or an unpacked C: element stores with C read (correct, slower).
//
// C = alpha * op(A) * op(B) + beta * C, column-major, BLAS semantics, `strided` convention; fp16 A, B, C with fp32
// alpha, beta and accumulation. Any M, N, K, batch and layout is computed correctly: where M > BM, N > BN, K < 1,
// or a column of A or B does not start on a VEC-byte boundary (pointer, leading dimension or stride), the kernel
// takes the one-thread-per-element path (slow); spaces/hgemm_ring_tc.yaml serves and marks valid only the sizes
// whose packed layout is aligned (M, N, K multiples of VEC / 2).
//
// Tuning parameters (template arguments):
//   BM, BN      compile-time bounds of M and N (tiles padded to the warp tiles)
//   KS          K-slice: values of K per ring stage (a multiple of 16)
//   WM, WN      warp tile: WM x WN blocks of 16 x 16 of C (IPW * WM * WN * 8 fp32 accumulators per thread)
//   NWARPS      warps per block
//   STAGES      ring stages (>= 2): STAGES - 1 slices in flight during the math on one
//   VEC         bytes per cp.async (4, 8, 16): the alignment the fast path needs
//   CDIRECT     0: C through shared memory and 16-byte stores; 1: element stores from the accumulators
// Launch: block (32 * NWARPS, 1, 1); grid (g, 1, 1) for any g >= 1 (persistent: about the resident blocks);
// dynamic shared memory hgemm_ring_tc_smem_bytes<...>() bytes (a launch with less traps).
#pragma once
#include <cuda_fp16.h>

#include "common.cuh"

namespace autotune {
namespace ring_detail {

using common::cdiv;
using common::misalign;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::ldmatrix_x4;
using ptx::mma16816;
using ptx::smem_u32;

// VEC bytes from global to shared memory, reading only the first src_bytes (0..VEC) and zero-filling the rest.
// 16 bytes bypass L1 (.cg); 4 and 8 bytes must go through it (.ca: the only form PTX has for them).
template <int VEC> __device__ __forceinline__ void cp_async(void* smem, const void* gmem, int src_bytes) {
  if constexpr (VEC == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(src_bytes)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_u32(smem)), "l"(gmem), "n"(VEC),
                 "r"(src_bytes)
                 : "memory");
}

// Compile-time geometry of one instance.
template <int TRANS_A, int TRANS_B, int BM, int BN, int KS, int WM, int WN, int NWARPS, int STAGES, int VEC, int CDIRECT>
struct Geo {
  static constexpr int THREADS = 32 * NWARPS;
  static constexpr int E = VEC / 2;  // halves per cp.async
  static constexpr int MP = cdiv(BM, 16 * WM) * 16 * WM;  // padded M, N
  static constexpr int NP = cdiv(BN, 16 * WN) * 16 * WN;
  // One slice of each operand in its stored orientation: R rows of L halves, row stride L + 8 (an odd number of
  // 16-byte chunks: the 8 rows an ldmatrix phase reads lie in 8 different bank groups).
  static constexpr int A_R = TRANS_A == 0 ? KS : MP, A_L = TRANS_A == 0 ? MP : KS, A_LD = A_L + 8;
  static constexpr int B_R = TRANS_B == 0 ? NP : KS, B_L = TRANS_B == 0 ? KS : NP, B_LD = B_L + 8;
  static constexpr int A_SL = A_R * A_LD, B_SL = B_R * B_LD, STAGE = A_SL + B_SL;  // halves
  static constexpr int QC = CDIRECT ? 0 : cdiv(BM * BN + 7, 8);  // 16-byte chunks of the shared C
  static constexpr int SMEM = 2 * STAGES * STAGE + 16 * QC;
  static constexpr int IM = MP / (16 * WM), IN = NP / (16 * WN), ITEMS = IM * IN;  // warp tiles per problem
  static constexpr int IPW = cdiv(ITEMS, NWARPS);                                   // warp tiles per warp
};

// Issue the cp.async copies of one operand slice: tile row r (of R, row stride LD) gets the first `len` halves at
// src + r * ld when r < rows, zeros elsewhere (and past len, up to L). `safe` is a mapped address for the
// zero-fill copies (they read nothing).
template <int R, int L, int LD, int E, int THREADS>
__device__ __forceinline__ void copy_slice(__half* tile, const __half* src, long long ld, int rows, int len,
                                           const __half* safe, int t) {
  constexpr int CPR = L / E;  // copies per row
  constexpr int TOTAL = R * CPR;
#pragma unroll 8
  for (int q0 = 0; q0 < TOTAL; q0 += THREADS) {
    const int q = q0 + t;
    if (TOTAL % THREADS != 0 && q >= TOTAL) break;
    const int r = q / CPR, c = (q - r * CPR) * E;
    int n = len - c;
    n = r < rows ? (n < 0 ? 0 : (n > E ? E : n)) : 0;
    cp_async<2 * E>(tile + r * LD + c, n > 0 ? src + r * ld + c : safe, 2 * n);
  }
}

template <int TRANS_A, int TRANS_B, int BM, int BN, int KS, int WM, int WN, int NWARPS, int STAGES, int VEC, int CDIRECT>
__device__ __forceinline__ void run(int M, int N, int K, float alpha, const __half* A, int lda, long long strideA,
                                    const __half* B, int ldb, long long strideB, float beta, __half* C, int ldc,
                                    long long strideC, int batch, unsigned char* smem) {
  using G = Geo<TRANS_A, TRANS_B, BM, BN, KS, WM, WN, NWARPS, STAGES, VEC, CDIRECT>;
  constexpr int THREADS = G::THREADS;
  __half* const ring = reinterpret_cast<__half*>(smem);
  __half* const sC = ring + STAGES * G::STAGE;

  const int MN = M * N;
  const bool readC = beta != 0.0f;
  const bool packC = !CDIRECT && !readC && ldc == M && (strideC == (long long)MN || batch == 1);
  const int KT = (K + KS - 1) / KS;
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;

  // Copies of unit (problem pg, slice s) into stage `slot`.
  auto copy_unit = [&](long long pg, int s, int slot) {
    __half* const sa = ring + slot * G::STAGE;
    __half* const sb = sa + G::A_SL;
    const int k0 = s * KS, kl = K - k0;
    const __half* const a = A + pg * strideA;
    const __half* const b = B + pg * strideB;
    if constexpr (TRANS_A == 0)  // stored M x K: tile rows k (columns k0.. of A), M halves each
      copy_slice<G::A_R, G::A_L, G::A_LD, G::E, THREADS>(sa, a + (long long)k0 * lda, lda, kl, M, a, t);
    else  // stored K x M: tile rows i, halves k0 .. k0 + KS - 1 of each
      copy_slice<G::A_R, G::A_L, G::A_LD, G::E, THREADS>(sa, a + k0, lda, M, kl, a, t);
    if constexpr (TRANS_B == 0)  // stored K x N: tile rows j, halves k0 .. of each
      copy_slice<G::B_R, G::B_L, G::B_LD, G::E, THREADS>(sb, b + k0, ldb, N, kl, b, t);
    else  // stored N x K: tile rows k, N halves each
      copy_slice<G::B_R, G::B_L, G::B_LD, G::E, THREADS>(sb, b + (long long)k0 * ldb, ldb, kl, N, b, t);
  };

  // Next unit to issue: problem ip, slice is, stage islot.
  long long ip = blockIdx.x;
  int is = 0, islot = 0;
  auto issue = [&]() {
    if (ip < batch) copy_unit(ip, is, islot);
    cp_async_commit();
    if (++is == KT) {
      is = 0;
      ip += gridDim.x;
    }
    if (++islot == STAGES) islot = 0;
  };
#pragma unroll 1
  for (int s = 0; s < STAGES - 1; ++s) issue();

  float acc[G::IPW][WM][2 * WN][4];
  const int gq = lane >> 2, tq = lane & 3;  // fragment row group and thread in group
  const int mi = lane >> 3, mr = lane & 7;  // ldmatrix: matrix and row this lane addresses
  long long pg = blockIdx.x;
  int cs = 0, cslot = 0;
#pragma unroll 1
  while (pg < batch) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // unit (pg, cs) has landed for every thread; every warp is done with the previous stage
    issue();          // into the stage the previous unit left
    if (cs == 0) {
#pragma unroll
      for (int q = 0; q < G::IPW; ++q)
#pragma unroll
        for (int a = 0; a < WM; ++a)
#pragma unroll
          for (int b = 0; b < 2 * WN; ++b)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[q][a][b][e] = 0.0f;
    }
    const __half* const ta = ring + cslot * G::STAGE;
    const __half* const tb = ta + G::A_SL;
    const int kv = K - cs * KS;  // valid K of this slice (>= 1)
#pragma unroll
    for (int q = 0; q < G::IPW; ++q) {
      const int item = warp + q * NWARPS;
      if (G::ITEMS % NWARPS != 0 && item >= G::ITEMS) break;  // warp-uniform
      const int i0 = (item % G::IM) * 16 * WM, j0 = (item / G::IM) * 16 * WN;
#pragma unroll
      for (int k0 = 0; k0 < KS; k0 += 16) {
        if (k0 >= kv) break;  // past K in the last slice (uniform)
        unsigned fa[WM][4], fb[WN][4];
#pragma unroll
        for (int a = 0; a < WM; ++a) {
          const int i = i0 + 16 * a;
          if constexpr (TRANS_A == 0)  // tile rows k, columns i: transpose while loading
            ldmatrix_x4<true>(fa[a], ta + (k0 + mr + (mi >> 1) * 8) * G::A_LD + i + (mi & 1) * 8);
          else
            ldmatrix_x4<false>(fa[a], ta + (i + mr + (mi & 1) * 8) * G::A_LD + k0 + (mi >> 1) * 8);
        }
#pragma unroll
        for (int b = 0; b < WN; ++b) {
          const int j = j0 + 16 * b;  // two n8 tiles: registers 0, 1 for j .. j + 7 and 2, 3 for j + 8 .. j + 15
          if constexpr (TRANS_B == 0)  // tile rows j, columns k
            ldmatrix_x4<false>(fb[b], tb + (j + mr + (mi >> 1) * 8) * G::B_LD + k0 + (mi & 1) * 8);
          else  // tile rows k, columns j
            ldmatrix_x4<true>(fb[b], tb + (k0 + mr + (mi & 1) * 8) * G::B_LD + j + (mi >> 1) * 8);
        }
#pragma unroll
        for (int a = 0; a < WM; ++a)
#pragma unroll
          for (int b = 0; b < WN; ++b) {
            mma16816(acc[q][a][2 * b], fa[a], fb[b][0], fb[b][1]);
            mma16816(acc[q][a][2 * b + 1], fa[a], fb[b][2], fb[b][3]);
          }
      }
    }

    if (cs == KT - 1) {  // the problem's last slice: epilogue (uniform)
      __half* const gc = C + pg * strideC;
      const int offC = packC ? misalign(gc) : 0;
#pragma unroll
      for (int q = 0; q < G::IPW; ++q) {
        const int item = warp + q * NWARPS;
        if (G::ITEMS % NWARPS != 0 && item >= G::ITEMS) break;
        const int i0 = (item % G::IM) * 16 * WM, j0 = (item / G::IM) * 16 * WN;
        // accumulator e of n8 tile b holds (i0 + 16a + gq + 8 (e >> 1), j0 + 8b + 2tq + (e & 1))
        const int ib = i0 + gq, jb = j0 + 2 * tq;
#pragma unroll
        for (int a = 0; a < WM; ++a)
#pragma unroll
          for (int b = 0; b < 2 * WN; ++b) {
            if (i0 + 16 * a >= M || j0 + 8 * b >= N) continue;  // an n8 tile of the padding (warp-uniform)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int i = ib + 16 * a + 8 * (e >> 1), j = jb + 8 * b + (e & 1);
              if (i < M && j < N) {
                const float v = alpha * acc[q][a][b][e];
                if (packC) {
                  sC[offC + i + j * M] = __float2half_rn(v);
                } else {
                  __half* const c = gc + (long long)j * ldc + i;
                  *c = __float2half_rn(readC ? v + beta * __half2float(*c) : v);
                }
              }
            }
          }
      }
      if (packC) {
        __syncthreads();  // the problem's C is complete in shared memory
        const int span = offC + MN;
        for (int x = t; x < (span + 7) >> 3; x += THREADS) {  // 16-byte stores, element stores at the ragged ends
          const int lo = 8 * x;
          if (lo >= offC && lo + 8 <= span) {
            __stcs(reinterpret_cast<uint4*>(gc + (lo - offC)), *reinterpret_cast<const uint4*>(sC + lo));
          } else {
            for (int s = max(lo, offC); s < min(lo + 8, span); ++s) gc[s - offC] = sC[s];
          }
        }
        // sC is written again only after the next unit's opening barrier
      }
    }
    if (++cs == KT) {
      cs = 0;
      pg += gridDim.x;
    }
    if (++cslot == STAGES) cslot = 0;
  }
  cp_async_wait<0>();  // nothing left in flight when the block exits
}

}  // namespace ring_detail

// Dynamic shared memory an instance needs, bytes.
template <int TRANS_A, int TRANS_B, int BM, int BN, int KS, int WM, int WN, int NWARPS, int STAGES, int VEC, int CDIRECT>
__host__ __device__ constexpr int hgemm_ring_tc_smem_bytes() {
  return ring_detail::Geo<TRANS_A, TRANS_B, BM, BN, KS, WM, WN, NWARPS, STAGES, VEC, CDIRECT>::SMEM;
}

// At least 512 resident threads per SM: registers capped at 128 per thread (the space's blocks_per_sm assumes it).
template <int TRANS_A, int TRANS_B, int BM, int BN, int KS, int WM, int WN, int NWARPS, int STAGES, int VEC, int CDIRECT>
__global__ void __launch_bounds__(32 * NWARPS, (512 / (32 * NWARPS)) > 0 ? 512 / (32 * NWARPS) : 1)
hgemm_ring_tc(int M, int N, int K, float alpha, const __half* A, int lda, long long strideA, const __half* B, int ldb,
              long long strideB, float beta, __half* C, int ldc, long long strideC, int batch) {
  static_assert(BM >= 1 && BN >= 1 && BM <= 256 && BN <= 256, "bounds out of range");
  static_assert(KS >= 16 && KS % 16 == 0, "KS is a multiple of 16");
  static_assert(WM >= 1 && WN >= 1 && NWARPS >= 1 && NWARPS <= 32, "bad warp tile or warps");
  static_assert(STAGES >= 2 && STAGES <= 8, "the ring needs at least two stages");
  static_assert(VEC == 4 || VEC == 8 || VEC == 16, "VEC is 4, 8 or 16 bytes");
  static_assert(CDIRECT == 0 || CDIRECT == 1, "CDIRECT is 0 or 1");
  extern __shared__ __align__(16) unsigned char ring_tc_smem[];
  if (M <= 0 || N <= 0 || batch <= 0) return;  // uniform: no thread reaches a barrier
  using addr_t = unsigned long long;
  constexpr int E = VEC / 2;
  const bool aligned = (reinterpret_cast<addr_t>(A) % VEC) == 0 && lda % E == 0 && (batch == 1 || strideA % E == 0) &&
                       (reinterpret_cast<addr_t>(B) % VEC) == 0 && ldb % E == 0 && (batch == 1 || strideB % E == 0);
  if (M > BM || N > BN || K < 1 || !aligned) {
    // Outside the fast path: one thread per element of C, straight from global memory (no barriers).
    common::gemm_per_element<TRANS_A, TRANS_B, __half>(M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc,
                                                       strideC, batch, (long long)blockIdx.x * blockDim.x + threadIdx.x,
                                                       (long long)gridDim.x * blockDim.x);
    return;
  }
  unsigned dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  if (dyn < static_cast<unsigned>(hgemm_ring_tc_smem_bytes<TRANS_A, TRANS_B, BM, BN, KS, WM, WN, NWARPS, STAGES, VEC, CDIRECT>()))
    __trap();  // launched with too little dynamic shared memory: fail loudly, never corrupt
  ring_detail::run<TRANS_A, TRANS_B, BM, BN, KS, WM, WN, NWARPS, STAGES, VEC, CDIRECT>(
      M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch, ring_tc_smem);
}

}  // namespace autotune
