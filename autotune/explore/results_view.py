"""A results database as the results charts see it: the verified rows, the test points in drawing order, and the
filter group of every (device, point, space) a chart draws. The sections of `autotune.explore.results` and
`autotune.explore.results_params` share it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pandas as pd
import plotly.graph_objects as go  # this module is loaded by report.build, after require_plotly

from autotune.explore.data import Results, ok_frame
from autotune.explore.page import PALETTE, Page

MAX_POINTS_DETAIL = 1000  # above: per-parameter boxes from precomputed quartiles per group
COLORS = PALETTE[:10]  # the results' charts cycle through the first ten colours


@dataclass(frozen=True)
class ResultsView:
    page: Page
    r: Results
    ok: pd.DataFrame  # the verified measurements with `space` and `slowdown` (`data.ok_frame`)
    order: pd.Series  # point id -> its rank by kind, precision, shape, then sizes
    groups: dict  # (device id, point id, space or None) -> the page's group id
    large: bool  # then WebGL markers at numbered points instead of SVG at named ones

    @classmethod
    def of(cls, page: Page, r: Results) -> ResultsView:
        ok = ok_frame(r)
        groups = point_groups(page, r)
        return cls(page, r, ok, point_order(r.points), groups, len(r.points) > MAX_POINTS_DETAIL)

    @property
    def xaxis(self) -> dict:
        """The x axis of a chart over test points."""
        title = "test point (numbered by kind, precision, shape, sizes)" if self.large else "test point"
        return dict(title=title, showticklabels=self.large or len(self.r.points) <= 60)

    def xs(self, point_ids: pd.Series) -> np.ndarray:
        """The x of each point: its rank when large, else its key."""
        return (self.order if self.large else self.r.points["key"]).reindex(point_ids).to_numpy()

    def bars(self, size: int, **trace: Any) -> Any:
        """A bar per test point; when large, WebGL markers of `size` instead."""
        if not self.large:
            return go.Bar(**trace)
        return go.Scattergl(mode="markers", marker=dict(trace.pop("marker", {}), size=size), **trace)

    def keys(self, point_ids: pd.Series) -> np.ndarray:
        return self.r.points["key"].reindex(point_ids).to_numpy().astype(object)

    def ranked(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The rows of `frame` (with a point_id) in drawing order, their rank in a column `rank`."""
        return frame.assign(rank=self.order.reindex(frame["point_id"]).to_numpy()).sort_values("rank")

    def with_points(self, frame: pd.DataFrame, *columns: str) -> pd.DataFrame:
        """`frame` (with a point_id) with these columns of each row's point added."""
        return frame.assign(**{c: self.r.points[c].reindex(frame["point_id"]).to_numpy() for c in columns})

    def meta(self, frame: pd.DataFrame, space: str | None = None) -> dict:
        """A trace's meta: the group of each row's (device, point, space)."""
        return {"g": [self.groups[(d, p, space)] for d, p in zip(frame["device_id"], frame["point_id"], strict=True)]}

    def by_space(self) -> Iterator[tuple[str, pd.DataFrame]]:
        """Each space with verified measurements, and those measurements."""
        for space in sorted(self.r.params):
            sub = self.ok[self.ok["space"] == space]
            if not sub.empty:
                yield space, sub


def point_groups(page: Page, r: Results) -> dict:
    """(device id, point id, space or None) -> group id, for every pair the charts draw."""
    out: dict = {}
    dev = r.devices["name"].to_dict()
    spaces = sorted(r.params) + [None]
    pairs = set(zip(r.measurements["device_id"].tolist(), r.measurements["point_id"].tolist(), strict=True)) | set(
        zip(r.baselines["device_id"].tolist(), r.baselines["point_id"].tolist(), strict=True)
    )
    multi = len(dev) > 1
    rows = r.points[["kind", "precision", "shape", "key"]].rename(columns={"key": "point"}).to_dict("index")
    for d, p in pairs:
        row = rows.get(p)
        if row is None:
            continue
        for space in spaces:
            out[(d, p, space)] = page.group(device=dev.get(d) if multi else None, space=space, **row)
    return out


def point_order(points: pd.DataFrame) -> pd.Series:
    """Rank of each point id: by kind, precision, shape, then sizes."""
    cols = ["kind", "precision", "shape"] + [
        c for c in points.columns if c not in ("kind", "precision", "shape", "key")
    ]
    ordered = points.sort_values(cols, kind="stable")
    return pd.Series(np.arange(len(ordered)), index=ordered.index)
