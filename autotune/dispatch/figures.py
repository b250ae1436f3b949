"""The figures of a validated table: from validation.csv, the validation database and the table, the share
of answers within TOL of the best of all candidates and the library, the worst loss, the answers below 0.97x the
library's speed, the same for the oracle (the best of the table's own kernels and the library at each problem),
and the kernels per tuned size. Used by `scripts/bench_tables.py` and active tuning (workflows/active.py)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from autotune.dispatch.validate import SLOW_VS_BASELINE

# the table, its kind's size names, the validation's medians per instance and the library's (`_measured`)
_Measured = tuple[Any, tuple[str, ...], dict[tuple, dict[str, tuple[float, float]]], dict[tuple, tuple[float, float]]]
TARGET_WITHIN, TARGET_WORST, TARGET_TOL = 0.95, 0.15, 0.10  # the targets: 95% within 10%, the worst within 15%, TOL 10%


@dataclass(frozen=True)
class Figures:
    problems: int
    within: float  # share of answers within `tol` of the best
    worst: float
    median: float
    mean: float
    below_library: int  # answers slower than 0.97x the library
    not_measured: int
    oracle_within: float
    oracle_worst: float
    kernels: int
    tuned_points: int
    tol: float

    @property
    def kernels_per_tuned(self) -> float:
        return self.kernels / self.tuned_points if self.tuned_points else math.nan

    @property
    def meets_targets(self) -> bool:
        return self.within >= TARGET_WITHIN and self.worst <= TARGET_WORST and self.below_library == 0

    def line(self, name: str) -> str:
        pct = lambda x: f"{100 * x:.1f}%"  # noqa: E731
        return (
            f"{name}: {self.problems} held-out problems; within {pct(self.tol)} of the best {pct(self.within)}, "
            f"worst {pct(self.worst)}, median {pct(self.median)}, below {SLOW_VS_BASELINE}x library "
            f"{self.below_library}, not measured {self.not_measured} | oracle (table kernels + library) within "
            f"{pct(self.oracle_within)}, worst {pct(self.oracle_worst)} | {self.kernels} kernels for "
            f"{self.tuned_points} tuned points ({self.kernels_per_tuned:.2f} per tuned size) | targets "
            f"{'met' if self.meets_targets else 'NOT met'}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kernels_per_tuned": self.kernels_per_tuned, "meets_targets": self.meets_targets}


def losses(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per row of validation.csv: the answer's loss against the best (NaN: not measured) and its speed against
    the library's (baseline_ms / table_ms)."""
    loss = pd.to_numeric(frame["loss_vs_best"], errors="coerce").to_numpy(dtype=float)
    speed = pd.to_numeric(frame["speedup_vs_baseline"], errors="coerce").to_numpy(dtype=float)
    return loss, speed


def oracle_losses(
    frame: pd.DataFrame,
    kernel_ids: set[str] | Mapping[tuple[str, str], set[str]],
    times: dict[tuple, dict[str, tuple[float, float]]],
    size_names: tuple[str, ...],
) -> np.ndarray:
    """Per row: the loss of the best of the table's own kernels and the library against the best of everything.
    `kernel_ids`: the table's instance ids per (precision, shape) group (an instance the table holds for fp32 only
    is no answer of an fp64 problem, though the validation may have measured it there as a candidate), or one set
    for every group."""
    out = []
    for r in frame.to_dict("records"):
        key = (str(r["precision"]), "" if pd.isna(r["shape"]) else str(r["shape"]), *(int(r[n]) for n in size_names))
        ids = kernel_ids if isinstance(kernel_ids, set) else kernel_ids.get((str(key[0]), str(key[1])), set())
        own = [t for i, (t, _) in times.get(key, {}).items() if i in ids]
        base = float(r["baseline_ms"]) if not pd.isna(r["baseline_ms"]) else math.inf
        best = float(r["best_ms"]) if not pd.isna(r["best_ms"]) else math.nan
        oracle = min(own + [base])
        out.append(max(0.0, 1.0 - best / oracle) if math.isfinite(oracle) and math.isfinite(best) else math.nan)
    return np.asarray(out, dtype=float)


def figures(
    frame: pd.DataFrame, oracle: np.ndarray, kernels: int, tuned_points: int, tol: float = TARGET_TOL
) -> Figures:
    loss, speed = losses(frame)
    known = loss[np.isfinite(loss)]
    ok_oracle = oracle[np.isfinite(oracle)]
    return Figures(
        problems=len(frame),
        within=float((known <= tol + 1e-12).sum() / max(1, len(frame))),
        worst=float(known.max()) if len(known) else math.nan,
        median=float(np.median(known)) if len(known) else math.nan,
        mean=float(known.mean()) if len(known) else math.nan,
        below_library=int((speed < SLOW_VS_BASELINE).sum()),
        not_measured=int(len(frame) - len(known)),
        oracle_within=float((ok_oracle <= tol + 1e-12).sum() / max(1, len(frame))),
        oracle_worst=float(ok_oracle.max()) if len(ok_oracle) else math.nan,
        kernels=kernels,
        tuned_points=tuned_points,
        tol=tol,
    )


def validated_figures(
    table_path: str | Path,
    validation_dir: str | Path,
    database: str | None = None,
    tol: float = TARGET_TOL,
    spaces: tuple[Path, ...] = (),
) -> Figures:
    """The figures of `autotune validate`'s output folder (validation.csv and, by default, validation.sqlite or
    the committed validation.sqlite.xz there) for the table at `table_path`; `spaces`: space files defining a kind
    that is not built in."""
    folder = Path(validation_dir)
    frame = pd.read_csv(folder / "validation.csv", keep_default_na=False, na_values=[""])
    return _table_figures(frame, _measured(table_path, folder, database, spaces), tol)


def _measured(table_path: str | Path, folder: Path, database: str | None, spaces: tuple[Path, ...]) -> _Measured:
    """The table at `table_path`, its kind's size names, and the medians of the validation in `folder` (its
    instances' and its library's: `validate.measured`) from `database` or the validation's own."""
    from autotune.dispatch.validate import measured
    from autotune.dispatch.validate_table import read_table, table_kind
    from autotune.store.engine import database_url

    table = read_table(Path(table_path))
    kind = table_kind(table, list(spaces))
    times, baseline = measured(database_url(_validation_database(folder, database)), kind)
    return table, tuple(kind.size_names), times, baseline


def _table_figures(frame: pd.DataFrame, got: _Measured, tol: float) -> Figures:
    """`figures` of a table's answers in `frame`, with the oracle (the table's own kernels and the library) from
    the validation's medians (`_measured`)."""
    table, names, times, _ = got
    ids: dict[tuple[str, str], set[str]] = {}
    for k in table.kernels:
        ids.setdefault((str(k["precision"]), str(k["shape"] or "")), set()).add(str(k["instance_id"]))
    return figures(frame, oracle_losses(frame, ids, times, names), len(table.kernels), len(table.points), tol)


def _answered(frame: pd.DataFrame, choice: list[str], ms: list[float]) -> pd.DataFrame:
    """`frame` with other answers (table_choice, table_ms), scored against its best_ms and baseline_ms."""
    out = frame.copy()
    out["table_choice"] = choice
    out["table_ms"] = ms
    best = pd.to_numeric(out["best_ms"], errors="coerce").to_numpy(dtype=float)
    base = pd.to_numeric(out["baseline_ms"], errors="coerce").to_numpy(dtype=float)
    t_ms = np.asarray(ms, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["loss_vs_best"] = np.maximum(0.0, 1.0 - best / t_ms)
        out["speedup_vs_baseline"] = base / t_ms
    return out


def answer_name(answer: int, ids: list[str]) -> str:
    """How validation.csv names a table answer: "library", a kernel's instance id (`ids`: the table's kernels in
    order), else the index (GENERIC, NONE)."""
    from autotune.dispatch.runtime import LIBRARY as LIBRARY_INDEX
    from autotune.dispatch.validate import LIBRARY

    return LIBRARY if answer == LIBRARY_INDEX else ids[answer] if 0 <= answer < len(ids) else str(answer)


def refined_frame(
    table_path: str | Path,
    validation_dir: str | Path,
    top: int,
    database: str | None = None,
    spaces: tuple[Path, ...] = (),
    chooser: Any = None,
) -> tuple[pd.DataFrame, int]:
    """validation.csv as runtime refinement (dispatch/refine.py, `top` predicted kernels and the library) would have
    answered it, and the timer calls it made. By default replayed from the validation's own measurements: the timer of
    an answer at a problem returns the validation's median there (None where it was not measured), so this is what
    refinement chooses when its one timing agrees with the validation's median. With `chooser` (a `refine.Timer`, a
    GPU backend's say) refinement chooses by that timer's measurements, and the choice is scored by the validation's
    medians as every answer is. The columns table_choice, table_ms, loss_vs_best and speedup_vs_baseline are the
    refined answer's; first_call_s is what its timer took there (Refiner.stats), timed_ms what it measured
    (`answer=ms;...`, the library as "library"); best_ms and baseline_ms are unchanged."""
    from autotune.dispatch.refine import Refiner
    from autotune.dispatch.runtime import LIBRARY as LIBRARY_INDEX

    folder = Path(validation_dir)
    table, names, times, baseline = _measured(table_path, folder, database, spaces)
    frame = pd.read_csv(folder / "validation.csv", keep_default_na=False, na_values=[""])
    ids = [str(k["instance_id"]) for k in table.kernels]

    def timer(answer: int, precision: str, shape: str, sizes: dict) -> float | None:
        key = (precision, shape, *(int(sizes[n]) for n in names))
        if answer == LIBRARY_INDEX:
            return baseline.get(key, (None, None))[0]
        return times.get(key, {}).get(ids[answer], (None, None))[0] if 0 <= answer < len(ids) else None

    refine = Refiner(dict(table.data), timer if chooser is None else chooser, top=top)
    choice, ms, spent, timed = [], [], [], []
    for r in frame.to_dict("records"):
        shape = "" if pd.isna(r["shape"]) else str(r["shape"])
        sizes = {n: int(r[n]) for n in names}
        before, seen = refine.stats.seconds, len(refine.choices)
        a = refine.index(str(r["precision"]), shape, sizes)
        spent.append(refine.stats.seconds - before)
        made = next(reversed(refine.choices.values()))["times"] if len(refine.choices) > seen else {}
        timed.append(";".join(f"{answer_name(int(c), ids)}={'' if t is None else f'{t:.6g}'}" for c, t in made.items()))
        t = timer(a, str(r["precision"]), shape, sizes)
        choice.append(answer_name(a, ids))
        ms.append(math.nan if t is None else float(t))
    out = _answered(frame, choice, ms)
    out["first_call_s"] = spent  # seconds the timer took at this problem's first call (0: answered untimed)
    out["timed_ms"] = timed  # what the timer measured there: answer=ms;... (empty: answered untimed)
    return out, refine.stats.calls


def refined_figures(
    table_path: str | Path,
    validation_dir: str | Path,
    top: int,
    database: str | None = None,
    tol: float = TARGET_TOL,
    spaces: tuple[Path, ...] = (),
    chooser: Any = None,
) -> tuple[Figures, float]:
    """The figures of `refined_frame` (the oracle column as in `validated_figures`) and the timer calls per problem."""
    frame, calls = refined_frame(table_path, validation_dir, top, database, spaces, chooser)
    return scored_refined(frame, calls, validated_figures(table_path, validation_dir, database, tol, spaces), tol)


def scored_refined(frame: pd.DataFrame, calls: int, static: Figures, tol: float = TARGET_TOL) -> tuple[Figures, float]:
    """The figures of a `refined_frame` (its oracle column that of the static figures) and timer calls per problem."""
    figs = figures(frame, np.zeros(0), static.kernels, static.tuned_points, tol)
    figs = Figures(**{**asdict(figs), "oracle_within": static.oracle_within, "oracle_worst": static.oracle_worst})
    return figs, calls / max(1, len(frame))


def _validation_database(folder: Path, database: str | None) -> str:
    """The validation's own database, or its committed packed copy."""
    if database is not None:
        return database
    plain = folder / "validation.sqlite"
    return str(plain if plain.exists() or not (folder / "validation.sqlite.xz").exists() else f"{plain}.xz")


def rescored_frame(
    table_path: str | Path, validation_dir: str | Path, database: str | None = None, spaces: tuple[Path, ...] = ()
) -> pd.DataFrame:
    """validation.csv as the static lookup of the table at `table_path` answers its problems, scored by that
    validation's medians: a CPU replay of any table of the kind (one rebuilt from more measured points, or with
    another structure) at a spent validation's problems. The columns table_choice, table_ms, loss_vs_best and
    speedup_vs_baseline are the table's answer's (NaN where the validation did not measure it); best_ms (the best
    of the validation's candidates and the library) and baseline_ms are unchanged. Score only a table that was not
    built from these problems' measurements."""
    from autotune.dispatch.runtime import LIBRARY as LIBRARY_INDEX
    from autotune.dispatch.runtime import Lookup

    folder = Path(validation_dir)
    table, names, times, baseline = _measured(table_path, folder, database, spaces)
    frame = pd.read_csv(folder / "validation.csv", keep_default_na=False, na_values=[""])
    ids = [str(k["instance_id"]) for k in table.kernels]
    lookup = Lookup(dict(table.data))
    choice, ms = [], []
    for r in frame.to_dict("records"):
        precision, shape = str(r["precision"]), "" if pd.isna(r["shape"]) else str(r["shape"])
        dims = tuple(int(r[n]) for n in names)
        key = (precision, shape, *dims)
        a = lookup.index(precision, shape, dims)
        got = baseline.get(key) if a == LIBRARY_INDEX else times.get(key, {}).get(ids[a]) if 0 <= a < len(ids) else None
        choice.append(answer_name(a, ids))
        ms.append(math.nan if got is None else float(got[0]))
    return _answered(frame, choice, ms)


def rescored_figures(
    table_path: str | Path,
    validation_dir: str | Path,
    database: str | None = None,
    tol: float = TARGET_TOL,
    spaces: tuple[Path, ...] = (),
) -> Figures:
    """The figures of `rescored_frame` (the oracle: the table's own kernels and the library, by the validation's
    medians)."""
    frame = rescored_frame(table_path, validation_dir, database, spaces)
    return _table_figures(frame, _measured(table_path, Path(validation_dir), database, spaces), tol)
