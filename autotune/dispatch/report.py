"""Report files: summary.csv, tol_table.csv and PNG plots (matplotlib, Agg backend; no display needed), for any
problem kind.

- perf_vs_size.png: GFLOP/s (GB/s for a kind without flops) against size (the geometric mean of the table
  sizes) per (precision, shape) for the table's kernels at the tuned points, the best measured instance, the
  library and the bandwidth roofline (the paper's Figures 7 and 13);
- kernels_vs_tol.png: kernels against TOL per method and BK (the paper's Table I as a plot);
- loss_per_point.png: the table's loss at each tuned point, with TOL, and the leave-one-out loss.
Roofline time = the kind's bytes moved (`ProblemKind.bytes_moved` with the sweeps' scalars) / bandwidth.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from autotune.analysis.winners import Layout, PerfMatrix
from autotune.dispatch.table import DispatchTable, library_times
from autotune.dispatch.loo import TOL_TABLE_COLUMNS


def library_label(layout: Layout) -> str:
    """The library's name in column names: the kind's baseline_name, else "baseline"."""
    kind = layout.kind_object
    return kind.baseline_name if kind is not None and kind.baseline_name else "baseline"


def summary_columns(layout: Layout) -> tuple[str, ...]:
    lib = library_label(layout)
    return (*layout.columns, "instance", "ms", "roofline_frac", f"{lib}_ms", f"speedup_vs_{lib}")


def work_per_point(points: pd.DataFrame, layout: Layout, what: str, scalars: Mapping[str, float]) -> np.ndarray:
    """The kind's bytes moved ("bytes") or flops ("flops") per point row; NaN where the kind is unknown."""
    kind = layout.kind_object
    if kind is None or points.empty:
        return np.full(len(points), np.nan)
    full = kind.own_scalars(scalars)
    out = []
    for row in points[list(layout.columns)].itertuples(index=False):
        point = kind.point(row[0], row[1], {n: int(v) for n, v in zip(layout.sizes, row[2:], strict=True)})
        out.append(float(kind.bytes_moved(point, full)) if what == "bytes" else float(kind.flops(point)))
    return np.asarray(out, dtype=float)


def roofline_ms(points: pd.DataFrame, bandwidth: float, layout: Layout, scalars: Mapping[str, float]) -> np.ndarray:
    """Fewest milliseconds the data movement allows at `bandwidth` bytes/s (read + write)."""
    return work_per_point(points, layout, "bytes", scalars) / bandwidth * 1e3


def summary_frame(
    matrix: PerfMatrix,
    library: pd.DataFrame | None,
    bandwidth: float | None,
    scalars: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """One row per test point: the best verified instance, its time, roofline fraction and the library comparison.

    `library` has the point columns and `median_ms` (status ok only); missing values stay empty. A point
    where no instance has a verified time keeps an empty instance and time.
    """
    layout = matrix.layout
    columns = list(summary_columns(layout))
    lib_ms, speedup = columns[-2], columns[-1]
    point = list(layout.columns)
    out = matrix.points[point].copy().reset_index(drop=True)
    if out.empty:
        return pd.DataFrame(columns=columns)
    med = np.where(np.isfinite(matrix.median), matrix.median, np.inf)
    col = med.argmin(axis=1)
    has = np.isfinite(med[np.arange(len(out)), col])
    out["instance"] = np.where(has, matrix.instances[col], "")
    out["ms"] = np.where(has, med[np.arange(len(out)), col], np.nan)
    out["roofline_frac"] = roofline_ms(out, bandwidth, layout, scalars or {}) / out["ms"] if bandwidth else np.nan
    out[lib_ms] = library_times(out, library, layout)
    out[speedup] = out[lib_ms] / out["ms"]
    return out[columns]


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def saved(plt: Any, fig: Any, path: Path, dpi: int = 120) -> Path:
    """Lay out `fig`, write it to `path` and close it."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def _size(frame: pd.DataFrame, layout: Layout) -> np.ndarray:
    """The geometric mean of a point's table sizes."""
    logs = np.log(frame[list(layout.table_sizes)].to_numpy(float))
    return np.exp(logs.mean(axis=1)) if len(frame) else np.zeros(0)


def plot_perf(
    summary: pd.DataFrame,
    table: DispatchTable,
    bandwidth: float | None,
    layout: Layout,
    scalars: Mapping[str, float],
    path: Path,
) -> Path:
    plt = pyplot()
    groups = list(summary.groupby(["precision", "shape"], sort=False))
    fig, axes = plt.subplots(len(groups) or 1, 1, figsize=(8, 3.6 * max(1, len(groups))), squeeze=False)
    point = list(layout.columns)
    best = pd.DataFrame(
        [
            {"precision": p["precision"], "shape": p["shape"], **p["sizes"], "best_ms": p["best_ms"]}
            for p in table.data["points"]
        ],
        columns=point + ["best_ms"],
    )
    lib = library_label(layout)
    flops_known = bool(np.nan_to_num(work_per_point(summary.iloc[:1], layout, "flops", scalars)).sum() > 0)
    work, unit = ("flops", "GFLOP/s") if flops_known else ("bytes", "GB/s")

    def rate(frame: pd.DataFrame, ms: Any) -> np.ndarray:
        """The work per second (in units of 1e9) of each row of `frame` done in `ms` milliseconds."""
        return work_per_point(frame, layout, work, scalars) / (np.asarray(ms, dtype=float) * 1e6)

    for ax, ((precision, shape), g) in zip(axes[:, 0], groups, strict=True):
        g = g.sort_values(list(layout.sizes))
        x = _size(g, layout)
        b = best.merge(g[point], on=point).sort_values(list(layout.sizes))
        ax.plot(_size(b, layout), rate(b, b["best_ms"]), "k:", label="best measured instance")
        for inst, h in g.groupby("instance"):
            ax.plot(_size(h, layout), rate(h, h["ms"]), "o", ms=4, label=f"table: {inst}")
        if g[f"{lib}_ms"].notna().any():
            ax.plot(x, rate(g, g[f"{lib}_ms"]), "s-", ms=3, color="gray", label=lib)
        if bandwidth:
            ax.plot(x, rate(g, roofline_ms(g, bandwidth, layout, scalars)), "r--", label="bandwidth roofline")
        ax.set_xscale("log", base=2)
        if any((np.asarray(line.get_ydata(), float) > 0).any() for line in ax.get_lines()):
            ax.set_yscale("log")
        else:  # the kind's work is unknown here (e.g. its space file could not be loaded): nothing to scale
            unknown = f"{unit} unknown: the kind's work could not be computed"
            ax.text(0.5, 0.5, unknown, ha="center", transform=ax.transAxes, fontsize=8)
        ax.set_xlabel(f"size (geometric mean of {', '.join(layout.table_sizes)})")
        ax.set_ylabel(unit)
        ax.set_title(f"{precision} {shape} on {table.provenance.get('device')}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    return saved(plt, fig, path)


def plot_kernels_vs_tol(tol_frame: pd.DataFrame, path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for (method, bk), g in tol_frame.groupby(["method", "bk"]):
        g = g.sort_values("tol")
        style = "o-" if method == "exact" else "s--"
        ax.plot(100 * g["tol"], g["kernels"], style, label=f"{method}, BK={bk if bk else 'all'}")
    ax.set_xlabel("TOL (%)")
    ax.set_ylabel("kernels to compile")
    ax.set_title("kernels against TOL (Table I)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return saved(plt, fig, path)


def plot_loss(table: DispatchTable, loo: pd.DataFrame | None, path: Path) -> Path:
    plt = pyplot()
    pts = pd.DataFrame(table.data["points"])
    fig, ax = plt.subplots(figsize=(max(6, 0.18 * len(pts) + 2), 4))
    x = np.arange(len(pts))
    ax.bar(x, 100 * pts["loss"] if len(pts) else [], color="tab:blue", label="in sample")
    if loo is not None and not loo.empty and len(pts):
        held = pts[["point_key"]].merge(loo[["point_key", "loss"]], on="point_key", how="left")
        ax.plot(x, 100 * held["loss"], "rx", label="leave-one-out")
    tol = float(table.provenance.get("tol") or 0.0)
    ax.axhline(100 * tol, color="k", ls="--", lw=1, label=f"TOL = {100 * tol:g}%")
    ax.set_xticks(x)
    ax.set_xticklabels(pts["point_key"] if len(pts) else [], rotation=90, fontsize=5)
    ax.set_ylabel("loss vs best (%)")
    ax.set_title(f"loss per point ({table.provenance.get('method')}, {table.provenance.get('kernels')} kernels)")
    ax.legend(fontsize=7)
    return saved(plt, fig, path)


def write_report(
    out_dir: Path,
    table: DispatchTable,
    matrix: PerfMatrix,
    tol_frame: pd.DataFrame | None,
    library: pd.DataFrame | None,
    bandwidth: float | None,
    scalars: Mapping[str, float] | None = None,
    loo: pd.DataFrame | None = None,
) -> list[Path]:
    """Write summary.csv, tol_table.csv (when given) and the PNG plots; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    scalars = scalars or {}
    summary = summary_frame(matrix, library, bandwidth, scalars)
    written = [out_dir / "summary.csv"]
    summary.to_csv(written[0], index=False, float_format="%.6g")
    if tol_frame is not None:
        written.append(out_dir / "tol_table.csv")
        tol_frame[list(TOL_TABLE_COLUMNS)].to_csv(written[-1], index=False, float_format="%.6g")
        written.append(plot_kernels_vs_tol(tol_frame, out_dir / "kernels_vs_tol.png"))
    written.append(plot_perf(summary, table, bandwidth, matrix.layout, scalars, out_dir / "perf_vs_size.png"))
    written.append(plot_loss(table, loo, out_dir / "loss_per_point.png"))
    return written
