"""Workloads: the problems an application runs, with weights -> the test points to tune, a sweep config
measuring them, and the weight of each tuned point (for the analyzer). Any problem kind.

A workload (read by `autotune.sweep.workloads.workload_files.load_workload`) is a set of distinct problems with weights,
grouped by (precision, shape). Distances are the dispatch tables' |log2 a/b| summed over the kind's
`table_sizes()` (GEMM: m, n, k); its other sizes (`tie_sizes()`, GEMM: batch) only break ties. Sizes a problem
may leave out (`ProblemKind.derived_sizes`, GEMM: batch) follow a `SizeRule`: a fixed value, else the kind's
`derive_sizes` from a byte budget.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from autotune.problems.base import ProblemKind
from autotune.vocab import TestPoint

if TYPE_CHECKING:  # pandas is imported where a frame is read: a sweep's config (SizeRule) never needs it
    import pandas as pd

DEFAULT_BUDGET_BYTES = 500 * 10**6  # `batch: {bytes: 500MB}` for GEMM
EPS = 1e-9  # distances closer than this are ties
Group = tuple[str, str]  # (precision, shape)


@dataclass(frozen=True)
class SizeRule:
    """How the sizes a problem leaves out (`kind.derived_sizes`) are filled: a fixed value per size
    (`fixed`), else `kind.derive_sizes` from `budget_bytes`."""

    fixed: tuple[tuple[str, int], ...] = ()
    budget_bytes: int = DEFAULT_BUDGET_BYTES

    def fill(self, kind: ProblemKind, precision: str, shape: str, sizes: Mapping[str, int]) -> dict[str, int]:
        """`sizes` with every derived size it lacks (given sizes kept)."""
        out = dict(sizes)
        for name, value in self.fixed:
            out.setdefault(name, value)
        if any(n not in out for n in kind.derived_sizes):
            out = kind.derive_sizes(precision, shape, out, self.budget_bytes)
        return out


@dataclass(frozen=True)
class _Arrays:
    """One group's problems sorted by sizes, as log2 coordinates (the table sizes), tie coordinates and weights."""

    points: list[TestPoint]
    x: np.ndarray  # (n, d) log2 of the table sizes
    tie: np.ndarray  # (n, t) log2 of the tie sizes (GEMM: batch): break distance ties
    w: np.ndarray  # (n,) weights


@dataclass(frozen=True, eq=False)
class Workload:
    """A loaded workload. `problems`: each distinct problem with its (summed) weight, in file order."""

    path: Path
    kind: str
    problem_kind: ProblemKind
    problems: tuple[tuple[TestPoint, float], ...]
    ranges: Mapping[Group, Mapping[str, tuple[int, int]]]  # per group, per table size: (min, max)
    rule: SizeRule = field(default_factory=SizeRule)  # for problems that leave a derived size out
    space: Path | None = None  # the space file that defines the kind (None: a built-in kind named by `kind:`)

    @property
    def table_sizes(self) -> tuple[str, ...]:
        """The sizes distances and `bounds` are over (the kind's table_sizes(); GEMM: m, n, k)."""
        return self.problem_kind.table_sizes()

    @property
    def tie_sizes(self) -> tuple[str, ...]:
        return self.problem_kind.tie_sizes()

    @property
    def total_weight(self) -> float:
        return float(sum(w for _, w in self.problems))

    def bounds(self, precision: str, shape: str) -> dict[str, tuple[int, int]]:
        """Per table size, the (min, max) over the group's problems (ValueError for a group it lacks)."""
        if (precision, shape) not in self.ranges:
            raise ValueError(
                f"the workload has no {precision} {shape or '-'} problems; groups: "
                + ", ".join(f"{p} {s or '-'}" for p, s in self.ranges)
            )
        return dict(self.ranges[(precision, shape)])

    def point(self, precision: str, shape: str, sizes: Mapping[str, int]) -> TestPoint:
        """The test point for these sizes; derived sizes it lacks (GEMM: batch) follow the workload's rule."""
        return self.problem_kind.point(precision, shape, self.rule.fill(self.problem_kind, precision, shape, sizes))

    @cached_property
    def groups(self) -> dict[Group, _Arrays]:
        by: dict[Group, list[tuple[TestPoint, float]]] = {}
        for p, w in self.problems:
            by.setdefault((p.precision, p.shape), []).append((p, w))
        names = self.table_sizes
        out = {}
        for key, items in by.items():
            items.sort(key=lambda pw: (tuple(pw[0].dims[n] for n in names), tuple(v for _, v in pw[0].sizes)))
            pts = [p for p, _ in items]
            out[key] = _Arrays(
                pts, _coords(pts, names), _coords(pts, self.tie_sizes), np.array([w for _, w in items], float)
            )
        return out


def _coords(points: Sequence[TestPoint], names: Sequence[str]) -> np.ndarray:
    return np.log2(np.array([[p.dims[n] for n in names] for p in points], float).reshape(len(points), len(names)))


# ---------------------------------------------------------------------------------------------- tuning
def _best(score: np.ndarray, w: np.ndarray) -> int:
    """The largest score; ties: the larger weight, then the smaller sizes (the lower index)."""
    cand = np.flatnonzero(score >= score.max() - EPS)
    return int(cand[np.argmax(w[cand])])


def _l1(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(len(x), len(y)) sums of |x_i - y_j| over the coordinates."""
    out = np.zeros((len(x), len(y)))
    for j in range(x.shape[1]):
        out += np.abs(x[:, j, None] - y[None, :, j])
    return out


def choose_points(workload: Workload, per_group: int, include: Sequence[TestPoint] = ()) -> list[TestPoint]:
    """The points to tune. Per (precision, shape) group: all problems when there are at most `per_group`;
    else the problems nearest the all-min and all-max corners, the heaviest problem, then repeatedly the
    problem farthest from every chosen one (ties: larger weight, then smaller sizes), up to `per_group`.
    `include` points are kept and count toward their group's `per_group`."""
    if per_group < 1:
        raise ValueError("per_group must be at least 1")
    include = list(dict.fromkeys(include))
    out: list[TestPoint] = []
    for (prec, shape), g in workload.groups.items():
        mine = [p for p in include if (p.kind, p.precision, p.shape) == (workload.kind, prec, shape)]
        out += mine
        if len(g.points) <= per_group:
            out += [p for p in g.points if p not in set(mine)]
            continue
        mind = _l1(g.x, _coords(mine, workload.table_sizes)).min(axis=1) if mine else np.full(len(g.points), np.inf)
        picks: list[int] = []
        firsts = [
            _best(-np.abs(g.x - g.x.min(0)).sum(1), g.w),
            _best(-np.abs(g.x - g.x.max(0)).sum(1), g.w),
            int(np.argmax(g.w)),
        ]
        while len(mine) + len(picks) < per_group:
            first = bool(firsts)
            i = firsts.pop(0) if first else _best(mind, g.w)
            if mind[i] <= EPS:  # chosen already
                if first:
                    continue
                break  # every problem is at a chosen point
            picks.append(i)
            mind = np.minimum(mind, np.abs(g.x - g.x[i]).sum(1))
        out += [g.points[i] for i in picks]
    seen = set(out)
    return out + [p for p in include if p not in seen]


def _nearest(
    workload: Workload, tuned: Sequence[TestPoint]
) -> dict[Group, tuple[list[TestPoint], np.ndarray, np.ndarray]]:
    """Per workload group with a tuned point: (its tuned points, each problem's nearest one, the distance)."""
    out = {}
    for key, g in workload.groups.items():
        mine = list(dict.fromkeys(p for p in tuned if (p.kind, p.precision, p.shape) == (workload.kind, *key)))
        if not mine:
            continue
        tx, ttie = _coords(mine, workload.table_sizes), _coords(mine, workload.tie_sizes)
        idx, dist = np.empty(len(g.points), int), np.empty(len(g.points))
        for a in range(0, len(g.points), 4096):
            d = _l1(g.x[a : a + 4096], tx)
            dmin = d.min(axis=1)
            tie = _l1(g.tie[a : a + 4096], ttie)  # ties: nearer tie sizes, then the earlier point
            tie[d > dmin[:, None] + EPS] = np.inf
            idx[a : a + 4096], dist[a : a + 4096] = tie.argmin(axis=1), dmin
        out[key] = (mine, idx, dist)
    return out


def weights(workload: Workload, tuned: Sequence[TestPoint]) -> tuple[dict[TestPoint, float], float]:
    """Each workload problem's weight goes to its nearest tuned point of the same kind, precision and shape
    (ties: the nearer tie sizes, then the earlier tuned point). Returns the weight per tuned point (0 where it
    gets none) and the total weight of problems whose group has no tuned point."""
    out = {p: 0.0 for p in tuned}
    near = _nearest(workload, tuned)
    unassigned = 0.0
    for key, g in workload.groups.items():
        if key not in near:
            unassigned += float(g.w.sum())
            continue
        mine, idx, _ = near[key]
        for p, w in zip(mine, np.bincount(idx, weights=g.w, minlength=len(mine)), strict=True):
            out[p] += float(w)
    return out, unassigned


def coverage(workload: Workload, tuned: Sequence[TestPoint]) -> dict[Group, tuple[int, float | None]]:
    """Per workload group: how many tuned points, and the largest log2 distance from a problem to its
    nearest tuned point (None: the group has no tuned point)."""
    near = _nearest(workload, tuned)
    return {
        key: (len(near[key][0]), float(near[key][2].max())) if key in near else (0, None) for key in workload.groups
    }


def point_weights_frame(workload: Workload, points: pd.DataFrame) -> np.ndarray:
    """The weight of each row of a frame of tuned points (columns precision, shape and the kind's sizes; a
    `kind` column, when present, gives rows of other kinds weight 0). Rows without a derived size (GEMM:
    batch) take the workload's rule."""
    import pandas as pd

    rows: list[TestPoint | None] = []
    for rec in points.to_dict("records"):
        if rec.get("kind", workload.kind) != workload.kind:
            rows.append(None)
            continue
        sizes = {n: int(rec[n]) for n in workload.problem_kind.size_names if n in rec and pd.notna(rec[n])}
        rows.append(workload.point(rec["precision"], rec.get("shape", "") or "", sizes))
    w, _ = weights(workload, [p for p in rows if p is not None])
    return np.array([w[p] if p is not None else 0.0 for p in rows], float)


# ---------------------------------------------------------------------------------------------- outputs
def point_group_yaml(p: TestPoint) -> str:
    """One sweep-config `points:` entry (flow YAML) measuring exactly the point `p`, of any kind."""
    q = json.dumps  # JSON scalars and flow lists are YAML
    shapes = f", shapes: [{q(p.shape)}]" if p.shape else ""
    sizes = ", ".join(f"{n}: [{v}]" for n, v in p.sizes)
    return f"{{kind: {q(p.kind)}, precisions: [{q(p.precision)}]{shapes}, sizes: {{{sizes}}}}}"


@dataclass(frozen=True)
class ConfigKeys:
    """What a generated sweep config says besides its spaces and points. `pool[space]`: measure only these instance
    ids; `measure_valid`: each instance wherever its `kernel.valid` holds; `share`: after the main phase, the BK
    best also at up to N more valid points (None: no share phase)."""

    share: int | None = None
    measure_valid: bool = False
    pool: Mapping[str, Sequence[str]] | None = None
    repetitions: int = 20
    tol: float = 0.05
    bk: int = 10


def sweep_config_text(
    workload: Workload,
    tuned: Sequence[TestPoint],
    spaces: Sequence[str],
    name: str,
    keys: ConfigKeys = ConfigKeys(),
    command: str = "autotune workload config",
) -> str:
    """The YAML of a sweep config measuring `tuned` with `spaces` (names or paths as the config should say
    them), as `keys` say."""
    share, measure_valid, pool = keys.share, keys.measure_valid, keys.pool
    repetitions, tol, bk = keys.repetitions, keys.tol, keys.bk
    q = json.dumps
    lines = [
        f"# Generated from the workload {workload.path} by:",
        f"#   {command}",
        f"# {len(tuned)} tuned points for {len(workload.problems):,} workload problems.",
        f"name: {q(name)}",
        "spaces:",
    ]
    for s in spaces:
        extra = (f", instances: [{', '.join(map(q, pool[s]))}]" if pool and s in pool else "") + (
            ", measure: valid" if measure_valid else ""
        )
        lines.append(f"  - {{space: {q(s)}{extra}}}")
    if share is not None:
        lines.append(f"share: {int(share)}")
    lines.append("points:")
    lines += [f"  - {point_group_yaml(p)}" for p in tuned]
    lines += [f"repetitions: {repetitions}", f"bk: {bk}", f"tol: {tol}"]
    return "\n".join(lines) + "\n"


def pool_from_db(url: str, bk: int) -> dict[str, list[str]]:
    """Per space, the instances among the `bk` fastest verified ('ok') ones at any test point of a results
    database (ranked by median, then instance id, per device and point)."""
    import pandas as pd

    from autotune.store.engine import database_url
    from autotune.store.store import Store

    with Store.open(database_url(url), create=False, readonly=True) as store:
        f = store.measurements()
    point = list(f.columns[f.columns.get_loc("kind") : f.columns.get_loc("status")])
    f = f[(f["status"] == "ok") & np.isfinite(pd.to_numeric(f["median_ms"], errors="coerce"))]
    f = f.assign(_key=f[["device", *point]].astype(str).agg("|".join, axis=1))
    best = f.sort_values(["median_ms", "instance_id"]).groupby("_key", sort=False).head(bk)
    return {s: sorted(ids.unique()) for s, ids in best.groupby("space")["instance_id"]}
