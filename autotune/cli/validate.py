"""`autotune validate TABLE`: measure a dispatch table's answers at problems it was not tuned on (any kind).

The workflow is autotune/workflows/validation.py (the work in autotune/dispatch/validate*.py); here: options and
printing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from autotune.cli.aliases import renamed
from autotune.cli.consoles import stdout, table as tabled
from autotune.cli.options import checked_pool_bk
from autotune.cli.tol import pct, tol_callback
from autotune.vocab import MAX_SEED


def validate(
    table_path: Annotated[Path, typer.Argument(metavar="TABLE", help="A dispatch.json (any problem kind).")],
    db: Annotated[
        Optional[str],
        typer.Option(
            "--db",
            help="The tuning database the table was made from: its fastest instances join the candidates, and it "
            "locates space files not under spaces/.",
        ),
    ] = None,
    points: Annotated[
        Optional[Path],
        typer.Option(
            "--points",
            help="Held-out problems: a CSV with the header of a workload CSV (precision, shape, the kind's sizes, "
            "weight; GEMM: precision,shape,m,n,k[,batch]) or a YAML list of mappings with those keys.",
        ),
    ] = None,
    max_problems: Annotated[
        Optional[int],
        typer.Option(
            "--max-problems",
            min=1,
            help="Refuse a --points file of more rows (counted before it is read) or a larger --random N (default 200,000 or "
            "AUTOTUNE_MAX_PROBLEMS).",
        ),
    ] = None,
    random_n: Annotated[Optional[int], typer.Option("--random", help="Draw N held-out problems instead.")] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, max=MAX_SEED, help="Seed of --random (0 to 2**32-1).")] = 0,
    workload: Annotated[
        Optional[Path],
        typer.Option(
            "--workload",
            help="Workload file whose bounds --random draws within (default: the table's tuned ranges per precision "
            "and shape).",
        ),
    ] = None,
    space: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--space",
            help="A space file of the candidates (repeatable): for spaces not under spaces/ whose recorded file is "
            "elsewhere; a kind that is not built in is read from it.",
        ),
    ] = None,
    pool_bk: Annotated[
        int,
        typer.Option(
            "--pool-bk",
            callback=checked_pool_bk,
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
            help="Sizes a problem leaves out and its kind derives (GEMM: the batch) take this many bytes (default: "
            "the tuned points' rule, else 500MB).",
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
    from autotune.cli.sweep import BarReporter, print_summary
    from autotune.workflows.sweeps import Launch
    from autotune.workflows.validation import ValidationOptions, validate_table

    opts = ValidationOptions(
        table_path,
        out_dir,
        db=db,
        points=points,
        random_n=random_n,
        seed=seed,
        workload=workload,
        spaces=tuple(space or ()),
        pool_bk=pool_bk,
        max_problems=max_problems,
        database=renamed(database, database_old, "--validation-db", "--database"),
        launch=Launch(replay=replay, replay_device=replay_device),
        repetitions=repetitions,
        batch_bytes=batch_bytes,
        tol=tol,
    )
    reporter = BarReporter(quiet)
    try:
        done = validate_table(opts, reporter, say=stdout().print)
    finally:
        reporter.stop()
    print_summary(done.summary, done.database) if not quiet else None
    if done.figures is None:
        raise KeyboardInterrupt  # the stop goes on: `interrupted`, exit code 130 (autotune.cli.main)
    _print_figures(done.figures, done.tol)
    stdout().print(f"wrote {', '.join(map(str, done.written[:-1]))} and {done.written[-1]}")


def _print_figures(figures: list[dict[str, Any]], tol: float) -> None:
    table = tabled(
        "the table's answers at held-out problems (loss against the best candidate or the baseline)",
        (
            "group",
            "problems",
            "median loss",
            "worst loss",
            f"within TOL {100 * tol:g}%",
            f"< {0.97}x baseline",
            "not measured",
        ),
        left=("group",),
    )
    for f in figures:
        table.add_row(
            f["group"],
            str(f["problems"]),
            pct(f["median_loss"]),
            pct(f["worst_loss"]),
            str(f["within_tol"]),
            str(f["slower_than_baseline"]),
            str(f["not_measured"]),
        )
    stdout().print(table)


def register(app: typer.Typer) -> None:
    from autotune.cli.active import active

    app.command()(validate)
    app.command()(active)
