"""Building a dispatch table from the winners and the set cover (`build_table`). The table's JSON format, its
reading and `DispatchTable` are in `autotune.dispatch.table_file`, the builder's inputs (kernel records, structure,
provenance, answers) in `autotune.dispatch.inputs`; `DispatchTable`, `load_table` and the builder's inputs are
imported from here too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from autotune.analysis.setcover import Selection
from autotune.analysis.winners import Layout, Winners
from autotune.dispatch.inputs import (
    MAX_NEIGHBOURS,
    MODES,
    STRUCTURES,
    Answers,
    GenericKernel,
    KernelInfo,
    Provenance,
    Structure,
    parse_structure,
)
from autotune.dispatch.runtime import FALLBACKS, GENERIC, LIBRARY, Lookup, validity_bounds
from autotune.dispatch.table_file import FORMAT, VERSION, DispatchTable, load_table


COST_SCALE = 1e18  # costs are integers: median ms per byte moved times this


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
    keys = list(layout.columns)
    if library is None or len(library) == 0 or len(points) == 0 or not set(keys) <= set(library.columns):
        return np.full(len(points), np.nan)
    lib = library[keys + ["median_ms"]].dropna(subset=list(layout.sizes))
    lib = lib.astype({c: np.int64 for c in layout.sizes}).groupby(keys, as_index=False)["median_ms"].median()
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


def _bytes(layout: Layout, scalars: Mapping[str, float]) -> Callable[[str, str, tuple[int, ...]], int]:
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
    answers: Answers = Answers(),
    library: str | None = "",
    structure: Structure = Structure(),
) -> "DispatchTable":
    """Make the canonical table from winners and a selection (same Winners the selection came from).

    The kind and its sizes come from `w.matrix.layout`; `answers.library_ms` are per point row of `w.matrix`.
    `library`: the library's name ("": the kind's baseline_name; None: no library, `answers.library_ms` is
    ignored).
    """
    generic, library_ms = answers.generic, answers.library_ms
    layout = w.matrix.layout
    if library == "":
        library = kind_library(layout, library_ms)
    fallback = answers.fallback or default_fallback(library, generic)
    check_fallback(fallback, library, generic)
    info = answers.kernel_info if answers.kernel_info is not None else {}
    precision_rank = {p: i for i, p in enumerate(layout.precisions)}
    shape_rank = {s: i for i, s in enumerate(layout.shapes)}
    kernels = sorted(sel.kernels, key=lambda k: (precision_rank.get(k[1], 99), shape_rank.get(k[2], 99), k[0]))
    index = {k: i for i, k in enumerate(kernels)}
    col_of = {iid: c for c, iid in enumerate(w.matrix.instances)}
    lib = np.full(len(w.best_ms), np.nan) if library_ms is None or not library else np.asarray(library_ms, float)
    if len(lib) != len(w.best_ms):
        raise ValueError(f"library_ms has {len(lib)} values for {len(w.best_ms)} points")
    names = list(layout.sizes)
    kernel_rows = _kernel_rows(kernels, info, names)
    head = {
        "kind": layout.kind,
        "size_names": names,
        "table_sizes": list(layout.table_sizes),
        "precisions": list(layout.precisions or dict.fromkeys(w.matrix.points["precision"])),
        "shapes": list(layout.shapes or dict.fromkeys(w.matrix.points["shape"])),
    }
    ctx = _Context(
        w=w,
        sel=sel,
        lib=lib,
        probe=Lookup({**head, "kernels": kernel_rows, "points": [], "regions": []}),
        bytes_of=_bytes(layout, provenance.scalars),
        names=names,
        keys=w.matrix.points["point_key"].astype(str).to_numpy(),
        dims=w.matrix.sizes,
        structure=structure,
    )
    points: list[dict] = []
    regions: list[dict] = []
    answer_loss: list[float] = []
    for (precision, shape), all_rows in w.matrix.groups:
        group_kernels = {col_of[iid]: index[(iid, p, s)] for iid, p, s in kernels if (p, s) == (precision, shape)}
        assigned = _group_points(ctx, precision, shape, all_rows, group_kernels, points, answer_loss)
        if structure.regions:
            regions.extend(_group_regions(ctx, precision, shape, all_rows, group_kernels, assigned))
    data = {
        "format": FORMAT,
        "version": VERSION,
        **head,
        "provenance": _provenance_json(ctx, provenance, len(kernels), points, answer_loss),
        "kernels": kernel_rows,
        "library": {"name": library} if library else None,
        "fallback": fallback,
        "generic": _generic_json(generic),
        "points": points,
        "regions": regions,
        "structure": structure.describe(),
    }
    if structure.mode == "model":
        data["model"] = _model(w, kernels, info, col_of, lib, layout)
    return DispatchTable(data)


@dataclass(frozen=True)
class _Context:
    """What every group of `build_table` reads: the winners, the selection, the library's times per point row,
    a lookup over the table's kernels (their validity), the bytes a point moves, the size names, the point keys,
    the point rows' sizes and the structure."""

    w: Winners
    sel: Selection
    lib: np.ndarray
    probe: Lookup
    bytes_of: Callable[[str, str, tuple[int, ...]], int]
    names: list[str]
    keys: np.ndarray
    dims: np.ndarray  # every point row's sizes (`w.matrix.sizes` builds them anew at each reading: read it once)
    structure: Structure


def _kernel_rows(
    kernels: list[tuple[str, str, str]], info: Mapping[tuple[str, str, str], KernelInfo], names: list[str]
) -> list[dict]:
    """The table's kernel records, in the table's kernel order; a validity predicate on an unknown size is
    rejected now, not at lookup time."""
    kernel_rows = []
    for iid, precision, shape in kernels:
        ki = info.get((iid, precision, shape)) or KernelInfo(space="", name=iid)
        valid = [{key: int(value)} for key, value in ki.valid]
        validity_bounds(valid, names)  # raises for an unknown one
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
    return kernel_rows


def _ranked(
    ctx: _Context, r: int, cols: np.ndarray, group_kernels: Mapping[int, int]
) -> tuple[list[int], list[int], dict[int, float]]:
    """Point row `r`'s kernels fastest first (`ranked`, the library before every kernel slower than it), the same
    with the library before every kernel not clearly faster than it (`near`, for points off the tuned ones), and
    each measured kernel's median time."""
    w, lib = ctx.w, ctx.lib
    med = w.matrix.median[r, cols]
    measured = cols[np.isfinite(med)]
    ranked = [group_kernels[int(c)] for c in sorted(measured, key=lambda c: (w.rank[r, c], c))]
    times = {group_kernels[int(c)]: float(w.matrix.median[r, c]) for c in measured}
    near = list(ranked)
    if np.isfinite(lib[r]):  # the library goes before every kernel slower than it
        at = next((j for j, kk in enumerate(ranked) if times[kk] > lib[r]), len(ranked))
        ranked.insert(at, LIBRARY)
        margin = 1.0 + ctx.structure.library_margin  # off the tuned point: only kernels clearly faster
        at = next((j for j, kk in enumerate(near) if times[kk] * margin > lib[r]), len(near))
        near.insert(at, LIBRARY)
    return ranked, near, times


def _group_points(
    ctx: _Context,
    precision: str,
    shape: str,
    all_rows: np.ndarray,
    group_kernels: Mapping[int, int],
    points: list[dict],
    answer_loss: list[float],
) -> list[int | None]:
    """Append one group's tuned point records to `points` and the loss of their answers to `answer_loss`;
    return each row's answer (the first valid of its ranked kernels, None where none is)."""
    w, sel, lib = ctx.w, ctx.sel, ctx.lib
    cols = np.array(sorted(group_kernels), dtype=np.int64)
    answers: list[int | None] = []
    for r in all_rows:
        dims = tuple(int(x) for x in ctx.dims[r])
        ranked, near, times = _ranked(ctx, r, cols, group_kernels)
        per_byte = COST_SCALE / ctx.bytes_of(precision, shape, dims)
        costs = [[kk, int(round(t * per_byte))] for kk, t in sorted(times.items())]
        if np.isfinite(lib[r]):
            costs.insert(0, [LIBRARY, int(round(float(lib[r]) * per_byte))])
        first = next((c for c in ranked if ctx.probe.valid(c, dims, tuned=True)), None)
        answers.append(first)
        if sel.assigned[r] < 0 and not np.isfinite(lib[r]):
            continue
        if first is not None and np.isfinite(w.best_ms[r]):
            t = lib[r] if first == LIBRARY else times[first]
            answer_loss.append(float(max(0.0, 1.0 - w.best_ms[r] / t)))
        assigned = int(sel.assigned[r])
        points.append(
            {
                "point_key": str(ctx.keys[r]),
                "precision": precision,
                "shape": shape,
                "sizes": dict(zip(ctx.names, dims, strict=True)),
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
    return answers


def _group_regions(
    ctx: _Context,
    precision: str,
    shape: str,
    all_rows: np.ndarray,
    group_kernels: Mapping[int, int],
    answers: list[int | None],
) -> list[dict]:
    """One group's region records: boxes of table sizes around each point's answer (`_regions`)."""
    w, lib, tol = ctx.w, ctx.lib, ctx.w.criteria.tol
    ref = np.fmin(w.best_ms[all_rows], lib[all_rows])  # best of the measured instances and the library
    times = {kern: w.matrix.median[all_rows, c] for c, kern in group_kernels.items()} | {LIBRARY: lib[all_rows]}
    with np.errstate(invalid="ignore"):
        good = {kern: np.nan_to_num(t, nan=np.inf) * (1.0 - tol) <= ref * (1.0 + 1e-12) for kern, t in times.items()}
    table_sizes = w.matrix.layout.table_sizes
    return [
        {
            "precision": precision,
            "shape": shape,
            "bounds": {n: [a, b] for n, a, b in zip(table_sizes, lo, hi, strict=True)},
            "kernel": int(kern),
        }
        for lo, hi, kern in _regions(w.matrix.table_xyz[all_rows], np.array(answers, dtype=object), good)
    ]


def _provenance_json(
    ctx: _Context, provenance: Provenance, kernels: int, points: list[dict], answer_loss: list[float]
) -> dict:
    """The table's provenance record: where it was measured, the criteria and selection, and its losses."""
    w, sel = ctx.w, ctx.sel
    finite = sel.loss[np.isfinite(sel.loss)]
    return {
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
        "kernels": kernels,
        "points": len(points),
        "worst_loss": float(max(0.0, finite.max())) if len(finite) else None,
        "mean_loss": float(max(0.0, finite.mean())) if len(finite) else None,
        "library_points": sum(1 for p in points if p["ranked"] and p["ranked"][0] == LIBRARY),  # the library first
        "answer_worst_loss": float(max(answer_loss)) if answer_loss else None,
        "answer_mean_loss": float(np.mean(answer_loss)) if answer_loss else None,
        "uncovered": list(sel.uncovered),
        "structure": ctx.structure.describe(),
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _generic_json(generic: GenericKernel | None) -> dict | None:
    """The generic kernel's record (None: the kind has none)."""
    if generic is None:
        return None
    return {**asdict(generic), "templates": dict(generic.templates), "parameters": dict(generic.parameters)}


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


__all__ = [
    "Answers",
    "MODES",
    "COST_SCALE",
    "DispatchTable",
    "FORMAT",
    "GENERIC",
    "GenericKernel",
    "KernelInfo",
    "LIBRARY",
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
