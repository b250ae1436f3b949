// Tensor-core batched HGEMM with Hopper's warpgroup MMA (wgmma, sm_90a) for memory-bound sizes (M <= 128,
// N <= 128, any K): a block streams K-slices of its problems through a ring of shared-memory stages (the ring of
// hgemm_ring_tc.cuh), and one or two warpgroups multiply each slice with wgmma.mma_async, both operands read by the
// tensor cores straight from shared memory through matrix descriptors (no ldmatrix, no fragments in registers).
//
// Why: the mma.sync families (hgemm_flat_tc, hgemm_ring_tc, hgemm_mma, hgemm_stream) reach 0.76-0.96x cuBLAS at
// fp16 n = 48..128 (docs/kernels.md), and cuBLAS's Hopper kernels use wgmma. This family answers, through the
// sweep, whether wgmma closes that gap. The GPU tier (tests/gpu/test_hgemm_wgmma.py) and scripts/check_wgmma.py
// check it against a float64 reference (first run on an H100: results/wgmma_h100).
//
// C = alpha * op(A) * op(B) + beta * C, column-major, BLAS semantics, `strided` convention; fp16 A, B, C with fp32
// alpha, beta and accumulation. Any M, N, K, batch and layout is computed correctly; beta == 0 never reads C.
// M <= BM and N <= BN (K >= 1) take the wgmma path for every layout: each operand is copied with the widest
// cp.async its alignment allows (16, 8 or 4 bytes; where a column may start on an odd half, e.g. packed odd sizes,
// synchronous aligned 16-byte loads shifted into place); M > BM, N > BN or K < 1 take the one-thread-per-element
// path (slow).
//
// 1. Shared-memory layout of one operand's K-slice (no swizzle: wgmma's "interleaved" canonical layout).
//    wgmma reads an operand as 8 x 8 core matrices of halves, each 8 rows of 16 contiguous bytes (128 bytes).
//    Each operand keeps the orientation it has in global memory: X is its contiguous dimension there, Y the other
//      A stored M x K (TRANS_A = 0): X = M, Y = K: "MN-major"  (transpose immediate 1)
//      A stored K x M (TRANS_A = 1): X = K, Y = M: "K-major"   (transpose immediate 0)
//      B stored K x N (TRANS_B = 0): X = K, Y = N: "K-major"   (transpose immediate 0)
//      B stored N x K (TRANS_B = 1): X = N, Y = K: "MN-major"  (transpose immediate 1)
//    so a 16-byte piece of a stored column (8 consecutive x at one y) is one row of a core matrix. The tile of
//    X x Y halves is CX = X / 8 "slabs"; slab xc holds x = 8 xc .. 8 xc + 7 of every y, row y at byte 16 y:
//        byte offset of (x, y) = (x / 8) * SX + 16 * y + 2 * (x % 8),   SX = 16 * (Y + PAD)
//    Core matrix (xc, yc) (x = 8 xc.., y = 8 yc..) is then the 128 contiguous bytes at xc * SX + 128 * yc.
//    Its neighbours: along Y at +128 bytes, along X at +SX bytes. In the descriptor (PTX ISA, "matrix descriptor";
//    CuTe's GmmaDescriptor, INTERLEAVE): LBO = bytes between core matrices adjacent in K, SBO = bytes between
//    core matrices adjacent in M or N. Hence
//        K-major  (X = K):  LBO = SX,  SBO = 128
//        MN-major (Y = K):  LBO = 128, SBO = SX
//    PAD (SPAD = 1) makes the cp.async writes of a warp conflict-free: the 8 lanes of a 16-byte phase write
//    slabs xc .. xc + 7 of one y (CX >= 8, PAD = 1: SX / 16 odd), or 8 / CX rows of CX slabs (CX = 2, 4: PAD =
//    8 / CX, SX / 16 = 8 / CX mod 8), which land in 8 different 16-byte bank groups. SPAD = 0: SX = 16 * Y,
//    every core matrix 128-byte aligned (a fallback should the padded strides be refused on the GPU).
//    SWZ = 1 (KS = 64): the 128-byte swizzle instead. The tile is slabs of 64 x (128 bytes) by Y rows, slab
//    stride 128 Y; logical byte o = (x / 64) * 128 Y + 128 y + 2 (x % 64), stored at o ^ ((o >> 3) & 0x70) (the
//    16-byte chunk index XOR the row index mod 8: Swizzle<3,4,3> on 1024-byte aligned atoms of 8 rows; the ring
//    starts on a 1024-byte boundary). A 128-byte row is 64 K values of one M or N index (K-major; KS = 64: one
//    slab) or 64 M or N values of one k (MN-major; X rounded up to 64). Descriptors (swizzle mode 1, base offset
//    0): K-major LBO = 16 (unused), SBO = 1024 (8 rows of M or N), the k-step's start + 32 kk bytes inside the
//    rows (the hardware applies the XOR to the address it forms, as CUTLASS's descriptor iterator relies on);
//    MN-major LBO = 128 Y (the next 64 of M or N), SBO = 1024 (the next 8 k), k-step start + 2048 kk.
// 2. Descriptors. One wgmma multiplies a 64 x 16 piece of A (warpgroup g: rows 64 g ..) by a 16 x BN piece of B
//    (k-step kk: k = 16 kk .. 16 kk + 15, two core matrices deep). Start addresses:
//        A MN-major: tile + 8 g * SX + 256 kk     A K-major: tile + 2 kk * SX + 1024 g
//        B K-major:  tile + 2 kk * SX             B MN-major: tile + 256 kk
//    Descriptor bits: [0, 14) start address >> 4, [16, 30) LBO >> 4, [32, 46) SBO >> 4, base offset 0, [62, 64)
//    swizzle (0: none; 1: 128 bytes, SWZ = 1).
// 3. Ring. As hgemm_ring_tc: a block takes problems blockIdx.x, blockIdx.x + gridDim.x, ... (PERSIST, a space
//    parameter: a grid of resident blocks; otherwise one block per problem); unit u is slice u % KT of problem
//    u / KT (KT = ceil(K / KS)), STAGES stages, one cp.async group per unit (committed even when empty). Each
//    unit: wait for its group, fence.proxy.async (the cp.async writes were made by the generic proxy, wgmma reads
//    through the async proxy), barrier; wgmma.fence, the KS / 16 k-steps' wgmmas (the first k-step of a problem
//    with scale-d = 0: D = A * B, no zeroing; k-steps past K multiply the zero padding), commit; then the cp.async copies of unit u + STAGES - 1 into the stage unit
//    u - 1 left (its wgmmas were waited for before the barrier) run while the tensor cores work; wait_group 0.
// 4. Accumulators (m64nNk16, f32): thread l of warp w of a warpgroup holds BN / 2 floats; value 4 j + e is
//    C(16 w + l / 4 + 8 (e / 2), 8 j + 2 (l % 4) + e % 2) of its warpgroup's 64 rows.
// 5. C (CDIRECT = 0): alpha * acc as fp16 into a shared copy of the problem's C in its global layout, then 16-byte
//    streaming stores (element stores at the two ragged ends), where C is packed and beta == 0; CDIRECT = 1, an
//    unpacked C or beta != 0: element stores from the accumulators (reading C where beta != 0).
//
// Tuning parameters (template arguments):
//   BM       64 or 128: warpgroups (128 threads each) = BM / 64, each 64 rows of C; the bound of M
//   BN       the wgmma N: a multiple of 8, at most 128; the bound of N
//   KS       K-slice: values of K per ring stage, a multiple of 16 up to 128 (KS / 16 wgmmas per slice; the space
//            offers 16, 32, 64, 128). KS = 128 takes the whole K of a problem up to 128 in one slice (half the units
//            and barriers of KS = 64): tiles of 128 along K, i.e. 16 slabs (K-major; PAD 1 with SPAD = 1, as for X =
//            BM = 128) or slabs of 128 rows (MN-major), and 8 k-steps (starts 2 kk SX or 256 kk, section 2). Correct on
//            an H100 and slower there than KS <= 64 at every size tried (results/wgmma_ks128_h100: one block per
//            SM with one problem in flight)
//   STAGES   ring stages (>= 2)
//   SPAD     1: padded slabs (conflict-free cp.async writes); 0: unpadded, 128-byte aligned core matrices
//   SWZ      1: the 128-byte swizzled layout (KS = 64, SPAD = 0); 0: the interleaved layout
//   CDIRECT  0: C through shared memory and 16-byte stores; 1: element stores from the accumulators
// Launch: block (2 * BM, 1, 1); grid (g, 1, 1) for any g >= 1; dynamic shared memory
// hgemm_wgmma_tc_smem_bytes<...>() bytes (a launch with less traps). Compile for sm_90a (`kernel: arch_specific:
// true`): ptxas refuses wgmma for sm_90, and no other architecture has it.
#pragma once
#include <cuda_fp16.h>

#include "common.cuh"

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 900 || __CUDA_ARCH__ >= 1000)
#error "hgemm_wgmma_tc uses wgmma, which only sm_90a has (compile with -arch=sm_90a: `kernel: arch_specific: true`)"
#endif

namespace autotune {
namespace wgmma_detail {

using common::cdiv;
using common::misalign;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::smem_u32;

// ------------------------------------------------------------------------------------------------ PTX
// W halves (W = 2, 4, 8: 4, 8 or 16 bytes) from global to shared memory, reading the first n (0..W), zero-filling
// the rest. 16 bytes bypass L1 (.cg); 4 and 8 bytes must go through it (.ca: the only form PTX has for them).
template <int W> __device__ __forceinline__ void cp_async_w(unsigned dst, const __half* src, int n) {
  if constexpr (W == 8)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(2 * n) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(2 * W), "r"(2 * n)
                 : "memory");
}
__device__ __forceinline__ void st_shared_v4(unsigned dst, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
// Halves s .. s + 7 of the 16 halves in w (32-bit words, little-endian: half 2i is the low half of w[i]), s = 0..7,
// the halves from the n-th on zeroed (n = 0..8). Selects, no indexing by s (no local memory); host too (tested).
__host__ __device__ __forceinline__ uint4 window8(const unsigned (&w)[8], int s, int n) {
  const int q = s >> 1;
  unsigned v[5];
#pragma unroll
  for (int e = 0; e < 5; ++e) v[e] = q == 0 ? w[e] : q == 1 ? w[e + 1] : q == 2 ? w[e + 2] : w[e + 3];
  if (s & 1) {
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = (v[e] >> 16) | (v[e + 1] << 16);
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) v[e] &= (2 * e < n ? 0xFFFFu : 0u) | (2 * e + 1 < n ? 0xFFFF0000u : 0u);
  return make_uint4(v[0], v[1], v[2], v[3]);
}
// This thread's shared-memory writes (cp.async included) become visible to the async proxy (wgmma's reads).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accesses of an accumulator across the wgmma fences (CUTLASS does the same).
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// Shared-memory matrix descriptor, no swizzle (section 2 above).
template <int SWZ> __host__ __device__ __forceinline__ unsigned long long descriptor(unsigned addr, unsigned lbo, unsigned sbo) {
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) | (static_cast<unsigned long long>(lbo >> 4) << 16) |
         (static_cast<unsigned long long>(sbo >> 4) << 32) | (static_cast<unsigned long long>(SWZ) << 62);
}

// wgmma.mma_async.sync.aligned.m64n<N>k16.f32.f16.f16 d, descA, descB, p, 1, 1, TA, TB: d (N / 2 floats a thread)
// = A * B + (scale_d ? d : 0); TA, TB the transpose immediates (1: MN-major). Inline PTX names every accumulator,
// so there is one specialization per N (operands %0 .. %(N/2 - 1) the accumulators, then descA, descB, scale_d,
// TA, TB).
template <int N, int TA, int TB> struct Mma;
#define AUTOTUNE_WG_F4(i) "+f"(d[(i)]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3])
#define AUTOTUNE_WG_MMA(N, REGS, CONS, DA, DB, SC, TA_, TB_)                                                       \
  template <int TA, int TB> struct Mma<N, TA, TB> {                                                               \
    static __device__ __forceinline__ void run(float* d, unsigned long long da, unsigned long long db, int scale) { \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" SC ", 0;\n"                                              \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.f16.f16 {" REGS "}, %" DA ", %" DB            \
                   ", p, 1, 1, %" TA_ ", %" TB_ ";\n}\n"                                                          \
                   : CONS                                                                                         \
                   : "l"(da), "l"(db), "r"(scale), "n"(TA), "n"(TB)                                               \
                   : "memory");                                                                                   \
    }                                                                                                             \
  };
#define AUTOTUNE_WG_R4 "%0, %1, %2, %3"
#define AUTOTUNE_WG_C4 AUTOTUNE_WG_F4(0)
#define AUTOTUNE_WG_R8 AUTOTUNE_WG_R4 ", %4, %5, %6, %7"
#define AUTOTUNE_WG_C8 AUTOTUNE_WG_C4, AUTOTUNE_WG_F4(4)
#define AUTOTUNE_WG_R12 AUTOTUNE_WG_R8 ", %8, %9, %10, %11"
#define AUTOTUNE_WG_C12 AUTOTUNE_WG_C8, AUTOTUNE_WG_F4(8)
#define AUTOTUNE_WG_R16 AUTOTUNE_WG_R12 ", %12, %13, %14, %15"
#define AUTOTUNE_WG_C16 AUTOTUNE_WG_C12, AUTOTUNE_WG_F4(12)
#define AUTOTUNE_WG_R20 AUTOTUNE_WG_R16 ", %16, %17, %18, %19"
#define AUTOTUNE_WG_C20 AUTOTUNE_WG_C16, AUTOTUNE_WG_F4(16)
#define AUTOTUNE_WG_R24 AUTOTUNE_WG_R20 ", %20, %21, %22, %23"
#define AUTOTUNE_WG_C24 AUTOTUNE_WG_C20, AUTOTUNE_WG_F4(20)
#define AUTOTUNE_WG_R28 AUTOTUNE_WG_R24 ", %24, %25, %26, %27"
#define AUTOTUNE_WG_C28 AUTOTUNE_WG_C24, AUTOTUNE_WG_F4(24)
#define AUTOTUNE_WG_R32 AUTOTUNE_WG_R28 ", %28, %29, %30, %31"
#define AUTOTUNE_WG_C32 AUTOTUNE_WG_C28, AUTOTUNE_WG_F4(28)
#define AUTOTUNE_WG_R36 AUTOTUNE_WG_R32 ", %32, %33, %34, %35"
#define AUTOTUNE_WG_C36 AUTOTUNE_WG_C32, AUTOTUNE_WG_F4(32)
#define AUTOTUNE_WG_R40 AUTOTUNE_WG_R36 ", %36, %37, %38, %39"
#define AUTOTUNE_WG_C40 AUTOTUNE_WG_C36, AUTOTUNE_WG_F4(36)
#define AUTOTUNE_WG_R44 AUTOTUNE_WG_R40 ", %40, %41, %42, %43"
#define AUTOTUNE_WG_C44 AUTOTUNE_WG_C40, AUTOTUNE_WG_F4(40)
#define AUTOTUNE_WG_R48 AUTOTUNE_WG_R44 ", %44, %45, %46, %47"
#define AUTOTUNE_WG_C48 AUTOTUNE_WG_C44, AUTOTUNE_WG_F4(44)
#define AUTOTUNE_WG_R52 AUTOTUNE_WG_R48 ", %48, %49, %50, %51"
#define AUTOTUNE_WG_C52 AUTOTUNE_WG_C48, AUTOTUNE_WG_F4(48)
#define AUTOTUNE_WG_R56 AUTOTUNE_WG_R52 ", %52, %53, %54, %55"
#define AUTOTUNE_WG_C56 AUTOTUNE_WG_C52, AUTOTUNE_WG_F4(52)
#define AUTOTUNE_WG_R60 AUTOTUNE_WG_R56 ", %56, %57, %58, %59"
#define AUTOTUNE_WG_C60 AUTOTUNE_WG_C56, AUTOTUNE_WG_F4(56)
#define AUTOTUNE_WG_R64 AUTOTUNE_WG_R60 ", %60, %61, %62, %63"
#define AUTOTUNE_WG_C64 AUTOTUNE_WG_C60, AUTOTUNE_WG_F4(60)
AUTOTUNE_WG_MMA(8, AUTOTUNE_WG_R4, AUTOTUNE_WG_C4, "4", "5", "6", "7", "8")
AUTOTUNE_WG_MMA(16, AUTOTUNE_WG_R8, AUTOTUNE_WG_C8, "8", "9", "10", "11", "12")
AUTOTUNE_WG_MMA(24, AUTOTUNE_WG_R12, AUTOTUNE_WG_C12, "12", "13", "14", "15", "16")
AUTOTUNE_WG_MMA(32, AUTOTUNE_WG_R16, AUTOTUNE_WG_C16, "16", "17", "18", "19", "20")
AUTOTUNE_WG_MMA(40, AUTOTUNE_WG_R20, AUTOTUNE_WG_C20, "20", "21", "22", "23", "24")
AUTOTUNE_WG_MMA(48, AUTOTUNE_WG_R24, AUTOTUNE_WG_C24, "24", "25", "26", "27", "28")
AUTOTUNE_WG_MMA(56, AUTOTUNE_WG_R28, AUTOTUNE_WG_C28, "28", "29", "30", "31", "32")
AUTOTUNE_WG_MMA(64, AUTOTUNE_WG_R32, AUTOTUNE_WG_C32, "32", "33", "34", "35", "36")
AUTOTUNE_WG_MMA(72, AUTOTUNE_WG_R36, AUTOTUNE_WG_C36, "36", "37", "38", "39", "40")
AUTOTUNE_WG_MMA(80, AUTOTUNE_WG_R40, AUTOTUNE_WG_C40, "40", "41", "42", "43", "44")
AUTOTUNE_WG_MMA(88, AUTOTUNE_WG_R44, AUTOTUNE_WG_C44, "44", "45", "46", "47", "48")
AUTOTUNE_WG_MMA(96, AUTOTUNE_WG_R48, AUTOTUNE_WG_C48, "48", "49", "50", "51", "52")
AUTOTUNE_WG_MMA(104, AUTOTUNE_WG_R52, AUTOTUNE_WG_C52, "52", "53", "54", "55", "56")
AUTOTUNE_WG_MMA(112, AUTOTUNE_WG_R56, AUTOTUNE_WG_C56, "56", "57", "58", "59", "60")
AUTOTUNE_WG_MMA(120, AUTOTUNE_WG_R60, AUTOTUNE_WG_C60, "60", "61", "62", "63", "64")
AUTOTUNE_WG_MMA(128, AUTOTUNE_WG_R64, AUTOTUNE_WG_C64, "64", "65", "66", "67", "68")

// ------------------------------------------------------------------------------------------- geometry
// One operand's K-slice tile: X (contiguous in global memory) by Y halves (section 1). SWZ = 0: CX slabs of SX
// bytes (8 x values each); SWZ = 1: slabs of 64 x values (X rounded up to 64), 128-byte rows, swizzled.
template <int X_, int Y_, int SPAD, int SWZ> struct Tile {
  static constexpr int X = SWZ ? cdiv(X_, 64) * 64 : X_, Y = Y_;  // the extent the copies fill (zeros past X_)
  static constexpr int CX = X / 8;
  static constexpr int PAD = SWZ || SPAD == 0 || CX == 1 ? 0 : (CX >= 8 ? 1 : 8 / CX);
  static constexpr int SX = SWZ ? 128 * Y : 16 * (Y + PAD);  // bytes from one slab to the next
  static constexpr int BYTES = SWZ ? (X / 64) * SX : CX * SX;
  static __host__ __device__ __forceinline__ unsigned offset(int x, int y) {
    if constexpr (SWZ) {
      const unsigned o = (x >> 6) * SX + 128 * y + 2 * (x & 63);
      return o ^ ((o >> 3) & 0x70);
    } else {
      return (x >> 3) * SX + 16 * y + 2 * (x & 7);
    }
  }
};

template <int TRANS_A, int TRANS_B, int BM, int BN, int KS, int STAGES, int SPAD, int SWZ, int CDIRECT> struct Geo {
  static constexpr int NWG = BM / 64, THREADS = 128 * NWG;
  using TA = Tile<TRANS_A == 0 ? BM : KS, TRANS_A == 0 ? KS : BM, SPAD, SWZ>;  // A: X = M, Y = K | X = K, Y = M
  using TB = Tile<TRANS_B == 0 ? KS : BN, TRANS_B == 0 ? BN : KS, SPAD, SWZ>;  // B: X = K, Y = N | X = N, Y = K
  static constexpr int STAGE = TA::BYTES + TB::BYTES;            // bytes (multiples of 16; of 1024 with SWZ)
  static constexpr int QC = CDIRECT ? 0 : cdiv(BM * BN + 7, 8);  // 16-byte chunks of the shared C
  static constexpr int LEAD = SWZ ? 1024 : 0;                    // room to start the ring on 1024 bytes
  static constexpr int SMEM = STAGES * STAGE + 16 * QC + LEAD;
};

// The descriptor of warpgroup wg's 64 x 16 piece of A at k-step kk (rows 64 wg .., k = 16 kk ..) in the A tile at
// shared address ta, and of B's 16 x BN piece in the B tile at tb (section 2; host too: the nvcc tier decodes them
// against the tiles the copies write, tests/test_kernels_compile_wgmma.py).
template <int TRANS_A, class TA, int SWZ>
__host__ __device__ __forceinline__ unsigned long long a_descriptor(unsigned ta, int wg, int kk) {
  if constexpr (SWZ)  // MN-major: warpgroup wg's 64 rows are slab wg, LBO the next 64 of M, SBO 8 k; K-major: SBO 8 rows
    return TRANS_A == 0 ? descriptor<1>(ta + wg * TA::SX + 2048 * kk, TA::SX, 1024)
                        : descriptor<1>(ta + 32 * kk + 8192 * wg, 16, 1024);
  else  // MN-major: LBO 128 (next 8 k), SBO SX (next 8 of M); K-major: LBO SX (next 8 k), SBO 128 (next 8 of M)
    return TRANS_A == 0 ? descriptor<0>(ta + 8 * wg * TA::SX + 256 * kk, 128, TA::SX)
                        : descriptor<0>(ta + 2 * kk * TA::SX + 1024 * wg, TA::SX, 128);
}
template <int TRANS_B, class TB, int SWZ>
__host__ __device__ __forceinline__ unsigned long long b_descriptor(unsigned tb, int kk) {
  if constexpr (SWZ)
    return TRANS_B == 0 ? descriptor<1>(tb + 32 * kk, 16, 1024) : descriptor<1>(tb + 2048 * kk, TB::SX, 1024);
  else  // K-major: LBO SX, SBO 128; MN-major: LBO 128, SBO SX
    return TRANS_B == 0 ? descriptor<0>(tb + 2 * kk * TB::SX, TB::SX, 128) : descriptor<0>(tb + 256 * kk, 128, TB::SX);
}

// ----------------------------------------------------------------------------------------------- copies
// The widest W in {8, 4, 2} halves such that every stored column of every problem starts on a 2W-byte boundary
// (pointer, leading dimension and batch stride), else 1. Slices start at column k0 (MN-major) or at row k0, a
// multiple of KS (K-major), so every copy of W halves is aligned.
__device__ __forceinline__ int copy_width(const __half* p, int ld, long long stride, int batch) {
  const unsigned long long a = reinterpret_cast<unsigned long long>(p);
#pragma unroll
  for (int w = 8; w >= 2; w >>= 1)
    if (a % (2 * w) == 0 && ld % w == 0 && (batch == 1 || stride % w == 0)) return w;
  return 1;
}

// Fill tile T (at shared address `tile`) with a slice whose element (x, y) is src[x + y * ld] for x < xlen and
// y < ylen, zeros elsewhere. W >= 2: one cp.async of W halves per piece (consecutive threads along x: coalesced
// reads, conflict-free writes with SPAD = 1); `safe` is a mapped, aligned address for the zero-fill copies (they
// read nothing). W == 1 (a column may start on an odd half): aligned 16-byte loads shifted into place, then 16-byte
// shared stores (synchronous).
template <class T, int W, int THREADS>
__device__ __forceinline__ void fill(unsigned tile, const __half* src, long long ld, int xlen, int ylen,
                                     const __half* safe, int t) {
  if constexpr (W >= 2) {
    constexpr int CPR = T::X / W, TOTAL = T::Y * CPR;
#pragma unroll 1  // (issued while the accumulators are live: unrolled 2 or 4, BN = 120 spilled)
    for (int q = t; q < TOTAL; q += THREADS) {
      const int y = q / CPR, x = (q - y * CPR) * W;
      int n = xlen - x;
      n = y < ylen ? (n < 0 ? 0 : (n > W ? W : n)) : 0;
      cp_async_w<W>(tile + T::offset(x, y), n > 0 ? src + y * ld + x : safe, n);
    }
  } else {
    // 16 bytes of the tile per piece, as for W = 8, from the one or two aligned 16-byte words of global memory that
    // hold its n valid halves (a word holding none is never read: no access past an allocation), shifted into place
    // (window8), the rest zeroed; U pieces' loads in flight per thread, then the shared stores.
    constexpr int CPR = T::X / 8, TOTAL = T::Y * CPR, U = 2;
#pragma unroll 1
    for (int q0 = t; q0 < TOTAL; q0 += U * THREADS) {
      unsigned w[U][8];
      int sh[U], nv[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int q = q0 + u * THREADS, y = q / CPR, x = (q - y * CPR) * 8;
        int n = xlen - x;
        n = q < TOTAL && y < ylen ? (n < 0 ? 0 : (n > 8 ? 8 : n)) : 0;
        const unsigned long long a = reinterpret_cast<unsigned long long>(src + y * ld + x);
        const uint4* const lo = reinterpret_cast<const uint4*>(a & ~15ull);
        sh[u] = static_cast<int>((a >> 1) & 7);
        nv[u] = n;
        const uint4 w0 = n > 0 ? __ldg(lo) : make_uint4(0, 0, 0, 0);
        const uint4 w1 = n > 0 && sh[u] + n > 8 ? __ldg(lo + 1) : make_uint4(0, 0, 0, 0);
        w[u][0] = w0.x, w[u][1] = w0.y, w[u][2] = w0.z, w[u][3] = w0.w;
        w[u][4] = w1.x, w[u][5] = w1.y, w[u][6] = w1.z, w[u][7] = w1.w;
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int q = q0 + u * THREADS, y = q / CPR, x = (q - y * CPR) * 8;
        const uint4 v = window8(w[u], sh[u], nv[u]);
        if (q < TOTAL) st_shared_v4(tile + T::offset(x, y), v);
      }
    }
  }
}

template <class T, int THREADS>
__device__ __forceinline__ void fill_any(int w, unsigned tile, const __half* src, long long ld, int xlen, int ylen,
                                         const __half* safe, int t) {
  switch (w) {  // uniform: the width is the operand's, the same for every thread and problem
    case 8: fill<T, 8, THREADS>(tile, src, ld, xlen, ylen, safe, t); break;
    case 4: fill<T, 4, THREADS>(tile, src, ld, xlen, ylen, safe, t); break;
    case 2: fill<T, 2, THREADS>(tile, src, ld, xlen, ylen, safe, t); break;
    default: fill<T, 1, THREADS>(tile, src, ld, xlen, ylen, safe, t); break;
  }
}

// ------------------------------------------------------------------------------------------------- epilogue
// C of problem pg from the accumulators (section 5), both kernels' (hgemm_wgmma_flat_tc's too). Thread t holds value
// 4 j8 + e at row i0 + 8 (e >> 1), column 8 j8 + 2 tq + (e & 1); each store goes through one of two pointers (columns
// 2 tq and 2 tq + 1) advanced by 8 columns per j8, predicated by row and column tests made once (the per-element
// index and 64-bit address arithmetic was 41% of hgemm_wgmma_flat_tc's instructions at fp16 n = 114).
template <int BN> struct Frag {
  // value e of n8 tile j8, through store(j8, e, v): the valid ones only
  template <class Store>
  __device__ __forceinline__ static void each(const float (&acc)[BN / 2], int M, int N, int i0, int tq, Store store) {
    const bool r0 = i0 < M, r1 = i0 + 8 < M;
#pragma unroll
    for (int j8 = 0; j8 < BN / 8; ++j8) {
      if (8 * j8 >= N) break;  // n8 tiles of the padding (uniform)
      const int j = 8 * j8 + 2 * tq;
      const bool c0 = j < N, c1 = j + 1 < N;
      if (r0 && c0) store(j8, 0, acc[4 * j8]);
      if (r0 && c1) store(j8, 1, acc[4 * j8 + 1]);
      if (r1 && c0) store(j8, 2, acc[4 * j8 + 2]);
      if (r1 && c1) store(j8, 3, acc[4 * j8 + 3]);
    }
  }
};

template <int BN>
__device__ __forceinline__ void epilogue(const float (&acc)[BN / 2], int M, int N, float alpha, float beta, __half* C,
                                         int ldc, long long strideC, long long pg, bool packC, __half* sC, int t,
                                         int threads) {
  const int lane = t & 31, wg = t >> 7, wq = (t >> 5) & 3, gq = lane >> 2, tq = lane & 3;
  __half* const gc = C + pg * strideC;
  const int offC = packC ? misalign(gc) : 0;
  const int i0 = 64 * wg + 16 * wq + gq;
  if (i0 - gq < M) {  // a warp whose 16 rows are all padding stores nothing (warp-uniform)
    if (packC) {      // element (i, j) at sC[offC + i + j M]
      __half* const p = sC + offC + i0 + 2 * tq * M;
      Frag<BN>::each(acc, M, N, i0, tq, [&](int j8, int e, float v) {
        p[8 * j8 * M + (e & 1) * M + 8 * (e >> 1)] = __float2half_rn(alpha * v);
      });
    } else {
      __half* const p = gc + i0 + static_cast<long long>(2 * tq) * ldc;
      const long long step = 8ll * ldc;
      if (beta == 0.0f) {
        Frag<BN>::each(acc, M, N, i0, tq, [&](int j8, int e, float v) {
          p[j8 * step + (e & 1) * ldc + 8 * (e >> 1)] = __float2half_rn(alpha * v);
        });
      } else {
        Frag<BN>::each(acc, M, N, i0, tq, [&](int j8, int e, float v) {
          __half* const c = p + j8 * step + (e & 1) * ldc + 8 * (e >> 1);
          *c = __float2half_rn(alpha * v + beta * __half2float(*c));
        });
      }
    }
  }
  if (packC) {
    __syncthreads();  // the problem's C is complete in shared memory
    const int span = offC + M * N;
    for (int x = t; x < (span + 7) >> 3; x += threads) {  // 16-byte stores, element stores at the ragged ends
      const int lo = 8 * x;
      if (lo >= offC && lo + 8 <= span) {
        __stcs(reinterpret_cast<uint4*>(gc + (lo - offC)), *reinterpret_cast<const uint4*>(sC + lo));
      } else {
        for (int s = max(lo, offC); s < min(lo + 8, span); ++s) gc[s - offC] = sC[s];
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------- main
template <int TRANS_A, int TRANS_B, int BM, int BN, int KS, int STAGES, int SPAD, int SWZ, int CDIRECT>
__device__ __forceinline__ void run(int M, int N, int K, float alpha, const __half* A, int lda, long long strideA,
                                    const __half* B, int ldb, long long strideB, float beta, __half* C, int ldc,
                                    long long strideC, int batch, unsigned char* smem) {
  using G = Geo<TRANS_A, TRANS_B, BM, BN, KS, STAGES, SPAD, SWZ, CDIRECT>;
  using TA = typename G::TA;
  using TB = typename G::TB;
  constexpr int THREADS = G::THREADS;
  const unsigned base = smem_u32(smem);
  const unsigned lead = SWZ ? ((base + 1023u) & ~1023u) - base : 0u;  // swizzle atoms on 1024-byte boundaries
  const unsigned ring = base + lead;
  __half* const sC = reinterpret_cast<__half*>(smem + lead + STAGES * G::STAGE);

  const int MN = M * N;
  const bool readC = beta != 0.0f;
  const bool packC = !CDIRECT && !readC && ldc == M && (strideC == (long long)MN || batch == 1);
  const int KT = (K + KS - 1) / KS;
  const int t = threadIdx.x, wg = t >> 7;
  const int wa = copy_width(A, lda, strideA, batch), wb = copy_width(B, ldb, strideB, batch);

  // Copies of unit (problem pg, slice s) into stage `slot`.
  auto copy_unit = [&](long long pg, int s, int slot) {
    const unsigned sa = ring + slot * G::STAGE, sb = sa + TA::BYTES;
    const int k0 = s * KS, kl = K - k0;
    const __half* const a = A + pg * strideA;
    const __half* const b = B + pg * strideB;
    if constexpr (TRANS_A == 0)  // stored M x K: x = i, y = k (columns k0.. of A)
      fill_any<TA, THREADS>(wa, sa, a + (long long)k0 * lda, lda, M, kl, a, t);
    else  // stored K x M: x = k (rows k0.. of each column), y = i
      fill_any<TA, THREADS>(wa, sa, a + k0, lda, kl, M, a, t);
    if constexpr (TRANS_B == 0)  // stored K x N: x = k, y = j
      fill_any<TB, THREADS>(wb, sb, b + k0, ldb, kl, N, b, t);
    else  // stored N x K: x = j, y = k
      fill_any<TB, THREADS>(wb, sb, b + (long long)k0 * ldb, ldb, N, kl, b, t);
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

  float acc[BN / 2];
#pragma unroll
  for (int r = 0; r < BN / 2; ++r) acc[r] = 0.0f;
  long long pg = blockIdx.x;
  int cs = 0, cslot = 0;
#pragma unroll 1
  while (pg < batch) {
    cp_async_wait<STAGES - 2>();
    fence_proxy_async();  // unit (pg, cs)'s copies by this thread, visible to wgmma
    __syncthreads();      // ... by every thread; every warpgroup's wgmmas of the previous unit are complete

    const unsigned ta = ring + cslot * G::STAGE, tb = ta + TA::BYTES;
#pragma unroll
    for (int r = 0; r < BN / 2; ++r) fence_operand(acc[r]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KS / 16; ++kk) {
      // (k-steps past K in the last slice multiply the tiles' zero padding: skipping them with a branch made ptxas
      // inject warpgroup.arrive between the wgmmas (C7519) and spill)
      const unsigned long long da = a_descriptor<TRANS_A, TA, SWZ>(ta, wg, kk);
      const unsigned long long db = b_descriptor<TRANS_B, TB, SWZ>(tb, kk);
      Mma<BN, TRANS_A == 0 ? 1 : 0, TRANS_B>::run(acc, da, db, cs > 0 || kk > 0);
    }
    wgmma_commit();
    issue();      // into the stage the previous unit left, while the tensor cores work
    __syncwarp();  // (the copies' loops diverge; wgmma.wait_group is .aligned)
    wgmma_wait<0>();
#pragma unroll
    for (int r = 0; r < BN / 2; ++r) fence_operand(acc[r]);

    if (cs == KT - 1)  // the problem's last slice (uniform); sC is written again only after the next unit's barrier
      epilogue<BN>(acc, M, N, alpha, beta, C, ldc, strideC, pg, packC, sC, t, THREADS);
    if (++cs == KT) {
      cs = 0;
      pg += gridDim.x;
    }
    if (++cslot == STAGES) cslot = 0;
  }
  cp_async_wait<0>();  // nothing left in flight when the block exits
}

}  // namespace wgmma_detail

// Dynamic shared memory an instance needs, bytes.
template <int TRANS_A, int TRANS_B, int BM, int BN, int KS, int STAGES, int SPAD, int SWZ, int CDIRECT>
__host__ __device__ constexpr int hgemm_wgmma_tc_smem_bytes() {
  return wgmma_detail::Geo<TRANS_A, TRANS_B, BM, BN, KS, STAGES, SPAD, SWZ, CDIRECT>::SMEM;
}

// At least 512 resident threads per SM: registers capped at 128 per thread (the space's blocks_per_sm assumes it).
template <int TRANS_A, int TRANS_B, int BM, int BN, int KS, int STAGES, int SPAD, int SWZ, int CDIRECT>
__global__ void __launch_bounds__(2 * BM, 512 / (2 * BM))
    hgemm_wgmma_tc(int M, int N, int K, float alpha, const __half* A, int lda, long long strideA, const __half* B,
                   int ldb, long long strideB, float beta, __half* C, int ldc, long long strideC, int batch) {
  static_assert(BM == 64 || BM == 128, "BM is 64 or 128: one or two warpgroups of 64 rows");
  static_assert(BN >= 8 && BN <= 128 && BN % 8 == 0, "BN (wgmma's N) is a multiple of 8 up to 128");
  static_assert(KS >= 16 && KS <= 128 && KS % 16 == 0,
                "KS is a multiple of 16 (wgmma's K) up to 128 (the range the nvcc tier's host checks decode)");
  static_assert(STAGES >= 2 && STAGES <= 8, "the ring needs at least two stages");
  static_assert(SPAD == 0 || SPAD == 1, "SPAD is 0 or 1");
  static_assert(SWZ == 0 || (SWZ == 1 && KS == 64 && SPAD == 0), "SWZ = 1 (128-byte swizzle) takes KS = 64, SPAD = 0");
  static_assert(CDIRECT == 0 || CDIRECT == 1, "CDIRECT is 0 or 1");
  static_assert(hgemm_wgmma_tc_smem_bytes<TRANS_A, TRANS_B, BM, BN, KS, STAGES, SPAD, SWZ, CDIRECT>() <= 227 * 1024,
                "over the 227 KB of shared memory a block may have");
  extern __shared__ __align__(1024) unsigned char wgmma_tc_smem[];
  if (M <= 0 || N <= 0 || batch <= 0) return;  // uniform: no thread reaches a barrier
  if (M > BM || N > BN || K < 1) {
    // Outside the fast path: one thread per element of C, straight from global memory (no barriers).
    common::gemm_per_element<TRANS_A, TRANS_B, __half>(M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc,
                                                       strideC, batch, (long long)blockIdx.x * blockDim.x + threadIdx.x,
                                                       (long long)gridDim.x * blockDim.x);
    return;
  }
  unsigned dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  if (dyn < static_cast<unsigned>(hgemm_wgmma_tc_smem_bytes<TRANS_A, TRANS_B, BM, BN, KS, STAGES, SPAD, SWZ, CDIRECT>()))
    __trap();  // launched with too little dynamic shared memory: fail loudly, never corrupt
  wgmma_detail::run<TRANS_A, TRANS_B, BM, BN, KS, STAGES, SPAD, SWZ, CDIRECT>(M, N, K, alpha, A, lda, strideA, B, ldb,
                                                                          strideB, beta, C, ldc, strideC, batch,
                                                                          wgmma_tc_smem);
}

}  // namespace autotune
