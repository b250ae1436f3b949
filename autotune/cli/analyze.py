"""`autotune analyze | emit | report`: from a results database to Table I, dispatch code and plots.

The work is autotune/workflows (results.py loads, tables.py builds); here: options and printing.
SOURCE is a results database (a path to an SQLite file or an SQLAlchemy URL) or a measurements CSV with the
columns of Store.measurements() (autotune.workflows.measurements_csv; point_key optional); `emit` also takes a
dispatch.json.
"""

from __future__ import annotations

import warnings

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from autotune.cli.options import (
    BkOpt,
    DeviceOpt,
    EmitSource,
    FallbackOpt,
    GenericOpt,
    IncludeOpt,
    KindOpt,
    MethodOpt,
    Source,
    SpaceOpt,
    SpreadOpt,
    StructureOpt,
    TolOpt,
    ValidityOpt,
    WorkloadOpt,
    checked_bks,
    read_bks,
)
from autotune.cli.consoles import stdout, table as tabled
from autotune.cli.tol import pct, tols_callback
from autotune.untrusted import fractions
from autotune.workflows.tables import DEFAULT_METHOD, DEFAULT_TOL, TableOptions


class Format(str, Enum):
    cpp = "cpp"
    python = "python"
    json = "json"
    csv = "csv"


def analyze(
    source: Source,
    device: DeviceOpt = None,
    space: SpaceOpt = None,
    bks: Annotated[
        str, typer.Option("--bks", callback=checked_bks, help="BK values, comma-separated (0: all).")
    ] = "10",
    tols: Annotated[
        str, typer.Option("--tols", callback=tols_callback, help="TOL values, comma-separated.")
    ] = "0,0.05,0.1,0.15",
    spread_ties: SpreadOpt = False,
    loo: Annotated[bool, typer.Option("--loo/--no-loo", help="Leave-one-out loss per row.")] = True,
    out_dir: Annotated[
        Optional[Path], typer.Option("--out", "-o", help="Write tol_table.csv and winners.csv here.")
    ] = None,
    validity: ValidityOpt = None,
    fallback: FallbackOpt = None,
    kind: KindOpt = None,
    structure: StructureOpt = "auto",
) -> None:
    """The number of kernels against TOL for both methods, with worst, mean and leave-one-out loss (Table I).

    The leave-one-out loss is that of the tables of one structure, named in the `LOO structure` column: --structure
    as `emit` and `report` read it; auto (the default), the one they choose with their defaults (exact, TOL 0.05,
    here at the first of --bks), so that the row of those settings is the figure `report` prints. With --out, also
    writes tol_table.csv and the BK winners per test point (winners.csv, at the first BK and TOL). A database with
    no verified measurement exits with code 2."""
    from autotune.analysis.winners import Criteria
    from autotune.dispatch.loo import describe
    from autotune.workflows.results import load_results
    from autotune.workflows.tables import kernels_against_tol, write_tol_files

    loaded = load_results(source, device, space, kind=kind)
    opts = TableOptions(spread_ties=spread_ties, validity=validity, fallback=fallback, structure=structure)
    bk_values, tol_values = read_bks(bks), fractions(tols, "--tols")
    done = kernels_against_tol(loaded, opts, bk_values, tol_values, loo)
    matrix, frame, chosen = done.matrix, done.frame, done.structure
    table = tabled(
        f"kernels against TOL on {loaded.provenance.device}: {len(matrix.points)} test points, "
        f"{len(matrix.instances)} instances",
        ("method", "BK", "TOL", "kernels", "worst loss", "mean loss", "LOO worst", "optimal"),
        left=("method",),
    )
    for r in frame.itertuples():
        table.add_row(
            r.method,
            str(r.bk or "all"),
            pct(r.tol),
            str(r.kernels),
            pct(r.worst_loss),
            pct(r.mean_loss),
            (pct(r.loo_worst_loss) or "-") + (f" ({r.loo_measured} measured)" if r.loo_failures else ""),
            "proven" if r.optimal else "-",
        )
    stdout().print(table)
    if chosen is not None:
        how = f" (chosen as report/emit choose it: {DEFAULT_METHOD}, TOL {100 * DEFAULT_TOL:g}%)" if done.chosen else ""
        stdout().print(f"LOO worst: the leave-one-out worst loss of the {describe(chosen)} tables{how}")
    if out_dir is not None:
        criteria = Criteria(bk=bk_values[0], tol=tol_values[0], spread_ties=spread_ties)
        written = write_tol_files(done, out_dir, criteria)
        stdout().print(f"wrote {written[0]} and {written[1]}")


def emit(
    source: EmitSource,
    fmt: Annotated[
        Optional[Format],
        typer.Option("--format", "-f", help="Output kind (default: from the --out extension, else json)."),
    ] = None,
    output: Annotated[
        Optional[Path],
        typer.Option("--out", "-o", help="Output file (default: stdout); .json, .cuh/.h/.hpp, .py or .csv."),
    ] = None,
    device: DeviceOpt = None,
    space: SpaceOpt = None,
    bk: BkOpt = 10,
    tol: TolOpt = DEFAULT_TOL,
    method: MethodOpt = DEFAULT_METHOD,
    spread_ties: SpreadOpt = False,
    validity: ValidityOpt = None,
    generic: GenericOpt = "",
    fallback: FallbackOpt = None,
    structure: StructureOpt = "auto",
    workload: WorkloadOpt = None,
    kind: KindOpt = None,
    include_dir: IncludeOpt = None,
) -> None:
    """Write the dispatch table as JSON (canonical), a C++ header, a Python module or CSV (the format of --out's
    extension unless --format says otherwise)."""
    from autotune.cli.outformat import output_format
    from autotune.dispatch.build import rename_sources
    from autotune.dispatch.emit import emit_cpp, emit_csv, emit_python
    from autotune.dispatch.table import load_table
    from autotune.dispatch.table_file import is_table_file
    from autotune.workflows.results import load_results
    from autotune.workflows.tables import build_table

    fmt = Format(output_format(output, fmt.value if fmt else None, [f.value for f in Format], Format.json.value))
    if is_table_file(source):
        building = {"--device": device, "--space": space, "--bk": bk != 10, "--tol": tol != DEFAULT_TOL}
        building |= {"--method": method != DEFAULT_METHOD, "--spread-ties": spread_ties, "--validity": bool(validity)}
        building |= {"--generic": generic, "--fallback": fallback, "--structure": structure != "auto"}
        ignored = [name for name, given in (building | {"--workload": workload, "--kind": kind}).items() if given]
        if ignored:
            warnings.warn(
                f"{', '.join(ignored)}: ignored for a table file ({Path(source).name} is written as it is); they build a "
                "table from a results database",
                stacklevel=2,
            )
        table = load_table(source)
        rename_sources(table.data, include_dir)  # no absolute path of the machine that wrote it
    else:
        opts = TableOptions(bk, tol, method, spread_ties, validity, generic, fallback, structure, workload, include_dir)
        table = build_table(load_results(source, device, space, kind=kind), opts).table
    text = (
        table.to_json() + "\n"
        if fmt is Format.json
        else {Format.cpp: emit_cpp, Format.python: emit_python, Format.csv: emit_csv}[fmt](table)
    )
    if output is None:
        typer.echo(text, nl=False)
    else:
        from autotune.outfiles import write_file

        write_file(output, text, make_folders=True)
        p = table.provenance
        stdout().print(
            f"wrote {output}: {p['kernels']} kernels, {p['points']} points, worst loss "
            f"{100 * (p['worst_loss'] or 0):.2f}% (TOL {100 * p['tol']:g}%, {p['method']})"
            + (f"; the library answers {p['library_points']} points" if p.get("library_points") else "")
        )


def report(
    source: Source,
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Directory for the files.")] = Path("report"),
    device: DeviceOpt = None,
    space: SpaceOpt = None,
    bk: BkOpt = 10,
    tol: TolOpt = DEFAULT_TOL,
    method: MethodOpt = DEFAULT_METHOD,
    spread_ties: SpreadOpt = False,
    validity: ValidityOpt = None,
    generic: GenericOpt = "",
    tols: Annotated[
        str, typer.Option("--tols", callback=tols_callback, help="TOL values for tol_table.csv.")
    ] = "0,0.05,0.1,0.15",
    fallback: FallbackOpt = None,
    structure: StructureOpt = "auto",
    workload: WorkloadOpt = None,
    kind: KindOpt = None,
    include_dir: IncludeOpt = None,
) -> None:
    """Write summary.csv, tol_table.csv, structures.csv, dispatch.json/.cuh/.py and the PNG plots into --out, for
    every problem kind of the database (in --out/KIND/ when it holds several kinds; --kind picks one)."""
    from autotune.workflows.tables import report_folder

    opts = TableOptions(bk, tol, method, spread_ties, validity, generic, fallback, structure, workload, include_dir)
    written = report_folder(
        source, out_dir, opts, fractions(tols, "--tols"), device=device, space=space, kind=kind, say=stdout().print
    )
    for path in written:
        stdout().print(f"wrote {path}")


def register(app: typer.Typer) -> None:
    """Add analyze, emit, report and compare to the main app (called by autotune.cli.main)."""
    app.command()(analyze)
    app.command()(emit)
    app.command()(report)
    from autotune.cli.compare import compare

    app.command()(compare)
