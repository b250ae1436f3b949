"""Limits checked before any work: problem sizes the kernels can take, and whether a test point's buffers
fit the GPU's memory. Used by the config loader (sizes, at load time, with file:line) and by the runner
(memory, before the first allocation).

Kernels take `int` sizes, so M, N, K and batch must be at most 2^31 - 1. A point's device memory is
estimated from what the GPU worker allocates for it (problems/gemm/data.py, verify.py): A, B and C of the
element type plus a pristine copy of C, the float64 reference of C, float32 scratch for the random
inputs, and the reference's chunk working memory. L2 rotation copies only matter for small points and
are left out (they add at most 3x the L2 cache).
"""
from __future__ import annotations

import math
import os
import re
from typing import Iterable, Mapping

from autotune.errors import UserError
from autotune.problems.base import ProblemKind
from autotune.vocab import TestPoint

INT32_MAX = 2**31 - 1
MAX_BYTES = 10**15  # `batch: {bytes: ...}` above 1 PB is a typo, not a working set
REFERENCE_CHUNK = 256 << 20  # verify.CHUNK_BYTES
MEMORY_ENV = "AUTOTUNE_GPU_MEMORY"  # bytes one test point may use (e.g. 40GB); overrides the GPU's memory
# memory of GPUs whose name does not say it (bytes); "H100 80GB HBM3", "A100-SXM4-40GB" say it
KNOWN_MEMORY = {"H200": 141 * 10**9, "H100": 80 * 10**9, "K40": 12 * 2**30, "V100": 16 * 2**30,
                "A100": 40 * 2**30}
USABLE = 0.9  # share of the GPU's memory one point may take (the context, cuBLAS and the kernel need some)


def point_limit_error(point: TestPoint) -> tuple[str, str, str] | None:
    """(config key, message, what to do) when a kernel cannot take `point`'s sizes; None when it can."""
    for name, value in point.sizes:
        if name != "batch" and value > INT32_MAX:
            return ("sizes", f"{name.upper() if point.kind == 'gemm' else name} = {value:,} is above 2^31 - 1, "
                    "the largest size a kernel takes (int)", "use sizes below 2,147,483,648")
    if point.kind == "gemm" and point.batch > INT32_MAX:
        return ("batch", f"batch {point.batch:,} at {point.m}x{point.n}x{point.k} is above 2^31 - 1 (kernels take "
                         "an int batch)", "give a smaller batch or fewer bytes")
    return None


def point_bytes(point: TestPoint, kind: ProblemKind | None = None) -> int:
    """Estimated device memory the GPU worker allocates for `point` (bytes, see the module doc). Kinds other
    than GEMM: twice the fewest bytes the kind moves (the buffers, and a float64 reference of the outputs)."""
    if point.kind != "gemm":
        return 2 * kind.bytes_moved(point, {}) if kind is not None else 0
    a, b, c = point.m * point.k, point.k * point.n, point.m * point.n
    per_problem = point.elem_bytes * (a + b + 2 * c) + 8 * c + 4 * max(a, b, c)
    return per_problem * point.batch + REFERENCE_CHUNK


def parse_bytes(text: str) -> int:
    """`80GB`, `40GiB`, `1.5e10` -> bytes (ValueError otherwise)."""
    units = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
             "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*([kmgt]i?b|b)?\s*", text, flags=re.IGNORECASE)
    if not match:
        raise ValueError(f"cannot read a size in bytes from {text!r}")
    value = float(match.group(1)) * units[(match.group(2) or "").lower()]
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{text!r} is not a positive size")
    return int(value)


def gpu_memory(device_name: str) -> int | None:
    """Total memory of a GPU from its name ("NVIDIA H100 80GB HBM3" -> 80 GB), else from KNOWN_MEMORY."""
    match = re.search(r"(\d+)\s*GB", device_name, flags=re.IGNORECASE)
    if match:
        return int(match.group(1)) * 10**9
    return next((v for k, v in KNOWN_MEMORY.items() if k.lower() in device_name.lower()), None)


def memory_cap(device_name: str, free_bytes: int | None = None) -> tuple[int | None, str]:
    """(bytes one point may use, where that figure comes from): AUTOTUNE_GPU_MEMORY when set, else the
    GPU's free memory when known, else USABLE x its total memory (by name), else (None, ...): no check."""
    if os.environ.get(MEMORY_ENV):
        try:
            return parse_bytes(os.environ[MEMORY_ENV]), f"{MEMORY_ENV}={os.environ[MEMORY_ENV]}"
        except ValueError as exc:
            raise UserError(f"{MEMORY_ENV}: {exc}", hint=f"write e.g. {MEMORY_ENV}=40GB") from None
    if free_bytes is not None:
        return int(free_bytes), f"free memory of {device_name}"
    total = gpu_memory(device_name)
    if total is None:
        return None, f"unknown memory of {device_name}"
    return int(total * USABLE), f"{USABLE:.0%} of {device_name}'s {total / 1e9:.0f} GB"


def check_points_fit(points: Iterable[TestPoint], device_name: str, free_bytes: int | None = None,
                     kinds: Mapping[str, ProblemKind] | None = None) -> None:
    """Raise UserError, before anything is allocated, when a test point's buffers exceed the memory cap."""
    cap, source = memory_cap(device_name, free_bytes)
    if cap is None:
        return
    kinds = kinds or {}

    def need(p: TestPoint) -> int:
        return point_bytes(p, kinds.get(p.kind))
    too_big = sorted({p for p in points if need(p) > cap}, key=need, reverse=True)
    if too_big:
        shown = "; ".join(f"{p.key} needs {need(p) / 1e9:,.1f} GB" for p in too_big[:3])
        more = f" (and {len(too_big) - 3} more)" if len(too_big) > 3 else ""
        raise UserError(f"{len(too_big)} test point(s) do not fit in {cap / 1e9:,.1f} GB ({source}): {shown}{more}",
                        hint=f"lower the sizes or the batch (batch: {{bytes: ...}}) in the config, or set "
                             f"{MEMORY_ENV}=BYTES if the GPU has more memory")
