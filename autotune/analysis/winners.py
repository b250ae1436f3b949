"""Winners: per test point the BK best verified instances, and which instances stay within TOL.

Input is a measurements DataFrame (one row per instance and test point) of one problem kind with the columns
`instance_id, point_key, precision, shape, <the kind's sizes>, status, median_ms, p20_ms, p80_ms`; a `Layout`
names the kind's sizes (`Layout.of(kind)`; without one, the sizes are the columns between `shape` and `status`,
the order of `Store.measurements()`).
Only rows with status "ok" or "skipped" and a positive median count; failures (compile error, wrong
result, ...) never win. A "skipped" instance was verified, then stopped early by the runner's rule
(its first 5 repetitions all above 1.2 × best / (1 - TOL_sweep)); its time is the median of those 5.
It is never within a TOL up to 20% of the best at that point, but its time lets the leave-one-out check
price a table kernel that was stopped early at a held-out point. Everything here is pure: DataFrame in, arrays and DataFrames out.

Definitions (the seed's tensor-core paper, section "Testing and Evaluation", Table I):
- best(p): the smallest median time of a verified instance at test point p.
- loss(i, p) = 1 - best(p) / median(i, p): the share of the best *performance* instance i gives up
  at p (0 for the best; performance is 1 / time, so a 5% loss is time = best / 0.95).
- within TOL: loss(i, p) <= TOL, i.e. median(i, p) <= best(p) / (1 - TOL).
- rank: instances at p sorted by (median, p80, instance_id); ties in the median go to the instance
  with the smaller p80 (less spread), then to the smaller ID, so the order is deterministic.
- BK winners of p: ranks 1..BK (BK = None keeps every verified instance).
- accepted(i, p) (instance i may serve point p): i is a BK winner of p and is within TOL of best(p).
- spread rule (opt-in, `spread_ties=True`): two instances whose [p20, p80] intervals overlap are tied,
  i.e. indistinguishable by the measurement. A BK winner tied with the best, p20(i) <= p80(best), is
  then accepted at any TOL, even where its median is more than TOL slower. The guarantee
  "every point within TOL" becomes "within TOL or within the best's measurement spread". Losses are
  always reported from medians. Without the spread rule (the default) the guarantee is exact.
- duplicates (the same instance measured twice at the same point): the median of each column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

TIMED_STATUSES = ("ok", "skipped")  # verified before timing; see the module docstring
RESULT_COLUMNS = ("status", "median_ms", "p20_ms", "p80_ms")
_EPS = 1e-12  # relative slack on "within TOL" so that time == best / (1 - TOL) is inside


@dataclass(frozen=True)
class Layout:
    """How the test points of one problem kind read: its size names (the kind's order), the sizes a dispatch table
    answers over (`table_sizes`; the others, `tie_sizes`, only break ties) and the order of its precisions and
    shapes (variants). `Layout.of(kind)` for a ProblemKind; `kind_object` is the kind itself when known (for
    its bytes and flops)."""

    kind: str
    sizes: tuple[str, ...]
    table_sizes: tuple[str, ...]
    precisions: tuple[str, ...] = ()
    shapes: tuple[str, ...] = ()
    kind_object: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, kind: Any) -> "Layout":
        return cls(
            kind.name,
            tuple(kind.size_names),
            tuple(kind.table_sizes()),
            tuple(kind.precisions),
            tuple(kind.shapes),
            kind,
        )

    @classmethod
    def infer(cls, frame: pd.DataFrame) -> "Layout":
        """The sizes of a frame without a kind: the columns between `shape` and `status` (Store.measurements()'s
        order); the built-in kind with exactly these sizes gives the rest, else every size is a table size."""
        cols = list(frame.columns)
        if "shape" not in cols or "status" not in cols or cols.index("status") < cols.index("shape"):
            raise ValueError("cannot tell the size columns: expected them between `shape` and `status`")
        sizes = tuple(
            c
            for c in cols[cols.index("shape") + 1 : cols.index("status")]
            if c != "point_key" and frame[c].notna().all()
        )
        kind = builtin_kind(sizes)
        if kind is not None:
            return cls.of(kind)
        name = str(frame["kind"].iloc[0]) if "kind" in cols and len(frame) else ""
        return cls(name, sizes, sizes)

    @property
    def tie_sizes(self) -> tuple[str, ...]:
        return tuple(n for n in self.sizes if n not in self.table_sizes)

    @property
    def columns(self) -> tuple[str, ...]:
        """The point columns: precision, shape and the sizes."""
        return ("precision", "shape", *self.sizes)

    def key(self, precision: str, shape: str, sizes: Sequence[int]) -> str:
        """A point's key: 'fp64:NN:32x32x32:b1000' (precision, shape, the table sizes joined by x, then each tie
        size after a colon, named by its first letter when those are unique, else by its name)."""
        value = dict(zip(self.sizes, sizes, strict=True))
        ties = self.tie_sizes
        short = len({n[0] for n in ties}) == len(ties)
        return (
            f"{precision}:{shape}:"
            + "x".join(str(int(value[n])) for n in self.table_sizes)
            + "".join(f":{n[0] if short else n}{int(value[n])}" for n in ties)
        )

    def order(self, column: str, values: pd.Series) -> pd.Series:
        """Rank of each precision or shape in the kind's order (unknown ones last)."""
        known = self.precisions if column == "precision" else self.shapes
        return values.map({v: i for i, v in enumerate(known)}).fillna(len(known))


def builtin_kind(sizes: Sequence[str]) -> Any:
    """The built-in problem kind whose size names are `sizes` (None when none is)."""
    from autotune.problems.registry import BUILT_IN

    return next((k for k in BUILT_IN.values() if tuple(k.size_names) == tuple(sizes)), None)


@dataclass(frozen=True)
class PerfMatrix:
    """Verified times as dense (points x instances) arrays; NaN where no verified time exists.

    `points` has the columns point_key and `layout.columns` in a canonical order (precision, shape, sizes)
    and includes points where every instance failed (they show up as uncovered later).
    """

    layout: Layout
    points: pd.DataFrame
    instances: np.ndarray  # (I,) instance IDs, sorted
    median: np.ndarray  # (P, I) ms
    p20: np.ndarray
    p80: np.ndarray

    @property
    def groups(self) -> list[tuple[tuple[str, str], np.ndarray]]:
        """(precision, shape) -> row indices; a kernel is one instance compiled for one group."""
        keys = list(zip(self.points["precision"], self.points["shape"], strict=True))
        out: dict[tuple[str, str], list[int]] = {}
        for row, key in enumerate(keys):
            out.setdefault(key, []).append(row)
        return [(key, np.asarray(rows)) for key, rows in out.items()]

    def take_points(self, rows: np.ndarray) -> "PerfMatrix":
        """A matrix with only the given point rows (same instance columns)."""
        rows = np.asarray(rows)
        return PerfMatrix(
            self.layout,
            self.points.iloc[rows].reset_index(drop=True),
            self.instances,
            self.median[rows],
            self.p20[rows],
            self.p80[rows],
        )

    @property
    def sizes(self) -> np.ndarray:
        """(P, len(layout.sizes)) int64 sizes of every point row."""
        return self.points[list(self.layout.sizes)].to_numpy(dtype=np.int64)

    @property
    def table_xyz(self) -> np.ndarray:
        """(P, len(layout.table_sizes)) int64 table sizes of every point row."""
        return self.points[list(self.layout.table_sizes)].to_numpy(dtype=np.int64)


def with_point_key(df: pd.DataFrame, layout: Layout | None = None) -> pd.DataFrame:
    """Add `point_key` when absent (store.Store.measurements has the point columns but no key)."""
    if "point_key" in df.columns:
        return df
    layout = layout or Layout.infer(df)
    keys = [layout.key(row[0], row[1], row[2:]) for row in df[list(layout.columns)].itertuples(index=False)]
    return df.assign(point_key=keys)


def sort_points(points: pd.DataFrame, layout: Layout, then: list[str] | None = None) -> pd.DataFrame:
    """Rows in the canonical point order: precision and shape in the kind's order, the sizes, then `then`."""
    points = points.assign(_p=layout.order("precision", points["precision"]), _s=layout.order("shape", points["shape"]))
    points = points.sort_values(["_p", "_s", "precision", "shape", *layout.sizes, *(then or [])])
    return points.drop(columns=["_p", "_s"]).reset_index(drop=True)


def perf_matrix(df: pd.DataFrame, layout: Layout | None = None) -> PerfMatrix:
    """Pivot a measurements DataFrame of one kind into a PerfMatrix (times of verified instances: ok and skipped).
    `layout`: the kind's sizes (default: Layout.infer)."""
    layout = layout or Layout.infer(df)
    point_columns = ["point_key", *layout.columns]
    if set(layout.columns) <= set(df.columns):
        df = with_point_key(df, layout)
    missing = [c for c in ("instance_id", *point_columns, *RESULT_COLUMNS) if c not in df.columns]
    if missing:
        raise ValueError(
            f"measurements lack the columns {missing}; expected instance_id, point_key, "
            f"{', '.join(layout.columns)}, {', '.join(RESULT_COLUMNS)}"
        )
    points = sort_points(df.loc[:, point_columns].drop_duplicates("point_key"), layout, ["point_key"])
    for col in layout.sizes:
        points[col] = points[col].astype(np.int64)
    med = pd.to_numeric(df["median_ms"], errors="coerce")
    ok = df.loc[
        df["status"].astype(str).isin(TIMED_STATUSES) & np.isfinite(med) & (med > 0),
        ["instance_id", "point_key", "median_ms", "p20_ms", "p80_ms"],
    ].copy()
    for col in ("median_ms", "p20_ms", "p80_ms"):  # (a missing p20 or p80: the median)
        ok[col] = pd.to_numeric(ok[col], errors="coerce").astype(float).fillna(ok["median_ms"])
    if ok.duplicated(["instance_id", "point_key"]).any():
        ok = ok.groupby(["instance_id", "point_key"], as_index=False, sort=False).median()
    instances = np.sort(df["instance_id"].astype(str).unique())
    row = pd.Index(points["point_key"]).get_indexer(ok["point_key"])
    col = pd.Index(instances).get_indexer(ok["instance_id"].astype(str))
    arrays = [np.full((len(points), len(instances)), np.nan) for _ in range(3)]
    for a, name in zip(arrays, ("median_ms", "p20_ms", "p80_ms"), strict=True):
        a[row, col] = ok[name].to_numpy()
    return PerfMatrix(layout, points, instances, *arrays)


@dataclass(frozen=True)
class Criteria:
    """How winners are chosen: BK per point, tolerance TOL (0.05 = 5%), and the spread rule."""

    bk: int | None = 10
    tol: float = 0.0
    spread_ties: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.tol < 1.0:
            raise ValueError(f"TOL must be in [0, 1), got {self.tol}")
        if self.bk is not None and self.bk < 1:
            raise ValueError(f"BK must be >= 1 (or None for all), got {self.bk}")


@dataclass(frozen=True)
class Winners:
    """Winners of every point under one Criteria. Arrays are (points x instances)."""

    matrix: PerfMatrix
    criteria: Criteria
    best_ms: np.ndarray  # (P,) NaN where no verified instance
    loss: np.ndarray  # NaN where not measured
    rank: np.ndarray  # 1-based rank, 0 where not measured
    tied: np.ndarray  # [p20, p80] overlaps the best's
    accepted: np.ndarray  # may serve the point (BK winner and within TOL, or tied under the spread rule)

    @property
    def uncovered(self) -> np.ndarray:
        """Row indices of points with no verified instance at all."""
        return np.flatnonzero(~np.isfinite(self.best_ms))

    def take_points(self, rows: np.ndarray) -> "Winners":
        """Winners of a subset of points: every quantity is per point, so slicing equals recomputing."""
        rows = np.asarray(rows)
        return Winners(
            self.matrix.take_points(rows),
            self.criteria,
            self.best_ms[rows],
            self.loss[rows],
            self.rank[rows],
            self.tied[rows],
            self.accepted[rows],
        )


def _ranks(median: np.ndarray, p80: np.ndarray) -> np.ndarray:
    p, i = median.shape
    med = np.where(np.isfinite(median), median, np.inf)
    spread = np.where(np.isfinite(p80), p80, np.inf)
    rows = np.repeat(np.arange(p), i)
    cols = np.tile(np.arange(i), p)
    order = np.lexsort((cols, spread.ravel(), med.ravel(), rows))  # instances are sorted by ID
    rank = np.empty(p * i, dtype=np.int64)
    rank[order] = np.tile(np.arange(1, i + 1), p)
    rank = rank.reshape(p, i)
    rank[~np.isfinite(median)] = 0
    return rank


def winners(matrix: PerfMatrix, criteria: Criteria) -> Winners:
    """Apply BK, TOL and the tie rule to a PerfMatrix."""
    med = matrix.median
    measured = np.isfinite(med)
    with np.errstate(all="ignore"):
        best = np.nanmin(np.where(measured, med, np.inf), axis=1) if med.size else np.full(len(med), np.nan)
        best = np.where(np.isfinite(best), best, np.nan)
        loss = 1.0 - best[:, None] / med
    rank = _ranks(med, matrix.p80) if med.size else np.zeros(med.shape, dtype=np.int64)
    has_best = np.isfinite(best)
    best_col = np.argmax(rank == 1, axis=1) if med.size else np.zeros(len(med), dtype=np.int64)
    best_p80 = np.where(has_best, matrix.p80[np.arange(len(med)), best_col] if med.size else np.nan, np.nan)
    with np.errstate(invalid="ignore"):
        tied = measured & (matrix.p20 <= best_p80[:, None])
        within = measured & (med * (1.0 - criteria.tol) <= best[:, None] * (1.0 + _EPS))
    top = measured & (rank <= (criteria.bk if criteria.bk is not None else np.iinfo(np.int64).max))
    accepted = top & (within | (tied if criteria.spread_ties else False))
    return Winners(matrix, criteria, best, loss, rank, tied, accepted)


def winners_frame(w: Winners) -> pd.DataFrame:
    """Long table of the BK winners: one row per (point, rank <= BK)."""
    bk = w.criteria.bk if w.criteria.bk is not None else w.matrix.median.shape[1]
    rows, cols = np.nonzero((w.rank >= 1) & (w.rank <= bk))
    pts = w.matrix.points.iloc[rows].reset_index(drop=True)
    out = pts.assign(
        rank=w.rank[rows, cols],
        instance_id=w.matrix.instances[cols],
        median_ms=w.matrix.median[rows, cols],
        p20_ms=w.matrix.p20[rows, cols],
        p80_ms=w.matrix.p80[rows, cols],
        loss=w.loss[rows, cols],
        tied=w.tied[rows, cols],
        accepted=w.accepted[rows, cols],
    )
    return out.sort_values(["precision", "shape", *w.matrix.layout.sizes, "rank"], kind="stable").reset_index(drop=True)
