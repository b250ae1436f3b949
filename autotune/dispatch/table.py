"""The dispatch table: one canonical JSON file from which the C++, Python and CSV consumers are made.

JSON layout (format "autotune-dispatch", version 1):
- provenance: device (name the table was tuned on), device_info, software versions, sweep_ids, bk, tol,
  spread_ties, method, optimal, secondary, kernels, worst_loss, mean_loss, points, uncovered, created_utc;
- kernels: [{instance_id, precision, shape, space, name, template, source, convention, valid}], one per
  instance compiled for one (precision, shape); `valid` is a list of one-key predicates
  ({"m_multiple_of": 8}, {"max_k": 256}, ...; see dispatch/runtime.py);
- generic: {space, source, convention, templates: {"fp64:NN": name expression, ...}}: the last resort;
- points: [{point_key, precision, shape, m, n, k, batch, kernel, ranked, ms, best_ms, loss}]: every tuned
  point, its assigned kernel, and `ranked` = the table's kernels measured there, fastest first;
- regions: [{precision, shape, m: [lo, hi], n: [lo, hi], k: [lo, hi], kernel}]: boxes where every
  measured point inside has `kernel` within TOL of its best (batch does not bound a region).
Lookup rules: dispatch/runtime.py.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from autotune.dispatch.runtime import DIMS, Lookup, validity_bounds
from autotune.analysis.setcover import Selection
from autotune.analysis.winners import PRECISION_ORDER, SHAPE_ORDER, Winners

FORMAT, VERSION = "autotune-dispatch", 1


@dataclass(frozen=True)
class KernelInfo:
    """How to build one kernel: its space, procedural name, name expression, source and validity."""

    space: str
    name: str
    template: str | None = None  # NVRTC name expression for this precision and shape
    source: str | None = None  # file under kernels_src/
    convention: str | None = None  # strided | ptr_array | vbatched
    valid: tuple[tuple[str, int], ...] = ()  # (("m_multiple_of", 8), ("max_k", 256))


@dataclass(frozen=True)
class GenericKernel:
    """The last-resort kernel (one instance of the gemm_naive space) and its name expressions."""

    space: str = "gemm_naive"
    source: str | None = "gemm_naive.cuh"
    convention: str | None = "strided"
    templates: tuple[tuple[str, str], ...] = ()  # (("fp64:NN", "autotune::gemm_naive<double, ...>"), ...)


@dataclass(frozen=True)
class Provenance:
    """Where the measurements came from."""

    device: str
    sweep_ids: tuple[str, ...] = ()
    device_info: Mapping[str, Any] = field(default_factory=dict)
    software: Mapping[str, str] = field(default_factory=dict)


def _order(kernel: tuple[str, str, str]) -> tuple[int, int, str]:
    iid, precision, shape = kernel
    return (PRECISION_ORDER.index(precision) if precision in PRECISION_ORDER else 9,
            SHAPE_ORDER.index(shape) if shape in SHAPE_ORDER else 9, iid)


def _regions(w: Winners, rows: np.ndarray, assigned: np.ndarray, kernel_of: Mapping[int, int],
             instance_col: Mapping[int, int]) -> list[tuple[list[int], list[int], int]]:
    """Grow boxes around each point's kernel while every measured point inside stays within TOL of it.

    `rows` are all points of one group (a point where everything failed blocks every region);
    `assigned` their assigned instance columns (-1: none).
    """
    pts = w.matrix.points.iloc[rows]
    xyz = pts[["m", "n", "k"]].to_numpy(dtype=np.int64)
    logs = np.log2(xyz.astype(float))
    tol = w.criteria.tol
    with np.errstate(invalid="ignore"):
        ok_for = {kern: np.nan_to_num(w.loss[rows, col], nan=np.inf) <= tol + 1e-12
                  for kern, col in instance_col.items()}
    done = {kern: np.zeros(len(rows), dtype=bool) for kern in instance_col}
    out: list[tuple[list[int], list[int], int]] = []
    for i in range(len(rows)):
        if assigned[i] < 0:
            continue
        kern = kernel_of[int(assigned[i])]
        good = ok_for[kern]
        if done[kern][i]:
            continue
        lo, hi = xyz[i].copy(), xyz[i].copy()
        order = np.argsort(np.abs(logs - logs[i]).sum(axis=1), kind="stable")
        for j in order:
            if not good[j]:
                continue
            nlo, nhi = np.minimum(lo, xyz[j]), np.maximum(hi, xyz[j])
            inside = ((xyz >= nlo) & (xyz <= nhi)).all(axis=1)
            if good[inside].all():
                lo, hi = nlo, nhi
        inside = ((xyz >= lo) & (xyz <= hi)).all(axis=1)
        if (lo < hi).any():
            out.append((lo.tolist(), hi.tolist(), kern))
            done[kern] |= inside
    return out


def build_table(w: Winners, sel: Selection, provenance: Provenance,
                kernel_info: Mapping[tuple[str, str, str], KernelInfo] | None = None,
                generic: GenericKernel | None = None) -> "DispatchTable":
    """Make the canonical table from winners and a selection (same Winners the selection came from)."""
    info = kernel_info or {}
    kernels = sorted(sel.kernels, key=_order)
    index = {k: i for i, k in enumerate(kernels)}
    col_of = {iid: c for c, iid in enumerate(w.matrix.instances)}
    kernel_rows = []
    for iid, precision, shape in kernels:
        ki = info.get((iid, precision, shape), KernelInfo(space="", name=iid))
        valid = [{key: int(value)} for key, value in ki.valid]
        validity_bounds(valid)  # reject unknown predicates now, not at lookup time
        kernel_rows.append({"instance_id": iid, "precision": precision, "shape": shape, "space": ki.space,
                            "name": ki.name, "template": ki.template, "source": ki.source,
                            "convention": ki.convention, "valid": valid})
    points, regions = [], []
    pts = w.matrix.points
    for (precision, shape), all_rows in w.matrix.groups:
        rows = all_rows[sel.assigned[all_rows] >= 0]
        if len(rows) == 0:
            continue
        group_kernels = {col_of[iid]: index[(iid, p, s)] for iid, p, s in kernels if (p, s) == (precision, shape)}
        cols = np.array(sorted(group_kernels), dtype=np.int64)
        for r in rows:
            med = w.matrix.median[r, cols]
            measured = cols[np.isfinite(med)]
            ranked = sorted(measured, key=lambda c: (w.rank[r, c], c))
            row = pts.iloc[r]
            points.append({"point_key": str(row["point_key"]), "precision": precision, "shape": shape,
                           **{d: int(row[d]) for d in DIMS}, "kernel": group_kernels[int(sel.assigned[r])],
                           "ranked": [group_kernels[int(c)] for c in ranked],
                           "ms": float(w.matrix.median[r, sel.assigned[r]]), "best_ms": float(w.best_ms[r]),
                           "loss": float(max(0.0, sel.loss[r]))})
        for lo, hi, kern in _regions(w, all_rows, sel.assigned[all_rows], group_kernels,
                                     {v: k for k, v in group_kernels.items()}):
            regions.append({"precision": precision, "shape": shape, "m": [lo[0], hi[0]], "n": [lo[1], hi[1]],
                            "k": [lo[2], hi[2]], "kernel": kern})
    g = generic or GenericKernel()
    finite = sel.loss[np.isfinite(sel.loss)]
    prov = {"device": provenance.device, "device_info": dict(provenance.device_info),
            "software": dict(provenance.software), "sweep_ids": list(provenance.sweep_ids),
            "bk": w.criteria.bk, "tol": w.criteria.tol, "spread_ties": w.criteria.spread_ties,
            "method": sel.method, "optimal": sel.optimal, "secondary": sel.secondary,
            "kernels": len(kernels), "points": len(points),
            "worst_loss": float(max(0.0, finite.max())) if len(finite) else None,
            "mean_loss": float(max(0.0, finite.mean())) if len(finite) else None,
            "uncovered": list(sel.uncovered),
            "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    data = {"format": FORMAT, "version": VERSION, "provenance": prov, "kernels": kernel_rows,
            "generic": {"space": g.space, "source": g.source, "convention": g.convention,
                        "templates": dict(g.templates)},
            "points": points, "regions": regions}
    return DispatchTable(data)


class DispatchTable:
    """The JSON object plus lookups. `data` is exactly what `to_json` writes."""

    def __init__(self, data: dict) -> None:
        if data.get("format") != FORMAT:
            raise ValueError(f"not a dispatch table (format {data.get('format')!r}, expected {FORMAT!r})")
        if data.get("version") != VERSION:
            raise ValueError(f"dispatch table version {data.get('version')} is not supported (expected {VERSION}); "
                             "re-run `autotune emit --format json` with this version of autotune")
        self.data = data
        self._lookup = Lookup(data)

    @property
    def provenance(self) -> dict:
        return self.data["provenance"]

    def lookup_index(self, precision: str, shape: str, m: int, n: int, k: int, batch: int,
                     device: str | None = None) -> int:
        """Kernel index for a problem; -1 means the generic kernel. Warns when `device` differs."""
        self._lookup.check_device(device)
        return self._lookup.index(precision, shape, m, n, k, batch)

    def lookup(self, precision: str, shape: str, m: int, n: int, k: int, batch: int,
               device: str | None = None) -> dict:
        """The kernel record (instance_id, template, ...) for a problem; `generic: True` for the fallback."""
        idx = self.lookup_index(precision, shape, m, n, k, batch, device)
        return self._lookup.kernel(idx, precision, shape)

    def to_json(self) -> str:
        return json.dumps(self.data, indent=1, sort_keys=False, allow_nan=False)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json() + "\n")
        return path


def load_table(path: str | Path) -> DispatchTable:
    return DispatchTable(json.loads(Path(path).read_text()))

