"""Validation of a dispatch table at problems it was not tuned on (`autotune validate`), for any problem kind.

At each held-out problem the table's answer, every candidate instance valid there (the table's kernels and the
fastest verified instances of the tuning database) and the kind's baseline (its library: `kind.baseline_name`,
where it has one) are measured by an ordinary sweep (the config `validation_config` writes, run like `autotune
sweep`); `validation_frame` then reads the validation database and sets the table's answer against the best
candidate and the baseline.

Steps, each a function:
- the table: `validate_table.read_table` (any format version, any kind) and `validate_table.table_kind`;
- held-out problems: `validate_points.read_points` / `random_points`, sizes the kind derives following a
  `DerivedRule` (GEMM: the batch rule);
- candidates: `candidates` (the table's kernels, plus the `pool_bk` fastest verified instances at every tuned
  point of the tuning database, plus the kind's generic kernel where the table answers with it), grouped by
  space with the space file to sweep (`space_refs`); `measurable` drops the instances whose space accepts
  none of the held-out problems of their precision;
- `validation_config`: the sweep config (space entries `instances: [...]`, `measure: valid`);
- `validation_frame` -> validation.csv (`csv_columns`: one column per size of the kind), `summarize` -> the
  summary, `plot` -> validation.png.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd
import yaml

from autotune.dispatch.validate_points import (
    DerivedRule,
    derived_rule,
    groups,
    parse_budget,
    problem_count,
    random_points,
    read_points,
    table_bounds,
    tuned_keys,
)
from autotune.dispatch.validate_table import GENERIC, LIBRARY, ValidatedTable, read_table, table_kind
from autotune.errors import UserError
from autotune.problems.base import ProblemKind
from autotune.vocab import TestPoint

__all__ = [
    "CSV_HEAD",
    "CSV_TAIL",
    "Candidates",
    "recorded_paths",
    "DerivedRule",
    "GENERIC",
    "LIBRARY",
    "UserError",
    "candidates",
    "csv_columns",
    "derived_rule",
    "groups",
    "measurable",
    "parse_budget",
    "problem_count",
    "random_points",
    "read_points",
    "read_table",
    "space_refs",
    "table_bounds",
    "table_kind",
    "tuned_keys",
    "validation_config",
    "validation_frame",
]

CSV_HEAD = ("kind", "precision", "shape")  # then one column per size of the kind
CSV_TAIL = (
    "table_choice",
    "table_ms",
    "best_choice",
    "best_ms",
    "best_roofline_frac",
    "baseline_ms",
    "loss_vs_best",
    "speedup_vs_baseline",
)
SLOW_VS_BASELINE = 0.97  # an answer below 0.97x the baseline's speed counts as slower than the baseline


def csv_columns(kind: ProblemKind) -> list[str]:
    """validation.csv's columns (GEMM: kind, precision, shape, m, n, k, batch, table_choice, ...)."""
    return [*CSV_HEAD, *kind.size_names, *CSV_TAIL]


# ------------------------------------------------------------------------------------------------ candidates
@dataclass(frozen=True)
class Candidates:
    """Instances to measure, per space name (ids sorted), with the space file (or name) a config can sweep and
    the precisions each instance was chosen for (empty: any)."""

    by_space: Mapping[str, tuple[str, ...]]
    refs: Mapping[str, str]  # space name -> name under spaces/ or an absolute path
    generic: str | None = None  # the instance id of the table's generic kernel, when it is measured
    precisions: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def ids(self) -> set[str]:
        return {i for ids in self.by_space.values() for i in ids}


def recorded_paths(tuning_url: str | None) -> dict[str, str]:
    """{space name: the space file the tuning database recorded} ({} without a database)."""
    if tuning_url is None:
        return {}
    from autotune.store.query import run_query

    rows = run_query(tuning_url, "SELECT name, yaml_path FROM spaces ORDER BY id")
    return {str(r.name): str(r.yaml_path) for r in rows.itertuples()}


def space_refs(
    names: Iterable[str], recorded: Mapping[str, str], given: Sequence[Path] = (), tuning_url: str | None = None
) -> dict[str, str]:
    """Per space name: a given space file (--space) of that name, else the name under spaces/, else the file the
    tuning database (at `tuning_url`) recorded: at its recorded path from the current folder, else where `autotune
    analyze` finds it (a relative path re-rooted under the database's folder and its parents: a sweep run from the
    repository root records examples/NAME/space.yaml). Raises UserError."""
    from autotune import paths
    from autotune.space.spec import load_space
    from autotune.store import spaces

    files = {load_space(p).name: str(Path(p).resolve()) for p in given}
    out = {}
    for name in names:
        path = recorded.get(name)
        if name in files:
            out[name] = files[name]
        elif name and (paths.SPACES_DIR / f"{name}.yaml").is_file():
            out[name] = name
        elif path and Path(path).is_file():
            out[name] = str(Path(path).resolve())
        elif path and tuning_url and (found := spaces.work_tree_file(name, path, tuning_url)) is not None:
            out[name] = str(found.resolve())
        else:
            looked = f"; looked for {Path(path).absolute()}" if path else ""
            if path and tuning_url:
                looked += f", and {spaces.places_looked(path, tuning_url)}"
            raise UserError(
                f"no space file for space {name!r}: not under {paths.SPACES_DIR}"
                + (f" and its recorded file {path} is gone{looked}" if path else ", and no tuning database records it"),
                hint="pass --space FILE (the space file), or the database the table was made from (validate's --db, "
                "active's TUNING_DB), or restore the space file",
            )
    return out


def pool(
    tuning_url: str, device: str | None, kind: ProblemKind, table_groups: Iterable[tuple[str, str]], pool_bk: int
) -> pd.DataFrame:
    """The `pool_bk` fastest verified instances (by median, then id) at every tuned point of `kind` in the tuning
    database for the given groups, on `device` (a name or uuid; None: the only one). Columns instance_id, space,
    precision."""
    from autotune.store.store import Store

    with Store.open(tuning_url, create=False, readonly=True) as store:
        frame = store.measurements(device=device)
    frame = frame[frame["kind"] == kind.name]
    if len(frame) == 0:
        raise UserError(
            f"no {kind.name} measurements in {tuning_url}" + (f" on {device}" if device else ""),
            hint="--db names the database the table was made from (the table's device must be in it)",
        )
    wanted = set(table_groups)
    ok = frame[(frame["status"] == "ok") & frame["median_ms"].notna()]
    ok = ok[[(p, s) in wanted for p, s in zip(ok["precision"], ok["shape"], strict=True)]]
    if pool_bk <= 0 or len(ok) == 0:
        return pd.DataFrame(columns=["instance_id", "space", "precision"])
    point = ["precision", "shape", *kind.size_names]
    ranked = ok.sort_values([*point, "median_ms", "instance_id"], kind="stable")
    top = ranked.groupby(point, sort=False).head(pool_bk)
    return top[["instance_id", "space", "precision"]].drop_duplicates().reset_index(drop=True)


def generic_instance(table: ValidatedTable, kind: ProblemKind) -> tuple[str, str] | None:
    """(space name, instance id) of the table's generic kernel: the instance of the kind's generic space whose
    name expressions are the table's; None when the kind or the table has none, or no instance matches."""
    from autotune.devices import get_device
    from autotune.space.generator import generate
    from autotune.space.spec import load_space

    generic = table.data.get("generic") or {}
    templates = generic.get("templates") or {}
    if kind.generic_space is None or not templates:
        return None
    key, want = min(templates.items())
    precision, shape = key.split(":")
    try:
        space = load_space(generic.get("space") or kind.generic_space)
        found = generate(space, get_device(None), precision, soft=False).instances()
    except UserError:
        return None
    match = sorted(i.id for i in found if space.template_name(i.param_dict, precision, shape) == want)
    return (space.name, match[0]) if match else None


def candidates(
    table: ValidatedTable,
    kind: ProblemKind,
    tuning_url: str | None,
    pool_bk: int = 1,
    generic: bool = False,
    spaces: Sequence[Path] = (),
) -> Candidates:
    """The table's kernels plus, with a tuning database, its `pool_bk` fastest instances per tuned point; with
    `generic` (and a kind that has one), the table's generic kernel."""
    by_space: dict[str, set[str]] = {}
    precisions: dict[str, set[str]] = {}
    generic_id = None
    if generic:
        found = generic_instance(table, kind)
        if found is not None:
            by_space.setdefault(found[0], set()).add(found[1])
            generic_id = found[1]
    for k in table.kernels:
        iid = str(k["instance_id"])
        by_space.setdefault(str(k.get("space") or ""), set()).add(iid)
        if k.get("precision"):
            precisions.setdefault(iid, set()).add(str(k["precision"]))
    if tuning_url is not None:
        device = table.provenance.get("device") or None
        from autotune.store.query import run_query

        names = set(run_query(tuning_url, "SELECT name FROM devices")["name"].astype(str))
        if device not in names:
            device = None  # a database of one GPU whose name differs; Store.device_id refuses several
        for r in pool(tuning_url, device, kind, groups(table, kind), pool_bk).itertuples():
            by_space.setdefault(str(r.space), set()).add(str(r.instance_id))
            precisions.setdefault(str(r.instance_id), set()).add(str(r.precision))
    refs = space_refs(by_space, recorded_paths(tuning_url), spaces, tuning_url)
    return Candidates(
        {name: tuple(sorted(ids)) for name, ids in sorted(by_space.items())},
        refs,
        generic_id,
        {i: frozenset(p) for i, p in precisions.items()},
    )


def measurable(cands: Candidates, points: Sequence[TestPoint]) -> Candidates:
    """The candidates a sweep can measure at `points`: a space that accepts none of the problems of an
    instance's precision (its `problems:` section: precisions, shapes, `where`) would not generate the instance,
    so that instance is left out there, and a space left with none is dropped. Raises UserError when nothing
    remains."""
    from autotune.space.spec import load_space

    by_space = {}
    for name, ids in cands.by_space.items():
        space = load_space(cands.refs[name])
        accepted = {p.precision for p in points if space.accepts(p)}
        keep = tuple(i for i in ids if accepted & cands.precisions.get(i, frozenset(accepted)))
        if keep:
            by_space[name] = keep
    if not by_space:
        raise UserError(
            "no candidate instance can be measured at any held-out problem: their spaces accept none of them",
            hint="check the problems' precisions and sizes against the spaces' `problems:`",
        )
    return replace(cands, by_space=by_space, refs={n: cands.refs[n] for n in by_space})


# -------------------------------------------------------------------------------------------- the sweep config
def point_group(p: TestPoint) -> dict[str, Any]:
    """A sweep config's `points:` entry measuring exactly `p` (the form every kind's points take)."""
    group: dict[str, Any] = {"kind": p.kind, "precisions": [p.precision]}
    if p.shape:
        group["shapes"] = [p.shape]
    group["sizes"] = {n: [v] for n, v in p.sizes}
    return group


def validation_config(
    points: Sequence[TestPoint],
    cands: Candidates,
    database: str,
    repetitions: int = 20,
    tol: float = 0.05,
    name: str = "validate",
) -> str:
    """The sweep config (YAML text) measuring every candidate where it is valid, at every held-out problem; run
    again on the same database, it measures only what is missing (on any GPU of the same model)."""
    spaces = [{"space": cands.refs[s], "instances": list(ids), "measure": "valid"} for s, ids in cands.by_space.items()]
    doc = {
        "name": name,
        "description": "autotune validate: held-out problems of a dispatch table",
        "spaces": spaces,
        "points": [point_group(p) for p in points],
        "database": database,
        "repetitions": int(repetitions),
        "strategy": "brute",
        "tol": float(tol),
        # a table serves a GPU model: a validation stopped part-way goes on on any card of that model
        "resume": "model",
    }
    return "# written by `autotune validate`; `autotune sweep` on this file measures the same pairs\n" + yaml.safe_dump(
        doc, sort_keys=False, default_flow_style=None, width=120
    )


# ------------------------------------------------------------------------------------------------ the results
def _frac(x: Any) -> float:
    return float(x) if x is not None and not pd.isna(x) else math.nan


def measured(
    url: str, kind: ProblemKind, device: str | None = None
) -> tuple[dict[tuple, dict[str, tuple[float, float]]], dict[tuple, tuple[float, float]]]:
    """From the validation database, on one GPU model: per point key (precision, shape, sizes...) the verified
    instances' (median_ms, roofline_frac) by instance id, and the baseline's. `device` (a uuid or name) stands
    for every recorded card of its model (a validation that went on on another card); where two cards measured
    the same pair, the first recorded card's wins, as a replay of the database answers (`ReplayBackend`). Cards
    of other models are never mixed in. None: every recorded card, which must be of one model."""
    from autotune.store.store import Store

    with Store.open(url, create=False, readonly=True) as store:
        cards = model_cards(store, device)
        if not cards:
            return {}, {}
        inst = pd.concat([store.measurements(device=c) for c in cards], ignore_index=True)
        base = pd.concat([store.baselines(device=c) for c in cards], ignore_index=True)
    point = ["precision", "shape", *kind.size_names]

    def rows(frame: pd.DataFrame) -> pd.DataFrame:
        if not {"kind", *point} <= set(frame.columns):  # nothing recorded (a replay lacking every pair stores none)
            return pd.DataFrame(columns=["kind", "instance_id", *point, "median_ms", "roofline_frac"])
        return frame[(frame["kind"] == kind.name) & (frame["status"] == "ok") & frame["median_ms"].notna()]

    def key(r: Mapping[str, Any]) -> tuple:
        return (str(r["precision"]), str(r["shape"] or ""), *(int(r[n]) for n in kind.size_names))

    times: dict[tuple, dict[str, tuple[float, float]]] = {}
    for r in rows(inst)[["instance_id", *point, "median_ms", "roofline_frac"]].to_dict("records"):
        times.setdefault(key(r), {}).setdefault(
            str(r["instance_id"]), (float(r["median_ms"]), _frac(r["roofline_frac"]))
        )
    baseline: dict[tuple, tuple[float, float]] = {}
    for r in rows(base)[[*point, "median_ms", "roofline_frac"]].to_dict("records"):
        baseline.setdefault(key(r), (float(r["median_ms"]), _frac(r["roofline_frac"])))
    return times, baseline


def model_cards(store: Any, device: str | None) -> list[str]:
    """The uuids of every recorded card of `device`'s GPU model (name, SM count, compute capability), first
    recorded first; `device` is a uuid or a name (of one model); None: the one model recorded (StoreError for
    several)."""
    from autotune.store.schema import Device
    from autotune.sweep.backends.replay import replayed_devices

    if device is None:
        with store.session() as s:
            if s.query(Device.id).first() is None:
                return []
    first = replayed_devices(store, device)[0]
    return [store.device_info(i).uuid for i in sorted(store.same_model(first))]


def validation_frame(
    table: ValidatedTable,
    kind: ProblemKind,
    points: Sequence[TestPoint],
    cands: Candidates,
    url: str,
    device: str | None = None,
) -> pd.DataFrame:
    """One row per held-out problem (`csv_columns(kind)`), in the order of `points`."""
    times, baseline = measured(url, kind, device)
    ids = cands.ids
    rows = []
    for p in points:
        key = (p.precision, p.shape, *(v for _, v in p.sizes))
        here = {i: t for i, t in times.get(key, {}).items() if i in ids}
        base_ms, base_rf = baseline.get(key, (math.nan, math.nan))
        choice_ = table.answer(p)
        answer = cands.generic if choice_ == GENERIC else choice_
        table_ms = base_ms if choice_ == LIBRARY else here.get(answer or "", (math.nan,))[0]
        best_choice, best_ms, best_rf = "", math.nan, math.nan
        if here:
            best_choice, (best_ms, best_rf) = min(here.items(), key=lambda kv: (kv[1][0], kv[0]))
        if math.isfinite(base_ms) and not base_ms >= best_ms:  # the library counts as an answer (NaN best: it wins)
            best_choice, best_ms, best_rf = LIBRARY, base_ms, base_rf
        loss = max(0.0, 1.0 - best_ms / table_ms) if math.isfinite(table_ms) and math.isfinite(best_ms) else math.nan
        speedup = base_ms / table_ms if math.isfinite(table_ms) and math.isfinite(base_ms) else math.nan
        tail = (choice_, table_ms, best_choice, best_ms, best_rf, base_ms, loss, speedup)  # CSV_TAIL's order
        rows.append((p.kind, p.precision, p.shape, *(p.dims[n] for n in kind.size_names), *tail))
    return pd.DataFrame(rows, columns=csv_columns(kind))
