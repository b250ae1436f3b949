/* A block-wide sum through CUB's umbrella header, which NVRTC rejects ("A function explicitly marked as a
   __host__ function is not allowed in JIT mode"): the `compiler: nvcc` test kernel (tests/test_nvcc_compile.py,
   tests/gpu/test_nvcc_sweep.py). One block of BLOCK threads sums its slice of ITEMS * BLOCK floats. */
#include <cub/cub.cuh>

#ifndef ITEMS
#define ITEMS 1
#endif

namespace autotune_test {

template <typename T, int BLOCK>
__global__ void block_sum(const T* in, T* out, int n)
{
    typedef cub::BlockReduce<T, BLOCK> Reduce;
    __shared__ typename Reduce::TempStorage temp;
    T v = T(0);
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        const int idx = (blockIdx.x * ITEMS + i) * BLOCK + threadIdx.x;
        v += idx < n ? in[idx] : T(0);
    }
    const T total = Reduce(temp).Sum(v);
    if (threadIdx.x == 0) {
        out[blockIdx.x] = total;
    }
}

/* The same sum, each block's total added into out[0]: the result does not depend on BLOCK or ITEMS, so one
   reference checks every instance (tests/gpu/test_nvcc_sweep.py). */
template <typename T, int BLOCK>
__global__ void block_sum_atomic(const T* in, T* out, int n)
{
    typedef cub::BlockReduce<T, BLOCK> Reduce;
    __shared__ typename Reduce::TempStorage temp;
    T v = T(0);
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        const int idx = (blockIdx.x * ITEMS + i) * BLOCK + threadIdx.x;
        v += idx < n ? in[idx] : T(0);
    }
    const T total = Reduce(temp).Sum(v);
    if (threadIdx.x == 0) {
        atomicAdd(out, total);
    }
}

}  // namespace autotune_test

extern "C" __global__ void plain_fill(float* out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = 1.0f;
    }
}
