"""The results part of a report: what a sweep database shows about where the fast instances live.

Charts (each filterable by device, kind, precision, shape, space and test point):
- best time per point against the baseline library: roofline fraction of each space's best and of the baseline,
  and the speedup of the best over the baseline;
- performance against each parameter: for each value, the best slowdown (time / best at the point) that value
  reaches at each point, as a box over points;
- parallel coordinates of the `top` fastest instances at each point;
- parameter importance (Optuna's evaluators, `autotune.explore.importance`);
- where the sweep's time went: compile seconds and timed kernel seconds per point, and per sweep against its wall
  clock (verification is not recorded on its own: it is in the rest);
- measurement outcomes (ok, skipped, failures) per space.

Aggregation keeps a large database's page small: nothing is drawn per measurement except parallel coordinates,
which are capped at `results_params.MAX_PARCOORDS` rows (a seeded sample, said in the chart's note).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go  # this module is loaded by report.build, after require_plotly

from autotune.explore.data import Results
from autotune.explore.page import Page, Section
from autotune.explore.results_params import importance, parallel_coordinates, per_parameter
from autotune.explore.results_view import COLORS, ResultsView


def add_results(page: Page, r: Results, top: int = 3, seed: int = 0) -> None:
    """Add the results sections of database `r` to `page`."""
    view = ResultsView.of(page, r)
    page.notes.append(
        f"{r.source}: {len(r.measurements):,} measurements ({len(view.ok):,} verified) of {r.instances.shape[0]:,} "
        f"instances at {len(r.points):,} test points on {len(r.devices)} device(s), {len(r.sweeps)} sweep(s)."
    )
    if view.ok.empty:
        _outcomes(view, page.section("Results", "No verified measurement in this database: nothing to draw."))
        return
    _best_per_point(view)
    per_parameter(view)
    parallel_coordinates(view, top, seed)
    importance(view, seed)
    _time(view)


def _best_per_point(view: ResultsView) -> None:
    """Each space's best and the baseline as roofline fractions per point, and the speedup of the best."""
    s = view.page.section(
        "Best per test point and the baseline",
        "Each space's fastest verified instance at each point, as a fraction of the bandwidth roofline "
        "(MEASURING.md), beside the baseline library's time at the same point; and the speedup of the "
        "best over the baseline.",
    )
    base = _roofline(view, s)
    if not base.empty:
        _speedup(view, s, base)


def _roofline(view: ResultsView, s: Section) -> pd.DataFrame:
    """The roofline chart; returns the baseline rows it draws (verified, at the database's points)."""
    r, ok = view.r, view.ok
    Scatter = go.Scattergl if view.large else go.Scatter
    best = view.ranked(ok.loc[ok.groupby(["device_id", "space", "point_id"])["median_ms"].idxmin()])
    fig = go.Figure()
    for i, (space, b) in enumerate(best.groupby("space", sort=True)):
        fig.add_trace(
            Scatter(
                x=view.xs(b["point_id"]),
                y=b["roofline_frac"].to_numpy(),
                mode="markers",
                name=f"{space} (best)",
                marker=dict(color=COLORS[i % len(COLORS)], size=6),
                text=view.keys(b["point_id"]) + "<br>" + r.instances.loc[b["instance_id"], "name"].to_numpy(),
                customdata=b["median_ms"].to_numpy(),
                hovertemplate="%{text}<br>%{customdata:.4g} ms, roofline %{y:.3f}<extra></extra>",
                meta=view.meta(b, space),
            )
        )
    base = r.baselines[(r.baselines["status"] == "ok") & r.baselines["point_id"].isin(r.points.index)]
    if not base.empty:
        base = view.ranked(base)
        fig.add_trace(
            Scatter(
                x=view.xs(base["point_id"]),
                y=base["roofline_frac"].to_numpy(),
                mode="markers",
                text=view.keys(base["point_id"]),
                name="baseline (" + ", ".join(sorted(set(base["library"].astype(str)))) + ")",
                marker=dict(color="black", symbol="x", size=6),
                customdata=base["median_ms"].to_numpy(),
                hovertemplate="%{text}<br>baseline %{customdata:.4g} ms, roofline %{y:.3f}<extra></extra>",
                meta=view.meta(base),
            )
        )
    fig.update_layout(
        xaxis=view.xaxis, yaxis=dict(title="fraction of the bandwidth roofline"), legend=dict(orientation="h", y=-0.2)
    )
    view.page.add(s, "roofline", "Roofline fraction of the best instance and of the baseline, per test point", fig)
    return base


def _speedup(view: ResultsView, s: Section, base: pd.DataFrame) -> None:
    """The speedup of the best instance of any space over the baseline, per point."""
    ok = view.ok
    overall = ok.loc[ok.groupby(["device_id", "point_id"])["median_ms"].idxmin()]
    base = base[["point_id", "device_id", "median_ms", "library"]]
    joined = view.ranked(overall.merge(base, on=["point_id", "device_id"], suffixes=("", "_base")))
    speed = joined["median_ms_base"].to_numpy() / joined["median_ms"].to_numpy()
    fig = go.Figure(
        view.bars(
            4,
            x=view.xs(joined["point_id"]),
            y=speed,
            marker=dict(color=np.where(speed >= 1, "#2ca02c", "#d62728")),
            text=view.keys(joined["point_id"])
            + "<br>"
            + view.r.instances.loc[joined["instance_id"], "name"].to_numpy(),
            hovertemplate="%{text}<br>speedup %{y:.3g}x<extra></extra>",
            name="speedup",
            meta=view.meta(joined),
        )
    )
    fig.update_layout(xaxis=view.xaxis, yaxis=dict(title="baseline time / best time", type="log"))
    view.page.add(
        s,
        "speedup",
        "Speedup of the best instance over the baseline (green: faster than the baseline)",
        fig,
        height=340,
    )


def _time(view: ResultsView) -> None:
    """Where the sweep's time went, per point and per sweep, and the measurements' outcomes."""
    s = view.page.section(
        "Where the time went",
        "Compile seconds (summed per measurement: compiles run in parallel and are cached, so this is "
        "work, not wall clock) and timed kernel seconds (repetitions x median) per test point. "
        "Verification is not recorded on its own: per sweep, it is in the rest of the wall clock.",
    )
    m = view.r.measurements
    work = pd.DataFrame(
        {
            "device_id": m["device_id"],
            "point_id": m["point_id"],
            "sweep_id": m["sweep_id"],
            "compile": m["compile_s"].fillna(0),
            "timed": m["median_ms"].fillna(0) * m["reps"].fillna(0) / 1e3,
        }
    )
    _time_per_point(view, s, work)
    _time_per_sweep(view, s, work)
    _outcomes(view, s)


def _time_per_point(view: ResultsView, s: Section, work: pd.DataFrame) -> None:
    per = view.ranked(work.groupby(["device_id", "point_id"])[["compile", "timed"]].sum().reset_index())
    meta = view.meta(per)
    x, text = view.xs(per["point_id"]), view.keys(per["point_id"])
    fig = go.Figure(
        [
            view.bars(3, x=x, y=per["compile"].to_numpy(), text=text, name="compile (s, summed)", meta=meta),
            view.bars(3, x=x, y=per["timed"].to_numpy(), text=text, name="timed kernels (s)", meta=meta),
        ]
    )
    fig.update_layout(barmode="stack", xaxis=view.xaxis, yaxis=dict(title="seconds"), legend=dict(orientation="h"))
    view.page.add(s, "time-points", "Compile and timing seconds per test point", fig, height=340)


def _time_per_sweep(view: ResultsView, s: Section, work: pd.DataFrame) -> None:
    sweeps = view.r.sweeps
    if sweeps.empty:
        return
    per = work.groupby("sweep_id")[["compile", "timed"]].sum().reindex(sweeps["id"], fill_value=0)
    wall = (pd.to_datetime(sweeps["finished_at"]) - pd.to_datetime(sweeps["started_at"])).dt.total_seconds()
    rest = np.maximum(wall.to_numpy() - per["timed"].to_numpy(), 0.0)  # an unfinished sweep's NaN stays NaN
    names = (sweeps["id"].astype(str) + " " + sweeps["config_name"].astype(str)).tolist()
    fig = go.Figure(
        [
            go.Bar(y=names, x=per["timed"].to_numpy(), name="timed kernels (s)", orientation="h"),
            go.Bar(
                y=names,
                x=rest,
                name="rest of the wall clock: compile waits, verification, launches, bookkeeping (s)",
                orientation="h",
            ),
            go.Scatter(
                y=names,
                x=per["compile"].to_numpy(),
                name="compile, summed over workers (s)",
                mode="markers",
                marker=dict(symbol="diamond", size=10, color="black"),
            ),
        ]
    )
    fig.update_layout(barmode="stack", xaxis=dict(title="seconds"), legend=dict(orientation="h", y=-0.3))
    view.page.add(
        s,
        "time-sweeps",
        "Per sweep: wall clock split into timed kernels and the rest",
        fig,
        height=max(220, 120 + 40 * len(names)),
    )


def _outcomes(view: ResultsView, s: Section) -> None:
    r, page = view.r, view.page
    m = view.with_points(r.measurements[["point_id", "instance_id", "status"]], "kind")
    m = m.assign(space=r.instances["space"].reindex(m["instance_id"]).to_numpy(), status=m["status"].astype(str))
    counts = m.groupby(["space", "kind", "status"]).size().reset_index(name="n")
    fig = go.Figure()
    for i, (status, c) in enumerate(counts.groupby("status")):
        fig.add_trace(
            go.Bar(
                x=c["space"].to_numpy(),
                y=c["n"].to_numpy(),
                name=status,
                marker=dict(color="#2ca02c" if status == "ok" else COLORS[(i + 1) % len(COLORS)]),
                meta={"g": [page.group(space=sp, kind=k) for sp, k in zip(c["space"], c["kind"], strict=True)]},
            )
        )
    fig.update_layout(barmode="stack", yaxis=dict(title="measurements"), legend=dict(orientation="h"))
    page.add(s, "outcomes", "Measurement outcomes per space", fig, height=320)
