"""The dispatch table: one canonical JSON file from which the C++, Python and CSV consumers are made.

JSON layout (format "autotune-dispatch", version 2; version 1 tables still load, without a library):
- provenance: device (name the table was tuned on), device_info, software versions, sweep_ids, bk, tol,
  spread_ties, method, optimal, secondary, kernels, worst_loss, mean_loss (of the selected kernels), points,
  library_points (tuned points the library answers), answer_worst_loss / answer_mean_loss (of the
  table's answers at the tuned points, against the best measured instance), uncovered, created_utc;
- kernels: [{instance_id, precision, shape, space, name, template, source, convention, valid, tuned_only}],
  one per instance compiled for one (precision, shape); `valid` is a list of one-key predicates
  ({"m_multiple_of": 8}, {"max_k": 256}, ...; see dispatch/runtime.py), derived from the space's `valid` (else `serves`) and
  `problems.where` (dispatch/validity.py); `tuned_only`: they could not be derived, the kernel answers
  only at its tuned points;
- library: {name}: the vendor library measured at the points (LIBRARY = -2 in `ranked` and `regions`);
- fallback: "library" or "naive": the answer where nothing in the table is valid;
- generic: {space, source, convention, templates: {"fp64:NN": name expression, ...}}: the naive kernel;
- points: [{point_key, precision, shape, m, n, k, batch, kernel, ranked, near, ms, best_ms, loss, library_ms}]:
  every tuned point, its assigned kernel, and `ranked` = the table's kernels measured there and the
  library (-2, where it was measured), fastest first; `near`: the same list for problems that were not
  tuned, where the library goes before every kernel not faster than it by the factor 1 + library_margin
  (structure: {mode, library_margin, reach}, see Structure); `costs`: [[answer, cost], ...] every table
  kernel measured there and the library (-2), cost = median ms per byte moved x 1e18, as an integer;
- regions: [{precision, shape, m: [lo, hi], n: [lo, hi], k: [lo, hi], kernel}]: boxes where every
  measured point inside has `kernel` (or the library, -2) within TOL of the best of the measured
  instances and the library (batch does not bound a region).
Lookup rules: dispatch/runtime.py.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from autotune.problems.gemm import GEMM, gemm_point
from autotune.dispatch.runtime import DIMS, FALLBACKS, LIBRARY, Lookup, validity_bounds
from autotune.analysis.setcover import Selection
from autotune.analysis.winners import PRECISION_ORDER, SHAPE_ORDER, Winners

FORMAT, VERSION = "autotune-dispatch", 2
VERSIONS = (1, 2)  # versions this code reads


@dataclass(frozen=True)
class KernelInfo:
    """How to build one kernel: its space, procedural name, name expression, source and validity."""

    space: str
    name: str
    template: str | None = None  # NVRTC name expression for this precision and shape
    source: str | None = None  # file under kernels_src/
    convention: str | None = None  # strided | ptr_array | vbatched
    valid: tuple[tuple[str, int], ...] = ()  # (("m_multiple_of", 8), ("max_k", 256))
    tuned_only: bool = False  # the predicates could not be derived: valid only at its tuned points


@dataclass(frozen=True)
class GenericKernel:
    """The last-resort kernel (one instance of the gemm_naive space) and its name expressions."""

    space: str = "gemm_naive"
    source: str | None = "gemm_naive.cuh"
    convention: str | None = "strided"
    templates: tuple[tuple[str, str], ...] = ()  # (("fp64:NN", "autotune::gemm_naive<double, ...>"), ...)


@dataclass(frozen=True)
class Structure:
    """How a table answers problems it was not tuned on (chosen by measured held-out loss: dispatch/loo.py).

    mode "regions": merged boxes, then the nearest tuned point's `near` list (runtime.py rules 3 and 4);
    "nearest": the nearest tuned point's `near` list only; "cost": every valid answer (kernel or library) is
    priced by its time per byte at the tuned point nearest the problem where it was measured (`costs` of each
    point), among answers measured within `reach` (log2 distance) of the nearest tuned point, and the cheapest
    answers. library_margin: a kernel goes before the library off the tuned points only when it was faster by
    at least the factor 1 + margin (the `near` lists; in cost mode its cost times 1 + margin is compared)."""

    mode: str = "regions"
    library_margin: float = 0.0
    reach: float = 1.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown structure mode {self.mode!r}; expected one of {MODES}")

    @property
    def regions(self) -> bool:
        return self.mode == "regions"

    def describe(self) -> dict:
        return {"mode": self.mode, "library_margin": self.library_margin, "reach": self.reach}


MODES = ("regions", "nearest", "cost")
STRUCTURES = (tuple(Structure(m, margin) for m in ("regions", "nearest") for margin in (0.0, 0.05, 0.1, 0.2))
              + tuple(Structure("cost", margin, reach) for reach in (0.5, 1.0, 2.0) for margin in (0.0, 0.05, 0.1, 0.2)))
COST_SCALE = 1e18  # costs are integers: median ms per byte moved times this


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


def library_times(points: pd.DataFrame, library: pd.DataFrame | None) -> np.ndarray:
    """Per point row, the library's verified median time (ms); NaN where it was not measured.

    `library` has the point columns precision, shape, m, n, k, batch and `median_ms` (or `cublas_ms`)."""
    out = np.full(len(points), np.nan)
    if library is None or len(library) == 0 or len(points) == 0:
        return out
    col = "median_ms" if "median_ms" in library.columns else "cublas_ms"
    keys = ["precision", "shape", "m", "n", "k", "batch"]
    lib = library[keys + [col]].copy()
    for c in DIMS:
        lib[c] = lib[c].astype(np.int64)
    lib = lib.groupby(keys, as_index=False)[col].median()
    merged = points[keys].reset_index(drop=True).merge(lib, on=keys, how="left")
    return pd.to_numeric(merged[col], errors="coerce").to_numpy(dtype=float)


def _regions(xyz: np.ndarray, answer: np.ndarray, good: Mapping[int, np.ndarray]) -> list[tuple[list[int], list[int], int]]:
    """Grow boxes around each point's answer while every measured point inside stays good for it.

    `xyz` (m, n, k) of all points of one group (a point where everything failed blocks every region);
    `answer` each point's answer (kernel index, LIBRARY, or None where uncovered); `good[answer]` the points
    where that answer is within TOL of the best.
    """
    logs = np.log2(xyz.astype(float))
    done = {kern: np.zeros(len(xyz), dtype=bool) for kern in good}
    out: list[tuple[list[int], list[int], int]] = []
    for i in range(len(xyz)):
        kern = answer[i]
        if kern is None or done[kern][i]:
            continue
        ok = good[kern]
        lo, hi = xyz[i].copy(), xyz[i].copy()
        order = np.argsort(np.abs(logs - logs[i]).sum(axis=1), kind="stable")
        for j in order:
            if not ok[j]:
                continue
            nlo, nhi = np.minimum(lo, xyz[j]), np.maximum(hi, xyz[j])
            inside = ((xyz >= nlo) & (xyz <= nhi)).all(axis=1)
            if ok[inside].all():
                lo, hi = nlo, nhi
        inside = ((xyz >= lo) & (xyz <= hi)).all(axis=1)
        if (lo < hi).any():
            out.append((lo.tolist(), hi.tolist(), kern))
            done[kern] |= inside
    return out


def build_table(w: Winners, sel: Selection, provenance: Provenance,
                kernel_info: Mapping[tuple[str, str, str], KernelInfo] | None = None,
                generic: GenericKernel | None = None, library_ms: np.ndarray | None = None,
                library: str = "cublas", fallback: str = "library",
                structure: Structure = Structure()) -> "DispatchTable":
    """Make the canonical table from winners and a selection (same Winners the selection came from).

    `library_ms`: the vendor library's time per point row of `w.matrix` (NaN: not measured; see
    `library_times`); where it is faster than the table's kernels it is the point's answer.
    `fallback`: "library" or "naive", the answer where no kernel of the table is valid.
    """
    if fallback not in FALLBACKS:
        raise ValueError(f"unknown fallback {fallback!r}; expected one of {sorted(FALLBACKS)}")
    info = kernel_info if kernel_info is not None else {}
    kernels = sorted(sel.kernels, key=_order)
    index = {k: i for i, k in enumerate(kernels)}
    col_of = {iid: c for c, iid in enumerate(w.matrix.instances)}
    lib = np.full(len(w.best_ms), np.nan) if library_ms is None else np.asarray(library_ms, dtype=float)
    if len(lib) != len(w.best_ms):
        raise ValueError(f"library_ms has {len(lib)} values for {len(w.best_ms)} points")
    kernel_rows = []
    for iid, precision, shape in kernels:
        ki = info.get((iid, precision, shape)) or KernelInfo(space="", name=iid)
        valid = [{key: int(value)} for key, value in ki.valid]
        validity_bounds(valid)  # reject unknown predicates now, not at lookup time
        kernel_rows.append({"instance_id": iid, "precision": precision, "shape": shape, "space": ki.space,
                            "name": ki.name, "template": ki.template, "source": ki.source,
                            "convention": ki.convention, "valid": valid, "tuned_only": bool(ki.tuned_only)})
    probe = Lookup({"kernels": kernel_rows, "points": [], "regions": []})
    points, regions = [], []
    answer_loss: list[float] = []
    pts = w.matrix.points
    tol = w.criteria.tol
    for (precision, shape), all_rows in w.matrix.groups:
        group_kernels = {col_of[iid]: index[(iid, p, s)] for iid, p, s in kernels if (p, s) == (precision, shape)}
        cols = np.array(sorted(group_kernels), dtype=np.int64)
        xyz = pts.iloc[all_rows][["m", "n", "k"]].to_numpy(dtype=np.int64)
        answers: list[int | None] = []
        for r in all_rows:
            med = w.matrix.median[r, cols]
            measured = cols[np.isfinite(med)]
            row = pts.iloc[r]
            dims = tuple(int(row[d]) for d in DIMS)
            ranked = [group_kernels[int(c)] for c in sorted(measured, key=lambda c: (w.rank[r, c], c))]
            times = {group_kernels[int(c)]: float(w.matrix.median[r, c]) for c in measured}
            per_byte = COST_SCALE / GEMM.bytes_moved(gemm_point(precision, shape, *dims), {})
            costs = [[kk, int(round(t * per_byte))] for kk, t in sorted(times.items())]
            if np.isfinite(lib[r]):
                costs.insert(0, [LIBRARY, int(round(float(lib[r]) * per_byte))])
            near = list(ranked)
            if np.isfinite(lib[r]):  # the library goes before every kernel slower than it
                at = next((j for j, kk in enumerate(ranked) if times[kk] > lib[r]), len(ranked))
                ranked.insert(at, LIBRARY)
                margin = 1.0 + structure.library_margin  # off the tuned point: only kernels clearly faster
                at = next((j for j, kk in enumerate(near) if times[kk] * margin > lib[r]), len(near))
                near.insert(at, LIBRARY)
            first = next((c for c in ranked if probe.valid(c, dims, tuned=True)), None)
            answers.append(first)
            if sel.assigned[r] < 0 and not np.isfinite(lib[r]):
                continue
            if first is not None and np.isfinite(w.best_ms[r]):
                t = lib[r] if first == LIBRARY else times[first]
                answer_loss.append(float(max(0.0, 1.0 - w.best_ms[r] / t)))
            assigned = int(sel.assigned[r])
            points.append({"point_key": str(row["point_key"]), "precision": precision, "shape": shape,
                           **{d: int(row[d]) for d in DIMS},
                           "kernel": group_kernels[assigned] if assigned >= 0 else LIBRARY,
                           "ranked": ranked, "near": near, "costs": costs,
                           "ms": float(w.matrix.median[r, assigned]) if assigned >= 0 else float(lib[r]),
                           "best_ms": float(w.best_ms[r]) if np.isfinite(w.best_ms[r]) else None,
                           "loss": float(max(0.0, sel.loss[r])) if assigned >= 0 else None,
                           "library_ms": float(lib[r]) if np.isfinite(lib[r]) else None})
        ref = np.fmin(w.best_ms[all_rows], lib[all_rows])  # best of the measured instances and the library
        with np.errstate(invalid="ignore"):
            good = {kern: np.nan_to_num(w.matrix.median[all_rows, c], nan=np.inf) * (1.0 - tol)
                    <= ref * (1.0 + 1e-12) for c, kern in group_kernels.items()}
            good[LIBRARY] = np.nan_to_num(lib[all_rows], nan=np.inf) * (1.0 - tol) <= ref * (1.0 + 1e-12)
        for lo, hi, kern in (_regions(xyz, np.array(answers, dtype=object), good) if structure.regions else ()):
            regions.append({"precision": precision, "shape": shape, "m": [lo[0], hi[0]], "n": [lo[1], hi[1]],
                            "k": [lo[2], hi[2]], "kernel": int(kern)})
    g = generic or GenericKernel()
    finite = sel.loss[np.isfinite(sel.loss)]
    prov = {"device": provenance.device, "device_info": dict(provenance.device_info),
            "software": dict(provenance.software), "sweep_ids": list(provenance.sweep_ids),
            "bk": w.criteria.bk, "tol": w.criteria.tol, "spread_ties": w.criteria.spread_ties,
            "method": sel.method, "optimal": sel.optimal, "secondary": sel.secondary,
            "kernels": len(kernels), "points": len(points),
            "worst_loss": float(max(0.0, finite.max())) if len(finite) else None,
            "mean_loss": float(max(0.0, finite.mean())) if len(finite) else None,
            "library_points": sum(1 for p in points if p["ranked"] and p["ranked"][0] == LIBRARY),
            "answer_worst_loss": float(max(answer_loss)) if answer_loss else None,
            "answer_mean_loss": float(np.mean(answer_loss)) if answer_loss else None,
            "uncovered": list(sel.uncovered), "structure": structure.describe(),
            "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    data = {"format": FORMAT, "version": VERSION, "provenance": prov, "kernels": kernel_rows,
            "library": {"name": library}, "fallback": fallback,
            "generic": {"space": g.space, "source": g.source, "convention": g.convention,
                        "templates": dict(g.templates)},
            "points": points, "regions": regions, "structure": structure.describe()}
    return DispatchTable(data)


class DispatchTable:
    """The JSON object plus lookups. `data` is exactly what `to_json` writes."""

    def __init__(self, data: dict) -> None:
        if data.get("format") != FORMAT:
            raise ValueError(f"not a dispatch table (format {data.get('format')!r}, expected {FORMAT!r})")
        if data.get("version") not in VERSIONS:
            raise ValueError(f"dispatch table version {data.get('version')} is not supported (expected {VERSION}); "
                             "re-run `autotune emit --format json` with this version of autotune")
        self.data = data
        self._lookup = Lookup(data)

    @property
    def provenance(self) -> dict:
        return self.data["provenance"]

    def lookup_index(self, precision: str, shape: str, m: int, n: int, k: int, batch: int,
                     device: str | None = None) -> int:
        """Kernel index for a problem; -1: the generic kernel, -2: the library (runtime.py). Warns when
        `device` differs; ValueError for invalid input (runtime.check_problem)."""
        self._lookup.check_device(device)
        return self._lookup.index(precision, shape, m, n, k, batch)

    def lookup(self, precision: str, shape: str, m: int, n: int, k: int, batch: int,
               device: str | None = None) -> dict:
        """The kernel record (instance_id, template, ...) for a problem; `generic: True` for the naive kernel,
        `library: "cublas"` for the library."""
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

