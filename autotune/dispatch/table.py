"""The dispatch table: one canonical JSON file from which the C++, Python and CSV consumers are made.

One table answers problems of one problem kind, over the kind's size names (`ProblemKind.size_names`); the
distances, regions and validity predicates range over `table_sizes` (`ProblemKind.table_sizes()`), the other
sizes (`tie_sizes`) only break ties.

JSON layout (format "autotune-dispatch", version 3; version 1 and 2 tables, which predate problem kinds and hold
the sizes m, n, k, batch at the top of each point, still load: `upgrade` turns them into version 3 in memory,
answering exactly as before):
- kind: the problem kind's name; size_names: its sizes in order; table_sizes: those the table answers over;
  precisions, shapes: the kind's precisions and variants ("" for a kind without variants), the input the
  lookup accepts;
- provenance: device (name the table was tuned on), device_info, software versions, sweep_ids, bk, tol,
  spread_ties, method, optimal, secondary, kernels, worst_loss, mean_loss (of the selected kernels), points,
  library_points (tuned points the library answers), answer_worst_loss / answer_mean_loss (of the
  table's answers at the tuned points, against the best measured instance), uncovered, include_dir (the
  directory the kernels' `source` paths are relative to, as given to `--include-dir`), created_utc;
- kernels: [{instance_id, precision, shape, space, name, template, source, convention, parameters, defines,
  valid, tuned_only}], one per instance compiled for one (precision, shape); `template`: the NVRTC name
  expression (or function name) of a template kernel; `parameters`: its C++ parameter list when the kind
  knows it (`ProblemKind.cpp_parameters(convention, precision)`, optional), for explicit instantiation; `defines`: {name: value} preprocessor defines of a kernel tuned by
  defines; `source`: its file relative to the include directory; `valid` is a list of one-key predicates
  ({"<size>_multiple_of": 8}, {"min_<size>": 2}, {"max_<size>": 256} for any size name; see runtime.py),
  derived from the space's `valid` (else `serves`) and `problems.where` (dispatch/validity.py); `tuned_only`:
  they could not be derived, the kernel answers only at its tuned points;
- library: {name}: the kind's baseline (`ProblemKind.baseline_name`) measured at the points (LIBRARY = -2 in
  `ranked` and `regions`); null when the kind has no baseline;
- fallback: "library", "naive" (the generic kernel) or "none" (NONE = -4: nothing the table knows may serve):
  the answer where nothing in the table is valid; never "library" without a library nor "naive" without a
  generic kernel;
- generic: {space, source, convention, templates: {"fp64:NN": name expression, ...}, parameters: {"fp64:NN":
  C++ parameter list}}: the kind's generic
  last-resort kernel (`ProblemKind.generic_space`); null when the kind has none;
- points: [{point_key, precision, shape, sizes: {name: value}, kernel, ranked, near, costs, ms, best_ms, loss,
  library_ms}]: every tuned point, its assigned kernel, and `ranked` = the table's kernels measured there and
  the library (-2, where it was measured), fastest first; `near`: the same list for problems that were not
  tuned, where the library goes before every kernel not faster than it by the factor 1 + library_margin
  (structure: {mode, library_margin, reach}, see Structure); `costs`: [[answer, cost], ...] every table
  kernel measured there and the library (-2), cost = median ms per byte moved (`ProblemKind.bytes_moved`)
  x 1e18, as an integer;
- structure: {mode, library_margin, reach} (Structure); model (mode "model" only): {align, features, kernels:
  [{tiles, coef} or null per kernel], library: {"precision:shape": coef}}: the selection model (model.py;
  integer coefficients with 16 fractional bits over runtime.model_features);
- regions: [{precision, shape, bounds: {name: [lo, hi]} over table_sizes, kernel}]: boxes where every measured
  point inside has `kernel` (or the library, -2) within TOL of the best of the measured instances and the
  library (tie sizes do not bound a region).
Lookup rules: dispatch/runtime.py.

Python API (what `autotune validate` and other readers use):
- `load_table(path) -> DispatchTable`; `DispatchTable(data)` from the JSON object (any supported version);
- `table.data` (version 3, whatever version was read), `table.version_read`, `table.kind` (name),
  `table.size_names`, `table.table_sizes`, `table.tie_sizes`, `table.precisions`, `table.shapes`,
  `table.provenance`, `table.kernels`, `table.points`, `table.regions`, `table.library` (name or None),
  `table.fallback` (the answer where nothing is valid: LIBRARY, GENERIC or NONE);
- `table.lookup(precision, shape, sizes: Mapping[str, int], device=None) -> int`: the answer index (>= 0 a
  kernel of `table.kernels`, GENERIC -1, LIBRARY -2, NONE -4); ValueError for invalid input (the C++ header
  answers INVALID -3); warns once when `device` differs from the tuned device;
- `table.lookup_index(precision, shape, *sizes, device=None) -> int`: the same, sizes in `size_names` order;
- `table.record(index, precision, shape) -> dict`: the kernel record of an answer ({"library": name, ...} for
  -2, {"generic": True, ...} for -1, {"none": True, ...} for -4); `table.answer(precision, shape, sizes)`: both;
- `table.save(path)`, `table.to_json()`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from autotune.analysis.setcover import Selection
from autotune.analysis.winners import Layout, Winners, builtin_kind
from autotune.dispatch.runtime import FALLBACKS, GENERIC, LIBRARY, NONE, Lookup, validity_bounds

FORMAT, VERSION = "autotune-dispatch", 3
RETIRED_FORMAT = "autotune-dispatch-kind"  # the per-kind tables before version 3 (refused with a hint)
VERSIONS = (1, 2, 3)  # versions this code reads
LEGACY_SIZES = ("m", "n", "k", "batch")  # the point fields of version 1 and 2 tables
LEGACY_TABLE_SIZES = ("m", "n", "k")  # the region fields of version 1 and 2 tables


@dataclass(frozen=True)
class KernelInfo:
    """How to build one kernel: its space, procedural name, name expression or defines, source and validity."""

    space: str
    name: str
    template: str | None = None  # NVRTC name expression (or function name) for this precision and shape
    source: str | None = None  # kernel file, relative to the include directory
    convention: str | None = None  # the kind's calling convention
    valid: tuple[tuple[str, int], ...] = ()  # (("m_multiple_of", 8), ("max_k", 256))
    tuned_only: bool = False  # the predicates could not be derived: valid only at its tuned points
    defines: tuple[tuple[str, Any], ...] = ()  # preprocessor defines of a kernel tuned by defines
    parameters: str | None = None  # the kernel's C++ parameter list (explicit instantiation), from the kind
    tiles: tuple[tuple[str, int], ...] = ()  # (("m", 64), ("n", 64), ("k", 32)): its tile per table size (model)


@dataclass(frozen=True)
class GenericKernel:
    """The kind's last-resort kernel (one instance of its generic space) and its name expressions."""

    space: str
    source: str | None = None
    convention: str | None = None
    templates: tuple[tuple[str, str], ...] = ()  # (("fp64:NN", "ns::kernel<double, ...>"), ...)
    parameters: tuple[tuple[str, str], ...] = ()  # (("fp64:NN", "int, int, ..."), ...): C++ parameter lists


@dataclass(frozen=True)
class Structure:
    """How a table answers problems it was not tuned on (chosen by measured held-out loss: dispatch/loo.py).

    mode "regions": merged boxes, then the nearest tuned point's `near` list (runtime.py rules 3 and 4);
    "nearest": the nearest tuned point's `near` list only; "model": every valid kernel and the library priced by
    the selection model's predicted time (dispatch/model.py), fitted on the tuned points; "cost": every valid answer (kernel or library) is
    priced by its time per byte at the tuned point nearest the problem where it was measured (`costs` of each
    point), among answers measured within `reach` (log2 distance) of the nearest tuned point, and the cheapest
    answers. library_margin: a kernel goes before the library off the tuned points only when it was faster by
    at least the factor 1 + margin (the `near` lists; in cost mode its cost times 1 + margin is compared).
    neighbours (cost mode only): with 2 or more, each competing answer is priced by the mean log2 of its cost at
    the `neighbours` tuned points nearest the problem where it was measured (runtime.py rule 4'), so a table whose
    points sample the problem space densely (problems measured ahead of time, at the deployment workload's
    sizes, swept into the tuning database: docs/tables2.md)
    follows the library's steps instead of one point's accident; 1 (the default) is the single nearest."""

    mode: str = "regions"
    library_margin: float = 0.0
    reach: float = 1.0
    neighbours: int = 1

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown structure mode {self.mode!r}; expected one of {MODES}")
        if not (isinstance(self.neighbours, int) and 1 <= self.neighbours <= MAX_NEIGHBOURS):
            raise ValueError(f"neighbours must be an integer in 1..{MAX_NEIGHBOURS}, got {self.neighbours!r}")
        if self.neighbours > 1 and self.mode != "cost":
            raise ValueError(f"neighbours applies to the cost mode only, not {self.mode!r}")

    @property
    def regions(self) -> bool:
        return self.mode == "regions"

    def describe(self) -> dict:
        out: dict = {"mode": self.mode, "library_margin": self.library_margin, "reach": self.reach}
        if self.neighbours != 1:  # absent: 1 (tables written before it existed read the same)
            out["neighbours"] = self.neighbours
        return out


def parse_structure(text: str) -> Structure:
    """MODE[:MARGIN[:REACH[:NEIGHBOURS]]] (e.g. `cost:0.05:1:2`) as a Structure; ValueError otherwise (MARGIN a
    fraction in [0, 1), REACH >= 0, NEIGHBOURS 1..MAX_NEIGHBOURS, cost mode only)."""
    mode, *rest = text.split(":")
    if len(rest) > 3:
        raise ValueError(f"too many fields in {text!r}")
    margin = float(rest[0]) if rest else 0.0
    reach = float(rest[1]) if len(rest) > 1 else 1.0
    neighbours_text = rest[2].strip() if len(rest) > 2 else "1"
    if not neighbours_text.isdigit():
        raise ValueError(f"NEIGHBOURS must be a positive integer, got {neighbours_text!r}")
    if not (0 <= margin < 1 and 0 <= reach < 1e6):  # also refuses nan
        raise ValueError(f"MARGIN must be in [0, 1) and REACH >= 0, got {text!r}")
    return Structure(mode, margin, reach, int(neighbours_text))


MODES = ("regions", "nearest", "cost", "model")
MAX_NEIGHBOURS = 16
STRUCTURES = (
    tuple(Structure(m, margin) for m in ("regions", "nearest") for margin in (0.0, 0.05, 0.1, 0.2))
    + tuple(Structure("cost", margin, reach) for reach in (0.5, 1.0, 2.0) for margin in (0.0, 0.05, 0.1, 0.2))
    + tuple(Structure("model", margin) for margin in (0.0, 0.05, 0.1))
)
COST_SCALE = 1e18  # costs are integers: median ms per byte moved times this


@dataclass(frozen=True)
class Provenance:
    """Where the measurements came from."""

    device: str
    sweep_ids: tuple[str, ...] = ()
    device_info: Mapping[str, Any] = field(default_factory=dict)
    software: Mapping[str, str] = field(default_factory=dict)
    scalars: Mapping[str, float] = field(default_factory=dict)  # the sweeps' scalars (bytes moved read them)
    include_dir: str | None = None  # what the kernels' sources are relative to


def default_fallback(library: str | None, generic: GenericKernel | None) -> str:
    """The answer where nothing is valid when the user names none: the library, else the generic kernel, else
    "none"."""
    return "library" if library else "naive" if generic is not None else "none"


def kind_library(layout: Layout, library_ms: np.ndarray | None = None) -> str | None:
    """The library of the layout's kind (its baseline_name); "library" when the kind is unknown but times are given."""
    if layout.kind_object is not None:
        return layout.kind_object.baseline_name
    measured = library_ms is not None and bool(np.isfinite(np.asarray(library_ms, dtype=float)).any())
    return "library" if measured else None


def check_fallback(fallback: str, library: str | None, generic: GenericKernel | None) -> None:
    """ValueError for a fallback the table cannot give (a library it lacks, a generic kernel it lacks)."""
    if fallback not in FALLBACKS:
        raise ValueError(f"unknown fallback {fallback!r}; expected one of {sorted(FALLBACKS)}")
    if FALLBACKS[fallback] == LIBRARY and not library:
        raise ValueError("fallback library: this kind has no library (baseline); use naive or none")
    if FALLBACKS[fallback] == GENERIC and generic is None:
        raise ValueError("fallback naive: this kind has no generic kernel (generic_space); use library or none")


def library_times(points: pd.DataFrame, library: pd.DataFrame | None, layout: Layout) -> np.ndarray:
    """Per point row, the library's verified median time (ms); NaN where it was not measured.

    `library` has the point columns precision, shape, the sizes of `layout` and `median_ms`."""
    out = np.full(len(points), np.nan)
    if library is None or len(library) == 0 or len(points) == 0:
        return out
    keys = list(layout.columns)
    if not set(keys) <= set(library.columns):
        return out
    lib = library[keys + ["median_ms"]].dropna(subset=list(layout.sizes)).copy()
    for c in layout.sizes:
        lib[c] = lib[c].astype(np.int64)
    lib = lib.groupby(keys, as_index=False)["median_ms"].median()
    merged = points[keys].reset_index(drop=True).merge(lib, on=keys, how="left")
    return pd.to_numeric(merged["median_ms"], errors="coerce").to_numpy(dtype=float)


def _regions(
    xyz: np.ndarray, answer: np.ndarray, good: Mapping[int, np.ndarray]
) -> list[tuple[list[int], list[int], int]]:
    """Grow boxes around each point's answer while every measured point inside stays good for it.

    `xyz` the table sizes of all points of one group (a point where everything failed blocks every region);
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


def _bytes(layout: Layout, scalars: Mapping[str, float]):
    """Bytes moved by a point of the layout's kind (its `bytes_moved`); 1 when the kind object is unknown."""
    kind = layout.kind_object
    if kind is None:
        return lambda precision, shape, dims: 1
    full = kind.own_scalars(scalars)
    return lambda precision, shape, dims: max(
        1, int(kind.bytes_moved(kind.point(precision, shape, dict(zip(layout.sizes, dims, strict=True))), full))
    )


def build_table(
    w: Winners,
    sel: Selection,
    provenance: Provenance,
    kernel_info: Mapping[tuple[str, str, str], KernelInfo] | None = None,
    generic: GenericKernel | None = None,
    library_ms: np.ndarray | None = None,
    library: str | None = "",
    fallback: str | None = None,
    structure: Structure = Structure(),
) -> "DispatchTable":
    """Make the canonical table from winners and a selection (same Winners the selection came from).

    The kind and its sizes come from `w.matrix.layout`. `library_ms`: the library's time per point row of
    `w.matrix` (NaN: not measured; see `library_times`); where it is faster than the table's kernels it is the
    point's answer. `library`: its name ("": the kind's baseline_name; None: no library, `library_ms` is ignored).
    `generic`: the kind's generic kernel (None: it has none). `fallback`: "library", "naive" or "none", the
    answer where no kernel of the table is valid (None: `default_fallback`).
    """
    layout = w.matrix.layout
    if library == "":
        library = kind_library(layout, library_ms)
    fallback = fallback or default_fallback(library, generic)
    check_fallback(fallback, library, generic)
    info = kernel_info if kernel_info is not None else {}
    precision_rank = {p: i for i, p in enumerate(layout.precisions)}
    shape_rank = {s: i for i, s in enumerate(layout.shapes)}
    kernels = sorted(sel.kernels, key=lambda k: (precision_rank.get(k[1], 99), shape_rank.get(k[2], 99), k[0]))
    index = {k: i for i, k in enumerate(kernels)}
    col_of = {iid: c for c, iid in enumerate(w.matrix.instances)}
    lib = np.full(len(w.best_ms), np.nan) if library_ms is None or not library else np.asarray(library_ms, float)
    if len(lib) != len(w.best_ms):
        raise ValueError(f"library_ms has {len(lib)} values for {len(w.best_ms)} points")
    names = list(layout.sizes)
    kernel_rows = []
    for iid, precision, shape in kernels:
        ki = info.get((iid, precision, shape)) or KernelInfo(space="", name=iid)
        valid = [{key: int(value)} for key, value in ki.valid]
        validity_bounds(valid, names)  # reject unknown predicates now, not at lookup time
        kernel_rows.append(
            {
                "instance_id": iid,
                "precision": precision,
                "shape": shape,
                "space": ki.space,
                "name": ki.name,
                "template": ki.template,
                "source": ki.source,
                "convention": ki.convention,
                "parameters": ki.parameters,
                "defines": {str(k): v for k, v in ki.defines},
                "valid": valid,
                "tuned_only": bool(ki.tuned_only),
            }
        )
    head = {
        "kind": layout.kind,
        "size_names": names,
        "table_sizes": list(layout.table_sizes),
        "precisions": list(layout.precisions or dict.fromkeys(w.matrix.points["precision"])),
        "shapes": list(layout.shapes or dict.fromkeys(w.matrix.points["shape"])),
    }
    probe = Lookup({**head, "kernels": kernel_rows, "points": [], "regions": []})
    bytes_of = _bytes(layout, provenance.scalars)
    points, regions = [], []
    answer_loss: list[float] = []
    pts = w.matrix.points
    all_dims = w.matrix.sizes
    all_xyz = w.matrix.table_xyz
    keys = pts["point_key"].astype(str).to_numpy()
    tol = w.criteria.tol
    for (precision, shape), all_rows in w.matrix.groups:
        group_kernels = {col_of[iid]: index[(iid, p, s)] for iid, p, s in kernels if (p, s) == (precision, shape)}
        cols = np.array(sorted(group_kernels), dtype=np.int64)
        xyz = all_xyz[all_rows]
        answers: list[int | None] = []
        for r in all_rows:
            med = w.matrix.median[r, cols]
            measured = cols[np.isfinite(med)]
            dims = tuple(int(x) for x in all_dims[r])
            ranked = [group_kernels[int(c)] for c in sorted(measured, key=lambda c: (w.rank[r, c], c))]
            times = {group_kernels[int(c)]: float(w.matrix.median[r, c]) for c in measured}
            per_byte = COST_SCALE / bytes_of(precision, shape, dims)
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
            points.append(
                {
                    "point_key": str(keys[r]),
                    "precision": precision,
                    "shape": shape,
                    "sizes": dict(zip(names, dims, strict=True)),
                    "kernel": group_kernels[assigned] if assigned >= 0 else LIBRARY,
                    "ranked": ranked,
                    "near": near,
                    "costs": costs,
                    "ms": float(w.matrix.median[r, assigned]) if assigned >= 0 else float(lib[r]),
                    "best_ms": float(w.best_ms[r]) if np.isfinite(w.best_ms[r]) else None,
                    "loss": float(max(0.0, sel.loss[r])) if assigned >= 0 else None,
                    "library_ms": float(lib[r]) if np.isfinite(lib[r]) else None,
                }
            )
        if not structure.regions:
            continue
        ref = np.fmin(w.best_ms[all_rows], lib[all_rows])  # best of the measured instances and the library
        with np.errstate(invalid="ignore"):
            good = {
                kern: np.nan_to_num(w.matrix.median[all_rows, c], nan=np.inf) * (1.0 - tol) <= ref * (1.0 + 1e-12)
                for c, kern in group_kernels.items()
            }
            good[LIBRARY] = np.nan_to_num(lib[all_rows], nan=np.inf) * (1.0 - tol) <= ref * (1.0 + 1e-12)
        for lo, hi, kern in _regions(xyz, np.array(answers, dtype=object), good):
            regions.append(
                {
                    "precision": precision,
                    "shape": shape,
                    "bounds": {n: [a, b] for n, a, b in zip(layout.table_sizes, lo, hi, strict=True)},
                    "kernel": int(kern),
                }
            )
    finite = sel.loss[np.isfinite(sel.loss)]
    prov = {
        "device": provenance.device,
        "device_info": dict(provenance.device_info),
        "software": dict(provenance.software),
        "sweep_ids": list(provenance.sweep_ids),
        "scalars": dict(provenance.scalars),
        "include_dir": provenance.include_dir,
        "bk": w.criteria.bk,
        "tol": w.criteria.tol,
        "spread_ties": w.criteria.spread_ties,
        "method": sel.method,
        "optimal": sel.optimal,
        "secondary": sel.secondary,
        "kernels": len(kernels),
        "points": len(points),
        "worst_loss": float(max(0.0, finite.max())) if len(finite) else None,
        "mean_loss": float(max(0.0, finite.mean())) if len(finite) else None,
        "library_points": sum(1 for p in points if _library_first(p["ranked"])),
        "answer_worst_loss": float(max(answer_loss)) if answer_loss else None,
        "answer_mean_loss": float(np.mean(answer_loss)) if answer_loss else None,
        "uncovered": list(sel.uncovered),
        "structure": structure.describe(),
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    data = {
        "format": FORMAT,
        "version": VERSION,
        **head,
        "provenance": prov,
        "kernels": kernel_rows,
        "library": {"name": library} if library else None,
        "fallback": fallback,
        "generic": None
        if generic is None
        else {
            "space": generic.space,
            "source": generic.source,
            "convention": generic.convention,
            "templates": dict(generic.templates),
            "parameters": dict(generic.parameters),
        },
        "points": points,
        "regions": regions,
        "structure": structure.describe(),
    }
    if structure.mode == "model":
        data["model"] = _model(w, kernels, info, col_of, lib, layout)
    return DispatchTable(data)


def _model(
    w: Winners, kernels: list, info: Mapping, col_of: Mapping[str, int], lib: np.ndarray, layout: Layout
) -> dict:
    """The selection model of the table's kernels and the library, fitted on the tuned points (model.py)."""
    from autotune.dispatch.model import fit_table_model

    names = list(layout.sizes)
    table_dims = [names.index(n) for n in layout.table_sizes]
    specs = []
    for iid, precision, shape in kernels:
        ki = info.get((iid, precision, shape)) or KernelInfo(space="", name=iid)
        tiles = dict(ki.tiles)
        specs.append((col_of[iid], (precision, shape), tuple(int(tiles.get(n, 1)) for n in layout.table_sizes)))
    return fit_table_model(w.matrix.sizes, w.matrix.groups, specs, w.matrix.median, lib, table_dims)


def upgrade(data: dict) -> dict:
    """A version 1 or 2 table as version 3 (a copy; version 3 tables are returned as they are). Those versions
    predate problem kinds: their points hold the sizes m, n, k, batch, their regions m, n, k, and the kind is the
    built-in kind with those sizes. Version 1 tables had no library: their fallback is the generic kernel."""
    version = int(data.get("version", 0))
    if version >= 3:
        return data
    kind = builtin_kind(LEGACY_SIZES)
    out = {k: v for k, v in data.items() if k not in ("points", "regions")}
    out.update(
        {
            "version": VERSION,
            "kind": kind.name if kind else "",
            "size_names": list(LEGACY_SIZES),
            "table_sizes": list(LEGACY_TABLE_SIZES),
            "precisions": list(kind.precisions if kind else ()),
            "shapes": list(kind.shapes if kind else ()),
            "upgraded_from": version,
        }
    )
    out["fallback"] = data.get("fallback", "naive" if version < 2 else "library")
    out["library"] = data.get("library") or {"name": kind.baseline_name if kind else None}
    out["generic"] = dict(data.get("generic") or {})
    params = getattr(kind, "cpp_parameters", None)
    if params is not None:  # the C++ parameter lists version 2 headers took from a table of calling conventions
        out["kernels"] = [{**k, "parameters": params(k.get("convention"), k["precision"])} for k in data["kernels"]]
        out["generic"]["parameters"] = {
            key: params(out["generic"].get("convention"), key.split(":")[0])
            for key in out["generic"].get("templates", {})
        }
    out["points"] = [
        {**{k: v for k, v in p.items() if k not in LEGACY_SIZES}, "sizes": {n: int(p[n]) for n in LEGACY_SIZES}}
        for p in data["points"]
    ]
    out["regions"] = [
        {
            "precision": r["precision"],
            "shape": r["shape"],
            "bounds": {n: list(r[n]) for n in LEGACY_TABLE_SIZES},
            "kernel": r["kernel"],
        }
        for r in data["regions"]
    ]
    return out


class BadSizes(ValueError):
    """A table point's size is not a problem size (a whole number of at least 1)."""


class DispatchTable:
    """The JSON object plus lookups (see the module docstring). `data` is exactly what `to_json` writes (version 3,
    whatever version was read)."""

    def __init__(self, data: dict) -> None:
        if data.get("format") != FORMAT:
            raise ValueError(f"not a dispatch table (format {data.get('format')!r}, expected {FORMAT!r})")
        if data.get("version") not in VERSIONS:
            raise ValueError(
                f"dispatch table version {data.get('version')} is not supported (expected {VERSION}); "
                "re-run `autotune emit --format json` with this version of autotune"
            )
        self.version_read = int(data["version"])
        self.data = upgrade(data)
        problem = _bad_sizes(self.data)  # before the lookup reads the points (their logs): a table is data
        if problem:
            raise BadSizes(problem)
        self._lookup = Lookup(self.data)

    kind = property(lambda self: str(self.data["kind"]))
    size_names = property(lambda self: tuple(self.data["size_names"]))
    table_sizes = property(lambda self: tuple(self.data["table_sizes"]))
    tie_sizes = property(lambda self: tuple(n for n in self.size_names if n not in self.table_sizes))
    precisions = property(lambda self: tuple(self.data["precisions"]))
    shapes = property(lambda self: tuple(self.data["shapes"]))
    kernels = property(lambda self: self.data["kernels"])
    points = property(lambda self: self.data["points"])
    regions = property(lambda self: self.data["regions"])
    fallback = property(lambda self: self._lookup.fallback)

    @property
    def provenance(self) -> dict:
        return self.data["provenance"]

    @property
    def library(self) -> str | None:
        """The library's name (the kind's baseline), None when the table has none."""
        return (self.data.get("library") or {}).get("name") or None

    def lookup(self, precision: str, shape: str, sizes: Mapping[str, int], device: str | None = None) -> int:
        """The answer index for a problem: a kernel (>= 0), GENERIC (-1), LIBRARY (-2) or NONE (-4) (runtime.py).
        Warns when `device` differs; ValueError for invalid input (runtime.check_problem)."""
        self._lookup.check_device(device)
        return self._lookup.index(precision, shape, sizes)

    def lookup_index(self, precision: str, shape: str, *sizes: int, device: str | None = None) -> int:
        """`lookup` with the sizes given in `size_names` order."""
        self._lookup.check_device(device)
        return self._lookup.index(precision, shape, sizes)

    def record(self, index: int, precision: str, shape: str) -> dict:
        """The kernel record (instance_id, template, ...) of an answer; `generic: True` for the generic kernel,
        `library: NAME` for the library, `none: True` for NONE."""
        return self._lookup.kernel(index, precision, shape)

    def answer(self, precision: str, shape: str, sizes: Mapping[str, int], device: str | None = None) -> dict:
        """The kernel record answering a problem (`record(lookup(...))`)."""
        return self.record(self.lookup(precision, shape, sizes, device), precision, shape)

    def to_json(self) -> str:
        return json.dumps(self.data, indent=1, sort_keys=False, allow_nan=False)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json() + "\n")
        return path


def load_table(path: str | Path) -> DispatchTable:
    """The table in a dispatch.json (or an xz-compressed dispatch.json.xz, as committed results keep large ones),
    checked: a JSON object of this format whose points and regions name only kernels it lists (or the library, the
    generic kernel, none). Raises UserError naming the file."""
    import lzma

    from autotune.errors import UserError

    hint = "give a dispatch.json written by `autotune report` or `autotune emit --format json`"
    try:
        raw = Path(path).read_bytes()
        if str(path).endswith(".xz"):
            raw = lzma.decompress(raw)
        data = json.loads(raw.decode("utf-8-sig"))
    except lzma.LZMAError as exc:
        raise UserError(f"not an xz file: {exc}", file=path, hint=hint) from None
    except UnicodeDecodeError:
        raise UserError("not a UTF-8 text file", file=path, hint=hint) from None
    except json.JSONDecodeError as exc:
        raise UserError(f"not valid JSON: {exc.msg}", file=path, line=exc.lineno, hint=hint) from None
    if isinstance(data, dict) and data.get("format") == RETIRED_FORMAT:
        raise UserError(
            f"a table of the retired per-kind format ({RETIRED_FORMAT})",
            file=path,
            hint="write it again with `autotune report DATABASE`: every kind has the one table format now",
        )
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UserError(f"not a dispatch table (format {FORMAT!r} expected)", file=path, hint=hint)
    if data.get("version") not in VERSIONS:
        raise UserError(
            f"dispatch table version {data.get('version')!r}; this autotune reads versions "
            f"{', '.join(map(str, VERSIONS))}",
            file=path,
            hint="write it again with this autotune's `autotune report`, or upgrade autotune",
        )
    problem = _dangling(data)
    if problem:
        raise UserError(problem, file=path, hint="write the table again with `autotune report` or `autotune emit`")
    try:
        return DispatchTable(data)
    except BadSizes as exc:  # version 3 (an older table's sizes as upgraded)
        raise UserError(
            str(exc), file=path, hint="write the table again with `autotune report` or `autotune emit`"
        ) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"not a readable dispatch table: {exc!r}", file=path, hint=hint) from None


def _bad_sizes(data: dict) -> str | None:
    """What in a table's points is not a problem size (each a whole number of at least 1), if anything: a table
    is data, and `validate` builds test points from it."""
    from autotune import untrusted
    from autotune.errors import UserError

    points = data.get("points") or []
    if not isinstance(points, list):
        return "the table's `points` is not a list"
    for p in points:
        sizes = p.get("sizes") if isinstance(p, dict) else None
        if not isinstance(sizes, dict):
            return f"a point has no `sizes` mapping: {str(p)[:80]}"
        for name, value in sizes.items():
            try:  # a number in JSON, not its text
                ok = not isinstance(value, str) and bool(untrusted.number(value, name=name, integer=True, lo=1))
            except UserError:
                ok = False
            if not ok:
                return (
                    f"point {p.get('point_key')}: size {name} = {repr(value)[:40]} is not a whole number of at least 1"
                )
    return None


def _dangling(data: dict) -> str | None:
    """What in a table names a kernel it does not list, if anything."""
    kernels = data.get("kernels")
    if not isinstance(kernels, list):
        return "the table lists no `kernels`"
    n = len(kernels)
    special = {GENERIC, LIBRARY, NONE}

    def bad(i: Any) -> bool:
        return isinstance(i, int) and not isinstance(i, bool) and not (0 <= i < n or i in special)

    for p in data.get("points") or []:
        answers = [
            p.get("kernel"),
            *(p.get("ranked") or []),
            *(p.get("near") or []),
            *(c[0] for c in (p.get("costs") or []) if isinstance(c, list) and c),
        ]
        if any(bad(a) for a in answers):
            return f"a point names a kernel the table does not list ({n} kernels): {p.get('point_key', p)}"
    for r in data.get("regions") or []:
        if bad(r.get("kernel")):
            return f"a region names a kernel the table does not list ({n} kernels)"
    return None


__all__ = [
    "COST_SCALE",
    "DispatchTable",
    "FORMAT",
    "GENERIC",
    "GenericKernel",
    "KernelInfo",
    "LIBRARY",
    "NONE",
    "Provenance",
    "STRUCTURES",
    "Structure",
    "parse_structure",
    "MAX_NEIGHBOURS",
    "VERSION",
    "build_table",
    "library_times",
    "load_table",
]


def _library_first(ranked: Any) -> bool:
    """A tuned point's ranked answers start with the library."""
    return bool(ranked) and ranked[0] == LIBRARY
