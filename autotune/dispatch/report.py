"""Report files: summary.csv, tol_table.csv and PNG plots (matplotlib, Agg backend; no display needed).

- perf_vs_size.png: GFLOP/s against size per (precision, shape) for the table's kernels at the tuned
  points, the best measured instance, cuBLAS and the bandwidth roofline (the paper's Figures 7 and 13);
- kernels_vs_tol.png: kernels against TOL per method and BK (the paper's Table I as a plot);
- loss_per_point.png: the table's loss at each tuned point, with TOL, and the leave-one-out loss.
Roofline time = bytes / bandwidth with bytes = batch x elem_size x (MK + KN + MN (+ MN if beta != 0)).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from autotune.analysis.winners import PerfMatrix
from autotune.dispatch.table import DispatchTable
from autotune.dispatch.loo import TOL_TABLE_COLUMNS

SUMMARY_COLUMNS = ("precision", "shape", "m", "n", "k", "batch", "instance", "ms", "roofline_frac", "cublas_ms",
                   "speedup_vs_cublas")
ELEM_BYTES = {"fp64": 8, "fp32": 4, "fp16": 2}
POINT = ["precision", "shape", "m", "n", "k", "batch"]


def roofline_ms(points: pd.DataFrame, bandwidth: float, beta_nonzero: bool) -> np.ndarray:
    """Fewest milliseconds the data movement allows at `bandwidth` bytes/s (read + write)."""
    m, n, k, b = (points[c].to_numpy(dtype=float) for c in ("m", "n", "k", "batch"))
    elem = points["precision"].map(ELEM_BYTES).to_numpy(dtype=float)
    words = m * k + k * n + m * n * (2.0 if beta_nonzero else 1.0)
    return b * elem * words / bandwidth * 1e3


def summary_frame(matrix: PerfMatrix, cublas: pd.DataFrame | None, bandwidth: float | None,
                  beta_nonzero: bool) -> pd.DataFrame:
    """One row per test point: the best verified instance, its time, roofline fraction and cuBLAS comparison.

    `cublas` has the point columns and `median_ms` (status ok only); missing values stay empty. A point
    where no instance has a verified time keeps an empty instance and time.
    """
    out = matrix.points[POINT].copy().reset_index(drop=True)
    if out.empty:
        return pd.DataFrame(columns=list(SUMMARY_COLUMNS))
    med = np.where(np.isfinite(matrix.median), matrix.median, np.inf)
    col = med.argmin(axis=1)
    has = np.isfinite(med[np.arange(len(out)), col])
    out["instance"] = np.where(has, matrix.instances[col], "")
    out["ms"] = np.where(has, med[np.arange(len(out)), col], np.nan)
    out["roofline_frac"] = roofline_ms(out, bandwidth, beta_nonzero) / out["ms"] if bandwidth else np.nan
    if cublas is not None and not cublas.empty:
        cb = cublas[POINT + ["median_ms"]].groupby(POINT, as_index=False).median()
        out = out.merge(cb.rename(columns={"median_ms": "cublas_ms"}), on=POINT, how="left")
    else:
        out["cublas_ms"] = np.nan
    out["speedup_vs_cublas"] = out["cublas_ms"] / out["ms"]
    return out[list(SUMMARY_COLUMNS)]


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _size(frame: pd.DataFrame) -> np.ndarray:
    return np.cbrt(frame["m"].to_numpy(float) * frame["n"].to_numpy(float) * frame["k"].to_numpy(float))


def plot_perf(summary: pd.DataFrame, table: DispatchTable, bandwidth: float | None, beta_nonzero: bool,
              path: Path) -> Path:
    plt = _pyplot()
    groups = list(summary.groupby(["precision", "shape"], sort=False))
    fig, axes = plt.subplots(len(groups) or 1, 1, figsize=(8, 3.6 * max(1, len(groups))), squeeze=False)
    best = pd.DataFrame(table.data["points"])
    for ax, ((precision, shape), g) in zip(axes[:, 0], groups):
        g = g.sort_values(["m", "n", "k", "batch"])
        x = _size(g)
        flops = 2.0 * g["m"] * g["n"] * g["k"] * g["batch"]
        b = best.merge(g[POINT], on=POINT).sort_values(["m", "n", "k", "batch"])
        ax.plot(_size(b), 2.0 * b["m"] * b["n"] * b["k"] * b["batch"] / (b["best_ms"] * 1e6), "k:",
                label="best measured instance")
        for inst, h in g.groupby("instance"):
            hf = 2.0 * h["m"] * h["n"] * h["k"] * h["batch"]
            ax.plot(_size(h), hf / (h["ms"] * 1e6), "o", ms=4, label=f"table: {inst}")
        if g["cublas_ms"].notna().any():
            ax.plot(x, flops / (g["cublas_ms"] * 1e6), "s-", ms=3, color="gray", label="cuBLAS")
        if bandwidth:
            ax.plot(x, flops / (roofline_ms(g, bandwidth, beta_nonzero) * 1e6), "r--", label="bandwidth roofline")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("size (M*N*K)^(1/3)")
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"{precision} {shape} on {table.provenance.get('device')}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_kernels_vs_tol(tol_frame: pd.DataFrame, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for (method, bk), g in tol_frame.groupby(["method", "bk"]):
        g = g.sort_values("tol")
        ax.plot(100 * g["tol"], g["kernels"], "o-" if method == "exact" else "s--",
                label=f"{method}, BK={bk if bk else 'all'}")
    ax.set_xlabel("TOL (%)")
    ax.set_ylabel("kernels to compile")
    ax.set_title("kernels against TOL (Table I)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_loss(table: DispatchTable, loo: pd.DataFrame | None, path: Path) -> Path:
    plt = _pyplot()
    pts = pd.DataFrame(table.data["points"])
    fig, ax = plt.subplots(figsize=(max(6, 0.18 * len(pts) + 2), 4))
    x = np.arange(len(pts))
    ax.bar(x, 100 * pts["loss"] if len(pts) else [], color="tab:blue", label="in sample")
    if loo is not None and not loo.empty:
        held = pts[POINT].merge(loo[POINT + ["loss"]], on=POINT, how="left")
        ax.plot(x, 100 * held["loss"], "rx", label="leave-one-out")
    tol = float(table.provenance.get("tol") or 0.0)
    ax.axhline(100 * tol, color="k", ls="--", lw=1, label=f"TOL = {100 * tol:g}%")
    ax.set_xticks(x)
    ax.set_xticklabels(pts["point_key"] if len(pts) else [], rotation=90, fontsize=5)
    ax.set_ylabel("loss vs best (%)")
    ax.set_title(f"loss per point ({table.provenance.get('method')}, {table.provenance.get('kernels')} kernels)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_report(out_dir: Path, table: DispatchTable, matrix: PerfMatrix, tol_frame: pd.DataFrame | None,
                 cublas: pd.DataFrame | None, bandwidth: float | None, beta_nonzero: bool,
                 loo: pd.DataFrame | None = None) -> list[Path]:
    """Write summary.csv, tol_table.csv (when given) and the PNG plots; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summary_frame(matrix, cublas, bandwidth, beta_nonzero)
    written = [out_dir / "summary.csv"]
    summary.to_csv(written[0], index=False, float_format="%.6g")
    if tol_frame is not None:
        written.append(out_dir / "tol_table.csv")
        tol_frame[list(TOL_TABLE_COLUMNS)].to_csv(written[-1], index=False, float_format="%.6g")
        written.append(plot_kernels_vs_tol(tol_frame, out_dir / "kernels_vs_tol.png"))
    written.append(plot_perf(summary, table, bandwidth, beta_nonzero, out_dir / "perf_vs_size.png"))
    written.append(plot_loss(table, loo, out_dir / "loss_per_point.png"))
    return written
