"""Trust and side effects: caches that cannot be tampered with, sources kept to the space's folder, nothing
half-written by a failed import, no files left by read-only commands, exports with the user's umask, results under
the current directory. Real files, real SQLite, real processes; we may run as root, so no test relies on file
permissions being enforced."""

from __future__ import annotations

import gzip
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.paths import ROOT
from tests.support.committed import committed, read_only
from tests.support.old_schema import older_copy

RECORDED = committed("default")  # results/default/default.sqlite.xz


def cli(
    *args: str, cwd: Path | str = ROOT, tmpdir: Path | None = None, timeout: float = 180
) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env
    )


def _plain_bytes() -> bytes:
    with sqlite3.connect(read_only(RECORDED)) as src:
        dst = sqlite3.connect(":memory:")
        src.backup(dst)
        return dst.serialize()


@pytest.fixture
def gz(tmp_path: Path) -> tuple[Path, Path]:
    """(a gzipped copy of the committed default database at schema 2, read through a decompressed and a migrated
    copy, the TMPDIR of the commands)."""
    path = tmp_path / "gz" / "default.sqlite.gz"
    old = older_copy(RECORDED, tmp_path / "old" / "default.sqlite", 2)
    path.parent.mkdir()
    path.write_bytes(gzip.compress(old.read_bytes(), compresslevel=1, mtime=0))
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    return path, tmpdir


COUNT = "SELECT COUNT(*) AS n FROM measurements"


def _cache(tmpdir: Path) -> Path:
    return tmpdir / f"autotune-gz-{os.getuid()}"


def _tamper(db: Path) -> None:
    """Delete the measurements of a cached copy (made writable first: root could write it anyway)."""
    os.chmod(db, 0o644)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("DELETE FROM measurements")
    conn.close()


# ---- decompressed copies of .sqlite.gz -------------------------------------------------------------------


def test_an_edited_decompressed_or_migrated_copy_is_not_reused(gz: tuple[Path, Path]) -> None:
    path, tmpdir = gz
    first = cli("query", COUNT, "--db", str(path), tmpdir=tmpdir)
    assert first.returncode == 0, first.stderr
    copies = sorted(tmpdir.glob("autotune-gz*/*.sqlite"))  # whatever the folder is called
    assert len(copies) == 2, "no decompressed and migrated copies were made"
    for copy in copies:  # the decompressed copy, and the migrated copy beside it (the file is older)
        _tamper(copy)
        again = cli("query", COUNT, "--db", str(path), tmpdir=tmpdir)
        assert again.returncode == 0, again.stderr
        assert again.stdout == first.stdout, f"{copy.name} edited changed what query returned"


def test_the_cache_folder_is_private_to_the_user(gz: tuple[Path, Path]) -> None:
    path, tmpdir = gz
    folder = _cache(tmpdir)
    folder.mkdir(mode=0o777)
    os.chmod(folder, 0o777)
    r = cli("query", COUNT, "--db", str(path), tmpdir=tmpdir)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    if os.getuid() == 0:  # only root can give the folder away: another user's folder is refused
        os.chown(folder, 65534, 65534)
        r = cli("query", COUNT, "--db", str(path), tmpdir=tmpdir)
        assert r.returncode == 2 and "not a folder of this user's own" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr


# ---- read-only commands leave no files ---------------------------------------------------------------------


@pytest.fixture
def wal_db(tmp_path: Path) -> Path:
    """The committed default database, upgraded to this schema, in WAL mode, closed (no -wal/-shm beside it)."""
    from autotune.store.migrate import upgrade

    db = tmp_path / "db" / "default.sqlite"
    db.parent.mkdir()
    db.write_bytes(_plain_bytes())
    upgrade(f"sqlite:///{db}")
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
    conn.close()
    assert sorted(p.name for p in db.parent.iterdir()) == ["default.sqlite"]
    return db


@pytest.mark.parametrize(
    "args",
    [
        ("query", COUNT, "--db", "{db}"),
        # one TOL, a fixed structure and no leave-one-out: the reads are the same, the tables built fewer
        ("report", "{db}", "--tols", "0.05", "--structure", "regions", "--out", "{out}"),
        ("analyze", "{db}", "--tols", "0.05", "--no-loo", "--out", "{out}"),
        ("compare", "{db}", "--by", "space"),
    ],
)
def test_read_only_commands_leave_no_wal_or_shm(wal_db: Path, tmp_path: Path, args: tuple[str, ...]) -> None:
    before = wal_db.stat().st_mtime_ns
    r = cli(*(a.format(db=wal_db, out=tmp_path / "out") for a in args), tmpdir=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in wal_db.parent.iterdir()) == ["default.sqlite"]
    assert wal_db.stat().st_mtime_ns == before


# ---- a failed import leaves nothing -----------------------------------------------------------------------

GOOD = (
    '{"device_name": "X", "kernel_name": "k", "problem_size": [4], "tune_params_keys": ["zz"], '
    '"tune_params": {"zz": [1]}, "objective": "time", "cache": {"1": {"zz": 1, "time": 1.0}}}'
)


@pytest.mark.parametrize(
    "text, space",
    [
        ("not json at all", ()),
        (GOOD, ("--space", "gemm_batched_simt")),  # a cache of parameters the space does not have
    ],
)
def test_a_failed_import_leaves_no_database_or_space(tmp_path: Path, text: str, space: tuple[str, ...]) -> None:
    cache = tmp_path / "bad.json"
    cache.write_text(text)
    db = tmp_path / "kt.sqlite"
    r = cli("import", "kerneltuner", str(cache), "--db", str(db), *space, cwd=tmp_path)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"], r.stderr


def test_a_written_kernel_tuner_cache_has_the_users_usual_mode(tmp_path: Path) -> None:
    """`export kerneltuner` wrote 0600 files (mkstemp's mode); now the umask decides, as for any file."""
    import os

    from autotune.interop.kerneltuner import read_cache, write_cache

    src = next((Path(__file__).parent / "data" / "kerneltuner").glob("*.json"))
    out = tmp_path / "cache.json"
    old = os.umask(0o022)
    try:
        write_cache(read_cache(src), out)
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o644
