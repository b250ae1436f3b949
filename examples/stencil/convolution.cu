/* 2D convolution of an fp32 grid with a fixed 5 x 5 filter (radius 2), Kernel Tuner style.
 *
 *   inp: (ny + 4) x (nx + 4), row-major: the grid with a border of 2 on every side (the caller pads)
 *   out: ny x nx, row-major: out[y][x] = sum_{dy, dx in 0..4} weights[5 * dy + dx] * inp[y + dy][x + dx]
 *
 * Every output element has its whole 5 x 5 neighbourhood inside the input, so the kernel has no
 * boundary condition of its own; blocks on the right and bottom edges are partial when nx or ny is
 * not a multiple of the block's output tile, and every load and store is guarded.
 *
 * The filter lives in a __constant__ array initialised here, in the source (no host code fills it).
 * Its taps are (k + 1) / 325 for tap k = 5 * dy + dx: they sum to 1 and are deliberately asymmetric,
 * so a flipped or transposed filter index fails verification. reference.py uses the same formula and
 * tests/test_examples_reference.py checks the two agree.
 *
 * Tuning parameters (macros, defaults below):
 *   block_size_x, block_size_y  thread block
 *   tile_size_x, tile_size_y    outputs per thread in x and y (strided by the block size, so that a
 *                               warp's loads and stores stay contiguous)
 *   use_shmem                   1: stage the block's input tile (with its border) in shared memory;
 *                               0: read every tap from global memory (through L1)
 *   use_padding                 1: pad the shared tile's row stride so that the rows a warp touches
 *                               fall on different banks (only used when use_shmem == 1)
 *   read_only                   1: the direct reads of use_shmem == 0 go through the read-only data
 *                               cache (__ldg); the shared-memory path reads each input once and
 *                               ignores it
 */
#ifndef block_size_x
#define block_size_x 32
#endif
#ifndef block_size_y
#define block_size_y 8
#endif
#ifndef tile_size_x
#define tile_size_x 1
#endif
#ifndef tile_size_y
#define tile_size_y 2
#endif
#ifndef use_shmem
#define use_shmem 1
#endif
#ifndef use_padding
#define use_padding 1
#endif
#ifndef read_only
#define read_only 0
#endif

#define FILTER_RADIUS 2
#define FILTER_WIDTH (2 * FILTER_RADIUS + 1)
#define OUT_TILE_X (block_size_x * tile_size_x)
#define OUT_TILE_Y (block_size_y * tile_size_y)
#define IN_TILE_X (OUT_TILE_X + 2 * FILTER_RADIUS)
#define IN_TILE_Y (OUT_TILE_Y + 2 * FILTER_RADIUS)
#if use_padding
/* round the stride up to a multiple of 32 words, then shift it by block_size_x (mod 32): a warp that
   spans 32 / block_size_x rows of the tile then touches 32 different banks */
#define SMEM_STRIDE (((IN_TILE_X + 31) / 32) * 32 + (block_size_x % 32))
#else
#define SMEM_STRIDE IN_TILE_X
#endif

#if read_only
#define LOAD(p) __ldg(p)
#else
#define LOAD(p) (*(p))
#endif

static_assert(block_size_x * block_size_y <= 1024, "at most 1024 threads per block");
#if use_shmem
static_assert(IN_TILE_Y * SMEM_STRIDE * 4 <= 48 * 1024, "static shared memory is limited to 48 KB");
#endif

__constant__ float weights[FILTER_WIDTH * FILTER_WIDTH] = {
     1.0f / 325.0f,  2.0f / 325.0f,  3.0f / 325.0f,  4.0f / 325.0f,  5.0f / 325.0f,
     6.0f / 325.0f,  7.0f / 325.0f,  8.0f / 325.0f,  9.0f / 325.0f, 10.0f / 325.0f,
    11.0f / 325.0f, 12.0f / 325.0f, 13.0f / 325.0f, 14.0f / 325.0f, 15.0f / 325.0f,
    16.0f / 325.0f, 17.0f / 325.0f, 18.0f / 325.0f, 19.0f / 325.0f, 20.0f / 325.0f,
    21.0f / 325.0f, 22.0f / 325.0f, 23.0f / 325.0f, 24.0f / 325.0f, 25.0f / 325.0f
};

extern "C" __global__ void __launch_bounds__(block_size_x * block_size_y)
convolution_kernel(float* __restrict__ out, const float* __restrict__ inp, int ny, int nx)
{
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int x0 = blockIdx.x * OUT_TILE_X;  /* first output column of this block */
    const int y0 = blockIdx.y * OUT_TILE_Y;  /* first output row of this block */
    const int in_nx = nx + 2 * FILTER_RADIUS;

    float acc[tile_size_y][tile_size_x];
#pragma unroll
    for (int j = 0; j < tile_size_y; j++) {
#pragma unroll
        for (int i = 0; i < tile_size_x; i++) {
            acc[j][i] = 0.0f;
        }
    }

#if use_shmem
    __shared__ float tile[IN_TILE_Y][SMEM_STRIDE];
    const int in_ny = ny + 2 * FILTER_RADIUS;
    for (int j = ty; j < IN_TILE_Y; j += block_size_y) {
        const int gy = y0 + j;
        for (int i = tx; i < IN_TILE_X; i += block_size_x) {
            const int gx = x0 + i;
            tile[j][i] = (gy < in_ny && gx < in_nx) ? inp[(long long)gy * in_nx + gx] : 0.0f;
        }
    }
    __syncthreads();

#pragma unroll
    for (int dy = 0; dy < FILTER_WIDTH; dy++) {
#pragma unroll
        for (int dx = 0; dx < FILTER_WIDTH; dx++) {
            const float w = weights[dy * FILTER_WIDTH + dx];
#pragma unroll
            for (int j = 0; j < tile_size_y; j++) {
#pragma unroll
                for (int i = 0; i < tile_size_x; i++) {
                    acc[j][i] += w * tile[ty + j * block_size_y + dy][tx + i * block_size_x + dx];
                }
            }
        }
    }
#else
#pragma unroll
    for (int j = 0; j < tile_size_y; j++) {
        const int y = y0 + ty + j * block_size_y;
#pragma unroll
        for (int i = 0; i < tile_size_x; i++) {
            const int x = x0 + tx + i * block_size_x;
            if (y < ny && x < nx) {
                const float* p = inp + (long long)y * in_nx + x;
                float sum = 0.0f;
#pragma unroll
                for (int dy = 0; dy < FILTER_WIDTH; dy++) {
#pragma unroll
                    for (int dx = 0; dx < FILTER_WIDTH; dx++) {
                        sum += weights[dy * FILTER_WIDTH + dx] * LOAD(p + (long long)dy * in_nx + dx);
                    }
                }
                acc[j][i] = sum;
            }
        }
    }
#endif

#pragma unroll
    for (int j = 0; j < tile_size_y; j++) {
        const int y = y0 + ty + j * block_size_y;
#pragma unroll
        for (int i = 0; i < tile_size_x; i++) {
            const int x = x0 + tx + i * block_size_x;
            if (y < ny && x < nx) {
                out[(long long)y * nx + x] = acc[j][i];
            }
        }
    }
}
