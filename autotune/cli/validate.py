"""`autotune validate TABLE`: measure a dispatch table's answers at problems it was not tuned on (any kind).

The work is in autotune/dispatch/validate*.py; here: options, files, the sweep (run as `autotune sweep` runs it)
and printing.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from autotune.cli.aliases import renamed
from autotune.cli.tol import tol_callback
from autotune.untrusted import fraction
from autotune.errors import UserError

out = Console()


def _device_of_sweep(url: str, sweep_id: int) -> str:
    from autotune.store.query import run_query

    rows = run_query(
        url, f"SELECT d.uuid FROM sweeps s JOIN devices d ON d.id = s.device_id WHERE s.id = {int(sweep_id)}"
    )
    return str(rows["uuid"].iloc[0])


def _pct(x: Any) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.2f}%"


def validate(
    table_path: Annotated[Path, typer.Argument(metavar="TABLE", help="A dispatch.json (any problem kind).")],
    db: Annotated[
        Optional[str],
        typer.Option(
            "--db",
            help="The tuning database the table was made from: "
            "its fastest instances join the candidates, and it locates "
            "space files not under spaces/.",
        ),
    ] = None,
    points: Annotated[
        Optional[Path],
        typer.Option(
            "--points",
            help="Held-out problems: a CSV with the header "
            "of a workload CSV (precision, shape, the kind's sizes, "
            "weight; GEMM: precision,shape,m,n,k[,batch]) or a YAML "
            "list of mappings with those keys.",
        ),
    ] = None,
    max_problems: Annotated[
        Optional[int],
        typer.Option(
            "--max-problems",
            min=1,
            help="Refuse a --points "
            "file of more rows (counted before it is read; "
            "default 200,000 or AUTOTUNE_MAX_PROBLEMS).",
        ),
    ] = None,
    random_n: Annotated[Optional[int], typer.Option("--random", help="Draw N held-out problems instead.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of --random.")] = 0,
    workload: Annotated[
        Optional[Path],
        typer.Option(
            "--workload",
            help="Workload file whose bounds "
            "--random draws within (default: the table's tuned "
            "ranges per precision and shape).",
        ),
    ] = None,
    space: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--space",
            help="A space file of the candidates "
            "(repeatable): for spaces not under spaces/ whose "
            "recorded file is elsewhere; a kind that is not "
            "built in is read from it.",
        ),
    ] = None,
    pool_bk: Annotated[
        int,
        typer.Option(
            "--pool-bk",
            help="Fastest verified instances per tuned point of "
            "--db added to the candidates (0: the table's kernels only).",
        ),
    ] = 1,
    out_dir: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Directory for validate_sweep.yaml, validation.csv, validation.png, validation_summary.json.",
        ),
    ] = Path("validation"),
    database: Annotated[
        Optional[str],
        typer.Option(
            "--validation-db",
            help="Where the validation sweep records its measurements (default OUT/validation.sqlite).",
        ),
    ] = None,
    database_old: Annotated[
        Optional[str], typer.Option("--database", hidden=True, help="Old name of --validation-db.")
    ] = None,
    replay: Annotated[
        Optional[str], typer.Option("--replay", help="Take measurements from this recorded database instead of a GPU.")
    ] = None,
    replay_device: Annotated[
        Optional[str],
        typer.Option(
            "--replay-device",
            help="With --replay: the GPU model (its name) or card (its uuid) to replay, for a database that holds "
            "several models (default: every card, which must be of one model; several cards of one model replay "
            "as one GPU).",
        ),
    ] = None,
    repetitions: Annotated[int, typer.Option("--repetitions", min=1, help="Timed repetitions.")] = 20,
    batch_bytes: Annotated[
        Optional[str],
        typer.Option(
            "--batch-bytes",
            help="Sizes a problem leaves out and "
            "its kind derives (GEMM: the batch) take this many "
            "bytes (default: the tuned points' rule, else "
            "500MB).",
        ),
    ] = None,
    tol: Annotated[
        Optional[float],
        typer.Option(
            "--tol",
            callback=tol_callback,
            help="Loss counted as within tolerance in the summary (default: the table's TOL).",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No live bar.")] = False,
) -> None:
    """Measure the table's answer, the best candidate and the baseline (the kind's library) at held-out problems.

    Candidates are the table's kernels and, with --db, the --pool-bk fastest verified instances at every tuned
    point; each is measured where its space says it is valid. The measuring is an ordinary sweep
    (OUT/validate_sweep.yaml, resumable, every instance timed fully) into --validation-db. Writes validation.csv
    (one column per size of the kind), validation.png and validation_summary.json into --out. With --replay
    VALIDATION_DB (a database that holds every measurement already) validation.csv comes out byte for byte the
    same.
    """
    from autotune.dispatch import validate as v
    from autotune.dispatch.given_paths import recorded_name
    from autotune.store.engine import database_url
    from autotune.sweep.config import load_config
    from autotune.sweep.runner import git_commit
    from autotune.cli.sweep import print_summary, run_config

    database = renamed(database, database_old, "--validation-db", "--database")
    table = v.read_table(table_path)
    if (points is None) == (random_n is None):
        raise UserError(
            "give the held-out problems: --points FILE or --random N (one of them)",
            hint="e.g. --random 100 --seed 0 (drawn within --workload's bounds or the table's tuned ranges)",
        )
    tol = fraction(table.provenance.get("tol", 0.05), f"{table_path}: provenance tol") if tol is None else tol
    tuning = database_url(db) if db else None
    spaces = list(space or [])
    kernel_spaces = dict.fromkeys(str(k.get("space") or "") for k in table.kernels)
    refs = v.space_refs(kernel_spaces, v.recorded_paths(tuning), spaces) if table.kernels else {}
    kind = v.table_kind(table, [*spaces, *map(Path, refs.values())])
    rule = v.derived_rule(table, kind, batch_bytes)
    if points is not None:
        problems = v.read_points(points, kind, rule, max_problems)
    else:
        assert random_n is not None
        problems = v.random_points(
            table, kind, random_n, seed, rule, _workload(workload, kind, spaces), rule_given=batch_bytes is not None
        )
    generic = kind.generic_space is not None and any(table.answer(p) == v.GENERIC for p in problems)
    cands = v.measurable(v.candidates(table, kind, tuning, pool_bk, generic, spaces), problems)
    out_dir.mkdir(parents=True, exist_ok=True)
    url = database_url(database, write=True) if database else f"sqlite:///{(out_dir / 'validation.sqlite').resolve()}"
    config_path = out_dir / "validate_sweep.yaml"
    config_path.write_text(v.validation_config(problems, cands, url, repetitions, tol))
    out.print(
        f"{len(problems)} held-out {kind.name} problems, {len(cands.ids)} candidate instances in "
        f"{len(cands.by_space)} spaces; derived sizes: {rule.describe(kind)}; sweep config {config_path}"
    )
    cfg = load_config(config_path)
    if replay_device is not None and replay is None:
        raise UserError("--replay-device names a GPU of the --replay database: give --replay too")
    summary = run_config(cfg, replay, quiet, early_stop=False, replay_device=replay_device)
    print_summary(summary, cfg.database) if not quiet else None
    if summary.status == "interrupted":
        raise KeyboardInterrupt  # the stop goes on: `interrupted`, exit code 130 (autotune.cli.main)
    device = _device_of_sweep(url, summary.sweep_id)
    frame = v.validation_frame(table, kind, problems, cands, url, device)
    csv_path = v.to_csv(frame, out_dir / "validation.csv")
    png = v.plot(frame, kind, out_dir / "validation.png")
    figures = v.summarize(frame, tol)
    prov = table.provenance
    info = {  # the user's files, never a temporary copy; relative to the repository inside it (given_paths)
        "table": recorded_name(table_path),
        "kind": kind.name,
        "table_device": prov.get("device"),
        "table_tol": prov.get("tol"),
        "tuning_database": recorded_name(db),
        "validation_database": recorded_name(url),
        "replay": recorded_name(replay),
        "device": device,
        "points_file": recorded_name(points),
        "random": random_n,
        "seed": seed if random_n is not None else None,
        "workload": recorded_name(workload),
        "problems": len(problems),
        "derived_sizes": rule.provenance(),
        "library": kind.baseline_name,
        "pool_bk": pool_bk,
        "candidates": {s: list(ids) for s, ids in cands.by_space.items()},
        "repetitions": repetitions,
        "tol": tol,
        "sweep_id": summary.sweep_id,
        "sweep_status": summary.status,
        "git_commit": git_commit(),
    }
    (out_dir / "validation_summary.json").write_text(
        json.dumps({"summary": figures, "provenance": info}, indent=1, default=v.finite_or_none) + "\n"
    )
    _print_figures(figures, tol)
    out.print(f"wrote {csv_path}, {png} and {out_dir / 'validation_summary.json'}")


def _workload(path: Optional[Path], kind: Any, spaces: list[Path]) -> Any:
    """--workload, which must be of the table's kind (a CSV workload reads the kind from --space)."""
    if path is None:
        return None
    from autotune.sweep.workload_files import load_workload

    space = next((p for p in spaces if path.suffix.lower() == ".csv"), None)
    wl = load_workload(path, space=space)
    if wl.kind != kind.name:
        raise UserError(
            f"the workload {path} is of the kind {wl.kind!r}; the table's is {kind.name!r}",
            hint="give a workload of the table's kind (`space:` names its space file)",
        )
    return wl


def _print_figures(figures: list[dict[str, Any]], tol: float) -> None:
    table = Table(title="the table's answers at held-out problems (loss against the best candidate or the baseline)")
    for col in (
        "group",
        "problems",
        "median loss",
        "worst loss",
        f"within TOL {100 * tol:g}%",
        f"< {0.97}x baseline",
        "not measured",
    ):
        table.add_column(col, justify="left" if col == "group" else "right")
    for f in figures:
        table.add_row(
            f["group"],
            str(f["problems"]),
            _pct(f["median_loss"]),
            _pct(f["worst_loss"]),
            str(f["within_tol"]),
            str(f["slower_than_baseline"]),
            str(f["not_measured"]),
        )
    out.print(table)


def register(app: typer.Typer) -> None:
    from autotune.cli.active import active

    app.command()(validate)
    app.command()(active)
