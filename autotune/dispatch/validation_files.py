"""What `autotune validate` writes besides the measurements: validation.csv, validation.png and the summary's
figures per (precision, shape) group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from autotune.dispatch.validate import SLOW_VS_BASELINE
from autotune.problems.base import ProblemKind


def to_csv(frame: pd.DataFrame, path: str | Path) -> Path:
    """validation.csv: the frame's columns, 9 significant digits, empty cells for unknown values (reproducible)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False, float_format="%.9g", lineterminator="\n")
    return path


def summarize(frame: pd.DataFrame, tol: float = 0.05) -> list[dict[str, Any]]:
    """Per (precision, shape) group and overall ("all"): problems, measured answers, median and worst loss against
    the best, problems within TOL, problems where the answer is < 0.97x the baseline's speed, answers not
    measured."""

    def one(label: str, f: pd.DataFrame) -> dict[str, Any]:
        loss = pd.to_numeric(f["loss_vs_best"], errors="coerce").dropna()
        speed = pd.to_numeric(f["speedup_vs_baseline"], errors="coerce")
        return {
            "group": label,
            "problems": len(f),
            "measured": len(loss),
            "median_loss": float(loss.median()) if len(loss) else None,
            "worst_loss": float(loss.max()) if len(loss) else None,
            "within_tol": int((loss <= tol + 1e-12).sum()),
            "slower_than_baseline": int((speed < SLOW_VS_BASELINE).sum()),
            "not_measured": int(pd.to_numeric(f["table_ms"], errors="coerce").isna().sum()),
        }

    out = [one(f"{p} {s}".strip(), g) for (p, s), g in frame.groupby(["precision", "shape"], sort=False)]
    return out + [one("all", frame)]


def plot(frame: pd.DataFrame, kind: ProblemKind, path: str | Path) -> Path:
    """validation.png: loss against the best and speedup over the baseline, against the product of the kind's
    table sizes (GEMM: M*N*K; log), per precision."""
    from autotune.dispatch.report import pyplot, saved

    plt = pyplot()
    path = Path(path)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    names = kind.table_sizes()
    size = np.prod([frame[n].astype(float).to_numpy() for n in names], axis=0) if len(frame) else np.array([])
    label = "*".join(n.upper() if len(n) == 1 else n for n in names)
    markers = {"fp64": "o", "fp32": "s", "fp16": "^"}
    for ax, col in ((ax1, "loss_vs_best"), (ax2, "speedup_vs_baseline")):
        for precision, g in frame.groupby("precision", sort=False):
            y = pd.to_numeric(g[col], errors="coerce")
            known = y.notna().to_numpy()
            if known.any():
                ax.scatter(
                    size[g.index.to_numpy()][known],
                    y[known],
                    marker=markers.get(str(precision), "x"),
                    label=str(precision),
                    alpha=0.7,
                )
        if ax.collections:
            ax.set_xscale("log")
        else:
            ax.text(0.5, 0.5, "nothing measured", ha="center", va="center", transform=ax.transAxes)
    ax1.set(xlabel=label, ylabel="loss vs best candidate", title="table answer: loss vs best")
    ax2.axhline(SLOW_VS_BASELINE, color="red", linestyle="--", linewidth=1, label=f"{SLOW_VS_BASELINE}x")
    ax2.set(xlabel=label, ylabel="baseline ms / table ms", title="table answer vs baseline")
    for ax in (ax1, ax2):
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    return saved(plt, fig, path, dpi=110)


def finite_or_none(x: Any) -> Any:
    return None if isinstance(x, float) and not np.isfinite(x) else x
