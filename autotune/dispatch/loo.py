"""Leave-one-out loss of a dispatch table, and the kernels-against-TOL study (the paper's Table I).

Leave-one-out: each test point p in turn is removed from the analysis; winners, the kernel set and the
dispatch table are rebuilt from the other points of p's (precision, shape) group (the other groups
cannot influence a lookup of p), with the same validity predicates and library times; the table is asked
for p as an untuned problem, and the measured time of the answer at p (a kernel's verified time, or the
library's) is compared with the best measured instance time at p. Where the answer was not measured at p
(an instance the sweep never ran there, the naive kernel, the library without a time), its loss is
unknown: the point's loss stays NaN and `measured` is False; nothing is made up. `interior` marks held-out
points inside the box of the remaining tuned sizes (between tuned ones): `worst_loss` is taken over the
measured interior points when there are any interior points, otherwise over all measured points
(extrapolation); `measured` / `total` count the points of that set.
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

TOL_TABLE_COLUMNS = ("method", "bk", "tol", "kernels", "worst_loss", "mean_loss", "loo_worst_loss", "loo_measured")


@dataclass(frozen=True)
class LooResult:
    frame: pd.DataFrame  # one row per held-out point: point columns, interior, instance_id, answer, loss, measured
    worst_loss: float  # NaN when no held-out answer was measured
    mean_loss: float
    measured: int  # held-out points (of the reported set) where the answer's time is known
    total: int  # held-out points in the reported set

    @property
    def failures(self) -> int:
        """Held-out points whose answer has no verified time there (loss unknown)."""
        return self.total - self.measured

    @property
    def measured_text(self) -> str:
        return f"{self.measured}/{self.total}"


def leave_one_out(matrix: PerfMatrix, criteria: Criteria, method: str, *,
                  kernel_info: Mapping[tuple[str, str, str], KernelInfo] | None = None,
                  library_ms: np.ndarray | None = None, fallback: str = "library",
                  secondary: bool = False, time_limit_s: float = 10.0) -> LooResult:
    """Held-out loss at every point (see the module docstring). `library_ms`: the library's time per point
    row (NaN: not measured). secondary=False skips the exact method's worst/mean tie-breaks for speed (the
    kernel count is the same)."""
    full = winners(matrix, criteria)
    lib = np.full(len(matrix.points), np.nan) if library_ms is None else np.asarray(library_ms, dtype=float)
    records = []
    for (precision, shape), rows in matrix.groups:
        xyz = matrix.points.iloc[rows][["m", "n", "k"]].to_numpy()
        for pos, p in enumerate(rows):
            rec = {**matrix.points.iloc[p].to_dict(), "interior": False, "instance_id": None, "answer": None,
                   "loss": math.nan, "measured": False}
            if not np.isfinite(full.best_ms[p]):
                continue  # nothing verified here: there is no loss to measure
            rest = np.delete(rows, pos)
            if len(rest) == 0:
                continue
            others = np.delete(xyz, pos, axis=0)
            rec["interior"] = bool(((others.min(axis=0) <= xyz[pos]) & (xyz[pos] <= others.max(axis=0))).all())
            w = full.take_points(rest)  # winners are per point: no need to recompute
            sel = select(w, method, time_limit_s=time_limit_s, secondary=secondary)
            table = build_table(w, sel, Provenance(device="leave-one-out"), kernel_info, library_ms=lib[rest],
                                fallback=fallback)
            pt = matrix.points.iloc[p]
            choice = table.lookup(precision, shape, int(pt["m"]), int(pt["n"]), int(pt["k"]), int(pt["batch"]))
            iid = choice.get("instance_id")
            rec["instance_id"] = iid
            if choice.get("library"):
                rec["answer"] = "library"
                if np.isfinite(lib[p]):
                    rec["loss"], rec["measured"] = float(max(0.0, 1.0 - full.best_ms[p] / lib[p])), True
            elif choice.get("generic"):
                rec["answer"] = "generic"
            else:
                rec["answer"] = "kernel"
                col = np.searchsorted(matrix.instances, iid) if iid is not None else -1
                if 0 <= col < len(matrix.instances) and matrix.instances[col] == iid and np.isfinite(full.loss[p, col]):
                    rec["loss"], rec["measured"] = float(max(0.0, full.loss[p, col])), True
            records.append(rec)
    frame = pd.DataFrame.from_records(records)
    if frame.empty:
        return LooResult(frame, math.nan, math.nan, 0, 0)
    pick = frame[frame["interior"]] if frame["interior"].any() else frame
    known = pick["loss"][pick["measured"]]
    return LooResult(frame, float(known.max()) if len(known) else math.nan,
                     float(known.mean()) if len(known) else math.nan, int(len(known)), int(len(pick)))


def tol_table(matrix: PerfMatrix, bks: Sequence[int | None], tols: Sequence[float],
              methods: Sequence[str] = ("greedy", "exact"), *, loo: bool = True, spread_ties: bool = False,
              time_limit_s: float = 60.0, kernel_info: Mapping[tuple[str, str, str], KernelInfo] | None = None,
              library_ms: np.ndarray | None = None, fallback: str = "library") -> pd.DataFrame:
    """Kernels, worst and mean loss (in sample) and leave-one-out worst loss per (method, BK, TOL).

    The first columns are TOL_TABLE_COLUMNS (what tol_table.csv holds: `loo_worst_loss` is empty where no
    held-out answer was measured, `loo_measured` = measured / held-out points); `loo_mean_loss`,
    `loo_failures` (held-out answers without a time), `optimal`, `secondary` and `solve_s` follow.
    """
    rows = []
    for bk in bks:
        for tol in tols:
            criteria = Criteria(bk=bk, tol=tol, spread_ties=spread_ties)
            w = winners(matrix, criteria)
            for method in methods:
                sel = select(w, method, time_limit_s=time_limit_s)
                held = leave_one_out(matrix, criteria, method, kernel_info=kernel_info, library_ms=library_ms,
                                     fallback=fallback) if loo else None
                rows.append({"method": method, "bk": bk if bk is not None else 0, "tol": tol,
                             "kernels": sel.n_kernels, "worst_loss": sel.worst_loss, "mean_loss": sel.mean_loss,
                             "loo_worst_loss": held.worst_loss if held else math.nan,
                             "loo_measured": held.measured_text if held else "",
                             "loo_mean_loss": held.mean_loss if held else math.nan,
                             "loo_failures": held.failures if held else 0,
                             "optimal": sel.optimal, "secondary": sel.secondary, "solve_s": sel.solve_s})
    return pd.DataFrame.from_records(rows)
