/* Out-of-place transpose of a row-major rows x cols fp32 matrix: out (cols x rows) = inp^T.
 *
 * Kernel Tuner style: every tuning parameter is a preprocessor macro with a default below, so the
 * file also compiles on its own (nvcc -arch=sm_90 -c transpose.cu).
 *
 *   block_size_x, block_size_y  thread block; each thread moves (TILE_DIM / block_size_x) x
 *                               (TILE_DIM / block_size_y) elements of a tile
 *   TILE_DIM                    edge of the square tile staged in shared memory
 *   PAD                         extra columns in the shared tile (1 avoids the 32-way bank conflicts
 *                               of reading a tile column; 0 keeps them)
 *
 * One block transposes one TILE_DIM x TILE_DIM tile: grid = (ceil(cols / TILE_DIM), ceil(rows / TILE_DIM)).
 * Every global access is guarded, so rows and cols need not be multiples of the tile.
 */
#ifndef block_size_x
#define block_size_x 32
#endif
#ifndef block_size_y
#define block_size_y 8
#endif
#ifndef TILE_DIM
#define TILE_DIM 32
#endif
#ifndef PAD
#define PAD 1
#endif

static_assert(TILE_DIM % block_size_x == 0, "TILE_DIM must be a multiple of block_size_x");
static_assert(TILE_DIM % block_size_y == 0, "TILE_DIM must be a multiple of block_size_y");
static_assert(block_size_x * block_size_y <= 1024, "at most 1024 threads per block");

extern "C" __global__ void __launch_bounds__(block_size_x * block_size_y)
transpose_kernel(float* __restrict__ out, const float* __restrict__ inp, int rows, int cols)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + PAD];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int col0 = blockIdx.x * TILE_DIM;  /* first input column of this tile */
    const int row0 = blockIdx.y * TILE_DIM;  /* first input row of this tile */

    /* read: consecutive threads of a row read consecutive input columns (coalesced) */
#pragma unroll
    for (int j = ty; j < TILE_DIM; j += block_size_y) {
        const int r = row0 + j;
#pragma unroll
        for (int i = tx; i < TILE_DIM; i += block_size_x) {
            const int c = col0 + i;
            if (r < rows && c < cols) {
                tile[j][i] = inp[(long long)r * cols + c];
            }
        }
    }
    __syncthreads();

    /* write: output row = input column col0 + j, output column = input row row0 + i;
       consecutive threads write consecutive output columns (coalesced) and read a tile column */
#pragma unroll
    for (int j = ty; j < TILE_DIM; j += block_size_y) {
        const int orow = col0 + j;
#pragma unroll
        for (int i = tx; i < TILE_DIM; i += block_size_x) {
            const int ocol = row0 + i;
            if (orow < cols && ocol < rows) {
                out[(long long)orow * rows + ocol] = tile[i][j];
            }
        }
    }
}
