"""Workloads: the problems an application runs, with weights -> the test points to tune, a sweep config
measuring them, and the weight of each tuned point (for the analyzer).

A workload file is YAML (`kind`/`space`, `batch`, `problems:` and/or `ranges:`) or CSV with the header
`precision,shape,<size names>,batch,weight` (shape, batch and weight optional). Problems are grouped by
(precision, shape); distances are the dispatch tables' |log2 a/b| summed over the sizes (GEMM: M, N, K; the
batch only breaks ties). Every mistake is a ConfigError naming the file, the line and what to do.
"""
from __future__ import annotations

import csv
import itertools
import json
import math
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

from autotune.errors import ConfigError
from autotune.problems.base import ProblemKind
from autotune.problems.gemm import GEMM
from autotune.sweep.config import _bytes, _Reader, _size_list, _space_path, batch_for_bytes
from autotune.sweep.limits import point_limit_error
from autotune.vocab import TestPoint

DEFAULT_BATCH_BYTES = 500 * 10**6  # `batch: {bytes: 500MB}`
TOP_KEYS = ("kind", "space", "batch", "problems", "ranges")
RANGE_KEYS = ("precisions", "shapes", "sizes", "batch", "weight")
EPS = 1e-9  # distances closer than this are ties
Group = tuple[str, str]  # (precision, shape)


@dataclass(frozen=True)
class _Arrays:
    """One group's problems sorted by sizes, as log2 coordinates (the distance sizes) and weights."""

    points: list[TestPoint]
    x: np.ndarray  # (n, d) log2 of the distance sizes
    lb: np.ndarray  # (n,) log2 batch (GEMM; zeros otherwise): breaks distance ties
    w: np.ndarray  # (n,) weights


@dataclass(frozen=True, eq=False)
class Workload:
    """A loaded workload. `problems`: each distinct problem with its (summed) weight, in file order."""

    path: Path
    kind: str
    problem_kind: ProblemKind
    problems: tuple[tuple[TestPoint, float], ...]
    ranges: Mapping[Group, Mapping[str, tuple[int, int]]]  # per group, per distance size: (min, max)
    batch: int | None = None  # GEMM: the batch of problems that give none (None: from batch_bytes)
    batch_bytes: int = DEFAULT_BATCH_BYTES
    space: Path | None = None  # the space file that defines a non-GEMM kind

    @property
    def size_names(self) -> tuple[str, ...]:
        """The sizes distances and `bounds` are over (GEMM: m, n, k; the batch follows from the batch rule)."""
        return _dist_names(self.problem_kind)

    @property
    def total_weight(self) -> float:
        return float(sum(w for _, w in self.problems))

    def bounds(self, precision: str, shape: str) -> dict[str, tuple[int, int]]:
        """Per size name, the (min, max) over the group's problems (ValueError for a group it lacks)."""
        if (precision, shape) not in self.ranges:
            raise ValueError(f"the workload has no {precision} {shape or '-'} problems; groups: "
                             + ", ".join(f"{p} {s or '-'}" for p, s in self.ranges))
        return dict(self.ranges[(precision, shape)])

    def point(self, precision: str, shape: str, sizes: Mapping[str, int]) -> TestPoint:
        """The test point for these sizes; a GEMM point without `batch` gets the workload's batch rule."""
        sizes = dict(sizes)
        if self.kind == "gemm" and "batch" not in sizes:
            sizes["batch"] = self.batch or batch_for_bytes(self.batch_bytes, precision, sizes["m"], sizes["n"],
                                                           sizes["k"])
        return self.problem_kind.point(precision, shape, sizes)

    @cached_property
    def groups(self) -> dict[Group, _Arrays]:
        by: dict[Group, list[tuple[TestPoint, float]]] = {}
        for p, w in self.problems:
            by.setdefault((p.precision, p.shape), []).append((p, w))
        names = self.size_names
        out = {}
        for key, items in by.items():
            items.sort(key=lambda pw: (tuple(pw[0].dims[n] for n in names), tuple(v for _, v in pw[0].sizes)))
            pts = [p for p, _ in items]
            out[key] = _Arrays(pts, _coords(pts, names), _log_batch(pts), np.array([w for _, w in items], float))
        return out


def _dist_names(kind: ProblemKind) -> tuple[str, ...]:
    return ("m", "n", "k") if kind.name == "gemm" else kind.size_names


def _coords(points: Sequence[TestPoint], names: Sequence[str]) -> np.ndarray:
    return np.log2(np.array([[p.dims[n] for n in names] for p in points], float).reshape(len(points), len(names)))


def _log_batch(points: Sequence[TestPoint]) -> np.ndarray:
    return np.log2(np.array([p.dims.get("batch", 1) for p in points], float))


# ---------------------------------------------------------------------------------------------- loading
def load_workload(path: str | Path, *, space: str | Path | None = None) -> Workload:
    """Read a workload file (YAML, or CSV: `space` names the space file of a non-GEMM kind). ConfigError."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"no workload file {p}", file=p, hint="give the path of a workload YAML or CSV file "
                          "(examples: configs/workloads/)")
    if p.suffix.lower() == ".csv":
        return _load_csv(p, space)
    return _load_yaml(p)


class _Collect:
    """Problems as they are read: duplicates add their weights; each point checked against kernel limits."""

    def __init__(self, kind: ProblemKind, batch: int | None, batch_bytes: int) -> None:
        self.kind, self.batch, self.batch_bytes = kind, batch, batch_bytes
        self.weights: dict[TestPoint, float] = {}

    def add(self, prec: str, shape: str, sizes: dict[str, int], batch: tuple[int | None, int] | None,
            weight: float, fail: Any) -> None:
        if self.kind.name == "gemm" and "batch" not in sizes:
            count, nbytes = batch or (self.batch, self.batch_bytes)
            sizes["batch"] = count or batch_for_bytes(nbytes, prec, sizes["m"], sizes["n"], sizes["k"])
        try:
            point = self.kind.point(prec, shape, sizes)
        except ValueError as exc:
            raise fail(str(exc), "fix the sizes") from None
        bad = point_limit_error(point)
        if bad:
            raise fail(bad[1], bad[2])
        self.weights[point] = self.weights.get(point, 0.0) + weight

    def workload(self, path: Path, space: Path | None, fail: Any) -> Workload:
        if not self.weights:
            raise fail("the workload has no problems", "list problems (`problems:`, `ranges:` or CSV rows)")
        ranges: dict[Group, dict[str, tuple[int, int]]] = {}
        for p in self.weights:
            r = ranges.setdefault((p.precision, p.shape), {})
            for n in _dist_names(self.kind):
                v = p.dims[n]
                lo, hi = r.get(n, (v, v))
                r[n] = (min(lo, v), max(hi, v))
        return Workload(path, self.kind.name, self.kind, tuple(self.weights.items()), ranges, self.batch,
                        self.batch_bytes, space)


def _load_yaml(p: Path) -> Workload:
    r = _Reader(p.resolve())
    try:
        root = yaml.compose(p.read_text(), Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(f"not valid YAML: {getattr(exc, 'problem', exc)}", file=p,
                          line=mark.line + 1 if mark else None, hint="fix the YAML syntax (indentation, colons)") from None
    if not isinstance(root, MappingNode):
        raise ConfigError("a workload is a mapping with `problems:` and/or `ranges:`", file=p,
                          line=root.start_mark.line + 1 if root is not None else None,
                          hint="start from configs/workloads/fp16_h100.yaml")
    top = r.mapping(root, TOP_KEYS, "workload")
    kind, space = _yaml_kind(r, top)
    if "batch" in top and kind.name != "gemm":
        raise r.error(top["batch"], f"`batch:` is for GEMM workloads; {kind.name} has none",
                      f"give the sizes {', '.join(kind.size_names)} in each problem")
    count, nbytes = _batch_rule(r, top["batch"]) if "batch" in top else (None, DEFAULT_BATCH_BYTES)
    if "problems" not in top and "ranges" not in top:
        raise r.error(root, "a workload needs `problems:` and/or `ranges:`", "see configs/workloads/fp16_h100.yaml")
    c = _Collect(kind, count, nbytes)
    shaped = kind.shapes != ("",)
    for node in r.sequence(top["problems"], "problems") if "problems" in top else []:
        allowed = ("precision", *(("shape",) if shaped else ()), *kind.size_names, "weight")
        m = r.mapping(node, allowed, "problem")
        need = [n for n in _dist_names(kind) if n not in m] + ([] if "precision" in m or len(kind.precisions) == 1
                                                               else ["precision"])
        if need:
            raise r.error(node, f"the problem misses {', '.join(need)}", f"write {{{', '.join(allowed)}}} "
                          "(shape, weight and for GEMM batch are optional)")
        prec = _choice(r, m["precision"], kind.precisions, "precision") if "precision" in m else kind.precisions[0]
        shape = _choice(r, m["shape"], kind.shapes, "shape") if "shape" in m else kind.shapes[0]
        gemm_batch = kind.name == "gemm" and "batch" in m  # an integer or {bytes: SIZE}
        sizes = {n: r.integer(m[n], 1) for n in kind.size_names if n in m and not (gemm_batch and n == "batch")}
        batch = _batch_rule(r, m["batch"]) if gemm_batch else None
        c.add(prec, shape, sizes, batch, _weight(r, m), lambda msg, hint, n=node: r.error(n, msg, hint))
    for node in r.sequence(top["ranges"], "ranges") if "ranges" in top else []:
        m = r.mapping(node, RANGE_KEYS if kind.name == "gemm" else RANGE_KEYS[:3] + RANGE_KEYS[4:], "range")
        if "sizes" not in m or ("precisions" not in m and len(kind.precisions) > 1):
            raise r.error(node, "a range needs `precisions:` and `sizes:`", "write {precisions: [fp16], shapes: "
                          "[NN], sizes: {m: S, n: S, k: S}, weight: 1}")
        precs = r.choices(m["precisions"], kind.precisions, "precisions") if "precisions" in m else kind.precisions
        shapes = r.choices(m["shapes"], kind.shapes, "shapes") if "shapes" in m else kind.shapes[:1]
        given = r.mapping(m["sizes"], _dist_names(kind), "sizes")
        if missing := [n for n in _dist_names(kind) if n not in given]:
            raise r.error(m["sizes"], f"the range's sizes miss {', '.join(missing)}",
                          f"give every size: {', '.join(_dist_names(kind))}")
        lists = [_size_list(r, given[n]) for n in _dist_names(kind)]
        batch, weight = _batch_rule(r, m["batch"]) if "batch" in m else None, _weight(r, m)
        fail = lambda msg, hint, n=node: r.error(n, msg, hint)
        for prec, shape, combo in itertools.product(precs, shapes, itertools.product(*lists)):
            c.add(prec, shape, dict(zip(_dist_names(kind), combo)), batch, weight, fail)
    return c.workload(p, space, lambda msg, hint: r.error(root, msg, hint))


def _yaml_kind(r: _Reader, top: dict[str, Node]) -> tuple[ProblemKind, Path | None]:
    name = r.string(top["kind"]) if "kind" in top else None
    if "space" in top:
        from autotune.space.spec import load_space
        path = _space_path(r, top["space"], r.string(top["space"]))
        kind = load_space(path).kind
        if name is not None and name != kind.name:
            raise r.error(top["kind"], f"the space {path.name} solves {kind.name!r}, not {name!r}",
                          f"write kind: {kind.name}, or name the space that defines {name!r}")
        return kind, path
    if name in (None, GEMM.name):
        return GEMM, None
    raise r.error(top["kind"], f"the kind {name!r} is not built in", "name the space file whose `problem:` "
                  "section defines it: `space: path/to/space.yaml`")


def _choice(r: _Reader, node: Node, allowed: Sequence[str], what: str) -> str:
    v = r.value(node)
    if v not in allowed:
        raise r.error(node, f"unknown {what} {v!r}", f"use one of {', '.join(map(repr, allowed))}")
    return v


def _weight(r: _Reader, m: dict[str, Node]) -> float:
    w = r.number(m["weight"]) if "weight" in m else 1.0
    if w <= 0:
        raise r.error(m["weight"], f"weight {w:g} is not above 0", "give a positive weight (or leave the problem out)")
    return w


def _batch_rule(r: _Reader, node: Node) -> tuple[int | None, int]:
    """An integer batch, or {bytes: SIZE}: the smallest batch whose A, B and C take SIZE."""
    if isinstance(node, ScalarNode):
        return r.integer(node, 1), 0
    spec = r.mapping(node, ("bytes",), "batch")
    if "bytes" not in spec:
        raise r.error(node, "batch needs `bytes:`", "write batch: 1000 or batch: {bytes: 500MB}")
    return None, _bytes(r, spec["bytes"])


def _load_csv(p: Path, space: str | Path | None) -> Workload:
    kind, space_path = GEMM, None
    if space is not None:
        from autotune.space.spec import find_space, load_space
        space_path = find_space(space)
        kind = load_space(space_path).kind
    allowed = ("precision", *(("shape",) if kind.shapes != ("",) else ()), *kind.size_names, "weight")
    need = [n for n in ("precision", *_dist_names(kind)) if n != "precision" or len(kind.precisions) > 1]
    c, header = _Collect(kind, None, DEFAULT_BATCH_BYTES), None
    with p.open(newline="") as fh:
        rows = csv.reader(fh)

        def fail(msg: str, hint: str, line: int | None = None) -> ConfigError:
            return ConfigError(msg, file=p, line=line or rows.line_num, hint=hint)
        for row in rows:
            if not any(v.strip() for v in row) or row[0].lstrip().startswith("#"):
                continue  # blank lines and comments
            if header is None:
                header = [h.strip() for h in row]
                bad, missing = [h for h in header if h not in allowed], [n for n in need if n not in header]
                if bad or missing or len(set(header)) < len(header):
                    raise fail(f"CSV header {','.join(header)}: " + ("; ".join(
                        [f"unknown columns {', '.join(bad)}"] * bool(bad) + [f"missing {', '.join(missing)}"]
                        * bool(missing)) or "a column appears twice"),
                        f"write the header {','.join(allowed)} (shape, batch, weight optional)")
                continue
            if len(row) != len(header):
                raise fail(f"{len(row)} cells, the header has {len(header)}", f"write {','.join(header)}")
            cell = {h: v.strip() for h, v in zip(header, row) if v.strip()}
            prec, shape = cell.get("precision", kind.precisions[0]), cell.get("shape", kind.shapes[0])
            for v, ok, what in ((prec, kind.precisions, "precision"), (shape, kind.shapes, "shape")):
                if v not in ok:
                    raise fail(f"unknown {what} {v!r}", f"use one of {', '.join(map(repr, ok))}")
            for n in kind.size_names:
                if n in cell and (not re.fullmatch(r"[0-9]+", cell[n]) or int(cell[n]) < 1):
                    raise fail(f"size {n} = {cell[n]!r} is not an integer >= 1", "write whole numbers >= 1")
            if missing := [n for n in _dist_names(kind) if n not in cell]:
                raise fail(f"the row misses {', '.join(missing)}", "fill every size cell")
            try:
                weight = float(cell.get("weight", "1"))
            except ValueError:
                raise fail(f"weight {cell['weight']!r} is not a number", "write e.g. 1 or 2.5") from None
            if not (math.isfinite(weight) and weight > 0):
                raise fail(f"weight {cell['weight']} is not above 0", "give a positive weight (or drop the row)")
            c.add(prec, shape, {n: int(cell[n]) for n in kind.size_names if n in cell}, None, weight, fail)
    return c.workload(p, space_path, lambda msg, hint: fail(msg, hint, 1))


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
        mind = _l1(g.x, _coords(mine, workload.size_names)).min(axis=1) if mine else np.full(len(g.points), np.inf)
        picks: list[int] = []
        firsts = [_best(-np.abs(g.x - g.x.min(0)).sum(1), g.w), _best(-np.abs(g.x - g.x.max(0)).sum(1), g.w),
                  int(np.argmax(g.w))]
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


def _nearest(workload: Workload, tuned: Sequence[TestPoint]) -> dict[Group, tuple[list[TestPoint], np.ndarray,
                                                                                   np.ndarray]]:
    """Per workload group with a tuned point: (its tuned points, each problem's nearest one, the distance)."""
    out = {}
    names = workload.size_names
    for key, g in workload.groups.items():
        mine = list(dict.fromkeys(p for p in tuned if (p.kind, p.precision, p.shape) == (workload.kind, *key)))
        if not mine:
            continue
        tx, tlb = _coords(mine, names), _log_batch(mine)
        idx, dist = np.empty(len(g.points), int), np.empty(len(g.points))
        for a in range(0, len(g.points), 4096):
            d = _l1(g.x[a:a + 4096], tx)
            dmin = d.min(axis=1)
            tie = np.abs(g.lb[a:a + 4096, None] - tlb[None, :])  # ties: nearer batch, then the earlier point
            tie[d > dmin[:, None] + EPS] = np.inf
            idx[a:a + 4096], dist[a:a + 4096] = tie.argmin(axis=1), dmin
        out[key] = (mine, idx, dist)
    return out


def weights(workload: Workload, tuned: Sequence[TestPoint]) -> tuple[dict[TestPoint, float], float]:
    """Each workload problem's weight goes to its nearest tuned point of the same kind, precision and shape
    (ties: the nearer batch, then the earlier tuned point). Returns the weight per tuned point (0 where it
    gets none) and the total weight of problems whose group has no tuned point."""
    out = {p: 0.0 for p in tuned}
    near = _nearest(workload, tuned)
    unassigned = 0.0
    for key, g in workload.groups.items():
        if key not in near:
            unassigned += float(g.w.sum())
            continue
        mine, idx, _ = near[key]
        for p, w in zip(mine, np.bincount(idx, weights=g.w, minlength=len(mine))):
            out[p] += float(w)
    return out, unassigned


def coverage(workload: Workload, tuned: Sequence[TestPoint]) -> dict[Group, tuple[int, float | None]]:
    """Per workload group: how many tuned points, and the largest log2 distance from a problem to its
    nearest tuned point (None: the group has no tuned point)."""
    near = _nearest(workload, tuned)
    return {key: (len(near[key][0]), float(near[key][2].max())) if key in near else (0, None)
            for key in workload.groups}


def point_weights_frame(workload: Workload, points: pd.DataFrame) -> np.ndarray:
    """The weight of each row of a frame of tuned points (columns precision, shape and the kind's sizes; a
    `kind` column, when present, gives rows of other kinds weight 0). GEMM rows without `batch` take the
    workload's batch rule."""
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
def sweep_config_text(workload: Workload, tuned: Sequence[TestPoint], spaces: Sequence[str], name: str, *,
                      share: int | None = None, measure_valid: bool = False,
                      pool: Mapping[str, Sequence[str]] | None = None, repetitions: int = 20, tol: float = 0.05,
                      bk: int = 10, command: str = "autotune workload config") -> str:
    """The YAML of a sweep config measuring `tuned` with `spaces` (names or paths as the config should say
    them). `pool[space]`: measure only these instance ids; `measure_valid`: each instance wherever its
    `kernel.valid` holds; `share`: after the main phase, the BK best also at up to N more valid points."""
    q = json.dumps  # JSON scalars and flow lists are YAML
    lines = [f"# Generated from the workload {workload.path} by:", f"#   {command}",
             f"# {len(tuned)} tuned points for {len(workload.problems):,} workload problems.", f"name: {q(name)}",
             "spaces:"]
    for s in spaces:
        extra = (f", instances: [{', '.join(map(q, pool[s]))}]" if pool and s in pool else "") \
            + (", measure: valid" if measure_valid else "")
        lines.append(f"  - {{space: {q(s)}{extra}}}")
    if share is not None:
        lines.append(f"share: {int(share)}")
    lines.append("points:")
    gemm: dict[tuple[str, str, int], list[str]] = {}
    for p in tuned:
        if p.kind == "gemm":
            gemm.setdefault((p.precision, p.shape, p.batch), []).append(f"[{p.m}, {p.n}, {p.k}]")
        else:
            shapes = f", shapes: [{q(p.shape)}]" if p.shape else ""
            sizes = ", ".join(f"{n}: [{v}]" for n, v in p.sizes)
            lines.append(f"  - {{kind: {q(p.kind)}, precisions: [{p.precision}]{shapes}, sizes: {{{sizes}}}}}")
    for (prec, shape, batch), triples in gemm.items():
        lines.append(f"  - {{precisions: [{prec}], shapes: [{shape}], sizes: {{triples: [{', '.join(triples)}]}}, "
                     f"batch: {batch}}}")
    lines += [f"repetitions: {repetitions}", f"bk: {bk}", f"tol: {tol}"]
    return "\n".join(lines) + "\n"


def pool_from_db(url: str, bk: int) -> dict[str, list[str]]:
    """Per space, the instances among the `bk` fastest verified ('ok') ones at any test point of a results
    database (ranked by median, then instance id, per device and point)."""
    from autotune.store.engine import database_url
    from autotune.store.store import Store
    with Store.open(database_url(url), create=False, readonly=True) as store:
        f = store.measurements()
    point = list(f.columns[f.columns.get_loc("kind"):f.columns.get_loc("status")])
    f = f[(f["status"] == "ok") & np.isfinite(pd.to_numeric(f["median_ms"], errors="coerce"))]
    f = f.assign(_key=f[["device", *point]].astype(str).agg("|".join, axis=1))
    best = f.sort_values(["median_ms", "instance_id"]).groupby("_key", sort=False).head(bk)
    return {s: sorted(ids.unique()) for s, ids in best.groupby("space")["instance_id"]}
