"""Kernels against TOL with and without sharing (issue 15, item 5).

A sweep with `share: N` measures the BK best instances of each point also at nearby points where they are valid
(sweep/runner.py). `home_mask` tells which measurements were at points the instance's space assigns to it (its
`serves` expression: what a sweep without sharing measures); `kernels_with_and_without_sharing` selects the kernel
set at each TOL from all measurements and from the home measurements only, so the report shows what sharing buys.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from autotune.analysis.setcover import select
from autotune.analysis.winners import Criteria, perf_matrix, winners


def home_mask(frame: pd.DataFrame) -> np.ndarray:
    """Per row of a Store.measurements() frame: True where the instance's space `serves` the point (or the space
    has no `serves`, or cannot be read: then every measurement counts as home)."""
    from autotune.dispatch.validity import _values
    from autotune.space.spec import load_space

    home = np.ones(len(frame), dtype=bool)
    if "space" not in frame.columns or frame.empty:
        return home
    pos = np.arange(len(frame))
    for space_name, rows in frame.groupby("space", sort=False):
        try:
            space = load_space(str(space_name))
        except Exception:  # noqa: BLE001 - a space not on this machine: no sharing information
            continue
        if space.kernel is None or space.kernel.serves is None:
            continue
        at = pos[frame.index.get_indexer(rows.index)]
        for (iid, precision), group in rows.groupby(["instance_id", "precision"], sort=False):
            first = group.iloc[0]
            params = {}
            for p in space.param_names:
                col = p if p in group.columns else f"param_{p}"
                if col in group.columns and not pd.isna(first[col]):
                    v = first[col]
                    params[p] = int(v) if isinstance(v, (float, np.floating)) and float(v).is_integer() else v
            env = {**_values(space, params, str(precision)),
                   **{name: group[col].to_numpy(dtype=np.int64) for name, col in
                      (("M", "m"), ("N", "n"), ("K", "k"), ("batch", "batch"))}}
            try:
                ok = np.broadcast_to(np.asarray(space.eval(space.kernel.serves, env), dtype=bool), (len(group),))
            except Exception:  # noqa: BLE001 - an expression this instance cannot evaluate: keep it as home
                continue
            home[at[rows.index.get_indexer(group.index)]] = ok
    return home


def kernels_with_and_without_sharing(frame: pd.DataFrame, criteria: Criteria, tols: Sequence[float],
                                     method: str) -> pd.DataFrame | None:
    """One row per TOL: points, kernels (all measurements), kernels_home (only where the instances' spaces serve
    the points), uncovered_home (points no home measurement verified). None when every measurement is a home one
    (the sweep did not share)."""
    home = home_mask(frame)
    if home.all():
        return None
    full, own = perf_matrix(frame), perf_matrix(frame[home])
    rows = []
    for tol in tols:
        c = Criteria(bk=criteria.bk, tol=tol, spread_ties=criteria.spread_ties)
        a, b = select(winners(full, c), method, secondary=False), select(winners(own, c), method, secondary=False)
        rows.append({"tol": tol, "points": len(full.points), "kernels": a.n_kernels, "kernels_home": b.n_kernels,
                     "uncovered_home": len(b.uncovered) + len(full.points) - len(own.points),
                     "shared_measurements": int((~home).sum())})
    return pd.DataFrame(rows)
