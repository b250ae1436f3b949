"""The results sections about the parameters: performance against each parameter's values, parallel coordinates of
the fastest instances, and parameter importance (see `autotune.explore.results` for the whole results part)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go  # this module is loaded by report.build, after require_plotly
from plotly.subplots import make_subplots

from autotune.explore.data import numeric_codes
from autotune.explore.importance import importances, ranked_names
from autotune.explore.page import Section
from autotune.explore.results_view import COLORS, MAX_POINTS_DETAIL, ResultsView

MAX_PARCOORDS = 3000


def per_parameter(view: ResultsView) -> None:
    """For each space, a box per parameter value of the best slowdown that value reaches at each point."""
    s = view.page.section(
        "Performance against each parameter",
        "For each value of a parameter, the best slowdown (time / the best time of any instance at the "
        "point) reached with that value, one box entry per test point: a value whose box sits at 1 "
        "holds the best instance at most points.",
    )
    for space, sub in view.by_space():
        _parameter_boxes(view, s, space, sub)


def _parameter_boxes(view: ResultsView, s: Section, space: str, sub: pd.DataFrame) -> None:
    params = view.r.params[space].reindex(sub["instance_id"].to_numpy())
    params.index = sub.index
    names = [n for n in params.columns if params[n].nunique(dropna=True) >= 2]
    if not names:
        return
    cols = min(3, len(names))
    rows = -(-len(names) // cols)
    fig = make_subplots(
        rows=rows, cols=cols, subplot_titles=names, vertical_spacing=0.5 / rows, horizontal_spacing=0.06
    )
    detailed = sub["point_id"].nunique() <= MAX_POINTS_DETAIL
    for i, name in enumerate(names):
        values = sub.assign(value=params[name].astype(str))
        agg = values.groupby(["device_id", "point_id", "value"], sort=False)["slowdown"].min().reset_index()
        vals = sorted(agg["value"].unique(), key=_value_order)
        row, col = i // cols + 1, i % cols + 1
        box = _box(view, space, name, agg) if detailed else _quartile_box(view, space, name, agg)
        fig.add_trace(box, row=row, col=col)
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=vals, row=row, col=col)
        fig.update_yaxes(type="log", row=row, col=col)
    fig.update_layout(showlegend=False)
    note = (
        f"{sub['point_id'].nunique():,} points: each box is drawn from its quartiles per "
        "kind, precision and shape (the test-point filter does not cut it)"
    )
    title = f"{space}: best slowdown at each point, per parameter value"
    view.page.add(s, f"param-{space}", title, fig, note="" if detailed else note, height=70 + 230 * rows)


def _box(view: ResultsView, space: str, name: str, agg: pd.DataFrame) -> Any:
    """A box of one parameter's values over the rows of `agg` (one per device, point and value)."""
    return go.Box(
        x=agg["value"].to_numpy(),
        y=agg["slowdown"].to_numpy(),
        name=name,
        boxpoints=False,
        marker=dict(size=3, color=COLORS[0]),
        meta=view.meta(agg, space),
    )


def _quartile_box(view: ResultsView, space: str, name: str, agg: pd.DataFrame) -> Any:
    """Many points: the boxes' statistics per (device, kind, precision, shape) group and value."""
    agg = view.with_points(agg, "kind", "precision", "shape")
    q = agg.groupby(["device_id", "kind", "precision", "shape", "value"], sort=False)["slowdown"]
    quartiles = {"q1": q.quantile(0.25), "median": q.median(), "q3": q.quantile(0.75)}
    stats = pd.DataFrame({**quartiles, "lowerfence": q.min(), "upperfence": q.max()}).reset_index()
    dev, multi = view.r.devices["name"], len(view.r.devices) > 1
    groups = [
        view.page.group(device=dev.get(d) if multi else None, space=space, **row)
        for d, row in zip(stats["device_id"], stats[["kind", "precision", "shape"]].to_dict("records"), strict=True)
    ]
    return go.Box(
        x=stats["value"].to_numpy(),
        **{c: stats[c].to_numpy() for c in ("q1", "median", "q3", "lowerfence", "upperfence")},
        name=name,
        marker=dict(color=COLORS[0]),
        meta={"g": groups},
    )


def parallel_coordinates(view: ResultsView, top: int, seed: int) -> None:
    """For each space, the `top` fastest instances at each point, one line each."""
    s = view.page.section(
        "Parallel coordinates of the best instances",
        f"The {top} fastest verified instances of each space at each point: one line each, coloured by "
        "log2 slowdown (0: the best at its point).",
    )
    for space, sub in view.by_space():
        _parcoords(view, s, space, sub, top, seed)


def _parcoords(view: ResultsView, s: Section, space: str, sub: pd.DataFrame, top: int, seed: int) -> None:
    ranked = sub.sort_values("median_ms").groupby(["device_id", "point_id"], sort=False).head(top)
    note = ""
    if len(ranked) > MAX_PARCOORDS:
        note = (
            f"{MAX_PARCOORDS:,} lines of {len(ranked):,}, a seeded uniform sample (every line is a "
            f"top-{top} instance at its point)"
        )
        ranked = ranked.sample(MAX_PARCOORDS, random_state=seed)
    dims = _dimensions(view.r.params[space].reindex(ranked["instance_id"].to_numpy()))
    slow = np.log2(ranked["slowdown"].to_numpy())
    dims.append(dict(label="log2 slowdown", values=slow))
    fig = go.Figure(
        go.Parcoords(
            dimensions=dims,
            line=dict(color=slow, colorscale="Viridis", showscale=False, cmin=0, cmax=max(float(slow.max()), 1e-6)),
            meta=view.meta(ranked, space),
        )
    )
    fig.update_layout(margin=dict(l=60, r=60, t=50, b=30))
    view.page.add(s, f"parcoords-{space}", f"{space}: top {top} per point", fig, note=note, height=380)


def _dimensions(params: pd.DataFrame) -> list[dict]:
    """A parallel-coordinates axis for each parameter of two values or more (labels for the ones not numbers)."""
    dims = []
    for name in params.columns:
        if params[name].nunique(dropna=True) < 2:
            continue
        values, labels = numeric_codes(params[name].fillna("-"))
        d = dict(label=name, values=values)
        if labels is not None:
            d.update(tickvals=list(range(len(labels))), ticktext=labels)
        elif len(np.unique(values)) <= 12:
            d.update(tickvals=sorted(np.unique(values).tolist()))
        dims.append(d)
    return dims


def importance(view: ResultsView, seed: int) -> None:
    """For each space, kind and precision, the parameters' importance by each of Optuna's evaluators."""
    s = view.page.section(
        "Parameter importance",
        "Optuna's importance evaluators on the recorded measurements of each space: one trial per "
        "verified (instance, point), its value log2(slowdown). PED-ANOVA always; fANOVA and mean "
        "decrease in impurity too where scikit-learn is installed.",
    )
    ok = view.with_points(view.ok, "kind", "precision")
    for space in sorted(view.r.params):
        for (kind, precision), sub in ok[ok["space"] == space].groupby(["kind", "precision"]):
            _importance_chart(view, s, (space, kind, precision), sub, seed)


def _importance_chart(view: ResultsView, s: Section, where: tuple, sub: pd.DataFrame, seed: int) -> None:
    space, kind, precision = where
    params = view.r.params[space].reindex(sub["instance_id"].to_numpy()).reset_index(drop=True)
    found = importances(params, sub["slowdown"].to_numpy(), seed)
    if not found:
        return
    fig = go.Figure()
    names = ranked_names(found)
    for i, f in enumerate(found):
        fig.add_trace(
            go.Bar(
                x=[f.values.get(n, 0.0) for n in names],
                y=names,
                orientation="h",
                name=f.evaluator,
                marker=dict(color=COLORS[i]),
                meta={"g": view.page.group(kind=kind, precision=precision, space=space)},
            )
        )
    fig.update_layout(
        xaxis=dict(title="importance (sums to 1 per evaluator)"),
        yaxis=dict(autorange="reversed"),
        barmode="group",
        legend=dict(orientation="h"),
    )
    sampled = found[0].trials < found[0].measured
    note = f"{found[0].trials:,} trials" + (
        f", a seeded sample of the {found[0].measured:,} verified measurements" if sampled else ""
    )
    view.page.add(
        s,
        f"importance-{space}-{kind}-{precision}",
        f"{space} ({kind}, {precision})",
        fig,
        note=note,
        height=max(220, 40 + 28 * len(names)),
    )


def _value_order(v: str) -> tuple:
    try:
        return (0, float(v), "")
    except ValueError:
        return (1, 0.0, v)
