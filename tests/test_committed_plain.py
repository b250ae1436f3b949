"""Every committed results database is xz of a plain SQLite file at the current schema: the `xz` command and Python's
own `sqlite3` read it with no step of autotune's, and read what `autotune query` reads.

Per file: `xz -dc`, then sqlite3 checks that no measurement with status ok lacks its median, no `times_ms` is written
in a packed form (`ns:...`), nothing of the older packed format is left, and the schema is this autotune's (so reading
it migrates nothing); then one aggregated SELECT over the medians gives the same text through sqlite3 and through
`python -m autotune query --db FILE.sqlite.xz`, which prints no warning. The README's first sweep warns of nothing."""

from __future__ import annotations

import csv
import io
import os
import shutil
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from autotune.paths import ROOT
from autotune.store.migrate import head
from autotune.store.version import SCHEMA_VERSION

# the medians of each (table, status), exactly: count, sum and a sum weighted by id (order-sensitive) as %.17g text
MEDIANS = (
    "SELECT '{table}' AS t, status, COUNT(*) AS n, COUNT(median_ms) AS timed, "
    "printf('%.17g', SUM(median_ms)) AS s, printf('%.17g', SUM(median_ms * id)) AS w FROM {table} GROUP BY status"
)
SQL = f"{MEDIANS.format(table='measurements')} UNION ALL {MEDIANS.format(table='baselines')} ORDER BY t, status"


def committed_results() -> list[Path]:
    """The committed databases: results/**/*.sqlite.xz and examples/*/results/**/*.sqlite.xz."""
    return sorted([*(ROOT / "results").rglob("*.sqlite.xz"), *(ROOT / "examples").glob("*/results/**/*.sqlite.xz")])


def _query(db: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autotune", "query", SQL, "--db", str(db), "--format", "csv"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _query_here(db: Path) -> subprocess.CompletedProcess:
    """`autotune query` on `db` in this process (the command line's app), as `_query` returns it; a Python warning
    is written to stderr as the command line would print it."""
    from typer.testing import CliRunner

    from autotune.cli.main import app

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = CliRunner().invoke(app, ["query", SQL, "--db", str(db), "--format", "csv"])
    said = r.stderr + "".join(f"warning: {w.message}\n" for w in caught)
    return subprocess.CompletedProcess([], r.exit_code, r.stdout, said)


@pytest.mark.skipif(shutil.which("xz") is None, reason="needs the xz command")
def test_every_committed_database_is_plain_sqlite_under_xz(tmp_path: Path) -> None:
    files = committed_results()
    assert len(files) >= 25
    # the largest through `python -m autotune` in a process of its own, the others through the same command in this
    # process (about 0.7 s of interpreter start and imports saved on each of the 35 others: CI time)
    largest = max(files, key=lambda p: p.stat().st_size)
    queried = {f: _query_here(f) for f in files if f != largest} | {largest: _query(largest)}
    problems = []
    for packed in files:
        name = packed.relative_to(ROOT).as_posix()
        plain = tmp_path / "plain.sqlite"
        with plain.open("wb") as out:
            subprocess.run(["xz", "-dc", str(packed)], stdout=out, check=True, timeout=120)
        conn = sqlite3.connect(plain)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            version = conn.execute("SELECT value FROM schema_meta WHERE key = 'schema_version'").fetchone()
            revision = conn.execute("SELECT version_num FROM autotune_alembic_version").fetchall()
            untimed = conn.execute(
                "SELECT COUNT(*) FROM measurements WHERE status = 'ok' AND median_ms IS NULL"
            ).fetchone()[0]
            packed_times = sum(
                conn.execute(f"SELECT COUNT(*) FROM {t} WHERE times_ms LIKE 'ns:%'").fetchone()[0]
                for t in ("measurements", "baselines")
            )
            rows = conn.execute(SQL).fetchall()
        finally:
            conn.close()
        plain.unlink()
        if version != (str(SCHEMA_VERSION),) or revision != [(head(),)]:
            problems.append(f"{name}: schema {version}, revision {revision} (this autotune: {SCHEMA_VERSION})")
        if tables & {"autotune_packing", "autotune_packing_work"}:
            problems.append(f"{name}: tables of the older packed format: {sorted(tables)}")
        if untimed or packed_times:
            problems.append(f"{name}: {untimed} ok measurements without a median, {packed_times} times_ms as ns:")
        r = queried[packed]
        want = [[str(v) for v in row] for row in rows]
        got = list(csv.reader(io.StringIO(r.stdout)))[1:] if r.returncode == 0 else None
        if r.returncode != 0 or r.stderr.strip() or got != want:
            problems.append(f"{name}: autotune query gave {got} ({r.stderr.strip()[:200]}) where sqlite3 gives {want}")
    assert not problems, "\n".join(problems)


def test_the_readme_first_sweep_warns_of_nothing(tmp_path: Path) -> None:
    """README.md's first sweep, replayed from the committed default database: no migration warning (nor any)."""
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "autotune",
            "sweep",
            "configs/default.yaml",
            "--replay",
            "results/default/default.sqlite.xz",
        ]
        + ["--db", str(tmp_path / "first.sqlite"), "--quiet"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "warning" not in r.stderr.lower() and "migrat" not in r.stderr + r.stdout, r.stderr
