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
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import pandas as pd

from autotune.dispatch.table import STRUCTURES, Answers, Provenance, Structure, build_table
from autotune.analysis.setcover import select
from autotune.analysis.winners import Criteria, PerfMatrix, winners

TOL_TABLE_COLUMNS = tuple(
    "method bk tol kernels worst_loss mean_loss loo_worst_loss loo_measured loo_structure".split()
)


def describe(structure: Structure) -> str:
    """A structure as the commands print it: `model, library margin 10%` (`, reach 1` for cost)."""
    return (
        f"{structure.mode}, library margin {100 * structure.library_margin:g}%"
        + (f", reach {structure.reach:g}" if structure.mode == "cost" else "")
        + (f", {structure.neighbours} neighbours" if structure.neighbours != 1 else "")
    )


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


def leave_one_out(
    matrix: PerfMatrix,
    criteria: Criteria,
    method: str,
    *,
    answers: Answers = Answers(),
    secondary: bool = False,
    time_limit_s: float = 10.0,
    structure: Structure = Structure(),
) -> LooResult:
    """Held-out loss at every point (see the module docstring). `answers.library_ms`: the library's time per point
    row (NaN: not measured). secondary=False skips the exact method's worst/mean tie-breaks for speed (the
    kernel count is the same)."""
    frames = _held_out(matrix, criteria, method, answers, secondary, time_limit_s, (structure,))
    return _result(frames[structure])


def _result(frame: pd.DataFrame) -> LooResult:
    if frame.empty:
        return LooResult(frame, math.nan, math.nan, 0, 0)
    pick = frame[frame["interior"]] if frame["interior"].any() else frame
    known = pick["loss"][pick["measured"]]
    return LooResult(
        frame,
        float(known.max()) if len(known) else math.nan,
        float(known.mean()) if len(known) else math.nan,
        int(len(known)),
        int(len(pick)),
    )


def _held_out(
    matrix: PerfMatrix,
    criteria: Criteria,
    method: str,
    answers: Answers,
    secondary: bool,
    time_limit_s: float,
    structures: Sequence[Structure],
) -> dict[Structure, pd.DataFrame]:
    """One frame of held-out answers per structure; the kernel set of each held-out run is shared by all."""
    full = winners(matrix, criteria)
    library_ms = answers.library_ms
    lib = np.full(len(matrix.points), np.nan) if library_ms is None else np.asarray(library_ms, dtype=float)
    ref = np.fmin(full.best_ms, lib)  # the library counts as an answer: its time can be the best
    records: dict[Structure, list[dict]] = {s: [] for s in structures}
    all_xyz, all_dims = matrix.table_xyz, matrix.sizes
    col_of = {iid: c for c, iid in enumerate(matrix.instances)}
    provenance = Provenance(device="leave-one-out")
    for (precision, shape), rows in matrix.groups:
        xyz = all_xyz[rows]
        for pos, p in enumerate(rows):
            if not np.isfinite(full.best_ms[p]):
                continue  # nothing verified here: there is no loss to measure
            rest = np.delete(rows, pos)
            if len(rest) == 0:
                continue
            others = np.delete(xyz, pos, axis=0)
            interior = bool(((others.min(axis=0) <= xyz[pos]) & (xyz[pos] <= others.max(axis=0))).all())
            w = full.take_points(rest)  # winners are per point: no need to recompute
            sel = select(w, method, time_limit_s=time_limit_s, secondary=secondary)
            pt, held = matrix.points.iloc[p].to_dict(), replace(answers, library_ms=lib[rest])
            dims = tuple(int(x) for x in all_dims[p])
            for structure in structures:
                table = build_table(w, sel, provenance, held, structure=structure)
                choice = table.record(table.lookup_index(precision, shape, *dims), precision, shape)
                answer = next((a for a in ("library", "generic", "none") if choice.get(a)), "kernel")
                col = col_of.get(choice.get("instance_id"), -1) if answer == "kernel" else -1
                ms = lib[p] if answer == "library" else matrix.median[p, col] if col >= 0 else math.nan
                records[structure].append(
                    {
                        **pt,
                        "interior": interior,
                        "instance_id": choice.get("instance_id"),
                        "answer": answer,
                        "loss": float(max(0.0, 1.0 - ref[p] / ms)) if np.isfinite(ms) else math.nan,
                        "measured": bool(np.isfinite(ms)),
                    }
                )
    return {s: pd.DataFrame.from_records(r) for s, r in records.items()}


def choose_structure(
    matrix: PerfMatrix,
    criteria: Criteria,
    method: str,
    *,
    answers: Answers = Answers(),
    weights: np.ndarray | None = None,
    structures: Sequence[Structure] = STRUCTURES,
    time_limit_s: float = 10.0,
) -> tuple[Structure, pd.DataFrame, LooResult]:
    """The structure (mode, library margin, reach) with the smallest measured held-out loss: weighted mean
    over the held-out points where every structure's answer was measured, then worst, then the order of
    `structures` (the default structure first). Returns it, one row per structure (structure, mean_loss,
    worst_loss, measured, total, chosen), and its leave-one-out result (what `leave_one_out` gives for it)."""
    frames = _held_out(matrix, criteria, method, answers, False, time_limit_s, structures)
    keys = matrix.points["point_key"]
    weight = pd.Series(
        np.ones(len(keys)) if weights is None else np.asarray(weights, dtype=float), index=keys.to_numpy()
    )
    common = None
    for frame in frames.values():
        known = set(frame["point_key"][frame["measured"]]) if not frame.empty else set()
        common = known if common is None else common & known
    rows = []
    for order, (structure, frame) in enumerate(frames.items()):
        got = frame[frame["point_key"].isin(common or set())] if not frame.empty else frame
        wts = weight.reindex(got["point_key"]).fillna(0.0).to_numpy() if len(got) else np.zeros(0)
        loss = got["loss"].to_numpy(dtype=float) if len(got) else np.zeros(0)
        mean = float((wts * loss).sum() / wts.sum()) if wts.sum() > 0 else math.nan
        rows.append(
            {
                "mode": structure.mode,
                "library_margin": structure.library_margin,
                "reach": structure.reach,
                "mean_loss": mean,
                "worst_loss": float(loss.max()) if len(loss) else math.nan,
                "compared": len(got),
                "measured": int(frame["measured"].sum()) if not frame.empty else 0,
                "total": len(frame),
                "order": order,
            }
        )
    table = pd.DataFrame(rows)
    ranked = table.assign(_m=table["mean_loss"].fillna(np.inf), _w=table["worst_loss"].fillna(np.inf))
    best = int(ranked.sort_values(["_m", "_w", "order"]).iloc[0]["order"])
    table["chosen"] = table["order"] == best
    chosen = list(frames)[best]
    return chosen, table.drop(columns=["order"]), _result(frames[chosen])


def tol_table(
    matrix: PerfMatrix,
    bks: Sequence[int | None],
    tols: Sequence[float],
    methods: Sequence[str] = ("greedy", "exact"),
    *,
    loo: Structure | None = Structure(),
    spread_ties: bool = False,
    time_limit_s: float = 60.0,
    answers: Answers = Answers(),
) -> pd.DataFrame:
    """Kernels, worst and mean loss (in sample) and leave-one-out worst loss of the tables of structure `loo` per
    (method, BK, TOL) (None: no leave-one-out).

    The first columns are TOL_TABLE_COLUMNS (what tol_table.csv holds: `loo_worst_loss` is empty where no
    held-out answer was measured, `loo_measured` = measured / held-out points, `loo_structure` the structure the
    leave-one-out figure is of); `loo_mean_loss`, `loo_failures` (held-out answers without a time), `optimal`,
    `secondary` and `solve_s` follow.
    """
    rows = []
    for bk in bks:
        for tol in tols:
            criteria = Criteria(bk=bk, tol=tol, spread_ties=spread_ties)
            w = winners(matrix, criteria)
            for method in methods:
                sel = select(w, method, time_limit_s=time_limit_s)
                held = (
                    leave_one_out(matrix, criteria, method, answers=answers, structure=loo) if loo is not None else None
                )
                rows.append(
                    {
                        "method": method,
                        "bk": bk if bk is not None else 0,
                        "tol": tol,
                        "kernels": sel.n_kernels,
                        "worst_loss": sel.worst_loss,
                        "mean_loss": sel.mean_loss,
                        "loo_worst_loss": held.worst_loss if held else math.nan,
                        "loo_measured": held.measured_text if held else "",
                        "loo_structure": describe(loo) if held and loo is not None else "",
                        "loo_mean_loss": held.mean_loss if held else math.nan,
                        "loo_failures": held.failures if held else 0,
                        "optimal": sel.optimal,
                        "secondary": sel.secondary,
                        "solve_s": sel.solve_s,
                    }
                )
    return pd.DataFrame.from_records(rows)
