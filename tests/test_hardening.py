"""Issue 16: bad input, faults and signals never crash, hang or lose data (real files, real processes)."""
from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.paths import ROOT

RECORDED = ROOT / "results" / "default" / "default.sqlite"


def cli(*args: str, cwd: Path | str = ROOT, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "80"}
    return subprocess.run([sys.executable, "-m", "autotune", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env=env)


@pytest.fixture
def recorded_copy(tmp_path: Path) -> Path:
    db = tmp_path / "db.sqlite"
    with sqlite3.connect(RECORDED) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    return db


# ---- 1. autotune query is read-only ------------------------------------------------------------------

@pytest.mark.parametrize("sql, created", [
    ("ATTACH 'attached.db' AS x", "attached.db"),
    ("ATTACH DATABASE 'file:attached.db?mode=rwc' AS x", "attached.db"),
    ("VACUUM INTO 'vacuumed.db'", "vacuumed.db"),
    ("PRAGMA writable_schema = 1", None),
    ("PRAGMA user_version = 7", None),
    ("PRAGMA journal_mode = DELETE", None),
    ("BEGIN IMMEDIATE", None),
    ("CREATE TEMP TABLE t (x)", None),
    ("DELETE FROM measurements", None),
    ("REINDEX", None),
])
def test_query_refuses_anything_but_reads(recorded_copy: Path, sql: str, created: str | None) -> None:
    before = sorted(p.name for p in recorded_copy.parent.iterdir())
    r = cli("query", sql, "--db", str(recorded_copy), cwd=recorded_copy.parent)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith("error: query failed") and "Traceback" not in r.stderr
    assert "read-only" in r.stderr
    after = sorted(p.name for p in recorded_copy.parent.iterdir() if not p.name.endswith(("-wal", "-shm")))
    assert created is None or created not in after
    assert set(after) <= set(before)
    with sqlite3.connect(recorded_copy) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == 0
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert c.execute("select count(*) from measurements").fetchone()[0] == 2886


def test_query_still_reads(recorded_copy: Path) -> None:
    r = cli("query", "PRAGMA table_info(sweeps)", "--db", str(recorded_copy))
    assert r.returncode == 0 and "config_name" in r.stdout
    r = cli("query", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3) "
            "SELECT x, upper('a') AS u FROM c", "--db", str(recorded_copy))
    assert r.returncode == 0 and r.stdout.split() == ["x", "u", "1", "A", "2", "A", "3", "A"]


def test_query_output_does_not_wrap_in_a_pipe(recorded_copy: Path) -> None:
    sql = "SELECT id, config_name, started_at, finished_at, status, alpha, beta, reps, host, pid FROM sweeps"
    r = cli("query", sql, "--db", str(recorded_copy))
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    n = cli("query", "SELECT COUNT(*) AS n FROM sweeps", "--db", str(recorded_copy), "-f", "csv")
    assert len(lines) == 1 + int(n.stdout.split()[1])  # header + one line per row, however wide
    assert lines[0].split() == ["id", "config_name", "started_at", "finished_at", "status", "alpha", "beta", "reps",
                                "host", "pid"]
    empty = cli("query", "SELECT id, status FROM sweeps WHERE 0", "--db", str(recorded_copy))
    assert empty.returncode == 0 and empty.stdout == "id  status\n(no rows)\n"


def test_query_without_db_says_what_to_pass(tmp_path: Path) -> None:
    r = cli("query", "SELECT 1", cwd=tmp_path)
    if (ROOT / "results" / "default.sqlite").exists():  # a checkout where the default sweep ran
        assert r.returncode == 0
        return
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "no --db given" in r.stderr and "--db" in r.stderr and "default.sqlite" in r.stderr
