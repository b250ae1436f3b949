"""Validation: measure a dispatch table's answers at problems it was not tuned on (any kind), as `autotune validate`
and active tuning do. The work is in autotune/dispatch/validate*.py; here: the held-out problems, the candidates,
the sweep (launched as `autotune sweep` launches it, workflows/sweeps.py) and the files written."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from autotune.errors import UserError
from autotune.untrusted import fraction
from autotune.workflows.sweeps import Launch, launch_sweep, refuse_without_gpu

if TYPE_CHECKING:
    from autotune.sweep.runner import Reporter, SweepSummary


@dataclass(frozen=True)
class ValidationOptions:
    """What `autotune validate` measures: the table, its held-out problems (`points` or `random_n`), the candidates
    and where the sweep records."""

    table_path: Path  # a dispatch.json (any problem kind)
    out_dir: Path = Path("validation")  # validate_sweep.yaml, validation.csv, .png, validation_summary.json
    db: str | None = None  # the tuning database: its fastest instances join the candidates, it locates space files
    points: Path | None = None  # held-out problems: a workload CSV or a YAML list (or `random_n` drawn)
    random_n: int | None = None
    seed: int = 0  # of `random_n`
    workload: Path | None = None  # bounds `random_n` draws within (default: the table's tuned ranges)
    spaces: tuple[Path, ...] = ()  # space files of the candidates not under spaces/
    pool_bk: int = 1  # fastest verified instances per tuned point of `db` added to the candidates
    max_problems: int | None = None  # refuse a `points` file of more rows
    database: str | None = None  # where the validation sweep records (default OUT/validation.sqlite)
    launch: Launch = field(default_factory=Launch)  # replay, replay_device (the sweep times every instance fully)
    repetitions: int = 20
    batch_bytes: str | None = None  # what derived sizes (GEMM: the batch) take
    tol: float | None = None  # loss counted as within tolerance (default: the table's TOL)


@dataclass(frozen=True)
class Validated:
    summary: SweepSummary  # the validation sweep's
    database: str  # where it recorded
    tol: float  # the loss counted as within tolerance
    figures: list[dict[str, Any]] | None = None  # per group; None: the sweep was interrupted (nothing written)
    written: tuple[Path, ...] = ()  # validation.csv, validation.png, validation_summary.json


def validate_table(
    opts: ValidationOptions, reporter: Reporter | None = None, say: Callable[[str], None] = print
) -> Validated:
    """Measure the table's answer, the best candidate and the baseline (the kind's library) at held-out problems.

    Candidates are the table's kernels and, with `db`, the `pool_bk` fastest verified instances at every tuned
    point; each is measured where its space says it is valid. The measuring is an ordinary sweep
    (OUT/validate_sweep.yaml, resumable, every instance timed fully). Writes validation.csv (one column per size of
    the kind), validation.png and validation_summary.json into `out_dir`."""
    from autotune.dispatch import validate as v
    from autotune.dispatch import validation_files as vf
    from autotune.store.engine import database_url
    from autotune.sweep.config import load_config

    table = v.read_table(opts.table_path)
    if (opts.points is None) == (opts.random_n is None):
        raise UserError(
            "give the held-out problems: --points FILE or --random N (one of them)",
            hint="e.g. --random 100 --seed 0 (drawn within --workload's bounds or the table's tuned ranges)",
        )
    if opts.launch.replay_device is not None and opts.launch.replay is None:
        raise UserError("--replay-device names a GPU of the --replay database: give --replay too")
    tol = opts.tol
    tol = fraction(table.provenance.get("tol", 0.05), f"{opts.table_path}: provenance tol") if tol is None else tol
    tuning = database_url(opts.db) if opts.db else None
    spaces = list(opts.spaces)
    kind = v.table_kind(table, table_space_files(table, tuning, spaces))
    rule = v.derived_rule(table, kind, opts.batch_bytes)
    if opts.points is not None:
        problems = v.read_points(opts.points, kind, rule, opts.max_problems)
    else:
        assert opts.random_n is not None
        workload = table_workload(opts.workload, kind, spaces)
        given = opts.batch_bytes is not None
        v.problem_count(opts.random_n, "--random", opts.max_problems, "--max-problems")
        problems = v.random_points(table, kind, opts.random_n, opts.seed, rule, workload, rule_given=given)
    generic = kind.generic_space is not None and any(table.answer(p) == v.GENERIC for p in problems)
    cands = v.measurable(v.candidates(table, kind, tuning, opts.pool_bk, generic, spaces), problems)
    refuse_without_gpu(opts.launch)  # (before OUT is made: every input is checked by now)
    out_dir = opts.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    url = (
        database_url(opts.database, write=True)
        if opts.database
        else f"sqlite:///{(out_dir / 'validation.sqlite').resolve()}"
    )
    config_path = out_dir / "validate_sweep.yaml"
    config_path.write_text(v.validation_config(problems, cands, url, opts.repetitions, tol))
    say(
        f"{len(problems)} held-out {kind.name} problems, {len(cands.ids)} candidate instances in "
        f"{len(cands.by_space)} spaces; derived sizes: {rule.describe(kind)}; sweep config {config_path}"
    )
    cfg = load_config(config_path)
    summary = launch_sweep(cfg, dataclasses.replace(opts.launch, early_stop=False), reporter).summary
    if summary.status == "interrupted":
        return Validated(summary, cfg.database, tol)
    device = _device_of_sweep(url, summary.sweep_id)
    frame = v.validation_frame(table, kind, problems, cands, url, device)
    csv_path = vf.to_csv(frame, out_dir / "validation.csv")
    png = vf.plot(frame, kind, out_dir / "validation.png")
    figures = vf.summarize(frame, tol)
    info = _provenance(opts, table, kind, url, device, summary)
    info.update(problems=len(problems), derived_sizes=rule.provenance(), tol=tol)
    info["candidates"] = {s: list(ids) for s, ids in cands.by_space.items()}
    (out_dir / "validation_summary.json").write_text(
        json.dumps({"summary": figures, "provenance": info}, indent=1, default=vf.finite_or_none) + "\n"
    )
    return Validated(summary, cfg.database, tol, figures, (csv_path, png, out_dir / "validation_summary.json"))


def _provenance(
    opts: ValidationOptions, table: Any, kind: Any, url: str, device: str, summary: SweepSummary
) -> dict[str, Any]:
    """validation_summary.json's provenance: the user's files, never a temporary copy; relative to the repository
    inside it (given_paths). The caller fills what the None values hold a place for."""
    from autotune.dispatch.given_paths import recorded_name
    from autotune.sweep.provenance import git_commit

    prov = table.provenance
    return {
        "table": recorded_name(opts.table_path),
        "kind": kind.name,
        "table_device": prov.get("device"),
        "table_tol": prov.get("tol"),
        "tuning_database": recorded_name(opts.db),
        "validation_database": recorded_name(url),
        "replay": recorded_name(opts.launch.replay),
        "device": device,
        "points_file": recorded_name(opts.points),
        "random": opts.random_n,
        "seed": opts.seed if opts.random_n is not None else None,
        "workload": recorded_name(opts.workload),
        "problems": None,
        "derived_sizes": None,
        "library": kind.baseline_name,
        "pool_bk": opts.pool_bk,
        "candidates": None,
        "repetitions": opts.repetitions,
        "tol": None,
        "sweep_id": summary.sweep_id,
        "sweep_status": summary.status,
        "git_commit": git_commit(),
    }


def table_space_files(table: Any, tuning: str | None, spaces: Sequence[Path]) -> list[Path]:
    """`spaces` and the space files of the table's kernels: given (`spaces`), under spaces/, or the ones the tuning
    database (URL `tuning`) recorded (a declared kind needs them). Raises UserError for a kernel's missing one."""
    from autotune.dispatch import validate as v

    kernel_spaces = dict.fromkeys(str(k.get("space") or "") for k in table.kernels)
    refs = v.space_refs(kernel_spaces, v.recorded_paths(tuning), spaces, tuning) if table.kernels else {}
    return [*spaces, *map(Path, refs.values())]


def table_workload(path: Path | None, kind: Any, spaces: list[Path]) -> Any:
    """--workload, which must be of the table's kind (a CSV workload reads the kind from --space)."""
    if path is None:
        return None
    from autotune.sweep.workloads.workload_files import load_workload

    space = next((p for p in spaces if path.suffix.lower() == ".csv"), None)
    wl = load_workload(path, space=space)
    if wl.kind != kind.name:
        raise UserError(
            f"the workload {path} is of the kind {wl.kind!r}; the table's is {kind.name!r}",
            hint="give a workload of the table's kind (`space:` names its space file)",
        )
    return wl


def _device_of_sweep(url: str, sweep_id: int) -> str:
    from autotune.store.query import run_query

    rows = run_query(
        url, f"SELECT d.uuid FROM sweeps s JOIN devices d ON d.id = s.device_id WHERE s.id = {int(sweep_id)}"
    )
    return str(rows["uuid"].iloc[0])
