"""`autotune explore` (an offline interactive HTML report) and `autotune dashboard` (optuna-dashboard on a results
database). The reports are built in autotune/explore/; printing and files live here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from autotune.cli.consoles import stdout
from autotune.errors import UserError
from autotune.vocab import MAX_SEED


def explore(
    target: Annotated[
        str,
        typer.Argument(
            metavar="SPACE|DATABASE|TABLE|FOLDER",
            help="A space (spaces/NAME.yaml or a built-in space name), a results database (.sqlite, .sqlite.xz, .sqlite.gz or "
            "a URL), a dispatch table (dispatch.json, with tol_table.csv and validation/ beside it), or a "
            "results folder (its database and table in one page).",
        ),
    ],
    out_path: Annotated[Path, typer.Option("--out", "-o", help="The HTML file to write.")] = Path("report.html"),
    device: Annotated[
        Optional[str], typer.Option("--device", "-d", help="Space: device profile (default H100 or this GPU).")
    ] = None,
    precision: Annotated[
        Optional[str], typer.Option("--precision", "-p", help="Space: precision (default: the space's first).")
    ] = None,
    no_soft: Annotated[bool, typer.Option("--no-soft", help="Space: switch off every soft constraint.")] = False,
    soft_off: Annotated[
        Optional[list[str]], typer.Option("--soft-off", help="Space: switch off one soft constraint (repeatable).")
    ] = None,
    top: Annotated[int, typer.Option(help="Results: instances per point in the parallel coordinates.")] = 3,
    seed: Annotated[
        int,
        typer.Option(
            min=0, max=MAX_SEED, help="Seed of every sample the report takes (said where taken; 0 to 2**32-1)."
        ),
    ] = 0,
) -> None:
    """Write one self-contained interactive HTML report (Plotly, works offline, no CDN) of a space, a results
    database or a dispatch table, with filters by device, kind, precision, shape, space and test point.

    Needs plotly: pip install 'autotune[explore]'. Large inputs are aggregated (a database of 10^6 measurements
    gives a page of a few MB); a space with over 10^6 hard survivors is explored from a sample, and says so."""
    from autotune.explore.report import build
    from autotune.outfiles import check_writable, write_file

    check_writable([out_path])
    built = build(
        target, device=device, precision=precision, top=top, no_soft=no_soft, soft_off=tuple(soft_off or ()), seed=seed
    )
    text = built.page.render()
    write_file(out_path, text)
    stdout().print(
        f"wrote {out_path} ({len(text.encode()) / 1e6:.1f} MB, {len(built.page.figures)} charts, "
        f"{built.what}) in {built.seconds:.1f} s",
        highlight=False,
    )


def dashboard(
    database: Annotated[
        str, typer.Argument(metavar="DATABASE", help="A results database (.sqlite, .sqlite.xz, .sqlite.gz or a URL).")
    ],
    per: Annotated[
        str,
        typer.Option(
            help="One study per `point` (space, test point, device) or per `sweep` "
            "(sweep, space; value: slowdown against the best at the point)."
        ),
    ] = "point",
    storage: Annotated[
        Optional[str],
        typer.Option(
            help="Write the studies into this Optuna storage (a file path or a database URL) and keep it; "
            "default: in memory, gone when the dashboard stops."
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Address the dashboard listens on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port of the dashboard.")] = 8080,
    no_serve: Annotated[
        bool, typer.Option("--no-serve", help="Only write the studies (with --storage); do not start the dashboard.")
    ] = False,
) -> None:
    """Show every sweep of a results database, brute force included, as Optuna studies in optuna-dashboard.

    Each measurement becomes a trial (verified: COMPLETE with its time; failed: FAIL; cut by early stop: PRUNED).
    Needs optuna-dashboard to serve: pip install 'autotune[dashboard]'. optuna-dashboard handles up to about
    10,000 trials a study; `autotune explore` draws larger databases."""
    import optuna
    from autotune.explore.data import load
    from autotune.explore.studies import studies

    if per not in ("point", "sweep"):
        raise UserError(f"--per must be point or sweep, not {per!r}")
    if no_serve and storage is None:
        raise UserError("--no-serve writes nothing without --storage", hint="add --storage studies.sqlite3")
    if not no_serve:
        try:
            import optuna_dashboard  # noqa: F401
        except ImportError:
            raise UserError(
                "`autotune dashboard` needs the optuna-dashboard package, which is not installed",
                hint="pip install 'autotune[dashboard]' (or: pip install optuna-dashboard), or write "
                "the studies with --storage FILE --no-serve and open them elsewhere",
            ) from None
    url = storage if storage is None or "://" in storage else f"sqlite:///{Path(storage).expanduser().resolve()}"
    target = optuna.storages.RDBStorage(url) if url else optuna.storages.InMemoryStorage()
    if url and url.startswith("sqlite"):
        _fast_sqlite(target)
    results = load(database)
    names = studies(results, target, per=per)
    stdout().print(f"{len(names)} studies from {database}" + (f" in {url}" if url else " (in memory)"), highlight=False)
    if no_serve:
        return
    from optuna_dashboard import run_server

    stdout().print(f"optuna-dashboard at http://{host}:{port}/ (Ctrl-C stops it)", highlight=False)
    run_server(target, host=host, port=port)


def _fast_sqlite(storage) -> None:  # type: ignore[no-untyped-def]
    """An SQLite file of converted studies is written without a sync per trial: it can be made again, and Optuna
    commits every trial on its own."""
    from sqlalchemy import event

    def pragmas(conn, _record) -> None:  # type: ignore[no-untyped-def]
        cur = conn.cursor()
        cur.execute("PRAGMA synchronous = OFF")
        cur.execute("PRAGMA journal_mode = MEMORY")
        cur.close()

    event.listen(storage.engine, "connect", pragmas)
    storage.engine.dispose()  # connections made before the listener: made again with it


def register(app: typer.Typer) -> None:
    app.command()(explore)
    app.command()(dashboard)
