#!/usr/bin/env python3
"""Figures of a seed reproduction (issue 56) from one results database of a seed sweep (configs/seeds/*.yaml).

Writes into --out and prints as Markdown:
- `table1.csv`: kernels against TOL at BK (the tensor-core paper's Table I), both reduction methods, with the
  reduction against TOL 0 and the worst and mean loss;
- `fig6.csv`: per test point, the served instance's time and GFLOP/s under the TOL 0 and the TOL --tol-high tables
  (exact method) and the drop between them (the paper's Figure 6), the TOL 0 instance's fraction of the roofline,
  and the kind's library (baseline) time, its roofline fraction and the speed-up of each table over it;
- `sweep.csv`: per sweep run of the database (a resumed sweep has several), its wall time from the `sweeps` table
  and the measurements it wrote, by status.
Figures are read from the database only (no GPU).

    python scripts/seed_repro.py results/seed_repro/hgemm_table1/seed_hgemm_table1.sqlite.xz \\
        --out results/seed_repro/hgemm_table1 --paper 0:11,0.05:8,0.1:8,0.15:7
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def _paper(text: str | None) -> dict[float, int]:
    """`0:11,0.05:8` -> {0.0: 11, 0.05: 8}: the paper's kernel counts by TOL."""
    if not text:
        return {}
    out = {}
    for item in text.split(","):
        tol, _, n = item.partition(":")
        out[float(tol)] = int(n)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", help="results database (.sqlite or .sqlite.xz)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--bk", type=int, default=10)
    ap.add_argument("--tols", default="0,0.05,0.1,0.15")
    ap.add_argument("--tol-high", type=float, default=0.15, help="the TOL Figure 6 compares with TOL 0")
    ap.add_argument("--paper", help="the paper's kernel counts, TOL:N,... (printed beside ours)")
    args = ap.parse_args(argv)

    from autotune.analysis.setcover import select, selection_frame
    from autotune.analysis.winners import Criteria, perf_matrix, winners
    from autotune.workflows.results import load_results as load, source_url
    from autotune.dispatch.report import work_per_point
    from autotune.store.query import run_query

    loaded = load(args.db, None, None)
    matrix = perf_matrix(loaded.frame, loaded.layout)
    tols = [float(t) for t in args.tols.split(",")]
    paper = _paper(args.paper)
    rows, frames = [], {}
    for tol in sorted(set(tols) | {0.0, args.tol_high}):
        w = winners(matrix, Criteria(bk=args.bk, tol=tol))
        for method in ("greedy", "exact"):
            sel = select(w, method)
            if tol in tols:
                rows.append(
                    dict(
                        method=method,
                        bk=args.bk,
                        tol=tol,
                        kernels=len(sel.kernels),
                        worst_loss=float(np.nanmax(sel.loss)),
                        mean_loss=float(np.nanmean(sel.loss)),
                        paper_kernels=paper.get(tol),
                    )
                )
            if method == "exact":
                frames[tol] = selection_frame(w, sel)
    table1 = pd.DataFrame(rows)
    base = table1[table1["tol"] == 0].set_index("method")["kernels"]
    table1["reduction"] = 1 - table1["kernels"] / table1["method"].map(base)

    sizes = list(loaded.layout.sizes)
    lo, hi = frames[0.0], frames[args.tol_high]
    fig6 = lo[["point_key", "precision", "shape", *sizes]].copy()
    fig6["instance_tol0"], fig6["ms_tol0"] = lo["instance_id"].values, lo["ms"].values
    fig6["instance_high"], fig6["ms_high"] = hi["instance_id"].values, hi["ms"].values
    flops = work_per_point(fig6, loaded.layout, "flops", loaded.scalars)
    fig6["gflops_tol0"] = flops / (fig6["ms_tol0"] * 1e6)
    fig6["gflops_high"] = flops / (fig6["ms_high"] * 1e6)
    fig6["drop"] = 1 - fig6["gflops_high"] / fig6["gflops_tol0"]
    keys = ["precision", "shape", *sizes]
    ok = loaded.frame[loaded.frame["status"] == "ok"]
    roof = ok.groupby([*keys, "instance_id"], as_index=False)["roofline_frac"].median()
    fig6 = fig6.merge(
        roof.rename(columns={"instance_id": "instance_tol0", "roofline_frac": "roofline_tol0"}),
        on=[*keys, "instance_tol0"],
        how="left",
    )
    if loaded.baseline is not None and len(loaded.baseline):
        lib = loaded.baseline.groupby(keys, as_index=False)[["median_ms", "roofline_frac"]].median()
        lib = lib.rename(columns={"median_ms": "library_ms", "roofline_frac": "library_roofline"})
        fig6 = fig6.merge(lib, on=keys, how="left")
        fig6["speedup_tol0"] = fig6["library_ms"] / fig6["ms_tol0"]
        fig6["speedup_high"] = fig6["library_ms"] / fig6["ms_high"]

    url = source_url(args.db)
    sweeps = run_query(
        url,
        "SELECT s.id AS sweep, s.started_at, s.finished_at, s.status AS ended, m.status, COUNT(*) AS n "
        "FROM sweeps s JOIN measurements m ON m.sweep_id = s.id GROUP BY s.id, m.status ORDER BY s.id, m.status",
    )
    sweeps["wall_s"] = (pd.to_datetime(sweeps["finished_at"]) - pd.to_datetime(sweeps["started_at"])).dt.total_seconds()

    args.out.mkdir(parents=True, exist_ok=True)
    table1.to_csv(args.out / "table1.csv", index=False)
    fig6.to_csv(args.out / "fig6.csv", index=False)
    sweeps.to_csv(args.out / "sweep.csv", index=False)
    _plot(fig6, sizes, args.tol_high, args.out / "fig6.png")

    fmt = {"worst_loss": "{:.2%}", "mean_loss": "{:.2%}", "reduction": "{:.1%}", "drop": "{:+.2%}"}
    for name, frame in (("Table I", table1), ("Figure 6", fig6.drop(columns=["point_key"])), ("sweeps", sweeps)):
        shown = frame.copy()
        for col, f in fmt.items():
            if col in shown:
                shown[col] = shown[col].map(lambda v, f=f: "" if pd.isna(v) else f.format(v))
        print(f"\n### {name}\n")
        print(_markdown(shown))
    per_run = sweeps.groupby("sweep").agg(wall_s=("wall_s", "first"), n=("n", "sum"))
    print(
        f"\nwhole experiment: {int(per_run['n'].sum()):,} pairs in {per_run['wall_s'].sum():.1f} s of sweep time "
        f"over {len(per_run)} run(s), {per_run['n'].sum() / per_run['wall_s'].sum():.1f} pairs/s"
    )
    return 0


def _markdown(frame: pd.DataFrame) -> str:
    """A pipe table (numbers to 4 significant digits)."""

    def cell(v) -> str:
        if isinstance(v, float):
            return "" if np.isnan(v) else f"{v:.4g}"
        return str(v)

    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def _series(fig6: pd.DataFrame, sizes: list[str]) -> tuple[str, list[str]]:
    """The x axis (the size with the most values, the first on a tie) and the columns whose values make the
    series: those that vary at one value of the axis (square sizes, n = k = m, are one series)."""
    axis = max(sizes, key=lambda s: (fig6[s].nunique(), -sizes.index(s)))
    others = [c for c in ("precision", "shape", *sizes) if c != axis and fig6.groupby(axis)[c].nunique().max() > 1]
    return axis, others


def _plot(fig6: pd.DataFrame, sizes: list[str], tol_high: float, path: Path) -> None:
    """GFLOP/s at TOL 0, at TOL --tol-high and of the library against the size that varies most, one colour per
    series (precision, shape and the other sizes where they vary independently of it), log x where the sizes span
    more than 20x; the drop below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axis, others = _series(fig6, sizes)
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(8, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    groups = fig6.groupby(others, sort=False) if others else [((), fig6)]
    for i, (key, g) in enumerate(groups):
        key = key if isinstance(key, tuple) else (key,)
        name = " ".join(f"{c}={v}" if c in sizes else str(v) for c, v in zip(others, key, strict=True))
        g = g.sort_values(axis)
        x, colour = g[axis].astype(float).values, f"C{i % 10}"
        ax.plot(x, g["gflops_tol0"], "o-", color=colour, label=f"{name} TOL 0%".strip())
        ax.plot(x, g["gflops_high"], "s--", color=colour, label=f"TOL {tol_high:.0%}" if i == 0 else None)
        if "library_ms" in g:
            ax.plot(
                x,
                g["gflops_tol0"] * g["ms_tol0"] / g["library_ms"],
                "^:",
                color=colour,
                label="library" if i == 0 else None,
            )
        bx.plot(x, 100 * g["drop"], "o-", color=colour)
    if fig6[axis].max() > 20 * fig6[axis].min():
        ax.set_xscale("log")
    ax.set_ylabel("GFLOP/s")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    bx.set_ylabel(f"drop % (TOL {tol_high:.0%})")
    bx.set_xlabel(axis)
    bx.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
