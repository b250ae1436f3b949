// Element and scalar types shared by the SIMT kernels: S = scalar_of<T>::type is the type of alpha and beta
// and of the accumulator (float for __half, whose products accumulate in float).
#pragma once
#include <cuda_fp16.h>

namespace autotune {
namespace precision {

template <typename T> struct scalar_of { using type = T; };
template <> struct scalar_of<__half> { using type = float; };

__device__ __forceinline__ double to_acc(double x) { return x; }
__device__ __forceinline__ float to_acc(float x) { return x; }
__device__ __forceinline__ float to_acc(__half x) { return __half2float(x); }

template <typename T> __device__ __forceinline__ T from_acc(typename scalar_of<T>::type x) { return x; }
template <> __device__ __forceinline__ __half from_acc<__half>(float x) { return __float2half_rn(x); }

}  // namespace precision
}  // namespace autotune
