"""`autotune workload ...`: the problems an application runs -> a sweep config of tuned points (show, config)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from autotune.cli.aliases import renamed
from autotune.cli.consoles import stdout, table as tabled
from autotune.errors import UserError

DEFAULT_TUNED_POINTS = 24  # per (precision, shape) group

app = typer.Typer(
    help="Workloads: the problems an application runs, with weights -> the test points to tune "
    "(a sweep config) and their weights.",
    no_args_is_help=True,
)

WorkloadArg = Annotated[
    str,
    typer.Argument(
        help="Workload file: YAML (configs/workloads/*.yaml) or CSV with the "
        "header precision,shape,<the kind's sizes>,weight."
    ),
]
KindSpaceOpt = Annotated[
    Optional[str],
    typer.Option(
        "--kind-space",
        help="CSV workloads of a kind that is not built in: the space file whose `problem:` defines the kind.",
    ),
]

MaxProblemsOpt = Annotated[
    Optional[int],
    typer.Option(
        "--max-problems",
        min=1,
        help="Refuse a workload of more problems (counted before they are built; default "
        "200,000 or AUTOTUNE_MAX_PROBLEMS).",
    ),
]


def _fmt(x: float) -> str:
    return f"{x:,.6g}"


@app.command()
def show(workload: WorkloadArg, kind_space: KindSpaceOpt = None, max_problems: MaxProblemsOpt = None) -> None:
    """Problems per (precision, shape) group, their total weight and the range of each size."""
    from autotune.sweep.workloads.workload_files import load_workload

    wl = load_workload(workload, space=kind_space, limit=max_problems)
    title = f"{wl.path}: {len(wl.problems):,} {wl.kind} problems, total weight {_fmt(wl.total_weight)}"
    table = tabled(title, ("precision", "shape", "problems", "weight", *wl.table_sizes, *wl.tie_sizes))
    for (prec, shape), g in wl.groups.items():
        lo_hi = [f"{lo}..{hi}" for lo, hi in (wl.ranges[(prec, shape)][n] for n in wl.table_sizes)]
        for name in wl.tie_sizes:
            values = [p.dims[name] for p in g.points]
            lo_hi.append(f"{min(values)}..{max(values)}")
        table.add_row(prec, shape or "-", f"{len(g.points):,}", _fmt(float(g.w.sum())), *lo_hi)
    stdout().print(table)


@app.command()
def config(
    workload: WorkloadArg,
    space: Annotated[
        list[str], typer.Option(help="A space to sweep: a name under spaces/ or a space file (repeatable).")
    ],
    out_path: Annotated[Path, typer.Option("--out", "-o", help="Write the sweep config here.")],
    tuned_points: Annotated[
        Optional[int],
        typer.Option(
            "--tuned-points",
            help="How many tuned points per (precision, shape) group (all problems when the group has no more)."
            " [default: 24]",
            min=1,
        ),
    ] = None,
    tuned_points_old: Annotated[
        Optional[int], typer.Option("--points", hidden=True, min=1, help="Old name of --tuned-points.")
    ] = None,
    include_config: Annotated[
        Optional[str], typer.Option(help="Also tune this sweep config's points (they count toward --tuned-points).")
    ] = None,
    pool: Annotated[
        Optional[str],
        typer.Option(
            help="Measure only the instances that were among the --pool-bk fastest at a point of this results database."
        ),
    ] = None,
    pool_bk: Annotated[int, typer.Option(help="With --pool: how many fastest instances per point.", min=1)] = 10,
    share: Annotated[
        Optional[int],
        typer.Option(
            help="After the main phase, measure each of the BK best instances at a point at up to N more points it is "
            "valid for, nearest first.",
            min=0,
        ),
    ] = None,
    measure_valid: Annotated[
        bool,
        typer.Option(
            "--measure-valid",
            help="Measure each instance wherever its space's kernel.valid holds, not only where it serves.",
        ),
    ] = False,
    name: Annotated[Optional[str], typer.Option(help="The sweep's name (default: the output file's name).")] = None,
    repetitions: Annotated[int, typer.Option(help="Timed repetitions per (instance, point).", min=1)] = 20,
    bk: Annotated[int, typer.Option(help="Analyzer: best instances kept per point.", min=1)] = 10,
    tol: Annotated[
        float, typer.Option(help="Analyzer: accepted loss against the best (0.05 = 5%).", min=0.0, max=0.999)
    ] = 0.05,
    kind_space: KindSpaceOpt = None,
    max_problems: MaxProblemsOpt = None,
    max_pairs: Annotated[
        Optional[int],
        typer.Option(
            "--max-pairs",
            min=1,
            help="Refuse to write a sweep of more (instance, point) pairs (default 1,000,000 or AUTOTUNE_MAX_PAIRS).",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Write the sweep whatever its pair count.")] = False,
) -> None:
    """Choose the points to tune for a workload and write a sweep config measuring them.

    Prints the tuned points per group and the largest log2 distance (the sum over the kind's table sizes of
    |log2 a/b|; GEMM: M, N, K) from any workload problem to its nearest tuned point.
    """
    from autotune.outfiles import check_writable, write_file
    from autotune.space.spec import find_space, load_space
    from autotune.sweep.config import load_config
    from autotune.sweep.workloads.workload import ConfigKeys, choose_points, coverage, pool_from_db, sweep_config_text
    from autotune.sweep.workloads.workload_files import load_workload
    from autotune.sweep.workloads.workload_limits import MAX_PAIRS, PAIRS_ENV, limit

    check_writable([out_path], make_folders=True)  # before the work: a path that cannot be written fails at once
    cap = limit(max_pairs, PAIRS_ENV, MAX_PAIRS)  # and a bad AUTOTUNE_MAX_PAIRS
    wl = load_workload(workload, space=kind_space, limit=max_problems)
    include = load_config(include_config).points if include_config else ()
    count = renamed(tuned_points, tuned_points_old, "--tuned-points", "--points")
    tuned = choose_points(wl, DEFAULT_TUNED_POINTS if count is None else count, include)
    folder = out_path.resolve().parent
    entries = []  # as the config should say them: names, absolute paths, or paths relative to its folder
    names = {}
    for s in space:
        path = find_space(s)
        if not path.is_file():
            raise UserError(f"no space file {s}", hint="give a space name under spaces/ or a space file's path")
        is_path = s.endswith((".yaml", ".yml")) or "/" in s
        entry = os.path.relpath(path.resolve(), folder) if is_path and not Path(s).is_absolute() else s
        entries.append(entry)
        names[entry] = load_space(path).name
    by_space = None
    if pool is not None:
        found = pool_from_db(pool, pool_bk)
        by_space = {e: found[n] for e, n in names.items() if n in found}
        for e in entries:
            said = f"{len(by_space[e])} instances" if e in by_space else f"not in {pool}; every instance is measured"
            stdout().print(f"pool: {e}: {said}", highlight=False)
    command = (
        shlex.join(["autotune", "workload", *sys.argv[sys.argv.index("config") :]])
        if "config" in sys.argv
        else "autotune workload config"
    )
    keys = ConfigKeys(share, measure_valid, by_space, repetitions, tol, bk)
    text = sweep_config_text(wl, tuned, entries, name or out_path.stem, keys, command)
    columns = ("precision", "shape", "problems", "tuned", "largest log2 distance")
    table = tabled(f"{len(tuned)} tuned points for {len(wl.problems):,} problems", columns)
    for (prec, shape), (n, worst) in coverage(wl, tuned).items():
        table.add_row(
            prec,
            shape or "-",
            f"{len(wl.groups[(prec, shape)].points):,}",
            str(n),
            "-" if worst is None else f"{worst:.3f}",
        )
    stdout().print(table)
    _check_pairs(text, out_path, cap, force)
    write_file(out_path, text, make_folders=True)
    stdout().print(f"wrote {out_path}", highlight=False)


def _check_pairs(text: str, out_path: Path, cap: int, force: bool) -> None:
    """Print the (instance, point) pairs the sweep config `text` plans; above `cap`, refuse unless `force`."""
    from autotune.sweep.config import parse_config
    from autotune.sweep.plan import plan_sweep
    from autotune.sweep.workloads.workload_limits import PAIRS_ENV

    cfg = parse_config(text, file=out_path.resolve())
    pairs = sum(plan.expected_pairs(plan.limit(cfg)) for plan in plan_sweep(cfg))
    stdout().print(f"planned: {pairs:,} (instance, point) pairs (the main phase; --share adds more)", highlight=False)
    if pairs > cap and not force:
        raise UserError(
            f"the sweep plans {pairs:,} (instance, point) pairs, above the limit of {cap:,}; "
            f"{out_path} was not written",
            hint="restrict the instances (--pool DB --pool-bk B), drop --measure-valid or lower --tuned-points, "
            f"or write it anyway: --force, or raise the limit: --max-pairs {pairs} or {PAIRS_ENV}=N",
        )
