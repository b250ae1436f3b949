"""`autotune active`: active tuning. The loop is autotune/workflows/active.py; here: options and printing."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from autotune.cli.consoles import stdout
from autotune.cli.options import checked_pool_bk, checked_structure
from autotune.cli.tol import tol_callback
from autotune.vocab import MAX_SEED


def active(
    db: Annotated[
        str,
        typer.Argument(
            metavar="TUNING_DB", help="The tuning database (SQLite path or URL); the added points are measured into it."
        ),
    ],
    config: Annotated[
        Path,
        typer.Option(
            "--config", help="The tuning sweep config: its spaces and instances are measured at the added points."
        ),
    ],
    out_dir: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Folder for every round's table, held-out problems, validation and active.json."
        ),
    ] = Path("active"),
    workload: Annotated[
        Optional[Path],
        typer.Option(
            "--workload", help="Held-out problems are drawn within its bounds (and weight the table's tuned points)."
        ),
    ] = None,
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="At most this many rounds.")] = 3,
    add: Annotated[
        int,
        typer.Option(
            "--add",
            min=0,
            help="Held-out problems with the largest measured loss added as tuned points after each round.",
        ),
    ] = 20,
    heldout: Annotated[
        int,
        typer.Option(
            "--heldout", min=1, help="Fresh held-out problems per round (never tuned, never of an earlier round)."
        ),
    ] = 200,
    seed: Annotated[
        int,
        typer.Option(
            "--seed", min=0, max=MAX_SEED, help="Seed of the held-out draws (round r: seed + r; 0 to 2**32-1)."
        ),
    ] = 1000,
    budget_s: Annotated[
        Optional[float], typer.Option("--budget-s", help="Start no new round after this many seconds.")
    ] = None,
    structure: Annotated[
        str,
        typer.Option(
            "--structure",
            callback=checked_structure,
            help="The tables' structure (as `autotune report --structure`; model: the selection model).",
        ),
    ] = "model",
    tol: Annotated[
        float, typer.Option("--tol", callback=tol_callback, help="The tables' TOL and the loss counted as within.")
    ] = 0.1,
    pool_bk: Annotated[
        int, typer.Option("--pool-bk", callback=checked_pool_bk, help="As `autotune validate --pool-bk`.")
    ] = 3,
    repetitions: Annotated[int, typer.Option("--repetitions", min=1, help="Timed repetitions.")] = 20,
    include_dir: Annotated[
        Optional[Path], typer.Option("--include-dir", help="Name kernel sources relative to this directory.")
    ] = None,
    replay: Annotated[
        Optional[str],
        typer.Option("--replay", help="Take every measurement from this recorded database instead of a GPU."),
    ] = None,
    points: Annotated[
        Optional[Path],
        typer.Option("--points", help="Draw the held-out problems from this points file instead of at random."),
    ] = None,
    space: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--space",
            help="A space file of the table's kernels (repeatable; a kind declared in a space file needs it where "
            "the tuning database recorded a path that is gone).",
        ),
    ] = None,
    seed_from: Annotated[
        Optional[Path],
        typer.Option(
            "--seed-from",
            help="An earlier validation folder (validation.csv): its --add problems with the largest measured loss "
            "become tuned points before round 0 (no new validation is measured for them).",
        ),
    ] = None,
) -> None:
    """Validate the table at fresh held-out problems, add the worst of them as tuned points, rebuild; repeat until
    at least 95% of the answers are within TOL of the best, the worst within 15% and none below 0.97x the library,
    or --rounds / --budget-s end. Each round's figures are on problems the table was not built from."""
    from autotune.cli.sweep import BarReporter
    from autotune.workflows.active import ActiveOptions, active_tuning

    opts = ActiveOptions(
        tuning_db=db,
        config=config,
        out_dir=out_dir,
        workload=workload,
        rounds=rounds,
        add=add,
        heldout=heldout,
        seed=seed,
        budget_s=budget_s,
        structure=structure,
        tol=tol,
        pool_bk=pool_bk,
        repetitions=repetitions,
        include_dir=include_dir,
        replay=replay,
        points=points,
        seed_from=seed_from,
        spaces=tuple(space or ()),
    )
    done = active_tuning(opts, say=stdout().print, reporter=BarReporter(quiet=True))
    stdout().print(f"wrote {out_dir / 'active.json'} ({len(done)} rounds)")
