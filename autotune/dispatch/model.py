"""The selection model of a dispatch table (structure mode "model"): a predicted time for every table kernel and
for the library at any problem, fitted on the tuning measurements only.

Per kernel (one instance compiled for one precision and shape) and per (precision, shape) group for the library,
log2 of the measured median time is fitted by ridge least squares (relative error) on the features of
`runtime.model_features`: the intercept, the log2 of every size, of every table size rounded up to
`MODEL_ALIGN`, padded to the kernel's tile and counted in tiles, and of the sum of the pairwise products of the
table sizes (bytes moved, for GEMM). A kernel's tiles come from its space parameters (`tiles_of`: for a size x,
the parameter BX, BLK_X or TILE_X, else 1), whether each table size is a multiple of MODEL_ALIGN and whether it
is even. The coefficients are stored as integers (16 fractional bits) and the
lookup (runtime.py, and the C++ header emit_cpp.py writes) evaluates them with integers only, so Python and C++ give
the same answer bit for bit.

A feature that is constant over a kernel's measured points (but the intercept) gets the coefficient 0.
A kernel measured at fewer than MIN_POINTS tuned points of its group gets no model (it answers only at its tuned
points). Whether the model beats the table's other structures is decided by leave-one-out on the tuning points
(dispatch/loo.py: the model is refitted without the held-out point).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping, Sequence

import numpy as np

from autotune.dispatch.features import FX_BITS, MODEL_ALIGN, model_count, model_features

MIN_POINTS = 3
RIDGE = 1e-3  # ridge penalty on the coefficients (features in log2 units; the intercept included)
TILE_PREFIXES = ("B", "BLK_", "TILE_")


def tiles_of(params: Mapping[str, Any], table_sizes: Sequence[str]) -> tuple[int, ...]:
    """A kernel's tile per table size from its parameters: BX, BLK_X or TILE_X for size x (first found, a
    positive integer), else 1."""

    def tile(raw: Any) -> int:
        try:
            return int(raw)
        except (TypeError, ValueError):
            return 0

    return tuple(
        next((t for prefix in TILE_PREFIXES if (t := tile(params.get(prefix + name.upper()))) >= 1), 1)
        for name in table_sizes
    )


@lru_cache(maxsize=200_000)
def _features(dims: tuple[int, ...], table_dims: tuple[int, ...], tiles: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(model_features(dims, table_dims, tiles))


def feature_matrix(dims: np.ndarray, table_dims: Sequence[int], tiles: Sequence[int]) -> np.ndarray:
    """(rows, features) float features (log2 units) of every row of `dims` (sizes in the kind's order)."""
    td, tl = tuple(int(d) for d in table_dims), tuple(int(t) for t in tiles)
    rows = [_features(tuple(int(x) for x in row), td, tl) for row in dims]
    return np.asarray(rows, dtype=float).reshape(len(rows), -1) / (1 << FX_BITS)


def fit(features: np.ndarray, ms: np.ndarray, ridge: float = RIDGE) -> list[int] | None:
    """Integer coefficients (16 fractional bits) of log2(ms) ~ features; None with fewer than MIN_POINTS rows."""
    keep = np.isfinite(ms) & (ms > 0)
    x, y = features[keep], np.log2(ms[keep])
    if len(y) < MIN_POINTS:
        return None
    # a feature constant over the kernel's points (but the intercept) says nothing: it gets no weight, so that a
    # problem where it differs (an odd size when every tuned size was even) is not extrapolated from it
    use = np.ones(x.shape[1], dtype=bool)
    use[1:] = np.ptp(x[:, 1:], axis=0) > 1e-12
    xs = x[:, use]
    coef = np.zeros(x.shape[1])
    coef[use] = np.linalg.solve(xs.T @ xs + ridge * np.eye(xs.shape[1]), xs.T @ y)
    return [int(round(c * (1 << FX_BITS))) for c in coef]


def fit_table_model(
    sizes: np.ndarray,
    groups: Sequence[tuple[tuple[str, str], np.ndarray]],
    kernels: Sequence[tuple[int, tuple[str, str], tuple[int, ...]]],
    median: np.ndarray,
    library_ms: np.ndarray,
    table_dims: Sequence[int],
) -> dict:
    """The table's `model` object: {"align", "features", "kernels": [{"tiles", "coef"} or None per table kernel],
    "library": {"precision:shape": coef}}.

    `sizes`: (points, sizes) every point row's sizes; `groups`: (precision, shape) -> point rows; `kernels`: per
    table kernel (in table order) its column of `median` (points x instances, ms), its group and its tiles;
    `library_ms`: per point row (NaN: not measured)."""
    rows_of = {g: rows for g, rows in groups}
    out_kernels: list[dict | None] = []
    for col, group, tiles in kernels:
        rows = rows_of.get(group, np.zeros(0, dtype=np.int64))
        times = median[rows, col] if len(rows) else np.zeros(0)
        coef = fit(feature_matrix(sizes[rows], table_dims, tiles), times) if len(rows) else None
        out_kernels.append(None if coef is None else {"tiles": [int(t) for t in tiles], "coef": coef})
    library: dict[str, list[int]] = {}
    ones = [1] * len(table_dims)
    for (precision, shape), rows in groups:
        times = np.asarray(library_ms, dtype=float)[rows]
        if not np.isfinite(times).any():
            continue
        coef = fit(feature_matrix(sizes[rows], table_dims, ones), times)
        if coef is not None:
            library[f"{precision}:{shape}"] = coef
    nf = model_count(sizes.shape[1], len(table_dims))
    return {"align": MODEL_ALIGN, "features": nf, "kernels": out_kernels, "library": library}
