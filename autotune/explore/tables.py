"""The table part of a report: a dispatch table (analyzer output), its TOL sweep, and `validate`'s held-out problems.

Reads the files the analyzer and `autotune validate` write, as they are: `dispatch.json` (its `points`: the kernel
chosen at each measured point, its loss against the best; its `regions`: boxes over the table sizes), `tol_table.csv`
(kernels and losses against TOL) and `validation/validation.csv` (per held-out problem: the table's choice, the best
measured, `loss_vs_best`). Charts are filterable by precision, shape, kind and test point.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd
import plotly.graph_objects as go  # this module is loaded by report.build, after require_plotly

from autotune.errors import UserError
from autotune.explore.page import PALETTE, Page, Section


@dataclass
class TableFiles:
    dispatch: Path
    tol_table: Path | None
    validation: Path | None


def find_table(path: Path) -> TableFiles:
    """The table files of a folder (or beside a dispatch.json): dispatch.json, tol_table.csv, validation/."""
    folder = path if path.is_dir() else path.parent
    dispatch = path if path.is_file() else folder / "dispatch.json"
    if not dispatch.is_file():
        raise UserError(f"no dispatch.json in {folder}", hint="give the output folder of `autotune analyze`")
    tol = folder / "tol_table.csv"
    val = next((p for p in (folder / "validation" / "validation.csv", folder / "validation.csv") if p.is_file()), None)
    return TableFiles(dispatch, tol if tol.is_file() else None, val)


@dataclass(frozen=True)
class TableView:
    """A dispatch table as its charts see it."""

    page: Page
    table: dict  # dispatch.json as read
    kind: str
    names: dict  # kernel index -> name (-1: generic, -2: the library)
    sizes: list[str]  # the table's sizes; the charts draw the first two

    def size_columns(self, frame: pd.DataFrame) -> list[str]:
        """The size columns of `frame`, in the table's order of size names."""
        return [c for c in (self.table.get("size_names") or self.sizes) if c in frame.columns]

    def point_keys(self, frame: pd.DataFrame, size_columns: list[str]) -> list[str]:
        """Each row's point as the results database names it (TestPoint.key), so one point filter serves both."""
        return [  # an empty shape (a kind without shapes) reads back from CSV as NaN: "-" as the database names it
            f"{self.kind}:{r['precision']}:{r['shape'] if isinstance(r['shape'], str) and r['shape'] else '-'}:"
            + "x".join(str(r[c]) for c in size_columns)
            for r in frame.to_dict("records")
        ]

    def groups(self, precision: str, shape: str, keys: Iterable[str]) -> list[int]:
        return [self.page.group(kind=self.kind, precision=precision, shape=shape, point=k) for k in keys]


def add_table(page: Page, files: TableFiles) -> None:
    """Add the sections of a dispatch table, its TOL sweep and its validation (where there are files) to `page`."""
    table = _read(files.dispatch)
    kernels = table.get("kernels", [])
    names = {i: k.get("name", k.get("instance_id", str(i))) for i, k in enumerate(kernels)}
    names.update({-1: "generic", -2: (table.get("library") or {}).get("name", "library")})
    sizes = list(table.get("table_sizes") or table.get("size_names") or [])
    view = TableView(page, table, str(table.get("kind", "gemm")), names, sizes)
    prov = table.get("provenance", {})
    page.notes.append(
        f"{files.dispatch}: {len(kernels)} kernels over {len(table.get('points', []))} points, "
        f"TOL {prov.get('tol')}, worst loss {prov.get('worst_loss', float('nan')):.3g}, mean loss "
        f"{prov.get('mean_loss', float('nan')):.3g} ({prov.get('device', '')})"
    )
    _wins(view)
    if files.tol_table is not None:
        _tol(page, files.tol_table)
    if files.validation is not None:
        _validation(view, files.validation)


def _read(path: Path) -> dict:
    hint = "give a dispatch.json written by `autotune analyze`"
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read the dispatch table {path}: {exc}", hint=hint) from None
    if table.get("format") != "autotune-dispatch":
        raise UserError(f"{path} is not a dispatch table (format {table.get('format')!r})", hint=hint)
    return table


def _wins(view: TableView) -> None:
    """Which kernel the table chooses at each measured point, per precision and shape, and its loss there."""
    sizes = view.sizes
    s = view.page.section(
        "Which kernel wins where",
        f"Each measured point at its first two table sizes ({', '.join(sizes[:2])}; the others in the "
        "hover), coloured by the kernel the table chooses, with the table's regions drawn as boxes over "
        "the same sizes (projected) in the chosen kernel's colour.",
    )
    points = pd.DataFrame(view.table.get("points", []))
    if points.empty or len(sizes) < 2:
        return
    points = pd.concat([points.drop(columns=["sizes"]), pd.DataFrame(list(points["sizes"]))], axis=1)
    points["point_key"] = view.point_keys(points, view.size_columns(points))
    for (precision, shape), sub in points.groupby(["precision", "shape"], sort=True):
        _wins_chart(view, s, precision, shape, sub)
    _loss(view, s, points)


def _wins_chart(view: TableView, s: Section, precision: str, shape: str, sub: pd.DataFrame) -> None:
    sizes, names = view.sizes, view.names
    fig = go.Figure()
    chosen = sorted(sub["kernel"].unique())
    color = {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(chosen)}
    for reg in view.table.get("regions", []):
        if (reg.get("precision"), reg.get("shape")) != (precision, shape) or reg.get("kernel") not in color:
            continue
        (x0, x1), (y0, y1) = reg["bounds"][sizes[0]], reg["bounds"][sizes[1]]
        fig.add_trace(
            go.Scatter(
                x=[x0 - 0.5, x1 + 0.5, x1 + 0.5, x0 - 0.5, x0 - 0.5],
                y=[y0 - 0.5, y0 - 0.5, y1 + 0.5, y1 + 0.5, y0 - 0.5],
                mode="lines",
                fill="toself",
                opacity=0.15,
                line=dict(color=color[reg["kernel"]], width=1),
                hoverinfo="skip",
                showlegend=False,
                meta={"g": view.page.group(kind=view.kind, precision=precision, shape=shape)},
            )
        )
    for k in chosen:
        pk = sub[sub["kernel"] == k]
        extra = [c for c in sizes[2:] + ["batch"] if c in pk.columns]
        text = [
            f"{names.get(int(k), k)}<br>" + ", ".join(f"{c}={row[c]}" for c in extra) + f"<br>loss {row['loss']:.3g}"
            for _, row in pk.iterrows()
        ]
        fig.add_trace(
            go.Scatter(
                x=pk[sizes[0]].to_numpy(),
                y=pk[sizes[1]].to_numpy(),
                mode="markers",
                name=str(names.get(int(k), k)),
                marker=dict(color=color[k], size=9, line=dict(width=0.5, color="white")),
                text=text,
                hovertemplate=f"{sizes[0]}=%{{x}} {sizes[1]}=%{{y}}<br>%{{text}}<extra></extra>",
                meta={"g": view.groups(precision, shape, pk["point_key"])},
            )
        )
    fig.update_layout(xaxis=dict(title=sizes[0]), yaxis=dict(title=sizes[1]), legend=dict(font=dict(size=9)))
    view.page.add(s, f"wins-{precision}-{shape}", f"{precision} {shape}", fig, height=460)


def _loss(view: TableView, s: Section, points: pd.DataFrame) -> None:
    fig = go.Figure()
    for i, ((precision, shape), sub) in enumerate(points.groupby(["precision", "shape"], sort=True)):
        sub = sub.sort_values("loss")
        fig.add_trace(
            go.Scatter(
                x=np.arange(len(sub)),
                y=sub["loss"].to_numpy(),
                mode="markers",
                name=f"{precision} {shape}",
                marker=dict(color=PALETTE[i % len(PALETTE)]),
                text=sub["point_key"].to_numpy(),
                hovertemplate="%{text}<br>loss %{y:.3g}<extra></extra>",
                meta={"g": view.groups(precision, shape, sub["point_key"])},
            )
        )
    fig.update_layout(
        xaxis=dict(title="measured points, by loss"), yaxis=dict(title="loss of the table's choice (1 - best / chosen)")
    )
    view.page.add(s, "table-loss", "Loss of the table at the measured points", fig, height=320)


def _tol(page: Page, path: Path) -> None:
    """Kernels and losses against TOL, from the analyzer's tol_table.csv."""
    tol = pd.read_csv(path)
    s = page.section(
        "Kernels against TOL",
        f"From {path}: how many kernels the table needs for each "
        "tolerance, and what it loses (worst and mean over the measured points; leave-one-out worst "
        "where recorded).",
    )
    fig = go.Figure()
    for i, (method, sub) in enumerate(tol.groupby("method")):
        fig.add_trace(
            go.Scatter(
                x=sub["tol"].to_numpy(),
                y=sub["kernels"].to_numpy(),
                mode="lines+markers",
                name=f"kernels ({method})",
                marker=dict(color=PALETTE[i]),
            )
        )
        for j, col in enumerate(c for c in ("worst_loss", "mean_loss", "loo_worst_loss") if c in sub.columns):
            fig.add_trace(
                go.Scatter(
                    x=sub["tol"].to_numpy(),
                    y=sub[col].to_numpy(),
                    mode="lines+markers",
                    name=f"{col} ({method})",
                    yaxis="y2",
                    line=dict(dash=["dot", "dash", "dashdot"][j], color=PALETTE[i]),
                )
            )
    fig.update_layout(
        xaxis=dict(title="TOL"),
        yaxis=dict(title="kernels"),
        yaxis2=dict(title="loss", overlaying="y", side="right"),
        legend=dict(orientation="h", y=-0.25),
    )
    page.add(s, "tol", "Kernels and loss against TOL", fig, height=380)


def _validation(view: TableView, path: Path) -> None:
    """The loss of the table's choice at each held-out problem of `autotune validate`."""
    val = pd.read_csv(path)
    s = view.page.section(
        "Validation on held-out problems",
        f"From {path} (`autotune validate`): at each held-out problem, the loss of the "
        "table's choice against the best kernel measured there.",
    )
    val["point_key"] = view.point_keys(val, view.size_columns(val))
    fig = go.Figure()
    for i, ((precision, shape), sub) in enumerate(val.groupby(["precision", "shape"])):
        sub = sub.sort_values("loss_vs_best")
        ks = sub["point_key"].tolist()
        fig.add_trace(
            go.Bar(
                x=ks,
                y=sub["loss_vs_best"].to_numpy(),
                name=f"{precision} {shape}",
                marker=dict(color=PALETTE[i % len(PALETTE)]),
                text=[
                    f"table {a}, best {b}"
                    for a, b in zip(
                        sub.get("table_choice", ""), sub.get("best_choice", ""), strict=False
                    )  # a missing column: no hover text
                ],
                hovertemplate="%{x}<br>loss %{y:.3g}<br>%{text}<extra></extra>",
                meta={"g": view.groups(precision, shape, ks)},
            )
        )
    fig.update_layout(
        xaxis=dict(title="held-out problem", showticklabels=len(val) <= 60),
        yaxis=dict(title="loss vs the best measured"),
        legend=dict(orientation="h"),
    )
    view.page.add(
        s,
        "validation",
        f"Loss per held-out problem ({len(val)} problems, worst "
        f"{val['loss_vs_best'].max():.3g}, mean {val['loss_vs_best'].mean():.3g})",
        fig,
        height=360,
    )
