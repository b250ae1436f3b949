"""`autotune db pack` / `db unpack` (autotune/store/packing.py): a .sqlite.xz is xz of the plain database, nothing else,
and a file an older autotune packed (autotune/store/legacy_pack.py) still reads, exactly.

Real SQLite files, the real `xz` command and the real command line: a committed database unpacked and packed again
is what `xz -dc` gives back, every row and index; the older format's fixture (tests/data/, the transpose example as
the older `db pack` wrote it) rebuilds to the committed database's rows, checks its digest and refuses a damaged
file; the statistics and figures it recomputes are the runner's and the store's."""

from __future__ import annotations

import json
import lzma
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from autotune.errors import UserError
from autotune.paths import ROOT
from autotune.store import legacy_pack, packing
from autotune.sweep.timing import summarize
from tests.support.committed import committed, gunzip_to
from tests.support.harness import invoke_cli

DEFAULT = committed("default")
LEGACY = ROOT / "tests" / "data" / "legacy_packed_transpose_h100.xz"  # examples/transpose as packed before plain xz
TRANSPOSE = ROOT / "examples" / "transpose" / "results" / "transpose_h100.sqlite.xz"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def _rows(path: Path, table: str, columns: str = "*") -> list[str]:
    with sqlite3.connect(path) as conn:
        rows = sorted(
            repr([v.hex() if isinstance(v, float) else v for v in r])
            for r in conn.execute(f'SELECT {columns} FROM "{table}"')
        )
    conn.close()
    return rows


def _schema(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()
    conn.close()
    return rows


def test_the_legacy_statistics_are_the_runners() -> None:
    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 20, 33):
        times = [float(np.float32(x)) for x in rng.uniform(0.01, 3.0, n)]
        s = summarize(times)
        assert legacy_pack.summarize(times) == (s.median_ms, s.p20_ms, s.p80_ms, s.min_ms, s.max_ms)


def test_the_legacy_figures_are_the_stores() -> None:
    from autotune.store.schema import figures

    rng = np.random.default_rng(1)
    for _ in range(200):
        flops, nbytes = (float(x) if rng.random() > 0.2 else None for x in rng.integers(0, 10**12, 2))
        median = float(np.float32(rng.uniform(-0.1, 3.0))) if rng.random() > 0.1 else None
        bandwidth = float(rng.choice([0.0, rng.uniform(1e11, 4e12)]))
        f = figures(flops, nbytes, median, bandwidth)
        assert legacy_pack.figures(flops, nbytes, median, bandwidth) == (f.gflops, f.gbs, f.roofline_frac)


def test_legacy_nanoseconds_read_back_and_a_bad_one_is_refused() -> None:
    text = json.dumps([float(np.float32(0.182144)), float(np.float32(0.181856)), float(np.float32(1.5e-3))])
    assert legacy_pack.decode_times("ns:182144,181856,1500") == text
    with pytest.raises(UserError, match="row 7: times_ms"):
        legacy_pack.decode_times("ns:182144," + "9" * 400, "measurements row 7: times_ms")


@pytest.mark.skipif(shutil.which("xz") is None, reason="needs the xz command")
def test_pack_writes_xz_of_the_plain_database(tmp_path: Path) -> None:
    """pack = VACUUM + xz: `xz -dc` gives a database with every table, row and index of the source."""
    plain = gunzip_to(DEFAULT, tmp_path / "plain.sqlite")
    done = packing.pack(plain, tmp_path / "again.sqlite.xz")
    assert done["bytes_out"] == (tmp_path / "again.sqlite.xz").stat().st_size < done["bytes_plain"] / 4
    back = tmp_path / "back.sqlite"
    with back.open("wb") as out:
        subprocess.run(["xz", "-dc", str(tmp_path / "again.sqlite.xz")], stdout=out, check=True)
    assert back.stat().st_size == done["bytes_plain"] and back.read_bytes()[:16] == b"SQLite format 3\x00"
    assert _schema(back) == _schema(plain)
    for table in ("measurements", "baselines", "test_points", "point_sizes", "sweeps", "spaces", "instances"):
        assert _rows(back, table) == _rows(plain, table), table
    assert "ix_measurements_point_status" in {name for _, name, _ in _schema(back)}
    with sqlite3.connect(back) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # one file: no -wal needed beside it
    conn.close()


def test_a_legacy_packed_file_rebuilds_to_the_committed_rows(tmp_path: Path) -> None:
    """The older format (times as ns:, statistics and figures left out, indexes dropped) rebuilds, digest-checked, to
    the database committed since as plain xz (the same rows; the committed one is migrated to the current schema)."""
    out = tmp_path / "legacy.sqlite"
    packing.unpack(LEGACY, out)
    with sqlite3.connect(out) as conn:
        assert not legacy_pack.is_packed(conn)
        assert conn.execute("SELECT COUNT(*) FROM measurements WHERE times_ms LIKE 'ns:%'").fetchone() == (0,)
    conn.close()
    now = gunzip_to(TRANSPOSE, tmp_path / "now.sqlite")
    assert _rows(out, "measurements") == _rows(now, "measurements")
    timed = "id, device_id, point_id, status, median_ms, p20_ms, p80_ms, min_ms, max_ms, reps, times_ms"
    assert _rows(out, "cublas", timed) == _rows(now, "baselines", timed)  # schema 2's cublas is schema 3's baselines


def test_a_damaged_legacy_file_is_refused(tmp_path: Path) -> None:
    work = tmp_path / "w.sqlite"
    work.write_bytes(lzma.decompress(LEGACY.read_bytes()))
    with sqlite3.connect(work) as conn:  # one repetition one nanosecond off
        rowid, times = conn.execute(
            "SELECT rowid, times_ms FROM measurements WHERE times_ms LIKE 'ns:%' LIMIT 1"
        ).fetchone()
        first, rest = times[3:].split(",", 1)
        conn.execute("UPDATE measurements SET times_ms = ? WHERE rowid = ?", (f"ns:{int(first) + 32},{rest}", rowid))
    conn.close()
    damaged = tmp_path / "damaged.sqlite.xz"
    damaged.write_bytes(lzma.compress(work.read_bytes()))
    with pytest.raises(UserError, match="differs from the one packed"):
        packing.unpack(damaged, tmp_path / "out.sqlite")
    assert not (tmp_path / "out.sqlite").exists()
    r = _cli("query", "SELECT COUNT(*) FROM measurements", "--db", str(damaged))
    assert r.returncode == 2 and "differs from the one packed" in r.stderr and "Traceback" not in r.stderr
    assert str(damaged) in r.stderr


def test_db_pack_and_unpack_on_the_command_line(tmp_path: Path) -> None:
    plain = gunzip_to(DEFAULT, tmp_path / "plain.sqlite")
    r = _cli("db", "pack", str(plain), "--out", str(tmp_path / "d.sqlite.xz"))
    assert r.returncode == 0, r.stderr
    assert "xz of the" in " ".join(r.stdout.split())
    sql = "SELECT status, COUNT(*) AS n, SUM(median_ms) AS s FROM measurements GROUP BY status ORDER BY status"
    # what the packed file reads as, against the plain one: the same query in this process (the outputs compared)
    a = invoke_cli("query", sql, "--db", str(plain), "--format", "csv")
    b = invoke_cli("query", sql, "--db", str(tmp_path / "d.sqlite.xz"), "--format", "csv")
    assert a.returncode == 0 and a.stdout == b.stdout
    refused = _cli("sweep", "configs/default.yaml", "--db", str(tmp_path / "d.sqlite.xz"), "--replay", str(plain))
    assert refused.returncode == 2 and "autotune db unpack" in refused.stderr
    r = _cli("db", "unpack", str(tmp_path / "d.sqlite.xz"), "--out", str(tmp_path / "u.sqlite"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "u.sqlite").read_bytes() == lzma.decompress((tmp_path / "d.sqlite.xz").read_bytes())
    for table in ("measurements", "baselines", "sweeps"):
        assert _rows(plain, table) == _rows(tmp_path / "u.sqlite", table)


def test_without_studies_empties_only_the_optuna_tables(tmp_path: Path) -> None:
    """`db pack --without-studies` on a committed hybrid-searched sweep (its per-point Optuna studies in the file):
    the study tables are empty in the packed file, every other table holds the same rows, and the file is smaller."""
    plain = gunzip_to(ROOT / "results" / "rect_h100" / "rect_h100_part2.sqlite.xz", tmp_path / "rect.sqlite")
    assert _rows(plain, "trials") and _rows(plain, "trial_params")  # the fixture has studies to drop
    whole, lean = tmp_path / "whole.sqlite.xz", tmp_path / "lean.sqlite.xz"
    packing.pack(plain, whole)
    done = _cli("db", "pack", str(plain), "-o", str(lean), "--without-studies")
    assert done.returncode == 0, done.stderr
    assert lean.stat().st_size < whole.stat().st_size
    back = tmp_path / "back.sqlite"
    back.write_bytes(lzma.decompress(lean.read_bytes()))
    assert _schema(back) == _schema(plain)
    tables = [name for kind, name, _ in _schema(plain) if kind == "table"]
    assert set(packing.STUDY_TABLES) <= set(tables)
    for table in tables:
        want = [] if table in packing.STUDY_TABLES else _rows(plain, table)
        assert _rows(back, table) == want, table
