"""GEMM's batch rule: a problem that gives no batch count is batched until its A, B and C together take a byte
budget (`batch: {bytes: 500MB}` in sweep configs and workloads, `--batch-bytes` of `autotune validate`).

`GemmKind.derive_sizes` and `GemmKind.infer_budget` (the kind hooks that keep workloads and validation
kind-neutral) call these functions.
"""

from __future__ import annotations

import math
from typing import Iterable

from autotune.vocab import ELEM_BYTES, TestPoint


def problem_bytes(precision: str, m: int, n: int, k: int) -> int:
    """The bytes of one problem's A (m x k), B (k x n) and C (m x n)."""
    return ELEM_BYTES[precision] * (m * k + k * n + m * n)


def batch_for_bytes(target: int, precision: str, m: int, n: int, k: int) -> int:
    """The smallest batch (>= 1) whose A, B and C of m x n x k together take at least `target` bytes."""
    return max(1, math.ceil(target / problem_bytes(precision, m, n, k)))


def infer_batch_bytes(points: Iterable[TestPoint]) -> int | None:
    """The budget the GEMM points' batches were made with, when they agree on one: bytes X such that every
    point's batch is the smallest whose A + B + C take >= X (the roundest such X: 100MB rather than
    99,999,872); None when no X fits (or there are no points)."""
    lo, hi = 0, math.inf  # X in (lo, hi]
    seen = False
    for p in points:
        seen = True
        per = problem_bytes(p.precision, p.m, p.n, p.k)
        lo, hi = max(lo, (p.batch - 1) * per), min(hi, p.batch * per)
    if not seen or lo >= hi:
        return None
    for digits in range(int(math.log10(hi)) + 1, -1, -1):
        unit = 10**digits
        x = (lo // unit + 1) * unit  # the smallest multiple of unit above lo
        if x <= hi:
            return int(x)
    return None  # unreachable: unit 1 always fits an integer interval (lo, hi] with lo < hi
