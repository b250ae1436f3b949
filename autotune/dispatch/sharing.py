"""Kernels against TOL with and without sharing.

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
from autotune.analysis.winners import Criteria, Layout, perf_matrix, winners


def home_mask(frame: pd.DataFrame) -> np.ndarray:
    """Per row of a Store.measurements() frame: True where the instance's space `serves` the point (or the space
    has no `serves`, or cannot be read: then every measurement counts as home)."""
    from autotune.dispatch.validity import expr_env, expr_values, recorded_params
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
        for (_iid, precision), group in rows.groupby(["instance_id", "precision"], sort=False):
            params = recorded_params(space, group.iloc[0])
            try:
                env = {
                    **expr_values(space, params, str(precision)),
                    **expr_env(space.kind, [group[n].to_numpy(dtype=np.int64) for n in space.kind.size_names]),
                }
                ok = np.broadcast_to(np.asarray(space.eval(space.kernel.serves, env), dtype=bool), (len(group),))
            except Exception:  # noqa: BLE001 - an expression this instance cannot evaluate: keep it as home
                continue
            home[at[rows.index.get_indexer(group.index)]] = ok
    return home


def kernels_with_and_without_sharing(
    frame: pd.DataFrame, criteria: Criteria, tols: Sequence[float], method: str, layout: Layout | None = None
) -> pd.DataFrame | None:
    """One row per TOL: points, kernels (all measurements), kernels_home (only where the instances' spaces serve
    the points), uncovered_home (points no home measurement verified), and the worst and mean loss of each set's
    answers against the best of all measurements (worst_loss, mean_loss, worst_loss_home, mean_loss_home: fewer
    kernels from home measurements may cost speed). None when every measurement is a home one (no sharing)."""
    home = home_mask(frame)
    if home.all():
        return None
    full, own = perf_matrix(frame, layout), perf_matrix(frame[home], layout)
    rows = []
    for tol in tols:
        c = Criteria(bk=criteria.bk, tol=tol, spread_ties=criteria.spread_ties)
        wa, wb = winners(full, c), winners(own, c)
        a, b = select(wa, method, secondary=False), select(wb, method, secondary=False)
        best = pd.Series(wa.best_ms, index=full.points["point_key"].to_numpy())
        got = pd.Series(
            [own.median[r, col] if col >= 0 else np.nan for r, col in enumerate(b.assigned)],
            index=own.points["point_key"].to_numpy(),
        )
        home_loss = (1.0 - best.reindex(got.index) / got).clip(lower=0.0)
        rows.append(
            {
                "tol": tol,
                "points": len(full.points),
                "kernels": a.n_kernels,
                "kernels_home": b.n_kernels,
                "uncovered_home": len(b.uncovered) + len(full.points) - len(own.points),
                "worst_loss": a.worst_loss,
                "mean_loss": a.mean_loss,
                "worst_loss_home": float(home_loss.max()),
                "mean_loss_home": float(home_loss.mean()),
                "shared_measurements": int((~home).sum()),
            }
        )
    return pd.DataFrame(rows)
