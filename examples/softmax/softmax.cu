/* Row-wise softmax of a row-major rows x cols fp32 matrix, Kernel Tuner style:
 *   out[r][c] = exp(inp[r][c] - max_r) / sum_c' exp(inp[r][c'] - max_r)
 *
 * One row is handled by block_size_x threads (threadIdx.x), rows_per_block rows per block (threadIdx.y),
 * grid = ceil(rows / rows_per_block). Two passes over a row: the first keeps a running (max, sum of
 * exponentials) per thread (online softmax) and reduces both across the row; the second writes the output.
 *
 * Tuning parameters (macros, defaults below):
 *   block_size_x    threads per row, a multiple of 32 (a row owns whole warps)
 *   rows_per_block  rows per block (blockDim.y)
 *   vector_width    1, 2 or 4 floats per load and store (float, float2, float4)
 *   use_cub         1: reduce a row with cub::BlockReduce; 0: warp shuffles plus shared memory
 *
 * Any cols works: each row is split into a scalar head (until the row's address is aligned to the
 * vector), vector_width-wide loads and stores, and a scalar tail. If the input and output rows are not
 * equally aligned (never for separate allocations of 16-byte alignment), the row is done in scalars.
 * Rows past the end still take part in the block-wide reductions (they synchronise the block) but
 * read and write nothing.
 *
 * This kernel has a C++ (mangled) name on purpose; the others of examples/ are extern "C".
 */
#ifndef block_size_x
#define block_size_x 128
#endif
#ifndef rows_per_block
#define rows_per_block 1
#endif
#ifndef vector_width
#define vector_width 4
#endif
#ifndef use_cub
#define use_cub 1
#endif

#if use_cub
/* the block-level header, not <cub/cub.cuh>: the umbrella header pulls in the device-wide algorithms,
   which NVRTC cannot compile (recent CCCL turns that into an #error) */
#include <cub/block/block_reduce.cuh>
#endif

#define WARPS_PER_ROW (block_size_x / 32)
#define NEG_INF __int_as_float(0xff800000)  /* -infinity without <math.h> (NVRTC has no INFINITY) */

static_assert(block_size_x % 32 == 0, "block_size_x must be a multiple of 32: a row owns whole warps");
static_assert(block_size_x * rows_per_block <= 1024, "at most 1024 threads per block");
static_assert(vector_width == 1 || vector_width == 2 || vector_width == 4, "vector_width is 1, 2 or 4");

#if vector_width == 4
typedef float4 vec_t;
#elif vector_width == 2
typedef float2 vec_t;
#else
typedef float vec_t;
#endif

struct MaxOp {
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
    __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

#if use_cub
typedef cub::BlockReduce<float, block_size_x> RowReduce;  /* linear thread id = threadIdx.x: one row */
struct Scratch {
    typename RowReduce::TempStorage temp[rows_per_block];
    float result[rows_per_block];
};
#else
struct Scratch {
    float partial[rows_per_block][WARPS_PER_ROW];
};
#endif

/* Reduce v over the block_size_x threads of row threadIdx.y; every thread of the row gets the result.
   Every thread of the block must call it: it synchronises the block. */
template <typename Op>
__device__ __forceinline__ float row_reduce(float v, Op op, Scratch& s)
{
#if use_cub
    const float r = RowReduce(s.temp[threadIdx.y]).Reduce(v, op);  /* valid in threadIdx.x == 0 */
    if (threadIdx.x == 0) {
        s.result[threadIdx.y] = r;
    }
    __syncthreads();
    v = s.result[threadIdx.y];
    __syncthreads();  /* the next call reuses temp and result */
    return v;
#else
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
#if WARPS_PER_ROW > 1
    if ((threadIdx.x & 31) == 0) {
        s.partial[threadIdx.y][threadIdx.x / 32] = v;
    }
    __syncthreads();
    v = s.partial[threadIdx.y][0];
#pragma unroll
    for (int w = 1; w < WARPS_PER_ROW; w++) {
        v = op(v, s.partial[threadIdx.y][w]);
    }
    __syncthreads();  /* the next call reuses partial */
#endif
    return v;
#endif
}

/* fold one value into the running (max m, sum s of exp(x - m)) */
__device__ __forceinline__ void online_update(float x, float& m, float& s)
{
    if (x > m) {
        s = s * expf(m - x) + 1.0f;  /* m = -inf at first: exp(-inf) = 0 */
        m = x;
    } else {
        s += expf(x - m);
    }
}

__global__ void __launch_bounds__(block_size_x * rows_per_block)
softmax_kernel(float* __restrict__ out, const float* __restrict__ inp, int rows, int cols)
{
    __shared__ Scratch scratch;

    const int tx = threadIdx.x;
    const int row = blockIdx.x * rows_per_block + threadIdx.y;
    const bool active = row < rows;
    const float* in_row = inp + (long long)(active ? row : 0) * cols;
    float* out_row = out + (long long)(active ? row : 0) * cols;

    /* scalar head up to the first vector-aligned element, vectors, scalar tail */
    const unsigned long long vec_bytes = sizeof(vec_t);
    const unsigned long long in_addr = (unsigned long long)in_row;
    const unsigned long long out_addr = (unsigned long long)out_row;
    int head = (int)(((vec_bytes - in_addr % vec_bytes) % vec_bytes) / sizeof(float));
    if ((out_addr - in_addr) % vec_bytes != 0 || head > cols) {
        head = cols;
    }
    const int nvec = (cols - head) / vector_width;
    const int tail = head + nvec * vector_width;
    const vec_t* in_vec = reinterpret_cast<const vec_t*>(in_row + head);
    vec_t* out_vec = reinterpret_cast<vec_t*>(out_row + head);
    const int n_head = active ? head : 0;
    const int n_vec = active ? nvec : 0;
    const int n_end = active ? cols : tail;

    /* pass 1: running max and sum of exponentials */
    float m = NEG_INF;
    float s = 0.0f;
    for (int c = tx; c < n_head; c += block_size_x) {
        online_update(in_row[c], m, s);
    }
    for (int v = tx; v < n_vec; v += block_size_x) {
        const vec_t x = in_vec[v];
        const float* e = reinterpret_cast<const float*>(&x);
#pragma unroll
        for (int k = 0; k < vector_width; k++) {
            online_update(e[k], m, s);
        }
    }
    for (int c = tail + tx; c < n_end; c += block_size_x) {
        online_update(in_row[c], m, s);
    }

    const float row_max = row_reduce(m, MaxOp(), scratch);
    const float scaled = (m == NEG_INF) ? 0.0f : s * expf(m - row_max);
    const float row_sum = row_reduce(scaled, SumOp(), scratch);
    const float inv_sum = 1.0f / row_sum;

    /* pass 2: write exp(x - max) / sum */
    for (int c = tx; c < n_head; c += block_size_x) {
        out_row[c] = expf(in_row[c] - row_max) * inv_sum;
    }
    for (int v = tx; v < n_vec; v += block_size_x) {
        vec_t x = in_vec[v];
        float* e = reinterpret_cast<float*>(&x);
#pragma unroll
        for (int k = 0; k < vector_width; k++) {
            e[k] = expf(e[k] - row_max) * inv_sum;
        }
        out_vec[v] = x;
    }
    for (int c = tail + tx; c < n_end; c += block_size_x) {
        out_row[c] = expf(in_row[c] - row_max) * inv_sum;
    }
}
