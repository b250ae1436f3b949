"""The kernel argument tuples of the three gemm conventions (`autotune.problems.gemm.data`), built on the CPU with
NumPy arrays standing in for the device arrays: exact values, NumPy types and order."""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.problems.gemm.data import Operand, ptr_array_args, strided_args, vbatched_args


def _check(got: tuple[Any, ...], want: list[tuple[Any, type]]) -> None:
    """`want`: (value, type) per argument; an array stands in for a device array and must be passed as is."""
    assert len(got) == len(want)
    for i, (g, (w, t)) in enumerate(zip(got, want, strict=True)):
        if isinstance(w, np.ndarray):
            assert g is w, i
        else:
            assert type(g) is t and g == w, (i, g, type(g), w, t)


def _arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.zeros(6, np.float16), np.zeros(8, np.float16), np.zeros(12, np.float16)


def test_strided_args_are_sizes_scalars_and_strides_typed() -> None:
    a, b, c = _arrays()
    for precision, s in (("fp64", np.float64), ("fp32", np.float32), ("fp16", np.float32)):
        got = strided_args(precision, (3, 4, 2), 1.5, Operand(a, 3, 6), Operand(b, 2, 8), -0.25, Operand(c, 3, 12), 5)
        want = [
            (3, np.int32), (4, np.int32), (2, np.int32), (1.5, s), (a, object), (3, np.int32), (6, np.int64),
            (b, object), (2, np.int32), (8, np.int64), (-0.25, s), (c, object), (3, np.int32), (12, np.int64),
            (5, np.int32),
        ]  # fmt: skip
        _check(got, want)


def test_ptr_array_args_are_sizes_scalars_and_pointer_arrays() -> None:
    pa, pb, pc = (np.arange(5, dtype=np.uint64) + o for o in (0, 100, 200))
    for precision, s in (("fp64", np.float64), ("fp32", np.float32), ("fp16", np.float32)):
        got = ptr_array_args(precision, (3, 4, 2), 1.5, Operand(pa, 3), Operand(pb, 2), -0.25, Operand(pc, 3), 5)
        want = [
            (3, np.int32), (4, np.int32), (2, np.int32), (1.5, s), (pa, object), (3, np.int32), (pb, object),
            (2, np.int32), (-0.25, s), (pc, object), (3, np.int32), (5, np.int32),
        ]  # fmt: skip
        _check(got, want)


def test_vbatched_args_pass_the_size_arrays_then_batch_and_maxima() -> None:
    pa, pb, pc = (np.arange(5, dtype=np.uint64) + o for o in (0, 100, 200))
    sizes = tuple(np.full(5, v, dtype=np.int32) for v in (3, 4, 2, 3, 2, 3))
    m, n, k, lda, ldb, ldc = sizes
    for precision, s in (("fp64", np.float64), ("fp32", np.float32), ("fp16", np.float32)):
        got = vbatched_args(precision, sizes, 1.5, (pa, pb, pc), -0.25, 5, (3, 4, 2))
        want = [
            (m, object), (n, object), (k, object), (1.5, s), (pa, object), (lda, object), (pb, object),
            (ldb, object), (-0.25, s), (pc, object), (ldc, object), (5, np.int32), (3, np.int32), (4, np.int32),
            (2, np.int32),
        ]  # fmt: skip
        _check(got, want)
