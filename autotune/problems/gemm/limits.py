"""GEMM's limits, checked before any work (`ProblemKind.check_limits`, `device_bytes`).

Kernels take `int` sizes, so M, N, K and batch must be at most 2^31 - 1. A point's device memory is estimated
from what the GPU worker allocates for it (data.py, verify.py): A, B and C of the element type plus a pristine
copy of C, the float64 reference of C, float32 scratch for the random inputs, and the reference's chunk working
memory. L2 rotation copies only matter for small points and are left out (they add at most 3x the L2 cache).
"""

from __future__ import annotations

from autotune.problems.base import INT32_MAX, Scalars, SizeLimit
from autotune.vocab import TestPoint

REFERENCE_CHUNK = 256 << 20  # verify.CHUNK_BYTES


def check_limits(point: TestPoint) -> SizeLimit | None:
    """(size name, message, what to do) when a kernel cannot take the point's M, N, K or batch; None when it can."""
    for name in ("m", "n", "k"):
        value = getattr(point, name)
        if value > INT32_MAX:
            return (
                name,
                f"{name.upper()} = {value:,} is above 2^31 - 1, the largest size a kernel takes (int)",
                "use sizes below 2,147,483,648",
            )
    if point.batch > INT32_MAX:
        return (
            "batch",
            f"batch {point.batch:,} at {point.m}x{point.n}x{point.k} is above 2^31 - 1 (kernels take an int batch)",
            "give a smaller batch or fewer bytes",
        )
    return None


def device_bytes(point: TestPoint, scalars: Scalars) -> int:
    """Estimated device memory of a GEMM point (see the module docstring); the scalars do not change it."""
    a, b, c = point.m * point.k, point.k * point.n, point.m * point.n
    per_problem = point.elem_bytes * (a + b + 2 * c) + 8 * c + 4 * max(a, b, c)
    return per_problem * point.batch + REFERENCE_CHUNK
