"""Packed results databases (`autotune db pack`, autotune/store/packing.py): smaller, and read back exactly.

Real SQLite files and the real command line: a committed database unpacked, packed again and unpacked gives the
same schema and rows, floats bit for bit; every command reads the .sqlite.xz as it is; a damaged file is refused;
the statistics the packing recomputes are the runner's."""

from __future__ import annotations

import json
import lzma
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from autotune.errors import UserError
from autotune.paths import ROOT
from autotune.store import packing
from autotune.sweep.timing import summarize
from tests.support.committed import committed, committed_databases, example_databases, gunzip_to, read_only

DEFAULT = committed("default")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def test_the_packing_statistics_are_the_runners() -> None:
    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 20, 33):
        times = [float(np.float32(x)) for x in rng.uniform(0.01, 3.0, n)]
        s = summarize(times)
        assert packing.summarize(times) == (s.median_ms, s.p20_ms, s.p80_ms, s.min_ms, s.max_ms)


def test_the_packing_figures_are_the_stores() -> None:
    from autotune.store.schema import figures

    rng = np.random.default_rng(1)
    for _ in range(200):
        flops, nbytes = (float(x) if rng.random() > 0.2 else None for x in rng.integers(0, 10**12, 2))
        median = float(np.float32(rng.uniform(-0.1, 3.0))) if rng.random() > 0.1 else None
        bandwidth = float(rng.choice([0.0, rng.uniform(1e11, 4e12)]))
        f = figures(flops, nbytes, median, bandwidth)
        assert packing.figures(flops, nbytes, median, bandwidth) == (f.gflops, f.gbs, f.roofline_frac)


def test_times_as_nanoseconds_come_back_character_for_character() -> None:
    text = json.dumps([float(np.float32(0.182144)), float(np.float32(0.181856)), float(np.float32(1.5e-3))])
    encoded = packing.encode_times(text)
    assert encoded == "ns:182144,181856,1500" and packing.decode_times(encoded) == text
    assert packing.encode_times(json.dumps([0.1234567891234])) is None  # not a float32 of whole ns: kept as is
    assert packing.encode_times("[1, 2]") is None and packing.encode_times("not json") is None


def test_a_committed_database_round_trips_exactly(tmp_path: Path) -> None:
    plain = gunzip_to(DEFAULT, tmp_path / "plain.sqlite")
    with sqlite3.connect(plain) as conn:
        want = packing.digest(conn)
        ok = conn.execute("SELECT COUNT(*) FROM measurements WHERE status = 'ok'").fetchone()[0]
    done = packing.pack(plain, tmp_path / "again.sqlite.xz")
    assert done["packed_rows"]["measurements"] > ok > 0
    assert done["figures_left_out"] >= ok  # every timed measurement's GFLOP/s, GB/s and roofline fraction
    assert done["bytes_out"] < DEFAULT.stat().st_size * 1.05
    back = tmp_path / "back.sqlite"
    packing.unpack(tmp_path / "again.sqlite.xz", back)
    with sqlite3.connect(back) as conn:
        assert packing.digest(conn) == want
        assert not packing.is_packed(conn)
        indexes = {
            r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
        }
    assert "ix_measurements_point_status" in indexes


def test_figures_that_their_work_does_not_give_back_are_kept(tmp_path: Path) -> None:
    """A measurement whose GFLOP/s is one ulp off what its (sweep, device, point) work gives: the figures of that
    (sweep, device, point) stay in the packed file, and the database still comes back bit for bit."""
    plain = gunzip_to(DEFAULT, tmp_path / "plain.sqlite")
    with sqlite3.connect(plain) as conn:
        rowid, gflops = conn.execute("SELECT rowid, gflops FROM measurements WHERE gflops > 0 LIMIT 1").fetchone()
        conn.execute("UPDATE measurements SET gflops = ? WHERE rowid = ?", (float(np.nextafter(gflops, 0)), rowid))
        want = packing.digest(conn)
    done = packing.pack(plain, tmp_path / "p.sqlite.xz")
    work = tmp_path / "w.sqlite"
    work.write_bytes(lzma.decompress((tmp_path / "p.sqlite.xz").read_bytes()))
    with sqlite3.connect(work) as conn:
        kept = conn.execute("SELECT gflops FROM measurements WHERE rowid = ?", (rowid,)).fetchone()[0]
        assert kept == float(np.nextafter(gflops, 0)) and done["figures_left_out"] > 0
    packing.unpack(tmp_path / "p.sqlite.xz", tmp_path / "back.sqlite")
    with sqlite3.connect(tmp_path / "back.sqlite") as conn:
        assert packing.digest(conn) == want


def test_a_file_of_packing_format_1_still_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Format 1 (before the work table: every figure kept) is read as it was written."""
    plain = gunzip_to(DEFAULT, tmp_path / "plain.sqlite")
    with sqlite3.connect(plain) as conn:
        want = packing.digest(conn)
    monkeypatch.setattr(packing, "_pack_figures", lambda conn: 0)
    monkeypatch.setattr(packing, "FORMAT", "1")
    packing.pack(plain, tmp_path / "v1.sqlite.xz")
    monkeypatch.undo()
    packing.unpack(tmp_path / "v1.sqlite.xz", tmp_path / "back.sqlite")
    with sqlite3.connect(tmp_path / "back.sqlite") as conn:
        assert packing.digest(conn) == want


def test_a_damaged_packed_file_is_refused(tmp_path: Path) -> None:
    plain = gunzip_to(DEFAULT, tmp_path / "plain.sqlite")
    packed = tmp_path / "p.sqlite.xz"
    packing.pack(plain, packed)
    work = tmp_path / "w.sqlite"
    work.write_bytes(lzma.decompress(packed.read_bytes()))
    with sqlite3.connect(work) as conn:  # one repetition one nanosecond off
        rowid, times = conn.execute(
            "SELECT rowid, times_ms FROM measurements WHERE times_ms LIKE 'ns:%' LIMIT 1"
        ).fetchone()
        first, rest = times[3:].split(",", 1)
        conn.execute("UPDATE measurements SET times_ms = ? WHERE rowid = ?", (f"ns:{int(first) + 32},{rest}", rowid))
    damaged = tmp_path / "damaged.sqlite.xz"
    damaged.write_bytes(lzma.compress(work.read_bytes()))
    with pytest.raises(UserError, match="differs from the one packed"):
        packing.unpack(damaged, tmp_path / "out.sqlite")
    r = _cli("query", "SELECT COUNT(*) FROM measurements", "--db", str(damaged))
    assert r.returncode == 2 and "differs from the one packed" in r.stderr and "Traceback" not in r.stderr


def test_db_pack_and_unpack_on_the_command_line(tmp_path: Path) -> None:
    plain = gunzip_to(DEFAULT, tmp_path / "plain.sqlite")
    r = _cli("db", "pack", str(plain), "--out", str(tmp_path / "d.sqlite.xz"))
    assert r.returncode == 0, r.stderr
    assert "measurements rows" in r.stdout
    sql = "SELECT status, COUNT(*) AS n, SUM(median_ms) AS s FROM measurements GROUP BY status ORDER BY status"
    a = _cli("query", sql, "--db", str(plain), "--format", "csv")
    b = _cli("query", sql, "--db", str(tmp_path / "d.sqlite.xz"), "--format", "csv")
    assert a.returncode == 0 and a.stdout == b.stdout
    refused = _cli("sweep", "configs/default.yaml", "--db", str(tmp_path / "d.sqlite.xz"), "--replay", str(plain))
    assert refused.returncode == 2 and "autotune db unpack" in refused.stderr
    r = _cli("db", "unpack", str(tmp_path / "d.sqlite.xz"), "--out", str(tmp_path / "u.sqlite"))
    assert r.returncode == 0, r.stderr
    with sqlite3.connect(plain) as x, sqlite3.connect(tmp_path / "u.sqlite") as y:
        assert packing.digest(x) == packing.digest(y)


def test_every_committed_database_reads_back() -> None:
    """Each committed .sqlite.xz rebuilds with the digest it was packed with (read_only raises otherwise)."""
    files = [*committed_databases(), *example_databases()]
    assert len(files) >= 20
    for packed in files:
        with sqlite3.connect(f"file:{read_only(packed)}?mode=ro", uri=True) as conn:
            assert conn.execute("SELECT COUNT(*) FROM measurements").fetchone()[0] > 0, packed
