"""`autotune query SQL` and `autotune db upgrade|pack|unpack|bake`: reading and maintaining results databases."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from autotune.cli.consoles import stdout
from autotune.errors import UserError


class OutFormat(str, Enum):
    table = "table"
    csv = "csv"


def query(
    sql: Annotated[
        str,
        typer.Argument(
            help="One SQL statement that only reads (SELECT, WITH, PRAGMA table_info): the connection is read-only "
            "and writes, ATTACH, VACUUM and PRAGMA assignments are refused."
        ),
    ],
    db: Annotated[
        Optional[str],
        typer.Option(
            "--db",
            help="Database URL or SQLite path, e.g. results/default/default.sqlite.xz (packed and gzipped files are "
            "read through a decompressed copy). Default: results/default.sqlite when it exists (the default "
            "sweep's database), else results/default.sqlite.xz or .gz.",
        ),
    ] = None,
    format: Annotated[OutFormat, typer.Option("--format", "-f", help="table or csv.")] = OutFormat.table,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.001, help="Cancel the statement after this many seconds (exit 2).")
    ] = 60.0,
    max_rows: Annotated[
        int,
        typer.Option(
            "--max-rows", min=1, help="Print at most this many rows (a note on stderr says when more were left)."
        ),
    ] = 100_000,
    max_bytes: Annotated[
        int,
        typer.Option(
            "--max-bytes",
            min=1,
            help="Print at most about this many bytes: longer values are cut (ending in …) and the rows that do not "
            "fit are left out (a note on stderr says so).",
        ),
    ] = 100_000_000,
) -> None:
    """Run one read-only SQL statement on a results database; print a plain-text table or CSV.

    A refused or failing statement exits with code 2 and changes nothing (no file is created)."""
    from autotune.cli.query_output import clipped, fit
    from autotune.store.query import run_query

    frame = run_query(db or _default_db(), sql, timeout=timeout, max_rows=max_rows)
    if frame.attrs.get("truncated"):
        sys.stderr.write(f"note: printed the first {max_rows:,} rows; more were left (--max-rows N prints more)\n")
    fitted = fit(frame, max_bytes, padded=format is not OutFormat.csv)
    frame = fitted.frame
    if format is OutFormat.csv:
        text = frame.to_csv(index=False)
    elif len(frame):  # plain text, never wrapped to the terminal's (or a pipe's 80-column) width
        text = frame.to_string(index=False) + "\n"
    else:
        text = "".join(f"{c}  " for c in frame.columns).rstrip() + ("\n" if len(frame.columns) else "") + "(no rows)\n"
    text, clip = clipped(text, max_bytes)
    sys.stdout.write(text)
    if fitted.values_cut or fitted.rows_left or clip:
        left = [f"{fitted.values_cut:,} values cut at {fitted.cut_at:,} characters"] * bool(fitted.values_cut)
        left += [f"{fitted.rows_left:,} more rows left out"] * bool(fitted.rows_left)
        left += ["the output cut"] * clip
        sys.stderr.write(f"note: printed at most {max_bytes:,} bytes: {'; '.join(left)} (--max-bytes N prints more)\n")


def _default_db() -> str:
    """results/default.sqlite (under the current folder, else the checkout) when it exists, else its packed
    results/default.sqlite.xz or gzipped .gz (read through a decompressed copy); otherwise an error that lists the
    databases found under results/ (plain, packed and gzipped)."""
    from autotune.paths import RESULTS_DIR
    from autotune.store.engine import database_url

    ends = (".sqlite", ".sqlite.xz", ".sqlite.gz")
    for candidate in (folder / f"default{end}" for end in ends for folder in (Path("results"), RESULTS_DIR)):
        if candidate.is_file():
            return database_url(str(candidate))
    found = sorted(f for end in ends for f in RESULTS_DIR.glob(f"**/*{end}"))
    listed = ", ".join(str(f.relative_to(Path.cwd()) if f.is_relative_to(Path.cwd()) else f) for f in found[:5])
    more = f" (and {len(found) - 5} more)" if len(found) > 5 else ""
    raise UserError(
        "no --db given and no results/default.sqlite (the default sweep has not run here)",
        hint=f"pass --db PATH_OR_URL, e.g. --db {listed.split(', ')[0]}; databases under results/: {listed}{more}"
        if found
        else "pass --db PATH_OR_URL of a sweep's database "
        "(a config's `database:`, default results/<config name>.sqlite)",
    )


db_app = typer.Typer(help="Maintain results databases.", no_args_is_help=True)


@db_app.command()
def upgrade(
    url: Annotated[str, typer.Argument(help="Database URL or SQLite file, e.g. results/default.sqlite.")],
    sql: Annotated[bool, typer.Option("--sql", help="Print the SQL the upgrade would run; change nothing.")] = False,
) -> None:
    """Migrate a results database to this autotune's schema (Alembic, to the head revision), in place and in
    one transaction (back the file up first)."""
    from autotune.store.migrate import head, upgrade as do_upgrade
    from autotune.store.engine import database_url

    done = do_upgrade(database_url(url, write=not sql), sql=sql)  # --sql only reads: a .gz is fine there
    if done.sql is not None:
        typer.echo(done.sql, nl=False)
        return
    assert done.after is not None
    if done.before.effective == done.after.effective:
        stamped = ", now recorded in autotune_alembic_version" if done.before.revision is None else ""
        stdout().print(f"already at {done.after.describe()} (head {head()}{stamped})")
    else:
        stdout().print(f"{done.before.describe()} -> {done.after.describe()}")


@db_app.command()
def pack(
    source: Annotated[Path, typer.Argument(help="A plain SQLite results file, e.g. results/my_run.sqlite.")],
    out_file: Annotated[
        Optional[Path], typer.Option("--out", "-o", help="The .sqlite.xz file to write (default: SOURCE.xz).")
    ] = None,
    without_studies: Annotated[
        bool,
        typer.Option(
            "--without-studies",
            help="Empty the Optuna studies a model-based search kept in the database (only a resumed sweep and "
            "`autotune dashboard` read them; often most of the file). Measurements, instances, points, sweeps and "
            "library times are kept.",
        ),
    ] = False,
) -> None:
    """Write a results database small enough to commit: xz of the plain SQLite file (after VACUUM), nothing else.
    `xz -dc FILE.sqlite.xz > FILE.sqlite` (or `autotune db unpack`) gives the database back, every value as the runner
    wrote it (with --without-studies, the Optuna studies' tables empty); every command that reads a database reads the
    .sqlite.xz as it is. The file is checked by decompressing it before it takes its name."""
    from autotune.outfiles import check_writable
    from autotune.store.engine import StoreError
    from autotune.store.packing import pack as do_pack

    if not source.is_file():
        raise StoreError(f"no SQLite file at {source}", hint="give the plain .sqlite file a sweep wrote")
    target = out_file or source.with_name(source.name + ".xz")
    if target.suffix != ".xz":
        raise UserError(f"--out {target}: a packed database's name ends in .sqlite.xz", hint=f"e.g. --out {target}.xz")
    check_writable([target])
    done = do_pack(source, target, studies=not without_studies)
    stdout().print(
        f"wrote {target}: {done['bytes_out']:,} bytes, xz of the {done['bytes_plain']:,}-byte SQLite database "
        f"({source}: {done['bytes_in']:,} bytes)"
    )


@db_app.command()
def unpack(
    source: Annotated[Path, typer.Argument(help="A compressed database (.sqlite.xz, or .sqlite.gz).")],
    out_file: Annotated[Path, typer.Option("--out", "-o", help="The plain SQLite file to write.")],
    force: Annotated[
        bool, typer.Option("--force", help="Replace OUT if it exists (only once the new file is complete).")
    ] = False,
) -> None:
    """Write the plain SQLite database a .sqlite.xz (or .sqlite.gz) file holds, to sweep into it or open it with any
    SQLite tool (`xz -dc` gives the same file; a file packed by an older autotune is rebuilt here). The output appears
    only once it is complete and checked: a failure leaves no file, and an existing file as it was."""
    from autotune.outfiles import check_writable
    from autotune.store.packing import unpack as do_unpack

    check_writable([out_file])
    do_unpack(source, out_file, replace=force)
    stdout().print(f"wrote {out_file}")


@db_app.command()
def bake(
    tuning: Annotated[Path, typer.Argument(help="The tuning database: .sqlite, .sqlite.xz or .sqlite.gz.")],
    out_file: Annotated[Path, typer.Option("--out", "-o", help="The plain SQLite file to write.")],
    sources: Annotated[
        Optional[list[Path]],
        typer.Argument(
            help="Validation folders (`autotune validate --out`: validate_sweep.yaml and validation.sqlite, "
            "either may be .xz) and results databases of the same GPU model (every sweep they recorded), replayed "
            "in this order."
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace OUT if it exists (once the new file is complete).")
    ] = False,
) -> None:
    """Write the tuning database with the sweeps of spent validations and of other results databases replayed into
    it (nothing is measured): their problems, instances and library times become part of the tables `autotune emit
    OUT` builds. A failure leaves no output."""
    from autotune.outfiles import check_writable
    from autotune.workflows.bake import bake as do_bake

    check_writable([out_file])
    done = do_bake(tuning, sources or [], out_file, replace=force)
    for source, added in zip(done.sources, done.added, strict=True):
        stdout().print(f"replayed {source}: {added:,} measurements", highlight=False, soft_wrap=True)
    stdout().print(f"wrote {out_file}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command()(query)
    app.add_typer(db_app, name="db")
