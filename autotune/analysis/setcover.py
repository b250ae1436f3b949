"""Kernel-set reduction: which kernels to compile so that every test point keeps a good one.

A *kernel* is one instance compiled for one (precision, shape): the element type and the
transpositions are template arguments, so (instance_id, precision, shape) is the unit that costs
compile time and binary size. Groups of different (precision, shape) share no kernel, so each group
is solved on its own and the counts add up (the sum of group minima is the global minimum).

Two methods, on the `accepted` relation of `winners.Winners` (BK winner and within TOL):
- "greedy": the paper's reduction (most frequent winners within TOL). Repeatedly take the kernel
  accepted at the most points not yet served; ties go to the kernel accepted at more points overall,
  then to the smaller summed loss on the newly served points, then to the smaller instance ID.
- "exact": the minimum set cover, solved as a 0/1 integer program with HiGHS (scipy.optimize.milp)
  after removing dominated rows and columns; `optimal` says whether HiGHS proved the count minimal
  within the time limit. Among minimum-size covers it then minimises the worst loss (binary search
  over loss thresholds, one set cover each) and then the mean loss (a small facility-location MILP),
  skipped when too large (`secondary` says what was done).
Every point is served by the fastest kernel of the set measured there (its "assigned" instance).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from autotune.analysis.winners import Criteria, Winners
from autotune.vocab import METHODS

MEAN_STAGE_MAX_PAIRS = 200_000  # above this many (point, kernel) pairs the mean-loss stage is skipped


@dataclass(frozen=True)
class Selection:
    """The chosen kernels and what each test point gets from them."""

    method: str
    criteria: Criteria
    kernels: tuple[tuple[str, str, str], ...]  # (instance_id, precision, shape)
    assigned: np.ndarray  # (P,) column of matrix.instances serving each point, -1 where uncovered
    loss: np.ndarray  # (P,) loss of the assigned instance, NaN where uncovered
    optimal: bool  # the kernel count is proven minimal
    secondary: str  # "worst+mean", "worst" or "none": tie-breaks optimized among minimum covers
    solve_s: float
    uncovered: tuple[str, ...]  # point keys without any verified instance

    @property
    def n_kernels(self) -> int:
        return len(self.kernels)

    @property
    def worst_loss(self) -> float:
        return float(np.nanmax(self.loss)) if np.isfinite(self.loss).any() else float("nan")

    @property
    def mean_loss(self) -> float:
        return float(np.nanmean(self.loss)) if np.isfinite(self.loss).any() else float("nan")


def _redundant(a: np.ndarray, keep_superset: bool, chunk: int = 2048) -> np.ndarray:
    """Columns of a (rows x cols bool) made redundant by another column.

    keep_superset=True (kernel columns): drop a column whose rows are within another's (and empties).
    keep_superset=False (point rows, transposed): drop a set that contains another set, because
    serving the smaller set serves the larger one. Of identical columns the first is kept.
    """
    n = a.shape[1]
    af = a.astype(np.float32)
    size = af.sum(axis=0)
    out = (size == 0) if keep_superset else np.zeros(n, dtype=bool)
    idx = np.arange(n)
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        overlap = af.T @ af[:, lo:hi]  # (n, hi - lo): |col_i & col_j|
        s_i, s_j = size[:, None], size[lo:hi][None, :]
        if keep_superset:  # col j within col i, and i strictly larger or an earlier twin
            rel = (overlap >= s_j - 0.5) & ((s_i > s_j) | ((s_i == s_j) & (idx[:, None] < idx[None, lo:hi])))
        else:  # col i within col j, and i strictly smaller or an earlier twin
            rel = (overlap >= s_i - 0.5) & ((s_i < s_j) | ((s_i == s_j) & (idx[:, None] < idx[None, lo:hi])))
        out[lo:hi] |= rel.any(axis=0)
    return out


def _reduce(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns that matter for the minimum cover (dominance rules, applied to a fixpoint)."""
    rows = np.arange(a.shape[0])
    cols = np.arange(a.shape[1])
    while True:
        sub = a[np.ix_(rows, cols)]
        keep_c = ~_redundant(sub, keep_superset=True)
        keep_r = ~_redundant(sub[:, keep_c].T, keep_superset=False)
        if keep_c.all() and keep_r.all():
            return rows, cols
        rows, cols = rows[keep_r], cols[keep_c]


def _highs():
    """scipy's HiGHS interface, imported on first use (it costs a third of a second at start-up)."""
    from scipy import sparse
    from scipy.optimize import Bounds, LinearConstraint, milp

    return sparse, Bounds, LinearConstraint, milp


def min_cover(a: np.ndarray, time_limit_s: float) -> tuple[np.ndarray, bool]:
    """Smallest set of columns covering every row of `a` (bool, rows x cols, every row coverable).

    Returns (chosen column indices, proven optimal).
    """
    if a.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), True
    if not a.any(axis=1).all():
        raise ValueError("a row has no column: nothing can cover it")
    rows, cols = _reduce(a)
    sub = a[np.ix_(rows, cols)]
    if sub.shape[1] == 1 or sub.all(axis=0).any():
        return cols[[int(np.argmax(sub.all(axis=0)))]], True
    sparse, Bounds, LinearConstraint, milp = _highs()
    res = milp(
        c=np.ones(sub.shape[1]),
        integrality=np.ones(sub.shape[1]),
        bounds=Bounds(0, 1),
        constraints=LinearConstraint(sparse.csr_matrix(sub.astype(np.float64)), lb=1, ub=np.inf),
        options={"time_limit": max(0.1, time_limit_s), "disp": False},
    )
    if res.x is None:  # no incumbent in time: fall back to greedy so callers still get a cover
        return cols[_greedy_cols(sub, np.zeros(sub.shape))], False
    chosen = cols[np.flatnonzero(res.x > 0.5)]
    return chosen, bool(res.status == 0)


def _greedy_cols(a: np.ndarray, loss: np.ndarray, weight: np.ndarray | None = None) -> np.ndarray:
    """The paper's greedy cover; with `weight` (per row) ties in the count go to the larger served weight and the
    summed loss is weighted."""
    left = np.ones(a.shape[0], dtype=bool)
    total = a.sum(axis=0)
    wt = np.ones(a.shape[0]) if weight is None else np.asarray(weight, dtype=float)
    chosen: list[int] = []
    while left.any():
        gain = a[left].sum(axis=0)
        if gain.max() == 0:
            break
        cand = np.flatnonzero(gain == gain.max())
        if weight is not None:
            served = (a[left][:, cand] * wt[left][:, None]).sum(axis=0)
            cand = cand[served >= served.max() * (1 - 1e-12)]
        gained_loss = np.where(a[left][:, cand], loss[left][:, cand] * wt[left][:, None], 0.0).sum(axis=0)
        pick = cand[np.lexsort((cand, gained_loss, -total[cand]))[0]]
        chosen.append(int(pick))
        left &= ~a[:, pick]
    return np.asarray(chosen, dtype=np.int64)


def _assign(w: Winners, rows: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """For each row, the chosen column with the smallest median (ties: better rank)."""
    if len(chosen) == 0:
        return np.full(len(rows), -1)
    med = w.matrix.median[np.ix_(rows, chosen)]
    key = np.where(np.isfinite(med), w.rank[np.ix_(rows, chosen)], np.iinfo(np.int64).max)
    best = chosen[np.argmin(key, axis=1)]
    return np.where(np.isfinite(med).any(axis=1), best, -1)


def _worst_then_mean(
    a: np.ndarray, loss: np.ndarray, k: int, deadline: float, weight: np.ndarray | None = None
) -> tuple[np.ndarray | None, str]:
    """Among covers of size k, lowest worst loss, then lowest (weighted) mean loss. None when nothing better
    found."""
    sparse, Bounds, LinearConstraint, milp = _highs()
    values = np.unique(loss[a])
    lo, hi = 0, len(values) - 1  # values[hi] is feasible (all accepted pairs)
    best_cols: np.ndarray | None = None
    while lo < hi and time.perf_counter() < deadline:
        mid = (lo + hi) // 2
        at = a & (loss <= values[mid])
        if not at.any(axis=1).all():
            lo = mid + 1
            continue
        cols, proven = min_cover(at, deadline - time.perf_counter())
        if len(cols) <= k:
            hi, best_cols = mid, cols
        else:
            lo = mid + 1  # unproven counts stay conservative: the threshold only grows
    if lo < hi:
        return best_cols, "none"
    at = a & (loss <= values[hi])
    r, c = np.nonzero(at)
    used = np.unique(c)
    if len(r) > MEAN_STAGE_MAX_PAIRS or time.perf_counter() >= deadline:
        return best_cols, "worst"
    ci = np.searchsorted(used, c)
    nx, ny = len(used), len(r)
    obj = np.concatenate([np.zeros(nx), loss[r, c] * (1.0 if weight is None else np.asarray(weight, float)[r])])
    one = sparse.csr_matrix((np.ones(ny), (r, nx + np.arange(ny))), shape=(a.shape[0], nx + ny))
    link = sparse.csr_matrix(
        (
            np.concatenate([np.ones(ny), -np.ones(ny)]),
            (np.tile(np.arange(ny), 2), np.concatenate([nx + np.arange(ny), ci])),
        ),
        shape=(ny, nx + ny),
    )
    count = sparse.csr_matrix((np.ones(nx), (np.zeros(nx, dtype=int), np.arange(nx))), shape=(1, nx + ny))
    res = milp(
        c=obj,
        integrality=np.concatenate([np.ones(nx), np.zeros(ny)]),
        bounds=Bounds(0, 1),
        constraints=[LinearConstraint(one, 1, 1), LinearConstraint(link, -np.inf, 0), LinearConstraint(count, 0, k)],
        options={"time_limit": max(0.1, deadline - time.perf_counter()), "disp": False},
    )
    if res.x is None:
        return best_cols, "worst"
    return used[res.x[:nx] > 0.5], "worst+mean" if res.status == 0 else "worst"


def select(
    w: Winners, method: str, time_limit_s: float = 60.0, secondary: bool = True, weights: np.ndarray | None = None
) -> Selection:
    """Reduce the kernel set with `method` ("greedy" or "exact"); see the module docstring. `weights` (per
    point row, e.g. how often a workload runs problems nearest to each point) make the mean-loss stages
    weighted: the kernel count and the worst loss per point come first either way."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {METHODS}")
    start = time.perf_counter()
    deadline = start + time_limit_s
    n = len(w.best_ms)
    assigned = np.full(n, -1, dtype=np.int64)
    kernels: list[tuple[str, str, str]] = []
    optimal, stages = True, set()
    loss = np.where(np.isfinite(w.loss), np.maximum(w.loss, 0.0), np.inf)
    for (precision, shape), rows in w.matrix.groups:
        rows = rows[np.isfinite(w.best_ms[rows])]
        if len(rows) == 0:
            continue
        cols = np.flatnonzero(w.accepted[rows].any(axis=0))
        a = w.accepted[np.ix_(rows, cols)]
        sub_loss = loss[np.ix_(rows, cols)]
        wt = None if weights is None else np.asarray(weights, dtype=float)[rows]
        if method == "greedy":
            chosen, proven = _greedy_cols(a, sub_loss, wt), False
        else:
            chosen, proven = min_cover(a, deadline - time.perf_counter())
            optimal &= proven
            if secondary and proven:
                better, stage = _worst_then_mean(a, sub_loss, len(chosen), deadline, wt)
                if better is not None and len(better) <= len(chosen):
                    chosen = better
                stages.add(stage)
        chosen = np.sort(cols[chosen])
        assigned[rows] = _assign(w, rows, chosen)
        used = np.unique(assigned[rows][assigned[rows] >= 0])  # a chosen kernel that serves no point is dropped
        kernels += [(str(w.matrix.instances[c]), precision, shape) for c in used]
    point_loss = np.where(assigned >= 0, w.loss[np.arange(n), np.maximum(assigned, 0)], np.nan)
    uncovered = tuple(w.matrix.points["point_key"].iloc[np.flatnonzero(assigned < 0)])
    if method == "greedy":
        optimal, second = False, "none"
    else:
        second = "none" if not stages or "none" in stages else ("worst" if "worst" in stages else "worst+mean")
        second = second if secondary else "none"
    return Selection(
        method,
        w.criteria,
        tuple(kernels),
        assigned,
        point_loss,
        optimal,
        second,
        time.perf_counter() - start,
        uncovered,
    )


def selection_frame(w: Winners, sel: Selection) -> pd.DataFrame:
    """Loss per test point: the served instance, its time, the best time, and the loss."""
    rows = np.arange(len(sel.assigned))
    col = np.maximum(sel.assigned, 0)
    ok = sel.assigned >= 0
    return w.matrix.points.assign(
        instance_id=np.where(ok, w.matrix.instances[col] if len(w.matrix.instances) else "", ""),
        ms=np.where(ok, w.matrix.median[rows, col] if w.matrix.median.size else np.nan, np.nan),
        best_ms=w.best_ms,
        loss=sel.loss,
        method=sel.method,
    )
