"""GEMM's baseline: cuBLAS (cublasGemmStridedBatchedEx) on the same data, timed like any kernel."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

# cuBLAS data type and compute type codes (cublas_api.h / library_types.h)
_CUDA_TYPE = {"fp64": 1, "fp32": 0, "fp16": 2}
_COMPUTE = {"fp64": 70, "fp32": 68, "fp16": 68}  # CUBLAS_COMPUTE_64F, _32F (fp16 accumulates in fp32)


def cublas_launcher(data: Any, alpha: float, beta: float) -> Callable[[int], None]:
    """launch(r): cublasGemmStridedBatchedEx on copy r % copies of `data` (a strided ProblemData)."""
    import cupy as cp
    from cupy.cuda import cublas

    p, lay = data.point, data.lay
    handle = cp.cuda.device.get_cublas_handle()
    scal = np.float64 if p.precision == "fp64" else np.float32
    al, be = np.array([alpha], dtype=scal), np.array([beta], dtype=scal)
    ta = cublas.CUBLAS_OP_T if p.shape[0] == "T" else cublas.CUBLAS_OP_N
    tb = cublas.CUBLAS_OP_T if p.shape[1] == "T" else cublas.CUBLAS_OP_N
    typ, comp = _CUDA_TYPE[p.precision], _COMPUTE[p.precision]

    def launch(r: int) -> None:
        copy = r % data.copies
        a, b = data.matrices(copy)
        c = data.c_copy(copy)
        cublas.gemmStridedBatchedEx(
            handle,
            ta,
            tb,
            p.m,
            p.n,
            p.k,
            al.ctypes.data,
            a.data.ptr,
            typ,
            lay.lda,
            lay.stride_a,
            b.data.ptr,
            typ,
            lay.ldb,
            lay.stride_b,
            be.ctypes.data,
            c.data.ptr,
            typ,
            lay.ldc,
            lay.stride_c,
            p.batch,
            comp,
            -1,
        )

    return launch
