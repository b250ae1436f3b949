"""What each design choice buys: per test point, the best time of each group of instances.

A group is the set of instances sharing the value of one parameter (`by="NSG"`: NSG=1, NSG=2, ...)
or the same space (`by="space"`). Input is the measurements frame of one GPU
(`autotune.store.store.Store.measurements`); everything here is pure: DataFrame in, DataFrame out.

Which times count:
- `ok` measurements (verified, every repetition timed) and `skipped` ones: verified, then stopped
  early by the sweep because their first repetitions were all above 1.2 x best / (1 - TOL) at that
  point. A skipped median covers fewer repetitions and is known to be more than TOL slower than the
  best instance the sweep had measured there, so without a filter a skipped time is never the best.
  A group's time is its smallest median; when that comes from a skipped measurement (the group has no
  ok one at least as fast), `<group> skipped` is True: an estimate, not a full time. Skipped medians
  are not dropped because a group's ok instances may all be slow ones measured early: in the H100
  recording (results/default) a group's best ok time is up to 6x its best skipped one (DIM_X), and
  groups of NSG have only skipped measurements at the smallest sizes.
- failures (compile_error, wrong, launch_error, timeout, crashed) never count.

The best group at a point has the smallest time, ties to the first group; `<group> slowdown` = the
group's time / that time (>= 1). The best is an ok time unless `space` or `where` left out every
instance faster than the skipped ones (then the best group's `skipped` flag says so).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from autotune.errors import UserError
from autotune.expr import where_rows
from autotune.analysis.winners import Layout, sort_points

BY_SPACE = "space"
SLOWDOWN = " slowdown"  # column suffixes of a group's columns (the group's own column holds its ms)
SKIPPED = " skipped"


def parameter_columns(frame: pd.DataFrame) -> dict[str, str]:
    """Parameter name -> column of a measurements frame, for the parameters some row has a value of
    (a parameter named like a fixed column, e.g. `k`, is the column `param_k`)."""
    from autotune.store.store import MEASUREMENT_COLUMNS  # SQLAlchemy: not at the command line's start

    out = {}
    for col in frame.columns:
        if col in MEASUREMENT_COLUMNS or not frame[col].notna().any():
            continue
        name = col.removeprefix("param_")
        out[name if name in MEASUREMENT_COLUMNS else col] = col
    return out


def groups(result: pd.DataFrame) -> list[str]:
    """The group labels of a `compare` result (e.g. ['NSG=1', 'NSG=2']), in order."""
    return [c.removesuffix(SLOWDOWN) for c in result.columns if c.endswith(SLOWDOWN)]


def library_label(layout: Layout) -> str:
    """The library's name in column names: the kind's baseline_name, else "baseline"."""
    kind = layout.kind_object
    return kind.baseline_name if kind is not None and kind.baseline_name else "baseline"


def compare(
    frame: pd.DataFrame,
    by: str,
    space: str | None = None,
    where: str | None = None,
    library: pd.DataFrame | None = None,
    layout: Layout | None = None,
) -> pd.DataFrame:
    """One row per test point: the best time of each group of instances, the best group, slowdowns.

    `frame`: measurements of one GPU and one problem kind (`layout`: its sizes; default Layout.infer). `by`: a
    parameter name, or "space". `space`: only that space's instances. `where`: a filter over instance
    parameters in the space-file expression language. `library`: the point columns and `median_ms` (that GPU's
    verified times of the kind's library, its baseline), optional.

    Columns: precision, shape, the kind's sizes; per group label `<by>=<value>` its best ms; `best`
    (label of the fastest group, empty where no group has a time) and `best_ms`; per group
    `<label> slowdown` and `<label> skipped` (the time is a skipped measurement's); `<lib>_ms` and
    `speedup_vs_<lib>` (library ms / best ms; <lib> the kind's baseline_name, else "baseline").
    `result.attrs["without_by"]` counts the instances left out because they lack the parameter.
    Raises UserError for an unknown space or parameter, a bad filter, or no timed measurement left.
    """
    layout = layout or Layout.infer(frame)
    point = list(layout.columns)
    lib = library_label(layout)
    df = _of_space(frame, space)
    params = parameter_columns(df)
    col = _group_column(by, params, space)
    if where:
        df = df[_where(df, where, params)]
    timed = _timed(df, col, by, space, where)
    values = sorted(timed[col].unique(), key=_value_order)
    label = {v: f"{by}={_text(v)}" for v in values}
    labels = list(dict.fromkeys(label.values()))
    timed = timed.assign(_group=timed[col].map(label), median_ms=pd.to_numeric(timed["median_ms"]))
    points = sort_points(df[point].drop_duplicates(), layout)
    out = pd.concat([points, pd.DataFrame(_group_columns(timed, points, labels))], axis=1)
    out = _with_library(out, points, library, layout)
    out.attrs["library"] = lib
    out.attrs["layout"] = layout
    out.attrs["without_by"] = int(df.loc[df[col].isna(), "instance_id"].nunique())
    return out


def _of_space(frame: pd.DataFrame, space: str | None) -> pd.DataFrame:
    """The rows of `space` (all rows: None); UserError for a space not measured."""
    if space is None:
        return frame
    spaces = sorted(str(s) for s in frame["space"].dropna().unique())
    if space not in spaces:
        raise UserError(
            f"--space: no measurements of space {space!r}",
            hint=f"spaces measured on this GPU: {', '.join(spaces) or 'none'}",
        )
    return frame[frame["space"] == space]


def _group_column(by: str, params: dict[str, str], space: str | None) -> str:
    """The column whose values form the groups; UserError for a parameter no measured instance has."""
    if by == BY_SPACE:
        return "space"
    if by in params:
        return params[by]
    of = f" of space {space!r}" if space else ""
    raise UserError(
        f"--by: no parameter {by!r} in the measured instances{of}",
        hint=f"name one of: {', '.join(sorted(params)) or '(none)'}, or `--by space`",
    )


def _timed(df: pd.DataFrame, col: str, by: str, space: str | None, where: str | None) -> pd.DataFrame:
    """The verified (ok or skipped) measurements with a time and a group; UserError where none is left."""
    median = pd.to_numeric(df["median_ms"], errors="coerce")
    timed = df[df["status"].isin(("ok", "skipped")) & (median > 0) & df[col].notna()]
    if timed.empty:
        filters = " ".join(f"{k} {v!r}" for k, v in (("--space", space), ("--where", where)) if v)
        with_by = "" if by == BY_SPACE else f" with the parameter {by}"
        raise UserError(
            f"no verified (ok or skipped) measurement of an instance{with_by}"
            + (f" matching {filters}" if filters else ""),
            hint="check --space, --where and --device, or sweep those instances first",
        )
    return timed


def _group_columns(timed: pd.DataFrame, points: pd.DataFrame, labels: list[str]) -> dict[str, Any]:
    """Per point (a row of `points`): each group's time, the best group and its time, the slowdowns and the
    skipped flags (`compare`'s columns after the point's)."""
    point = list(points.columns)
    index = pd.MultiIndex.from_frame(points)

    def best_of(status: str) -> pd.DataFrame:
        rows = timed[timed["status"] == status]
        table = rows.groupby(point + ["_group"])["median_ms"].min().unstack("_group")
        return table.reindex(index=index, columns=labels).astype(float)

    ok, skipped = best_of("ok").to_numpy(), best_of("skipped").to_numpy()
    from_skipped = np.isfinite(skipped) & ~(ok <= skipped)  # no ok time at least as fast
    ms = np.where(from_skipped, skipped, ok)
    has = np.isfinite(ms).any(axis=1)
    pick = np.argmin(np.where(np.isfinite(ms), ms, np.inf), axis=1)  # ties: the first group in order
    best_ms = np.where(has, ms[np.arange(len(ms)), pick], np.nan)
    columns: dict[str, Any] = {g: ms[:, j] for j, g in enumerate(labels)}
    columns["best"] = np.where(has, np.asarray(labels, dtype=object)[pick], "")
    columns["best_ms"] = best_ms
    columns.update({g + SLOWDOWN: ms[:, j] / best_ms for j, g in enumerate(labels)})
    columns.update({g + SKIPPED: from_skipped[:, j] for j, g in enumerate(labels)})
    return columns


def _with_library(
    out: pd.DataFrame, points: pd.DataFrame, library: pd.DataFrame | None, layout: Layout
) -> pd.DataFrame:
    """`out` with the library's best time per point (`<lib>_ms`) and the speedup of the best group over it."""
    point = list(layout.columns)
    lib = library_label(layout)
    cb = pd.DataFrame(columns=point + ["median_ms"]) if library is None else library[point + ["median_ms"]]
    cb = cb.dropna(subset=list(layout.sizes)).astype({c: points[c].dtype for c in point})
    cb = cb.groupby(point, as_index=False)["median_ms"].min().rename(columns={"median_ms": f"{lib}_ms"})
    out = out.merge(cb, on=point, how="left")
    out[f"{lib}_ms"] = out[f"{lib}_ms"].astype(float)
    out[f"speedup_vs_{lib}"] = out[f"{lib}_ms"] / out["best_ms"]
    return out


def summarize(result: pd.DataFrame, layout: Layout | None = None) -> pd.DataFrame:
    """One row per group of a `compare` result: at how many points it is the best (`best_at`), at how
    many it has a time (`points`, `skipped_points` of them from skipped measurements), the geometric mean
    and worst slowdown over those points, and where it wins (`wins`: runs of consecutive points per
    precision and shape, e.g. 'fp64 NN 4x4x4..12x12x12')."""
    sizes = size_labels(result, layout or result.attrs["layout"])
    rows = []
    for g in groups(result):
        slow = result[g + SLOWDOWN].to_numpy(float)
        timed = np.isfinite(slow)
        wins = (result["best"] == g).to_numpy()
        rows.append(
            {
                "group": g,
                "best_at": int(wins.sum()),
                "points": int(timed.sum()),
                "skipped_points": int(result.loc[timed, g + SKIPPED].sum()),
                "geomean_slowdown": float(np.exp(np.log(slow[timed]).mean())) if timed.any() else math.nan,
                "worst_slowdown": float(slow[timed].max()) if timed.any() else math.nan,
                "wins": win_ranges(result, wins, sizes),
            }
        )
    return pd.DataFrame(
        rows, columns=["group", "best_at", "points", "skipped_points", "geomean_slowdown", "worst_slowdown", "wins"]
    )


def size_labels(result: pd.DataFrame, layout: Layout) -> list[str]:
    """The table sizes joined by x per row ('32x32x32'), plus ' name=value' of each tie size when the result has
    several values of it for one table size."""
    table, ties = list(layout.table_sizes), list(layout.tie_sizes)
    shown = [t for t in ties if result.duplicated(["precision", "shape", *table], keep=False).any()]
    return [
        "x".join(str(v) for v in row[: len(table)])
        + "".join(f" {n}={v}" for n, v in zip(shown, row[len(table) :], strict=True))
        for row in result[table + shown].itertuples(index=False)
    ]


def win_ranges(result: pd.DataFrame, wins: np.ndarray, sizes: list[str]) -> str:
    """The rows where `wins` holds, as runs of consecutive rows per (precision, shape):
    'fp64 NN 4x4x4..8x8x8, 32x32x32'."""
    parts = []
    keys = list(zip(result["precision"], result["shape"], strict=True))
    for key in dict.fromkeys(keys):
        rows = [i for i, k in enumerate(keys) if k == key]
        runs: list[list[int]] = []
        for pos, i in enumerate(rows):
            if wins[i]:
                if runs and pos > 0 and runs[-1][-1] == rows[pos - 1]:
                    runs[-1].append(i)
                else:
                    runs.append([i])
        if runs:
            text = ", ".join(sizes[r[0]] if len(r) == 1 else f"{sizes[r[0]]}..{sizes[r[-1]]}" for r in runs)
            parts.append(f"{key[0]} {key[1]} {text}")
    return "; ".join(parts)


def _where(df: pd.DataFrame, text: str, params: dict[str, str]) -> pd.Series:
    """Rows of `df` whose instance's parameters satisfy `text`."""
    inst = df.drop_duplicates("instance_id")
    env = {name: _array(inst[col]) for name, col in params.items()}
    keep = where_rows(text, env, len(inst), UserError, names=", ".join(sorted(params)) or "(no parameters)")
    return df["instance_id"].isin(inst["instance_id"][keep])


def _array(values: pd.Series) -> np.ndarray:
    """A parameter column as the expression language sees it: numbers (NaN where an instance lacks the
    parameter, so every comparison with it is false) or strings."""
    present = values.dropna()
    if len(present) and all(isinstance(v, str) for v in present):
        return values.fillna("").astype(str).to_numpy(dtype=str)
    return pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)


def _value_order(value: Any) -> tuple:
    number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    return (0, float(value), "") if number else (1, 0.0, str(value))


def _text(value: Any) -> str:
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)
