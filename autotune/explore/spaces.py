"""The space part of a report: which constraint removes which region of a tuning space.

From one generation with the hard constraints only (`autotune.space.generator.generate(soft=False)`, exact), the
soft constraints are evaluated on the hard survivors, one by one in file order like the generator does. Above
`SAMPLE` hard survivors they are evaluated on a seeded uniform sample of them, and every figure after the soft
constraints says so (the soft steps of the funnel are then estimates: the sample's fraction times the count).

Charts: the funnel; each parameter's values raw, after the hard constraints and after all; two-parameter maps of the
fraction of raw combinations that survive, after the hard constraints, after all, and for each constraint on its
own (a seeded sample of `RAW_SAMPLE` raw combinations: what that constraint alone removes). A parameter of more
than `max_values()` values (AUTOTUNE_EXPLORE_MAX_VALUES, default 200) is drawn in bins of neighbouring values, so a
range of 2^24 values makes a page of the usual size (it took 9.2 GB and died drawing every value).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go  # this module is loaded by report.build, after require_plotly

from autotune.devices import DeviceLimits
from autotune.untrusted import env_number
from autotune.explore.page import Page, Section, table_html
from autotune.space.generator import FunnelStep, Generated, generate, where
from autotune.space.orders import param_deps
from autotune.space.spec import Space

SAMPLE = 1_000_000  # hard survivors above this: the soft constraints are evaluated on a sample
RAW_SAMPLE = 50_000  # raw combinations drawn for the maps of each constraint on its own
MAX_PAIRS = 12
MAX_VALUES = 200  # values of one parameter drawn one by one; more are drawn in bins of neighbouring values
MAX_VALUES_ENV = "AUTOTUNE_EXPLORE_MAX_VALUES"


def max_values() -> int:
    """Bars (and map rows or columns) one parameter gets at most: $AUTOTUNE_EXPLORE_MAX_VALUES, default 200."""
    return int(env_number(MAX_VALUES_ENV, MAX_VALUES, integer=True, lo=2, hi=100_000, example="500") or MAX_VALUES)


@dataclass(frozen=True)
class Bins:
    """A parameter's values as drawn: one bar per value, or above `max_values()` one per bin of `width` neighbouring
    values (in the space file's order)."""

    labels: list[str]
    width: int
    sizes: np.ndarray  # values in each bin

    @classmethod
    def of(cls, values: tuple, limit: int) -> Bins:
        n = len(values)
        width = -(-n // limit)
        starts = range(0, n, width)
        labels = [str(values[i]) if width == 1 else f"{values[i]}..{values[min(n, i + width) - 1]}" for i in starts]
        return cls(labels, width, np.array([min(width, n - i) for i in starts], dtype=float))

    def codes(self, codes: np.ndarray) -> np.ndarray:
        return codes // self.width if self.width > 1 else codes

    def count(self, codes: np.ndarray) -> np.ndarray:
        return _bincount(lambda rows: self.codes(codes[rows]), len(codes), len(self.labels))


CHUNK = 1 << 20  # rows per bincount: its integer copies stay small (a space's 47M hard survivors: 1.5 GB per grid)


def _bincount(cells: Callable[[slice], np.ndarray], n: int, length: int) -> np.ndarray:
    """np.bincount of the `n` values `cells(rows)` gives, taken CHUNK rows at a time (the same counts)."""
    counts = np.zeros(length, dtype=np.intp)
    for start in range(0, n, CHUNK):
        counts += np.bincount(cells(slice(start, start + CHUNK)), minlength=length)
    return counts


@dataclass
class Explored:
    space: Space
    hard: Generated  # survivors of the hard constraints (all of them)
    rows: np.ndarray  # rows of `hard` evaluated against the soft constraints (all, or a sample)
    keep: np.ndarray  # per row of `rows`: passes every applied soft constraint
    funnel: list[FunnelStep]  # exact hard steps, soft steps exact or estimated
    sampled: bool
    seconds: float


def explore_space(
    space: Space,
    device: DeviceLimits,
    precision: str | None = None,
    soft_off: tuple[str, ...] = (),
    no_soft: bool = False,
    seed: int = 0,
    max_raw: int | None = None,
    max_survivors: int | None = None,
) -> Explored:
    import time

    start = time.perf_counter()
    hard = generate(space, device, precision, soft=False, max_raw=max_raw, max_survivors=max_survivors)
    n = hard.count
    sampled = n > SAMPLE
    rows = np.sort(np.random.default_rng(seed).choice(n, SAMPLE, replace=False)) if sampled else np.arange(n)
    sub = _subset(hard, rows)
    keep = np.ones(len(rows), dtype=bool)
    funnel = list(hard.funnel)
    applied = [c for c in space.soft if not no_soft and c.name not in soft_off]
    for c in applied:
        alive = np.flatnonzero(keep)
        if len(alive):
            ok = where(_subset(sub, alive), c.expr.text, label=f"soft constraint {c.name}")
            keep[alive[~ok]] = False
        remaining = int(keep.sum()) if not sampled else int(round(keep.mean() * n)) if len(keep) else 0
        funnel.append(FunnelStep("soft", c.name, c.reason, remaining, funnel[-1].remaining - remaining, c.line))
    return Explored(space, hard, rows, keep, funnel, sampled, time.perf_counter() - start)


def _subset(g: Generated, rows: np.ndarray) -> Generated:
    codes = {k: v[rows] for k, v in g.codes.items()}
    return Generated(
        g.space, g.device, g.precision, g.soft_applied, codes, [FunnelStep("raw", "rows", "", len(rows), 0)], 0.0
    )


COLORS = {"raw": "#7f7f7f", "hard": "#d62728", "soft": "#ff7f0e"}


@dataclass(frozen=True)
class SpaceView:
    """An explored space as its charts see it."""

    page: Page
    e: Explored
    group: int  # the page group of every trace: the space and precision
    sample_note: str  # said under each figure after the soft constraints ("" when they saw every hard survivor)
    limit: int  # bars one parameter gets at most (`max_values()`)
    bins: dict[str, Bins]  # parameter -> its values as drawn

    @property
    def raw(self) -> int:
        return self.e.funnel[0].remaining

    @property
    def final_rows(self) -> np.ndarray:
        """The rows of the hard survivors that pass every soft constraint (of the sample, when sampled)."""
        return self.e.rows[self.e.keep]

    @property
    def scale(self) -> float:
        """Hard survivors per row evaluated against the soft constraints."""
        return self.e.hard.count / len(self.e.rows) if self.e.sampled and len(self.e.rows) else 1.0

    @property
    def after_all(self) -> str:
        return "after all" + (" (estimated)" if self.e.sampled else "")


def add_space(page: Page, e: Explored, seed: int = 0) -> None:
    """Add the sections of an explored space to `page`: the funnel, the parameter values, the two-parameter maps."""
    space, hard = e.space, e.hard
    sample_note = (
        f"The soft constraints were evaluated on a seeded uniform sample of {len(e.rows):,} of the "
        f"{hard.count:,} hard survivors: their counts are estimates."
        if e.sampled
        else ""
    )
    page.notes.append(f"{space.name}: {space.description}")
    page.notes.append(
        f"device {hard.device.name}, precision {hard.precision}: {e.funnel[0].remaining:,} raw combinations, "
        f"{hard.count:,} after the hard constraints, {e.funnel[-1].remaining:,} after the soft ones"
        f"{' (estimated)' if e.sampled else ''}; explored in {e.seconds:.1f} s."
    )
    if sample_note:
        page.notes.append(sample_note)
    group = page.group(space=space.name, precision=hard.precision)
    limit = max_values()
    bins = {p.name: Bins.of(p.values, limit) for p in space.parameters}
    view = SpaceView(page, e, group, sample_note, limit, bins)
    _funnel(view)
    _values(view)
    _maps(view, seed)


def _funnel(view: SpaceView) -> None:
    """The combinations that remain after each constraint: a chart and a table."""
    funnel = view.e.funnel
    s = view.page.section(
        "Funnel",
        "Raw combinations, then what remains after each hard constraint (in the order the "
        "generator applies them) and each soft constraint (file order).",
    )
    labels = [f"{f.name} ({f.kind})" if f.kind != "raw" else f.name for f in funnel]
    fig = go.Figure(
        go.Bar(
            y=labels,
            x=[max(f.remaining, 1) for f in funnel],
            orientation="h",
            marker=dict(color=[COLORS[f.kind] for f in funnel]),
            text=[f"{f.remaining:,}" + (f" (-{f.removed:,})" if f.kind != "raw" else "") for f in funnel],
            textposition="auto",
            customdata=[f.reason for f in funnel],
            hovertemplate="%{y}<br>%{text}<br>%{customdata}<extra></extra>",
            meta={"g": view.group},
        )
    )
    fig.update_layout(
        xaxis=dict(type="log", title="remaining combinations (log)"), yaxis=dict(autorange="reversed", automargin=True)
    )
    view.page.add(
        s,
        "funnel",
        "Funnel: remaining after each constraint",
        fig,
        note=view.sample_note,
        height=max(260, 60 + 30 * len(funnel)),
    )
    columns = ["step", "kind", "remaining", "removed", "line", "reason"]
    cells = [(f.name, f.kind, f.remaining, f.removed if f.kind != "raw" else None, f.line, f.reason) for f in funnel]
    s.html = table_html([dict(zip(columns, row, strict=True)) for row in cells], columns)


def _values(view: SpaceView) -> None:
    """How many combinations hold each value of each parameter: raw, after the hard constraints, after all."""
    e, group = view.e, view.group
    s = view.page.section(
        "Parameter values before and after",
        "How many combinations hold each value: raw (every value equally), after the hard constraints, "
        "after all constraints (log scale).",
    )
    binned = [f"{p.name} ({len(p.values):,} values)" for p in e.space.parameters if view.bins[p.name].width > 1]
    if binned:
        view.page.notes.append(
            f"Drawn in bins of neighbouring values (at most {view.limit} per parameter, {MAX_VALUES_ENV}): "
            f"{', '.join(binned)}."
        )
    for p in e.space.parameters:
        pbins = view.bins[p.name]
        labels, n = pbins.labels, len(p.values)
        after_hard = pbins.count(e.hard.codes[p.name])
        after_all = pbins.count(e.hard.codes[p.name][view.final_rows]) * view.scale
        layers = (("raw", "raw", view.raw / n * pbins.sizes), ("after hard", "hard", after_hard))
        fig = go.Figure(
            [
                go.Bar(x=labels, y=y, name=name, marker=dict(color=COLORS[kind]), meta={"g": group})
                for name, kind, y in (*layers, (view.after_all, "soft", after_all))
            ]
        )
        fig.update_layout(
            barmode="group",
            yaxis=dict(type="log", title="combinations"),
            xaxis=dict(type="category", title=p.name),
            legend=dict(orientation="h"),
        )
        shown = f"{n:,} values" + (f" in bins of {pbins.width:,}" if pbins.width > 1 else "")
        view.page.add(s, f"values-{p.name}", f"{p.name} ({shown})", fig, height=280)


def _maps(view: SpaceView, seed: int) -> None:
    """For each pair of parameters that share a constraint, the fraction of raw combinations that survive."""
    space, hard = view.e.space, view.e.hard
    s = view.page.section(
        "Two-parameter maps",
        "The fraction of the raw combinations holding each pair of values that survive: after the hard "
        "constraints, after all of them, and under each constraint on its own (menu above each map; "
        f"a constraint on its own is drawn from a seeded sample of {RAW_SAMPLE:,} raw combinations). "
        "Pairs are those of parameters that share a constraint.",
    )
    raw_codes = {
        p.name: np.random.default_rng(seed + i).integers(0, len(p.values), RAW_SAMPLE)
        for i, p in enumerate(space.parameters)
    }
    raw_g = Generated(
        space, hard.device, hard.precision, (), raw_codes, [FunnelStep("raw", "sample", "", RAW_SAMPLE, 0)], 0.0
    )
    alone = {}
    for c in (*space.hard, *space.soft):
        try:
            alone[c] = where(raw_g, c.expr.text, label=f"{c.kind} constraint {c.name}")
        except Exception:  # noqa: BLE001 - a constraint that cannot be evaluated alone is left out of the menus
            continue
    for a, b in pairs(space):
        _map(view, s, (a, b), _map_layers(view, (a, b), raw_codes, alone))


def _map_layers(view: SpaceView, pair: tuple[str, str], raw_codes: dict, alone: dict) -> list[tuple[str, np.ndarray]]:
    """The map's layers, labelled: kept after the hard constraints, after all, and under each constraint alone (of
    `alone`: constraint -> the rows of the raw sample `raw_codes` it keeps) that involves the pair."""
    a, b = pair
    e, final_rows = view.e, view.final_rows
    ba, bb = view.bins[a], view.bins[b]
    n_raw = int(ba.sizes.sum()) * int(bb.sizes.sum())  # the values of a times those of b
    cell_raw = view.raw / n_raw * np.outer(ba.sizes, bb.sizes)  # raw combinations in each cell
    zs = [
        ("after hard", _grid(ba, bb, e.hard.codes[a], e.hard.codes[b]) / cell_raw),
        (
            view.after_all,
            _grid(ba, bb, e.hard.codes[a][final_rows], e.hard.codes[b][final_rows]) * view.scale / cell_raw,
        ),
    ]
    drawn = np.maximum(_grid(ba, bb, raw_codes[a], raw_codes[b]), 1)
    for c, kept in alone.items():
        if {a, b} & param_deps(e.space, c.expr.names):
            zs.append((f"{c.name} alone ({c.kind})", _grid(ba, bb, raw_codes[a][kept], raw_codes[b][kept]) / drawn))
    return zs


def _map(view: SpaceView, s: Section, pair: tuple[str, str], zs: list[tuple[str, np.ndarray]]) -> None:
    """A heatmap of the first layer of `zs`, with a menu of all of them."""
    a, b = pair
    fig = go.Figure(
        go.Heatmap(
            z=zs[0][1],
            x=view.bins[b].labels,
            y=view.bins[a].labels,
            zmin=0,
            colorscale="Viridis",
            colorbar=dict(title="kept"),
            hovertemplate=f"{a}=%{{y}} {b}=%{{x}}<br>kept %{{z:.3g}}<extra></extra>",
            meta={"g": view.group},
        )
    )
    fig.update_layout(
        xaxis=dict(title=b, type="category"),
        yaxis=dict(title=a, type="category"),
        updatemenus=[
            dict(
                buttons=[dict(label=label, method="restyle", args=[{"z": [z]}]) for label, z in zs],
                x=0,
                y=1.18,
                xanchor="left",
                yanchor="top",
            )
        ],
        margin=dict(l=60, r=20, t=60, b=50),
    )
    view.page.add(s, f"map-{a}-{b}", f"{a} x {b}", fig, height=380)


def _grid(ba: Bins, bb: Bins, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Combinations in each (bin of a, bin of b) cell, of the codes `a` and `b` of one set of rows."""
    na, nb = len(ba.labels), len(bb.labels)

    def cells(rows: slice) -> np.ndarray:
        return ba.codes(a[rows]).astype(np.int64) * nb + bb.codes(b[rows]).astype(np.int64)

    return _bincount(cells, len(a), na * nb).reshape(na, nb).astype(float)


def pairs(space: Space, limit: int = MAX_PAIRS) -> list[tuple[str, str]]:
    """Parameter pairs worth a map: those that appear together in a constraint, the most shared first."""
    names = list(space.param_names)
    if len(names) < 2:
        return []
    shared: dict[tuple[str, str], int] = {}
    for c in (*space.hard, *space.soft):
        deps = sorted(param_deps(space, c.expr.names), key=names.index)
        for a, b in itertools.combinations(deps, 2):
            shared[(a, b)] = shared.get((a, b), 0) + 1
    ranked = sorted(shared, key=lambda k: (-shared[k], names.index(k[0]), names.index(k[1])))
    if not ranked:
        ranked = list(itertools.combinations(names, 2))
    return ranked[:limit]
