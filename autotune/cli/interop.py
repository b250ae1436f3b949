"""`autotune import kerneltuner` and `autotune export kerneltuner`: Kernel Tuner caches in and out."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from autotune.cli.consoles import stdout

import_app = typer.Typer(help="Bring results of other tuners into a results database.", no_args_is_help=True)
export_app = typer.Typer(help="Write results in other tuners' formats.", no_args_is_help=True)


@import_app.command("kerneltuner")
def import_kerneltuner(
    cache: Path = typer.Argument(
        ..., help="a Kernel Tuner cache file (JSON; an unterminated one left by a stopped run is read too)"
    ),
    db: str = typer.Option(..., "--db", help="results database URL or SQLite file to import into (created if new)"),
    space: Optional[str] = typer.Option(
        None,
        "--space",
        help="the space file the kernel was tuned with; without it a space is written from the cache's tune_params",
    ),
    space_out: Optional[Path] = typer.Option(
        None, "--space-out", help="where to write the created space (default: next to the cache, CACHE.space.yaml)"
    ),
    precision: str = typer.Option(
        "fp32", "--precision", "-p", help="precision of the test point (the cache does not record it)"
    ),
    max_cache_mb: Optional[int] = typer.Option(
        None,
        "--max-cache-mb",
        min=1,
        help="refuse a larger cache file, before reading it (default 256 or AUTOTUNE_MAX_CACHE_MB)",
    ),
    max_entries: Optional[int] = typer.Option(
        None,
        "--max-entries",
        min=1,
        help="refuse a cache of more configurations (default 500,000 or AUTOTUNE_MAX_CACHE_ENTRIES)",
    ),
) -> None:
    """Import a Kernel Tuner cache: every configuration becomes a measurement (times kept exactly, failures as
    failures), the cache's problem size a test point, its device a device."""
    from autotune.interop.kt_store import import_cache
    from autotune.outfiles import check_writable
    from autotune.space.spec import load_space
    from autotune.paths import sqlite_files
    from autotune.store.engine import database_url, sqlite_path
    from autotune.store.store import Store

    # nothing half-written: every output's folder is checked first, and a database file or space file this
    # import creates is removed when it fails
    db_file = sqlite_path(database_url(db, write=True))
    new_space = [space_out or cache.with_suffix(".space.yaml")] if space is None else []
    check_writable(([Path(db_file)] if db_file else []) + new_space)
    made = (sqlite_files(db_file) if db_file else []) + new_space
    made = [p for p in made if not p.exists()]
    try:
        with Store.open(db) as store:
            got = import_cache(
                cache,
                store,
                load_space(space) if space else None,
                space_out,
                precision,
                max_mb=max_cache_mb,
                max_entries=max_entries,
            )
    except BaseException:
        for path in made:
            path.unlink(missing_ok=True)
        raise
    if got.space_file is not None:
        stdout().print(f"space written to {got.space_file}")
    if got.dropped_entries:
        stdout().print("the cache was cut off mid-entry: its last, partial configuration was dropped")
    if got.rejected:
        stdout().print(
            f"{len(got.rejected)} configuration(s) recorded as failed, not ok: their time is not a positive "
            "finite number of ms",
            markup=False,
        )
        for key, why in got.rejected[:10]:
            stdout().print(f"  {key}: {why}", markup=False, highlight=False)
        if len(got.rejected) > 10:
            stdout().print(f"  ... and {len(got.rejected) - 10} more", markup=False)
    if got.named_sizes:
        stdout().print(
            f"problem_size {', '.join(got.named_sizes)}: an expression of the tunable parameters (the grid follows "
            "the configuration); the test point has size 1 on that axis",
            markup=False,
        )
    if got.skipped:
        stdout().print(
            f"skipped {got.skipped} configuration(s) already in the database at this point on this device", markup=False
        )
    stdout().print(
        f"imported {got.records} configurations ({got.failures} failed) of space {got.space} at "
        f"{got.point.key} into {db} (sweep {got.sweep_id})"
    )


@export_app.command("kerneltuner")
def export_kerneltuner(
    db: str = typer.Argument(..., help="results database URL or SQLite file"),
    space: str = typer.Option(..., "--space", help="the space whose measurements to write"),
    out_file: Path = typer.Option(..., "--out", "-o", help="the Kernel Tuner cache file to write"),
    point: Optional[str] = typer.Option(
        None,
        "--point",
        help="the test point (its key, e.g. transpose:fp32:-:4096x4096) when the space was measured at several",
    ),
    device: Optional[str] = typer.Option(None, "--device", "-d", help="device name or UUID (default: the only one)"),
    t4: Optional[Path] = typer.Option(None, "--t4", help="also write Kernel Tuner's T4 results JSON here"),
) -> None:
    """Export one space's measurements at one test point as a Kernel Tuner cache (Kernel Tuner's reader and its
    simulation mode accept it), and optionally as T4 results."""
    from autotune.interop.kerneltuner import cache_text, t4_text
    from autotune.interop.kt_export import export_cache
    from autotune.outfiles import check_writable, write_files
    from autotune.store.store import Store

    targets = [out_file] + ([t4] if t4 is not None else [])
    check_writable(targets)  # before reading the database: a path that cannot be written fails at once
    with Store.open(db, readonly=True) as store:
        cache = export_cache(store, space, device, point)
    texts = {out_file: cache_text(cache)}
    if t4 is not None:
        texts[t4] = t4_text(cache)
    write_files(texts)  # both or neither
    stdout().print(f"wrote {len(cache.records)} configurations to {out_file}" + (f" and {t4}" if t4 else ""))
