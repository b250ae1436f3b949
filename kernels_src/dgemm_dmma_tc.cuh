// fp64 tensor-core (DMMA) batched GEMM for the compute-heavy fp64 points: fixed K with M, N up to 256 (K = 32 at
// M = N = 64..256 needs ~16 TFLOP/s at the HBM roofline, more than the CUDA cores' FMA kernels sustain) and square
// n = 26..32. The H100's fp64 tensor cores (mma.sync.m8n8k4.f64, sm_80 and up) have twice the FMA peak.
//
// NOT YET RUN ON A GPU: written and compiled (nvcc, sm_90, ptxas) without one. The layout arguments below are there
// so that correctness can be checked by reading; tests/gpu/test_dgemm_dmma.py and scripts/check_dmma.py check it
// against a float64 reference on the first GPU run.
//
// Structure (the K-sliced cp.async ring of hgemm_ring_tc.cuh, generalised to tiles of C):
//   1. Units. A unit is one BM x BN tile of C (tile origin m0 = tm * BM, n0 = tn * BN) of a group of PPB consecutive
//      problems (problems g * PPB .. g * PPB + PPB - 1; PPB > 1 is for sizes <= 32, where one tile of one problem is
//      too little work for a block). Unit u is (group u / TILES, tile u % TILES), TILES = ceil(M / BM) * ceil(N / BN),
//      tm = tile % ceil(M / BM): the tiles of one group are adjacent, so its A and B panels are re-read from L2.
//      Block b takes units b, b + gridDim.x, ... (any grid >= 1 is correct; the space launches one unit per block,
//      or with PERSIST = 1 one wave of resident blocks).
//   2. Ring. Each unit is KT = ceil(K / KS) slices of KS values of K; the block's slices (unit after unit) run through
//      a ring of STAGES shared-memory stages: after the barrier that opens slice x the block issues slice
//      x + STAGES - 1 into the stage slice x - 1 has just left (one cp.async group per slice, committed even when
//      empty, so wait_group counts slices); the next unit's first slices load during this unit's last slice and its
//      epilogue.
//   3. Copies straight into padded tiles. Each operand keeps its stored orientation (NN: A is stored M x K, so one
//      slice is KS tile rows (k) of MP doubles (i); TN: MP tile rows (i) of KS doubles (k); likewise B). Every piece
//      of E = VEC / 8 doubles of every tile row is written by a cp.async each time (src-size zero-fill where the piece
//      lies past M, N, K, the tile or the batch), so the padding is zero without a separate pass. E = 2 (16 bytes)
//      needs 16-byte aligned columns (pointer, even ld and stride; tile offsets are multiples of 8); a launch whose
//      operand is not so aligned copies that operand 8 bytes at a time (same ring, same tiles: always correct).
//   4. DMMA on C^T. mma.sync.aligned.m8n8k4.row.col.f64 computes D (8 x 8) += P (8 x 4, row) * Q (4 x 8, col).
//      PTX ISA fragment layout, lane l, g = l >> 2 (group), t = l & 3 (thread in group):
//        P: one double, element (row g, col t);  Q: one double, element (row t, col g);
//        C/D: two doubles, elements (row g, col 2t) and (row g, col 2t + 1).
//      The kernel computes the 8 x 8 block of C^T at (j0, i0): P = op(B)^T (rows j, cols k), Q = op(A)^T (rows k,
//      cols i). So lane l loads op(B)(k0 + t, j0 + g) as P and op(A)(i0 + g, k0 + t) as Q, and holds
//      C(i0 + 2t, j0 + g) and C(i0 + 2t + 1, j0 + g): two elements adjacent in a column of C (column-major), stored
//      as one 16-byte store where C is 16-byte aligned (hgemm_stream does the same with half2).
//      MMA = 1684 / 1688 (sm_90: mma.sync.m16n8k4 / m16n8k8 .f64): P is 16 x K, its rows g and g + 8 in registers
//      p0, p1 (K = 8: p2, p3 the same rows at k + 4), Q is K x 8 (q0 at (t, g), K = 8: q1 at (t + 4, g)), D rows g
//      (d0, d1) and g + 8 (d2, d3). So one m16n8k4 is the two m8n8k4 blocks 2c and 2c + 1 of a warp tile (rows
//      j0 + 16c + g and j0 + 16c + 8 + g of C^T) with their fragments and accumulators unchanged, and one m16n8k8 is
//      that pair over the k-steps k0 and k0 + 4: the loads and the layout do not depend on MMA.
//   5. Conflict-free fragment loads. A tile row is L doubles with row stride LD = L + 4, L a multiple of 8, so
//      LD = 4 (mod 8). An 8-byte load of a warp needs two 128-byte wavefronts at best; it gets two when each of
//      the 16 eight-byte bank pairs (address / 8 mod 16) is hit by exactly two lanes. A warp reads 8 values of the
//      row/column index (g = 0..7) x 4 of k (t = 0..3):
//        k-major tile (NN A, NT B: tile row = k): address (k0 + t) * LD + x0 + g, x0 a multiple of 8. As LD / 4 is
//          odd, (k0 + t) * LD mod 16 = 4 t' with t' a permutation of 0..3, so the pair is 4 t' + g (+ 8) mod 16:
//          4 t' + g takes 0..3 and 16..19 once each (0..3 twice mod 16) and 4..15 twice: every pair twice.
//        index-major tile (TN A, NN B: tile row = i or j): address (x0 + g) * LD + k0 + t; g * LD mod 16 = 4 g' where
//          g' runs through 0..3 twice for g = 0..7, so the pair is 4 g' + t (+ const): every pair twice.
//      Tile rows start on 16-byte boundaries (LD even, stage bases multiples of 16 bytes): 16-byte cp.async targets.
//   6. C: after a unit's last slice each warp stores alpha * acc (+ beta * C, read only where beta != 0) for the
//      elements inside M, N and its tile, straight from the accumulators (no shared C).
//
// C = alpha * op(A) * op(B) + beta * C, column-major, BLAS semantics, `strided` convention, fp64 throughout. Any
// M, N >= 1 (tiles of BM x BN over the problem), K >= 1, leading dimensions above the matrix, batch counts above
// 65,535 (grid on x, 64-bit problem offsets); K < 1 runs the one-thread-per-element path (C = beta * C).
//
// Tuning parameters (template arguments):
//   BM, BN      C tile of a unit (multiples of 8; padded up to the warp tiles: MP = ceil(BM / 8WM) * 8WM)
//   KS          K-slice: values of K per ring stage (a multiple of 8)
//   WM, WN      warp tile: WM x WN blocks of 8 x 8 of C (IPW * WM * WN * 2 fp64 accumulators per thread)
//   NWARPS      warps per block; warp w owns warp tiles w, w + NWARPS, ... (IPW of them) of the unit's PPB problems
//   STAGES      ring stages (>= 2): STAGES - 1 slices in flight during the math on one
//   PPB         problems per unit (several small problems per block)
//   VEC         bytes per cp.async: 16 (with the 8-byte fallback for unaligned operands) or 8
//   MMA         884: mma.sync.m8n8k4 (sm_80+); 1684: m16n8k4, 1688: m16n8k8 (sm_90+, WN even)
// Launch: block (32 * NWARPS, 1, 1); grid (g, 1, 1) for any g >= 1; dynamic shared memory
// dgemm_dmma_tc_smem_bytes<...>() bytes (a launch with less traps).
#pragma once

#include "common.cuh"

namespace autotune {
namespace dmma_detail {

using common::cdiv;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::smem_u32;

// 8 * E bytes from global to shared memory, reading only the first src_bytes and zero-filling the rest. 16 bytes
// bypass L1 (.cg); 8 bytes must go through it (.ca: the only form PTX has for them).
template <int E> __device__ __forceinline__ void cp_async(double* smem, const double* gmem, int src_bytes) {
  if constexpr (E == 2)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(src_bytes)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(src_bytes)
                 : "memory");
}

// d (2 doubles) += p * q on one 8 x 8 x 4 block: p the lane's element of the row-major 8 x 4 operand, q of the
// column-major 4 x 8 operand (layouts in the header comment).
__device__ __forceinline__ void dmma(double (&d)[2], double p, double q) {
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
      : "+d"(d[0]), "+d"(d[1])
      : "d"(p), "d"(q));
}

// sm_90: d0, d1 (rows g of P) and d2, d3 (rows g + 8) += P (16 x 4, row: p0 at (g, t), p1 at (g + 8, t)) * Q (4 x 8,
// col: q at (t, g)). The same fragments as two m8n8k4 blocks stacked along P's rows.
__device__ __forceinline__ void dmma16k4(double (&d0)[2], double (&d1)[2], double p0, double p1, double q) {
  asm("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
      : "+d"(d0[0]), "+d"(d0[1]), "+d"(d1[0]), "+d"(d1[1])
      : "d"(p0), "d"(p1), "d"(q));
}

// sm_90: the same with K = 8: P (16 x 8, row) p0 (g, t), p1 (g + 8, t), p2 (g, t + 4), p3 (g + 8, t + 4); Q (8 x 8,
// col) q0 (t, g), q1 (t + 4, g): the fragments of two m16n8k4 steps, k0 and k0 + 4.
__device__ __forceinline__ void dmma16k8(double (&d0)[2], double (&d1)[2], double p0, double p1, double p2, double p3,
                                         double q0, double q1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+d"(d0[0]), "+d"(d0[1]), "+d"(d1[0]), "+d"(d1[1])
      : "d"(p0), "d"(p1), "d"(p2), "d"(p3), "d"(q0), "d"(q1));
}

// Compile-time geometry of one instance (sizes in doubles).
template <int TRANS_A, int TRANS_B, int BM, int BN, int KS, int WM, int WN, int NWARPS, int STAGES, int PPB, int VEC,
          int MMA>
struct Geo {
  static constexpr int THREADS = 32 * NWARPS;
  static constexpr int MP = cdiv(BM, 8 * WM) * 8 * WM;  // padded tile: whole warp tiles
  static constexpr int NP = cdiv(BN, 8 * WN) * 8 * WN;
  // One slice of each operand in its stored orientation: R tile rows of L doubles, row stride LD = L + 4.
  static constexpr int A_R = TRANS_A == 0 ? KS : MP, A_L = TRANS_A == 0 ? MP : KS, A_LD = A_L + 4;
  static constexpr int B_R = TRANS_B == 0 ? NP : KS, B_L = TRANS_B == 0 ? KS : NP, B_LD = B_L + 4;
  static constexpr int A_SL = A_R * A_LD, B_SL = B_R * B_LD;
  static constexpr int PROB = A_SL + B_SL;    // one problem's slices: A then B
  static constexpr int STAGE = PPB * PROB;    // one ring stage: the unit's PPB problems
  static constexpr int SMEM = 8 * STAGES * STAGE;  // bytes
  static constexpr int IM = MP / (8 * WM), IN = NP / (8 * WN);  // warp tiles per problem along M, N
  static constexpr int ITEMS = PPB * IM * IN;                    // warp tiles per unit
  static constexpr int IPW = cdiv(ITEMS, NWARPS);                // warp tiles per warp
  static constexpr int NH = MMA == 1688 ? 2 : 1;                 // k-steps of 4 per mma
  static_assert(A_LD % 8 == 4 && B_LD % 8 == 4, "row strides of 4 mod 8 doubles: conflict-free fragment loads");
  static_assert(A_SL % 2 == 0 && B_SL % 2 == 0, "slices keep 16-byte alignment");
};

// Issue the cp.async copies of one operand slice of the unit's PPB problems, pieces of E doubles: tile row r (of R,
// stride LD) of problem p (slices PROB doubles apart in the stage) gets the first `len` doubles at
// src + p * stride + r * ld when p < np and r < rows, zeros elsewhere (and past len, up to L). `safe` is a mapped
// address for the zero-fill copies (they read nothing).
template <int R, int L, int LD, int E, int PPB, int PROB, int THREADS>
__device__ __forceinline__ void copy_slice(double* tile, const double* src, long long stride, long long ld, int np,
                                           int rows, int len, const double* safe, int t) {
  constexpr int CPR = L / E;  // pieces per tile row
  constexpr int PER = R * CPR;
  constexpr int TOTAL = PPB * PER;
#pragma unroll 2
  for (int q0 = 0; q0 < TOTAL; q0 += THREADS) {
    const int q = q0 + t;
    if (TOTAL % THREADS != 0 && q >= TOTAL) break;
    const int p = q / PER, rq = q - p * PER;
    const int r = rq / CPR, c = (rq - r * CPR) * E;
    int n = len - c;
    n = (p < np && r < rows) ? (n < 0 ? 0 : (n > E ? E : n)) : 0;
    cp_async<E>(tile + p * PROB + r * LD + c, n > 0 ? src + p * stride + r * ld + c : safe, 8 * n);
  }
}

template <int TRANS_A, int TRANS_B, int BM, int BN, int KS, int WM, int WN, int NWARPS, int STAGES, int PPB, int VEC,
          int MMA>
__device__ __forceinline__ void run(int M, int N, int K, double alpha, const double* A, int lda, long long strideA,
                                    const double* B, int ldb, long long strideB, double beta, double* C, int ldc,
                                    long long strideC, int batch, double* ring) {
  using G = Geo<TRANS_A, TRANS_B, BM, BN, KS, WM, WN, NWARPS, STAGES, PPB, VEC, MMA>;
  constexpr int THREADS = G::THREADS;
  using addr_t = unsigned long long;

  const int tiles_m = cdiv(M, BM);
  const long long tiles = (long long)tiles_m * cdiv(N, BN);
  const long long units = (long long)cdiv(batch, PPB) * tiles;
  const int KT = cdiv(K, KS);
  const bool readC = beta != 0.0;
  // 16-byte copies of an operand: every column starts on 16 bytes (tile offsets m0, n0, k0 and piece offsets are even)
  const bool a16 = VEC == 16 && reinterpret_cast<addr_t>(A) % 16 == 0 && lda % 2 == 0 && (batch == 1 || strideA % 2 == 0);
  const bool b16 = VEC == 16 && reinterpret_cast<addr_t>(B) % 16 == 0 && ldb % 2 == 0 && (batch == 1 || strideB % 2 == 0);
  // 16-byte C accesses: element i of column j at C + j * ldc + m0 + i with m0 and i even
  const bool c16 = reinterpret_cast<addr_t>(C) % 16 == 0 && ldc % 2 == 0 && (batch == 1 || strideC % 2 == 0);
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;

  // Copies of slice s of unit u into stage `slot`.
  auto copy_unit = [&](long long u, int s, int slot) {
    const long long g = u / tiles;
    const int tile = static_cast<int>(u - g * tiles);
    const int m0 = (tile % tiles_m) * BM, n0 = (tile / tiles_m) * BN, k0 = s * KS;
    const int mv = min(M - m0, BM), nv = min(N - n0, BN), kv = K - k0;  // valid rows, columns, K from the corner
    const long long p0 = g * PPB;
    const int np = batch - p0 < PPB ? static_cast<int>(batch - p0) : PPB;  // problems of the group (last one partial)
    double* const sa = ring + slot * G::STAGE;
    double* const sb = sa + G::A_SL;
    const double* const a = A + p0 * strideA;
    const double* const b = B + p0 * strideB;
    // A, NN: stored M x K; tile row r = k - k0 holds A(m0 .. m0 + MP - 1, k), contiguous in column k.
    // A, TN: stored K x M; tile row r = i - m0 holds A^T(k0 .. k0 + KS - 1, i), contiguous in column i.
    if constexpr (TRANS_A == 0) {
      const double* src = a + (long long)k0 * lda + m0;
      if (a16)
        copy_slice<G::A_R, G::A_L, G::A_LD, 2, PPB, G::PROB, THREADS>(sa, src, strideA, lda, np, kv, mv, A, t);
      else
        copy_slice<G::A_R, G::A_L, G::A_LD, 1, PPB, G::PROB, THREADS>(sa, src, strideA, lda, np, kv, mv, A, t);
    } else {
      const double* src = a + (long long)m0 * lda + k0;
      if (a16)
        copy_slice<G::A_R, G::A_L, G::A_LD, 2, PPB, G::PROB, THREADS>(sa, src, strideA, lda, np, mv, kv, A, t);
      else
        copy_slice<G::A_R, G::A_L, G::A_LD, 1, PPB, G::PROB, THREADS>(sa, src, strideA, lda, np, mv, kv, A, t);
    }
    // B, NN: stored K x N; tile row r = j - n0 holds B(k0 .. k0 + KS - 1, j), contiguous in column j.
    // B, NT: stored N x K; tile row r = k - k0 holds B^T(n0 .. n0 + NP - 1, k), contiguous in column k.
    if constexpr (TRANS_B == 0) {
      const double* src = b + (long long)n0 * ldb + k0;
      if (b16)
        copy_slice<G::B_R, G::B_L, G::B_LD, 2, PPB, G::PROB, THREADS>(sb, src, strideB, ldb, np, nv, kv, B, t);
      else
        copy_slice<G::B_R, G::B_L, G::B_LD, 1, PPB, G::PROB, THREADS>(sb, src, strideB, ldb, np, nv, kv, B, t);
    } else {
      const double* src = b + (long long)k0 * ldb + n0;
      if (b16)
        copy_slice<G::B_R, G::B_L, G::B_LD, 2, PPB, G::PROB, THREADS>(sb, src, strideB, ldb, np, kv, nv, B, t);
      else
        copy_slice<G::B_R, G::B_L, G::B_LD, 1, PPB, G::PROB, THREADS>(sb, src, strideB, ldb, np, kv, nv, B, t);
    }
  };

  // Next slice to issue: unit iu, slice is, stage islot.
  long long iu = blockIdx.x;
  int is = 0, islot = 0;
  auto issue = [&]() {
    if (iu < units) copy_unit(iu, is, islot);
    cp_async_commit();
    if (++is == KT) {
      is = 0;
      iu += gridDim.x;
    }
    if (++islot == STAGES) islot = 0;
  };
#pragma unroll 1
  for (int s = 0; s < STAGES - 1; ++s) issue();

  // acc[q][a][b][e] = C(i0 + 8a + 2gt + e, j0 + 8b + gg) of warp tile q (i0, j0 its corner in the padded tile)
  double acc[G::IPW][WM][WN][2];
  const int gg = lane >> 2, gt = lane & 3;  // fragment group and thread in group
  long long cu = blockIdx.x;
  int cs = 0, cslot = 0;
#pragma unroll 1
  while (cu < units) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // slice (cu, cs) has landed for every thread; every warp is done with the previous stage
    issue();          // into the stage the previous slice left
    const long long g = cu / tiles;
    const int tile = static_cast<int>(cu - g * tiles);
    const int m0 = (tile % tiles_m) * BM, n0 = (tile / tiles_m) * BN;
    const int mv = min(M - m0, BM), nv = min(N - n0, BN);
    const long long p0 = g * PPB;
    const int np = batch - p0 < PPB ? static_cast<int>(batch - p0) : PPB;
    if (cs == 0) {
#pragma unroll
      for (int q = 0; q < G::IPW; ++q)
#pragma unroll
        for (int a = 0; a < WM; ++a)
#pragma unroll
          for (int b = 0; b < WN; ++b) acc[q][a][b][0] = acc[q][a][b][1] = 0.0;
    }
    const double* const stage = ring + cslot * G::STAGE;
    const int kv = K - cs * KS;  // valid K of this slice (>= 1)
#pragma unroll
    for (int q = 0; q < G::IPW; ++q) {
      const int item = warp + q * NWARPS;
      if (G::ITEMS % NWARPS != 0 && item >= G::ITEMS) break;  // warp-uniform
      const int p = item / (G::IM * G::IN), w = item - p * (G::IM * G::IN);
      const int i0 = (w % G::IM) * 8 * WM, j0 = (w / G::IM) * 8 * WN;
      if (p >= np || i0 >= mv || j0 >= nv) continue;  // a warp tile of padding only (warp-uniform)
      const double* const ta = stage + p * G::PROB;
      const double* const tb = ta + G::A_SL;
#pragma unroll
      for (int k0 = 0; k0 < KS; k0 += 4 * G::NH) {
        if (k0 >= kv) break;  // k-steps past K in the last slice (uniform; the tiles hold zeros there anyway)
        double fa[G::NH][WM], fb[G::NH][WN];  // the fragments of k-steps k0 + 4h
#pragma unroll
        for (int h = 0; h < G::NH; ++h) {
#pragma unroll
          for (int a = 0; a < WM; ++a) {  // Q: op(A)(i0 + 8a + gg, k0 + 4h + gt)
            const int i = i0 + 8 * a + gg, k = k0 + 4 * h + gt;
            fa[h][a] = TRANS_A == 0 ? ta[k * G::A_LD + i] : ta[i * G::A_LD + k];
          }
#pragma unroll
          for (int b = 0; b < WN; ++b) {  // P: op(B)(k0 + 4h + gt, j0 + 8b + gg)
            const int j = j0 + 8 * b + gg, k = k0 + 4 * h + gt;
            fb[h][b] = TRANS_B == 0 ? tb[j * G::B_LD + k] : tb[k * G::B_LD + j];
          }
        }
#pragma unroll
        for (int a = 0; a < WM; ++a) {
          if constexpr (MMA == 884) {  // C^T block (j0 + 8b, i0 + 8a)
#pragma unroll
            for (int b = 0; b < WN; ++b) dmma(acc[q][a][b], fb[0][b], fa[0][a]);
          } else {  // blocks 2c and 2c + 1 as one 16 x 8 block of C^T: P rows j0 + 16c + gg and j0 + 16c + 8 + gg
#pragma unroll
            for (int c = 0; c < WN / 2; ++c) {
              if constexpr (MMA == 1684)
                dmma16k4(acc[q][a][2 * c], acc[q][a][2 * c + 1], fb[0][2 * c], fb[0][2 * c + 1], fa[0][a]);
              else
                dmma16k8(acc[q][a][2 * c], acc[q][a][2 * c + 1], fb[0][2 * c], fb[0][2 * c + 1], fb[1][2 * c],
                         fb[1][2 * c + 1], fa[0][a], fa[1][a]);
            }
          }
        }
      }
    }

    if (cs == KT - 1) {  // the unit's last slice: C from the accumulators (uniform)
#pragma unroll
      for (int q = 0; q < G::IPW; ++q) {
        const int item = warp + q * NWARPS;
        if (G::ITEMS % NWARPS != 0 && item >= G::ITEMS) break;
        const int p = item / (G::IM * G::IN), w = item - p * (G::IM * G::IN);
        const int i0 = (w % G::IM) * 8 * WM, j0 = (w / G::IM) * 8 * WN;
        if (p >= np || i0 >= mv || j0 >= nv) continue;
        double* const gc = C + (p0 + p) * strideC + (long long)n0 * ldc + m0;
#pragma unroll
        for (int a = 0; a < WM; ++a)
#pragma unroll
          for (int b = 0; b < WN; ++b) {
            const int i = i0 + 8 * a + 2 * gt, j = j0 + 8 * b + gg;  // this lane's C(i, j) and C(i + 1, j)
            if (j >= nv || i >= mv) continue;
            double* const c = gc + (long long)j * ldc + i;
            double v0 = alpha * acc[q][a][b][0], v1 = alpha * acc[q][a][b][1];
            if (c16 && i + 1 < mv) {  // c is 16-byte aligned: i, m0 and ldc even, C and strideC aligned
              if (readC) {
                const double2 old = *reinterpret_cast<const double2*>(c);
                v0 += beta * old.x;
                v1 += beta * old.y;
              }
              *reinterpret_cast<double2*>(c) = make_double2(v0, v1);
            } else {
              c[0] = readC ? v0 + beta * c[0] : v0;
              if (i + 1 < mv) c[1] = readC ? v1 + beta * c[1] : v1;
            }
          }
      }
    }
    if (++cs == KT) {
      cs = 0;
      cu += gridDim.x;
    }
    if (++cslot == STAGES) cslot = 0;
  }
  cp_async_wait<0>();  // nothing left in flight when the block exits
}

}  // namespace dmma_detail

// Dynamic shared memory an instance needs, bytes.
template <int TRANS_A, int TRANS_B, int BM, int BN, int KS, int WM, int WN, int NWARPS, int STAGES, int PPB, int VEC,
          int MMA>
__host__ __device__ constexpr int dgemm_dmma_tc_smem_bytes() {
  return dmma_detail::Geo<TRANS_A, TRANS_B, BM, BN, KS, WM, WN, NWARPS, STAGES, PPB, VEC, MMA>::SMEM;
}

// At least 256 resident threads per SM: up to 255 registers a thread (fp64 accumulators and fragments take two each;
// at 128 the 64 accumulator registers of a 4 x 4 warp tile spill). The space's blocks_per_sm estimates the registers.
template <int TRANS_A, int TRANS_B, int BM, int BN, int KS, int WM, int WN, int NWARPS, int STAGES, int PPB, int VEC,
          int MMA>
__global__ void __launch_bounds__(32 * NWARPS, (256 / (32 * NWARPS)) > 0 ? 256 / (32 * NWARPS) : 1)
dgemm_dmma_tc(int M, int N, int K, double alpha, const double* A, int lda, long long strideA, const double* B, int ldb,
              long long strideB, double beta, double* C, int ldc, long long strideC, int batch) {
  static_assert(BM >= 8 && BN >= 8 && BM <= 256 && BN <= 256 && BM % 8 == 0 && BN % 8 == 0,
                "BM, BN: multiples of 8 up to 256");
  static_assert(KS >= 8 && KS % 8 == 0, "KS is a multiple of 8");
  static_assert(WM >= 1 && WN >= 1 && NWARPS >= 1 && NWARPS <= 32, "bad warp tile or warps");
  static_assert(STAGES >= 2 && STAGES <= 8, "the ring needs at least two stages");
  static_assert(PPB >= 1 && PPB <= 64, "PPB: 1 to 64 problems per unit");
  static_assert(VEC == 8 || VEC == 16, "VEC is 8 or 16 bytes");
  static_assert(MMA == 884 || MMA == 1684 || MMA == 1688, "MMA: 884 (m8n8k4), 1684 (m16n8k4) or 1688 (m16n8k8)");
  static_assert(MMA == 884 || WN % 2 == 0, "the m16 shapes take pairs of 8 x 8 blocks along N: WN even");
  extern __shared__ __align__(16) double dmma_tc_smem[];
  if (M <= 0 || N <= 0 || batch <= 0) return;  // uniform: no thread reaches a barrier
  if (K < 1) {  // C = beta * C: one thread per element (no barriers)
    common::gemm_per_element<TRANS_A, TRANS_B, double>(M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc,
                                                       strideC, batch, (long long)blockIdx.x * blockDim.x + threadIdx.x,
                                                       (long long)gridDim.x * blockDim.x);
    return;
  }
  unsigned dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  if (dyn < static_cast<unsigned>(dgemm_dmma_tc_smem_bytes<TRANS_A, TRANS_B, BM, BN, KS, WM, WN, NWARPS, STAGES, PPB, VEC, MMA>()))
    __trap();  // launched with too little dynamic shared memory: fail loudly, never corrupt
  dmma_detail::run<TRANS_A, TRANS_B, BM, BN, KS, WM, WN, NWARPS, STAGES, PPB, VEC, MMA>(
      M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch, dmma_tc_smem);
}

}  // namespace autotune
