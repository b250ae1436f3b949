"""Limits checked before any work: problem sizes the kernels can take, and whether a test point's buffers
fit the GPU's memory. Used by the config loader (sizes, at load time, with file:line) and by the runner
(memory, before the first allocation). What a point may be and what it needs is its kind's
(`ProblemKind.check_limits`, `ProblemKind.device_bytes`); this module finds the memory cap and reports.
"""

from __future__ import annotations

import math
import os
import re
from typing import Iterable, Mapping

from autotune import untrusted
from autotune.errors import UserError
from autotune.problems.base import ProblemKind, Scalars, SizeLimit, int32_limit
from autotune.problems.registry import BUILT_IN
from autotune.vocab import TestPoint

MAX_BYTES = 10**15  # `batch: {bytes: ...}` above 1 PB is a typo, not a working set
MEMORY_ENV = "AUTOTUNE_GPU_MEMORY"  # bytes one test point may use (e.g. 40GB); overrides the GPU's memory
# memory of GPUs whose name does not say it (bytes); "H100 80GB HBM3", "A100-SXM4-40GB" say it
KNOWN_MEMORY = {"H200": 141 * 10**9, "H100": 80 * 10**9, "K40": 12 * 2**30, "V100": 16 * 2**30, "A100": 40 * 2**30}
USABLE = 0.9  # share of the GPU's memory one point may take (the context, cuBLAS and the kernel need some)


def point_limit_error(point: TestPoint, kind: ProblemKind | None = None) -> SizeLimit | None:
    """(size name, message, what to do) when a kernel of the point's kind cannot take its sizes; None when it can.
    `kind` defaults to the built-in kind of the point's kind name (else the generic rule: every size an int)."""
    kind = kind if kind is not None else BUILT_IN.get(point.kind)
    return kind.check_limits(point) if kind is not None else int32_limit(point)


def point_bytes(point: TestPoint, kind: ProblemKind | None = None, scalars: Scalars | None = None) -> int:
    """Estimated device memory the GPU worker allocates for `point` (bytes): `kind.device_bytes` with the run's
    scalars of that kind (`kind` defaults to the built-in kind of that name; 0 when none is known)."""
    kind = kind if kind is not None else BUILT_IN.get(point.kind)
    if kind is None:
        return 0
    return kind.device_bytes(point, kind.own_scalars(scalars))


UNITS = dict(b=1, kb=10**3, mb=10**6, gb=10**9, tb=10**12, kib=2**10, mib=2**20, gib=2**30, tib=2**40)
SIZE = re.compile(r"\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*([kmgt]i?b|b)?\s*", flags=re.IGNORECASE)
SIZE_HINT = "write e.g. 100MB, 1.5GB, 512MiB or 100000000"


def parse_bytes(value: object, name: str) -> int:
    """`80GB`, `40GiB`, `1.5e10` or a number -> bytes, from 1 to MAX_BYTES; the number read by autotune.untrusted.
    Anything else is one UserError naming `name` (where the value came from: `AUTOTUNE_GPU_MEMORY`, `batch bytes`)."""
    if isinstance(value, str):
        match = SIZE.fullmatch(value)
        if not match:
            raise UserError(f"{name}: cannot read a size in bytes from {value[:64]!r}", hint=SIZE_HINT)
        given, unit = match.group(1), UNITS[(match.group(2) or "b").lower()]
    else:
        given, unit = value, 1
    try:
        size = untrusted.number(given, name=name) * unit
    except UserError:
        size = math.inf
    if not 0 < size <= MAX_BYTES:  # 0MB would silently give batch 1; 1e400B would overflow
        raise UserError(f"{name} {value!r} must be above 0 and at most 1 PB", hint=SIZE_HINT)
    return int(size)


def gpu_memory(device_name: str) -> int | None:
    """Total memory of a GPU from its name ("NVIDIA H100 80GB HBM3" -> 80 GB), else from KNOWN_MEMORY."""
    match = re.search(r"(\d+)\s*GB", device_name, flags=re.IGNORECASE)
    if match:
        return int(match.group(1)) * 10**9
    return next((v for k, v in KNOWN_MEMORY.items() if k.lower() in device_name.lower()), None)


def memory_cap(device_name: str, free_bytes: int | None = None) -> tuple[int | None, str]:
    """(bytes one point may use, where that figure comes from): AUTOTUNE_GPU_MEMORY when set, else the
    GPU's free memory when known, else USABLE x its total memory (by name), else (None, ...): no check."""
    given = os.environ.get(MEMORY_ENV, "").strip()
    if given:
        return parse_bytes(given, MEMORY_ENV), f"{MEMORY_ENV}={given}"
    if free_bytes is not None:
        return int(free_bytes), f"free memory of {device_name}"
    total = gpu_memory(device_name)
    if total is None:
        return None, f"unknown memory of {device_name}"
    return int(total * USABLE), f"{USABLE:.0%} of {device_name}'s {total / 1e9:.0f} GB"


def check_points_fit(
    points: Iterable[TestPoint],
    device_name: str,
    free_bytes: int | None = None,
    kinds: Mapping[str, ProblemKind] | None = None,
    scalars: Scalars | None = None,
) -> None:
    """Raise UserError, before anything is allocated, when a test point's buffers exceed the memory cap
    (`kinds`: the points' kinds by name; `scalars`: the run's scalars)."""
    cap, source = memory_cap(device_name, free_bytes)
    if cap is None:
        return
    kinds = kinds or {}
    need = {p: point_bytes(p, kinds.get(p.kind), scalars) for p in set(points)}  # a plan lists a point per instance
    too_big = sorted((p for p in need if need[p] > cap), key=need.__getitem__, reverse=True)
    if too_big:
        shown = "; ".join(f"{p.key} needs {need[p] / 1e9:,.1f} GB" for p in too_big[:3])
        more = f" (and {len(too_big) - 3} more)" if len(too_big) > 3 else ""
        raise UserError(
            f"{len(too_big)} test point(s) do not fit in {cap / 1e9:,.1f} GB ({source}): {shown}{more}",
            hint=f"lower the sizes (or a batch count) in the config, or set "
            f"{MEMORY_ENV}=BYTES if the GPU has more memory",
        )
