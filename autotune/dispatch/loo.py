"""Leave-one-out loss of a dispatch table, and the kernels-against-TOL study (the paper's Table I).

Leave-one-out: each test point p in turn is removed from the analysis; winners, the kernel set and the
dispatch table are rebuilt from the other points of p's (precision, shape) group (the other groups
cannot influence a lookup of p); the table is asked for p as an untuned problem, and the measured time
of the answer at p is compared with the best measured time at p. A table whose answer was not measured
or failed at p counts as a loss of 1.0 (`failed`). `interior` marks held-out points inside the box of
the remaining tuned sizes (between tuned ones): `worst_loss` is taken over interior points when there
are any, otherwise over all points (extrapolation).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from autotune.dispatch.table import KernelInfo, Provenance, build_table
from autotune.analysis.setcover import select
from autotune.analysis.winners import Criteria, PerfMatrix, winners

TOL_TABLE_COLUMNS = ("method", "bk", "tol", "kernels", "worst_loss", "mean_loss", "loo_worst_loss")


@dataclass(frozen=True)
class LooResult:
    frame: pd.DataFrame  # one row per held-out point: point columns, interior, instance_id, loss, failed
    worst_loss: float
    mean_loss: float
    failures: int  # held-out points where the table's answer was not verified there


def leave_one_out(matrix: PerfMatrix, criteria: Criteria, method: str, *,
                  kernel_info: Mapping[tuple[str, str, str], KernelInfo] | None = None,
                  secondary: bool = False, time_limit_s: float = 10.0) -> LooResult:
    """Held-out loss at every point (see the module docstring). secondary=False skips the exact
    method's worst/mean tie-breaks for speed (the kernel count is the same)."""
    full = winners(matrix, criteria)
    records = []
    for (precision, shape), rows in matrix.groups:
        xyz = matrix.points.iloc[rows][["m", "n", "k"]].to_numpy()
        for pos, p in enumerate(rows):
            rec = {**matrix.points.iloc[p].to_dict(), "interior": False, "instance_id": None,
                   "loss": math.nan, "failed": False}
            if not np.isfinite(full.best_ms[p]):
                continue  # nothing verified here: there is no loss to measure
            rest = np.delete(rows, pos)
            if len(rest) == 0:
                continue
            others = np.delete(xyz, pos, axis=0)
            rec["interior"] = bool(((others.min(axis=0) <= xyz[pos]) & (xyz[pos] <= others.max(axis=0))).all())
            w = full.take_points(rest)  # winners are per point: no need to recompute
            sel = select(w, method, time_limit_s=time_limit_s, secondary=secondary)
            table = build_table(w, sel, Provenance(device="leave-one-out"), kernel_info)
            pt = matrix.points.iloc[p]
            choice = table.lookup(precision, shape, int(pt["m"]), int(pt["n"]), int(pt["k"]), int(pt["batch"]))
            iid = choice.get("instance_id")
            rec["instance_id"] = iid
            col = np.searchsorted(matrix.instances, iid) if iid is not None else -1
            if col < 0 or col >= len(matrix.instances) or matrix.instances[col] != iid \
                    or not np.isfinite(full.loss[p, col]):
                rec["loss"], rec["failed"] = 1.0, True
            else:
                rec["loss"] = float(max(0.0, full.loss[p, col]))
            records.append(rec)
    frame = pd.DataFrame.from_records(records)
    if frame.empty:
        return LooResult(frame, math.nan, math.nan, 0)
    pick = frame[frame["interior"]] if frame["interior"].any() else frame
    return LooResult(frame, float(pick["loss"].max()), float(pick["loss"].mean()), int(pick["failed"].sum()))


def tol_table(matrix: PerfMatrix, bks: Sequence[int | None], tols: Sequence[float],
              methods: Sequence[str] = ("greedy", "exact"), *, loo: bool = True, spread_ties: bool = False,
              time_limit_s: float = 60.0) -> pd.DataFrame:
    """Kernels, worst and mean loss (in sample) and leave-one-out worst loss per (method, BK, TOL).

    The first columns are TOL_TABLE_COLUMNS (what tol_table.csv holds); `loo_mean_loss`, `loo_failures`, `optimal`,
    `secondary` and `solve_s` follow.
    """
    rows = []
    for bk in bks:
        for tol in tols:
            criteria = Criteria(bk=bk, tol=tol, spread_ties=spread_ties)
            w = winners(matrix, criteria)
            for method in methods:
                sel = select(w, method, time_limit_s=time_limit_s)
                held = leave_one_out(matrix, criteria, method) if loo else None
                rows.append({"method": method, "bk": bk if bk is not None else 0, "tol": tol,
                             "kernels": sel.n_kernels, "worst_loss": sel.worst_loss, "mean_loss": sel.mean_loss,
                             "loo_worst_loss": held.worst_loss if held else math.nan,
                             "loo_mean_loss": held.mean_loss if held else math.nan,
                             "loo_failures": held.failures if held else 0,
                             "optimal": sel.optimal, "secondary": sel.secondary, "solve_s": sel.solve_s})
    return pd.DataFrame.from_records(rows)
