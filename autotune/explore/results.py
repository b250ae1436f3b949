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
which are capped at `MAX_PARCOORDS` rows (a seeded sample, said in the chart's note).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from autotune.explore.data import Results, numeric_codes, ok_frame
from autotune.explore.importance import importances
from autotune.explore.page import Page

MAX_PARCOORDS = 3000
MAX_POINTS_DETAIL = 1000  # above: per-parameter boxes from precomputed quartiles per group
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def add_results(page: Page, r: Results, top: int = 3, seed: int = 0) -> None:
    """Add the results sections of database `r` to `page`."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    ok = ok_frame(r)
    pts = r.points
    point_groups = _point_groups(page, r, ok)
    n_meas = len(r.measurements)
    page.notes.append(
        f"{r.source}: {n_meas:,} measurements ({len(ok):,} verified) of {r.instances.shape[0]:,} "
        f"instances at {len(pts):,} test points on {len(r.devices)} device(s), {len(r.sweeps)} sweep(s)."
    )
    if ok.empty:
        s = page.section("Results", "No verified measurement in this database: nothing to draw.")
        _outcomes(page, s, r, go)
        return

    # --- best per point and baseline ---------------------------------------------------------------------------
    s = page.section(
        "Best per test point and the baseline",
        "Each space's fastest verified instance at each point, as a fraction of the bandwidth roofline "
        "(MEASURING.md), beside the baseline library's time at the same point; and the speedup of the "
        "best over the baseline.",
    )
    order = _point_order(pts)
    large = len(pts) > MAX_POINTS_DETAIL  # then WebGL markers at numbered points instead of SVG at named ones
    Scatter = go.Scattergl if large else go.Scatter
    xtitle = "test point (numbered by kind, precision, shape, sizes)" if large else "test point"

    def xs(point_ids: pd.Series) -> np.ndarray:
        return order.reindex(point_ids).to_numpy() if large else pts["key"].reindex(point_ids).to_numpy()

    def keys(point_ids: pd.Series) -> np.ndarray:
        return pts["key"].reindex(point_ids).to_numpy().astype(object)

    best = ok.loc[ok.groupby(["device_id", "space", "point_id"])["median_ms"].idxmin()]
    best = best.assign(rank=order.reindex(best["point_id"]).to_numpy()).sort_values("rank")
    fig = go.Figure()
    for i, (space, b) in enumerate(best.groupby("space", sort=True)):
        fig.add_trace(
            Scatter(
                x=xs(b["point_id"]),
                y=b["roofline_frac"].to_numpy(),
                mode="markers",
                name=f"{space} (best)",
                marker=dict(color=PALETTE[i % len(PALETTE)], size=6),
                text=keys(b["point_id"]) + "<br>" + r.instances.loc[b["instance_id"], "name"].to_numpy(),
                customdata=b["median_ms"].to_numpy(),
                hovertemplate="%{text}<br>%{customdata:.4g} ms, roofline %{y:.3f}<extra></extra>",
                meta={"g": [point_groups[(d, p, space)] for d, p in zip(b["device_id"], b["point_id"], strict=True)]},
            )
        )
    base = r.baselines[(r.baselines["status"] == "ok") & r.baselines["point_id"].isin(pts.index)]
    if not base.empty:
        base = base.assign(rank=order.reindex(base["point_id"]).to_numpy()).sort_values("rank")
        fig.add_trace(
            Scatter(
                x=xs(base["point_id"]),
                y=base["roofline_frac"].to_numpy(),
                mode="markers",
                text=keys(base["point_id"]),
                name="baseline (" + ", ".join(sorted(set(base["library"].astype(str)))) + ")",
                marker=dict(color="black", symbol="x", size=6),
                customdata=base["median_ms"].to_numpy(),
                hovertemplate="%{text}<br>baseline %{customdata:.4g} ms, roofline %{y:.3f}<extra></extra>",
                meta={
                    "g": [point_groups[(d, p, None)] for d, p in zip(base["device_id"], base["point_id"], strict=True)]
                },
            )
        )
    fig.update_layout(
        xaxis=dict(title=xtitle, showticklabels=large or len(pts) <= 60),
        yaxis=dict(title="fraction of the bandwidth roofline"),
        legend=dict(orientation="h", y=-0.2),
    )
    page.add(s, "roofline", "Roofline fraction of the best instance and of the baseline, per test point", fig)

    overall = ok.loc[ok.groupby(["device_id", "point_id"])["median_ms"].idxmin()]
    if not base.empty:
        joined = overall.merge(
            base[["point_id", "device_id", "median_ms", "library"]],
            on=["point_id", "device_id"],
            suffixes=("", "_base"),
        )
        joined = joined.assign(rank=order.reindex(joined["point_id"]).to_numpy()).sort_values("rank")
        speed = joined["median_ms_base"].to_numpy() / joined["median_ms"].to_numpy()
        bars = (
            dict(mode="markers", marker=dict(size=4, color=np.where(speed >= 1, "#2ca02c", "#d62728")))
            if large
            else dict(marker=dict(color=np.where(speed >= 1, "#2ca02c", "#d62728")))
        )
        fig = go.Figure(
            (go.Scattergl if large else go.Bar)(
                x=xs(joined["point_id"]),
                y=speed,
                **bars,
                text=keys(joined["point_id"]) + "<br>" + r.instances.loc[joined["instance_id"], "name"].to_numpy(),
                hovertemplate="%{text}<br>speedup %{y:.3g}x<extra></extra>",
                name="speedup",
                meta={
                    "g": [
                        point_groups[(d, p, None)] for d, p in zip(joined["device_id"], joined["point_id"], strict=True)
                    ]
                },
            )
        )
        fig.update_layout(
            xaxis=dict(title=xtitle, showticklabels=large or len(pts) <= 60),
            yaxis=dict(title="baseline time / best time", type="log"),
        )
        page.add(
            s,
            "speedup",
            "Speedup of the best instance over the baseline (green: faster than the baseline)",
            fig,
            height=340,
        )

    # --- performance against each parameter ---------------------------------------------------------------------
    s = page.section(
        "Performance against each parameter",
        "For each value of a parameter, the best slowdown (time / the best time of any instance at the "
        "point) reached with that value, one box entry per test point: a value whose box sits at 1 "
        "holds the best instance at most points.",
    )
    for space in sorted(r.params):
        sub = ok[ok["space"] == space]
        if sub.empty:
            continue
        params = r.params[space].reindex(sub["instance_id"].to_numpy())
        params.index = sub.index
        names = [n for n in params.columns if params[n].nunique(dropna=True) >= 2]
        if not names:
            continue
        cols = min(3, len(names))
        rows = -(-len(names) // cols)
        fig = make_subplots(
            rows=rows, cols=cols, subplot_titles=names, vertical_spacing=0.5 / rows, horizontal_spacing=0.06
        )
        detailed = sub["point_id"].nunique() <= MAX_POINTS_DETAIL
        for i, name in enumerate(names):
            frame = pd.DataFrame(
                {
                    "device_id": sub["device_id"],
                    "point_id": sub["point_id"],
                    "value": params[name].astype(str),
                    "slowdown": sub["slowdown"],
                }
            )
            agg = frame.groupby(["device_id", "point_id", "value"], sort=False)["slowdown"].min().reset_index()
            vals = sorted(agg["value"].unique(), key=_value_order)
            row, col = i // cols + 1, i % cols + 1
            if detailed:
                box = go.Box(
                    x=agg["value"].to_numpy(),
                    y=agg["slowdown"].to_numpy(),
                    name=name,
                    boxpoints=False,
                    marker=dict(size=3, color=PALETTE[0]),
                    meta={
                        "g": [
                            point_groups[(d, p, space)] for d, p in zip(agg["device_id"], agg["point_id"], strict=True)
                        ]
                    },
                )
            else:  # many points: the boxes' statistics per (device, kind, precision, shape) group and value
                agg = agg.assign(
                    **{c: pts[c].reindex(agg["point_id"]).to_numpy() for c in ("kind", "precision", "shape")}
                )
                q = agg.groupby(["device_id", "kind", "precision", "shape", "value"], sort=False)["slowdown"]
                stats = pd.DataFrame(
                    {"q1": q.quantile(0.25), "median": q.median(), "q3": q.quantile(0.75), "lo": q.min(), "hi": q.max()}
                ).reset_index()
                dev = r.devices["name"]
                box = go.Box(
                    x=stats["value"].to_numpy(),
                    q1=stats["q1"].to_numpy(),
                    median=stats["median"].to_numpy(),
                    q3=stats["q3"].to_numpy(),
                    lowerfence=stats["lo"].to_numpy(),
                    upperfence=stats["hi"].to_numpy(),
                    name=name,
                    marker=dict(color=PALETTE[0]),
                    meta={
                        "g": [
                            page.group(
                                device=dev.get(d) if len(r.devices) > 1 else None,
                                kind=k,
                                precision=pr,
                                shape=sh,
                                space=space,
                            )
                            for d, k, pr, sh in zip(
                                stats["device_id"], stats["kind"], stats["precision"], stats["shape"], strict=True
                            )
                        ]
                    },
                )
            fig.add_trace(box, row=row, col=col)
            fig.update_xaxes(type="category", categoryorder="array", categoryarray=vals, row=row, col=col)
            fig.update_yaxes(type="log", row=row, col=col)
        fig.update_layout(showlegend=False)
        note = (
            ""
            if detailed
            else (
                f"{sub['point_id'].nunique():,} points: each box is drawn from its quartiles per "
                "kind, precision and shape (the test-point filter does not cut it)"
            )
        )
        page.add(
            s,
            f"param-{space}",
            f"{space}: best slowdown at each point, per parameter value",
            fig,
            note=note,
            height=70 + 230 * rows,
        )

    # --- parallel coordinates -----------------------------------------------------------------------------------
    s = page.section(
        "Parallel coordinates of the best instances",
        f"The {top} fastest verified instances of each space at each point: one line each, coloured by "
        "log2 slowdown (0: the best at its point).",
    )
    for space in sorted(r.params):
        sub = ok[ok["space"] == space]
        if sub.empty:
            continue
        ranked = sub.sort_values("median_ms").groupby(["device_id", "point_id"], sort=False).head(top)
        note = ""
        if len(ranked) > MAX_PARCOORDS:
            note = (
                f"{MAX_PARCOORDS:,} lines of {len(ranked):,}, a seeded uniform sample (every line is a "
                f"top-{top} instance at its point)"
            )
            ranked = ranked.sample(MAX_PARCOORDS, random_state=seed)
        params = r.params[space].reindex(ranked["instance_id"].to_numpy())
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
        slow = np.log2(ranked["slowdown"].to_numpy())
        dims.append(dict(label="log2 slowdown", values=slow))
        fig = go.Figure(
            go.Parcoords(
                dimensions=dims,
                line=dict(color=slow, colorscale="Viridis", showscale=False, cmin=0, cmax=max(float(slow.max()), 1e-6)),
                meta={
                    "g": [
                        point_groups[(d, p, space)]
                        for d, p in zip(ranked["device_id"], ranked["point_id"], strict=True)
                    ]
                },
            )
        )
        fig.update_layout(margin=dict(l=60, r=60, t=50, b=30))
        page.add(s, f"parcoords-{space}", f"{space}: top {top} per point", fig, note=note, height=380)

    # --- importance -----------------------------------------------------------------------------------------
    s = page.section(
        "Parameter importance",
        "Optuna's importance evaluators on the recorded measurements of each space: one trial per "
        "verified (instance, point), its value log2(slowdown). PED-ANOVA always; fANOVA and mean "
        "decrease in impurity too where scikit-learn is installed.",
    )
    ok = ok.assign(
        kind=pts["kind"].reindex(ok["point_id"]).to_numpy(),
        precision=pts["precision"].reindex(ok["point_id"]).to_numpy(),
    )
    for space in sorted(r.params):
        for (kind, precision), sub in ok[ok["space"] == space].groupby(["kind", "precision"]):
            params = r.params[space].reindex(sub["instance_id"].to_numpy()).reset_index(drop=True)
            found = importances(params, sub["slowdown"].to_numpy(), seed)
            if not found:
                continue
            fig = go.Figure()
            names = sorted({n for f in found for n in f.values}, key=lambda n: -found[0].values.get(n, 0))
            for i, f in enumerate(found):
                fig.add_trace(
                    go.Bar(
                        x=[f.values.get(n, 0.0) for n in names],
                        y=names,
                        orientation="h",
                        name=f.evaluator,
                        marker=dict(color=PALETTE[i]),
                        meta={"g": page.group(kind=kind, precision=precision, space=space)},
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
            page.add(
                s,
                f"importance-{space}-{kind}-{precision}",
                f"{space} ({kind}, {precision})",
                fig,
                note=note,
                height=max(220, 40 + 28 * len(names)),
            )

    # --- time ---------------------------------------------------------------------------------------------------
    s = page.section(
        "Where the time went",
        "Compile seconds (summed per measurement: compiles run in parallel and are cached, so this is "
        "work, not wall clock) and timed kernel seconds (repetitions x median) per test point. "
        "Verification is not recorded on its own: per sweep, it is in the rest of the wall clock.",
    )
    m = r.measurements
    timed = m["median_ms"].fillna(0) * m["reps"].fillna(0) / 1e3
    per = (
        pd.DataFrame(
            {
                "device_id": m["device_id"],
                "point_id": m["point_id"],
                "compile": m["compile_s"].fillna(0),
                "timed": timed,
            }
        )
        .groupby(["device_id", "point_id"])
        .sum()
        .reset_index()
    )
    per = per.assign(rank=order.reindex(per["point_id"]).to_numpy()).sort_values("rank")
    groups = [point_groups[(d, p, None)] for d, p in zip(per["device_id"], per["point_id"], strict=True)]
    x, text = xs(per["point_id"]), keys(per["point_id"])
    kind = (lambda **k: go.Scattergl(mode="markers", marker=dict(size=3), **k)) if large else go.Bar
    fig = go.Figure(
        [
            kind(x=x, y=per["compile"].to_numpy(), text=text, name="compile (s, summed)", meta={"g": groups}),
            kind(x=x, y=per["timed"].to_numpy(), text=text, name="timed kernels (s)", meta={"g": groups}),
        ]
    )
    fig.update_layout(
        barmode="stack",
        xaxis=dict(title=xtitle, showticklabels=large or len(pts) <= 60),
        yaxis=dict(title="seconds"),
        legend=dict(orientation="h"),
    )
    page.add(s, "time-points", "Compile and timing seconds per test point", fig, height=340)
    sweep_rows = []
    for sw in r.sweeps.itertuples():
        mine = m[m["sweep_id"] == sw.id]
        wall = (
            (pd.Timestamp(sw.finished_at) - pd.Timestamp(sw.started_at)).total_seconds()
            if sw.finished_at is not None and sw.started_at is not None
            else float("nan")
        )
        comp = float(mine["compile_s"].fillna(0).sum())
        tim = float((mine["median_ms"].fillna(0) * mine["reps"].fillna(0)).sum() / 1e3)
        sweep_rows.append(
            dict(
                sweep=f"{sw.id} {sw.config_name}",
                status=sw.status,
                measurements=len(mine),
                wall=wall,
                compile=comp,
                timed=tim,
                rest=max(wall - tim, 0.0) if wall == wall else float("nan"),
            )
        )
    if sweep_rows:
        names = [x["sweep"] for x in sweep_rows]
        fig = go.Figure(
            [
                go.Bar(y=names, x=[x["timed"] for x in sweep_rows], name="timed kernels (s)", orientation="h"),
                go.Bar(
                    y=names,
                    x=[x["rest"] for x in sweep_rows],
                    name="rest of the wall clock: compile waits, verification, launches, bookkeeping (s)",
                    orientation="h",
                ),
                go.Scatter(
                    y=names,
                    x=[x["compile"] for x in sweep_rows],
                    name="compile, summed over workers (s)",
                    mode="markers",
                    marker=dict(symbol="diamond", size=10, color="black"),
                ),
            ]
        )
        fig.update_layout(barmode="stack", xaxis=dict(title="seconds"), legend=dict(orientation="h", y=-0.3))
        page.add(
            s,
            "time-sweeps",
            "Per sweep: wall clock split into timed kernels and the rest",
            fig,
            height=max(220, 120 + 40 * len(sweep_rows)),
        )
    _outcomes(page, s, r, go)


def _outcomes(page: Page, s, r: Results, go) -> None:  # type: ignore[no-untyped-def]
    m = r.measurements
    space = r.instances["space"].reindex(m["instance_id"].to_numpy()).to_numpy()
    kinds = r.points["kind"].reindex(m["point_id"].to_numpy()).to_numpy()
    counts = (
        pd.DataFrame({"space": space, "kind": kinds, "status": m["status"].astype(str).to_numpy()})
        .groupby(["space", "kind", "status"])
        .size()
        .reset_index(name="n")
    )
    fig = go.Figure()
    for i, (status, c) in enumerate(counts.groupby("status")):
        fig.add_trace(
            go.Bar(
                x=c["space"].to_numpy(),
                y=c["n"].to_numpy(),
                name=status,
                marker=dict(color="#2ca02c" if status == "ok" else PALETTE[(i + 1) % len(PALETTE)]),
                meta={"g": [page.group(space=sp, kind=k) for sp, k in zip(c["space"], c["kind"], strict=True)]},
            )
        )
    fig.update_layout(barmode="stack", yaxis=dict(title="measurements"), legend=dict(orientation="h"))
    page.add(s, "outcomes", "Measurement outcomes per space", fig, height=320)


def _point_groups(page: Page, r: Results, ok: pd.DataFrame) -> dict:
    """(device id, point id, space or None) -> group id, for every pair the charts draw."""
    out: dict = {}
    dev = r.devices["name"].to_dict()
    spaces = sorted(r.params) + [None]
    pairs = set(zip(r.measurements["device_id"].tolist(), r.measurements["point_id"].tolist(), strict=True)) | set(
        zip(r.baselines["device_id"].tolist(), r.baselines["point_id"].tolist(), strict=True)
    )
    multi = len(dev) > 1
    rows = r.points[["kind", "precision", "shape", "key"]].to_dict("index")
    for d, p in pairs:
        row = rows.get(p)
        if row is None:
            continue
        for space in spaces:
            out[(d, p, space)] = page.group(
                device=dev.get(d) if multi else None,
                kind=row["kind"],
                precision=row["precision"],
                shape=row["shape"],
                point=row["key"],
                space=space,
            )
    return out


def _point_order(points: pd.DataFrame) -> pd.Series:
    """Rank of each point id: by kind, precision, shape, then sizes."""
    cols = ["kind", "precision", "shape"] + [
        c for c in points.columns if c not in ("kind", "precision", "shape", "key")
    ]
    ordered = points.sort_values(cols, kind="stable")
    return pd.Series(np.arange(len(ordered)), index=ordered.index)


def _value_order(v: str) -> tuple:
    try:
        return (0, float(v), "")
    except ValueError:
        return (1, 0.0, v)
