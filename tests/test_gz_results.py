"""Gzipped results databases (`*.sqlite.gz`) are read transparently and never written.

Real files and real processes: a gzipped copy of the committed default database gives the same report, emit
and query output as the plain file; sweeping into (or upgrading) a .gz is refused with exit 2 and leaves it
untouched; the decompressed copy is made once and reused. The commands on a .gz run in processes of their own (each
with its TMPDIR, where its cache of decompressed copies is); what they are compared with, the same command on the
plain file, runs in this process (`here`: no ~1-2 s of interpreter start and imports for a reference)."""

from __future__ import annotations

import gzip
import hashlib
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pytest

from autotune.paths import ROOT
from autotune.store.engine import GZ_READ_ONLY, StoreError, database_url, gz_cache_dir, sqlite_path
from autotune.store.store import Store
from tests.support.committed import plain_bytes
from tests.support.harness import invoke_cli
from tests.support.old_schema import older_copy

SOURCE = ROOT / "results" / "default" / "default.sqlite"  # the committed default database, plain or as .xz


def cli(
    *args: str, cwd: Path | str = ROOT, tmpdir: Path | None = None, timeout: float = 180
) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env
    )


@pytest.fixture(scope="module")
def committed_bytes() -> tuple[bytes, bytes]:
    """The committed default database: its bytes and their `gzip -9 -n` copy (made once for the module's tests)."""
    data = SOURCE.read_bytes() if SOURCE.is_file() else plain_bytes(SOURCE.with_name(SOURCE.name + ".xz"))
    return data, gzip.compress(data, compresslevel=9, mtime=0)


@pytest.fixture
def dbs(tmp_path: Path, committed_bytes: tuple[bytes, bytes]) -> tuple[Path, Path, Path]:
    """(plain database, its `gzip -9 -n` copy, the TMPDIR of the commands) in tmp_path."""
    plain = tmp_path / "plain" / "default.sqlite"
    plain.parent.mkdir()
    plain.write_bytes(committed_bytes[0])
    gz = tmp_path / "gz" / "default.sqlite.gz"
    gz.parent.mkdir()
    gz.write_bytes(committed_bytes[1])
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    return plain, gz, tmpdir


def here(*args: str, cwd: Path | str = ROOT) -> subprocess.CompletedProcess:
    """`autotune ARGS` in this process (a plain file's reference output, with `cli`'s console width)."""
    return invoke_cli(*args, cwd=cwd, COLUMNS="200")


def _cached(tmpdir: Path) -> list[Path]:
    """The decompressed copies (<sha256>.sqlite)."""
    return sorted(p for p in (tmpdir / gz_cache_dir().name).glob("*.sqlite") if "." not in p.stem)


def _migrated(tmpdir: Path) -> list[Path]:
    """The migrated copies of older decompressed copies (<sha256>.s<schema version>-<revisions digest>.sqlite)."""
    return sorted(p for p in (tmpdir / gz_cache_dir().name).glob("*.sqlite") if "." in p.stem)


def _stamp_free(text: str) -> str:
    return re.sub(r"created_utc.{0,6}\d{4}-\d\d-\d\dT[0-9:+]+", "created_utc", text)


def test_report_of_a_gzipped_database_is_the_same(dbs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """Every file of the report alike (a fixed structure: no leave-one-out search, the reads are what is compared)."""
    plain, gz, tmpdir = dbs
    fixed = ("--tols", "0,0.1", "--structure", "cost:0.05:1:4")
    r = here("report", str(plain), *fixed, "--out", str(tmp_path / "report_plain"))
    assert r.returncode == 0, r.stderr
    r = cli("report", str(gz), *fixed, "--out", str(tmp_path / "report_gz"), tmpdir=tmpdir)
    assert r.returncode == 0, r.stderr
    for f in ("summary.csv", "tol_table.csv", "dispatch.json", "dispatch.cuh", "dispatch.py"):
        a, b = (tmp_path / f"report_{n}" / f for n in ("plain", "gz"))
        assert _stamp_free(a.read_text()) == _stamp_free(b.read_text()), f
    assert len(_cached(tmpdir)) == 1


def test_emit_of_a_gzipped_database_is_the_same(dbs: tuple[Path, Path, Path]) -> None:
    """The read path is what differs: the table as JSON (all of it; the other formats render the same table)."""
    plain, gz, tmpdir = dbs
    fixed = ("--structure", "cost:0.05:1:4")  # no leave-one-out search: the reads are what is compared
    a = here("emit", str(plain), "--format", "json", *fixed)
    b = cli("emit", f"sqlite:///{gz}", "--format", "json", *fixed, tmpdir=tmpdir)  # a URL works like a path
    assert a.returncode == b.returncode == 0, b.stderr
    assert _stamp_free(a.stdout) == _stamp_free(b.stdout) and a.stdout


def test_query_and_analyze_of_a_gzipped_database_are_the_same(dbs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    plain, gz, tmpdir = dbs
    sql = (
        "SELECT i.space, m.status, COUNT(*) AS n, MIN(m.median_ms) AS best FROM measurements m "
        "JOIN instances i ON i.id = m.instance_id GROUP BY i.space, m.status ORDER BY i.space, m.status"
    )
    a = here("query", sql, "--db", str(plain), "--format", "csv")
    b = cli("query", sql, "--db", str(gz), "--format", "csv", tmpdir=tmpdir)
    assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
    assert a.stdout == b.stdout and len(a.stdout.splitlines()) > 1
    fixed = ("--tols", "0,0.1", "--no-loo")  # the kernels against TOL and the winners: the leave-one-out reads no more
    r = here("analyze", str(plain), *fixed, "--out", str(tmp_path / "analyze_plain"))
    assert r.returncode == 0, r.stderr
    r = cli("analyze", str(gz), *fixed, "--out", str(tmp_path / "analyze_gz"), tmpdir=tmpdir)
    assert r.returncode == 0, r.stderr
    for f in ("tol_table.csv", "winners.csv"):
        assert (tmp_path / "analyze_plain" / f).read_text() == (tmp_path / "analyze_gz" / f).read_text(), f


def test_the_decompressed_copy_is_made_once_and_reused(dbs: tuple[Path, Path, Path]) -> None:
    plain, gz, tmpdir = dbs
    r = cli("query", "SELECT COUNT(*) FROM measurements", "--db", str(gz), tmpdir=tmpdir)
    assert r.returncode == 0, r.stderr
    (copy,) = _cached(tmpdir)
    assert copy.name == hashlib.sha256(gz.read_bytes()).hexdigest() + ".sqlite"
    assert copy.read_bytes() == plain.read_bytes()
    before = copy.stat()
    again = cli("query", "SELECT COUNT(*) FROM measurements", "--db", str(gz), tmpdir=tmpdir)
    assert again.returncode == 0 and again.stdout == r.stdout
    assert _cached(tmpdir) == [copy]
    assert (copy.stat().st_ino, copy.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not rewritten
    assert _migrated(tmpdir) == [] and "warning" not in r.stderr  # committed at the current schema: nothing migrated
    assert copy.read_bytes() == plain.read_bytes()  # reading left it as it was
    assert not [p for p in (tmpdir / gz_cache_dir().name).iterdir() if p.name.endswith(".tmp")]
    # other bytes (another database under the same name) get their own copy
    gz.write_bytes(gzip.compress(plain.read_bytes(), compresslevel=1, mtime=0))
    assert cli("query", "SELECT 1", "--db", str(gz), tmpdir=tmpdir).returncode == 0
    assert len(_cached(tmpdir)) == 2


def test_an_older_gz_is_read_through_one_migrated_copy_made_once(dbs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """A user's gzipped database of an older schema: one migrated copy beside the decompressed one, reused by the next
    process (no second warning-worthy migration), and the .gz never written."""
    _, _, tmpdir = dbs
    old = older_copy(SOURCE.with_name(SOURCE.name + ".xz"), tmp_path / "old" / "old.sqlite", 2)
    gz = old.with_name("old.sqlite.gz")
    gz.write_bytes(gzip.compress(old.read_bytes(), mtime=0))
    before = gz.read_bytes()
    outs = [cli("query", "SELECT COUNT(*) FROM measurements", "--db", str(gz), tmpdir=tmpdir) for _ in range(2)]
    assert all(r.returncode == 0 for r in outs) and outs[0].stdout == outs[1].stdout, [r.stderr for r in outs]
    (copy,) = _cached(tmpdir)
    (migrated,) = _migrated(tmpdir)
    assert migrated.name.startswith(copy.stem + ".s") and copy.read_bytes() == old.read_bytes()
    assert "schema version 2" in outs[0].stderr and gz.read_bytes() == before


def test_concurrent_readers_share_one_complete_copy(dbs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """Four processes read one older gzipped database at once: one decompressed copy, one migrated copy."""
    _, _, tmpdir = dbs
    plain = older_copy(SOURCE.with_name(SOURCE.name + ".xz"), tmp_path / "old" / "old.sqlite", 2)
    gz = plain.with_name("old.sqlite.gz")
    gz.write_bytes(gzip.compress(plain.read_bytes(), mtime=0))
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "TMPDIR": str(tmpdir)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "autotune",
                "query",
                "SELECT COUNT(*) FROM measurements",
                "--db",
                str(gz),
                "--format",
                "csv",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert len({o for o, _ in outs}) == 1
    (copy,) = _cached(tmpdir)
    assert copy.read_bytes() == plain.read_bytes()
    assert len(_migrated(tmpdir)) == 1


def test_sweep_into_a_gzipped_database_is_refused(dbs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    plain, gz, tmpdir = dbs
    before = gz.read_bytes()
    r = cli("sweep", "configs/default.yaml", "--replay", str(plain), "--db", str(gz), "--quiet", tmpdir=tmpdir)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert GZ_READ_ONLY in " ".join(r.stderr.split()) and "gunzip" in r.stderr
    cfg = tmp_path / "to_gz.yaml"  # the same through the config's `database:`, as a URL
    cfg.write_text((ROOT / "configs" / "default.yaml").read_text() + f"\ndatabase: sqlite:///{gz}\n")
    r = cli("sweep", str(cfg), "--replay", str(plain), "--quiet", tmpdir=tmpdir)
    assert r.returncode == 2 and GZ_READ_ONLY in " ".join(r.stderr.split()), r.stderr
    assert gz.read_bytes() == before and _cached(tmpdir) == []
    assert sorted(p.name for p in gz.parent.iterdir()) == [gz.name]


def test_a_gzipped_database_replays_into_a_new_file(dbs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    plain, gz, tmpdir = dbs
    out = tmp_path / "new.sqlite"
    r = cli("sweep", "configs/default.yaml", "--replay", str(gz), "--db", str(out), "--quiet", tmpdir=tmpdir)
    assert r.returncode == 0, r.stderr
    q = "SELECT COUNT(*) FROM measurements WHERE status = 'ok'"
    assert here("query", q, "--db", str(out)).stdout == here("query", q, "--db", str(plain)).stdout


def test_db_upgrade_refuses_a_gzipped_database(dbs: tuple[Path, Path, Path]) -> None:
    _, gz, tmpdir = dbs
    before = gz.read_bytes()
    r = cli("db", "upgrade", str(gz), tmpdir=tmpdir)
    assert r.returncode == 2 and GZ_READ_ONLY in " ".join(r.stderr.split()) and "Traceback" not in r.stderr
    assert gz.read_bytes() == before and _cached(tmpdir) == []
    sql = cli("db", "upgrade", str(gz), "--sql", tmpdir=tmpdir)  # printing the SQL changes nothing: allowed
    assert sql.returncode == 0 and "Traceback" not in sql.stderr, sql.stderr  # (empty: the database is current)


def test_store_open_for_writing_refuses_a_gzipped_database(
    dbs: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, gz, tmpdir = dbs
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
    for kwargs in ({}, {"create": True}, {"create": False}):
        with pytest.raises(StoreError, match="gzipped database is read-only"):
            Store.open(str(gz), **kwargs)
    with pytest.raises(StoreError, match="gzipped database is read-only"):
        database_url(f"sqlite:///{gz}", write=True)
    assert _cached(tmpdir) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the committed database is at the current schema: read as it is
        with Store.open(str(gz), create=False, readonly=True) as store:
            assert not store.measurements().empty
    assert gz_cache_dir() == tmpdir / gz_cache_dir().name
    assert Path(sqlite_path(database_url(str(gz))) or "").parent == tmpdir / gz_cache_dir().name


def test_query_without_db_finds_a_gzipped_default(dbs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    plain, gz, tmpdir = dbs
    work = tmp_path / "work"
    (work / "results").mkdir(parents=True)
    gz.rename(work / "results" / "default.sqlite.gz")
    q = "SELECT COUNT(*) FROM measurements"
    r = cli("query", q, cwd=work, tmpdir=tmpdir)
    assert r.returncode == 0, r.stderr
    assert r.stdout == here("query", q, "--db", str(plain)).stdout


def test_a_missing_or_broken_gz_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.sqlite.gz"
    broken.write_bytes(b"not gzip at all")
    for db, words in ((tmp_path / "missing.sqlite.gz", "no compressed SQLite database"), (broken, "not a compressed")):
        r = cli("query", "SELECT 1", "--db", str(db), tmpdir=tmp_path)
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not [p for p in (tmp_path / gz_cache_dir().name).iterdir()]


@pytest.mark.parametrize("suffix", [".json.gz", ".json.xz"])
def test_emit_reads_a_compressed_dispatch_table(suffix: str, tmp_path: Path) -> None:
    """`autotune emit` takes a compressed dispatch.json (as committed results keep large tables) as it takes the
    plain file: the same header and module, not a 'does not hold an SQLite database' error. In this process: what is
    checked is how emit reads the file."""
    import lzma

    plain = ROOT / "results" / "default" / "dispatch.json"
    packed = tmp_path / f"dispatch{suffix}"
    packed.write_bytes((gzip.compress if suffix.endswith(".gz") else lzma.compress)(plain.read_bytes()))
    for fmt in ("cpp", "python"):
        want, got = here("emit", str(plain), "-f", fmt), here("emit", str(packed), "-f", fmt)
        assert want.returncode == 0 and got.returncode == 0, got.stderr
        assert got.stdout == want.stdout
