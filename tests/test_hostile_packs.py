"""A hostile pack suite: compressed databases that would fill the disk, hide something that is not a database, are not
compressed at all or are cut off; a packed file given to `db pack`; an unpack that fails over an existing file.

Each is one `error:` line (exit 2, no traceback) and leaves nothing behind: no output file, no half-written copy in the
temporary folder, an existing file untouched. Real files, real xz and gzip, the real command line; a limit on the
size of files the command may write (RLIMIT_FSIZE) shows that nothing large was written before the refusal."""

from __future__ import annotations

import gzip
import lzma
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.paths import ROOT
from autotune.store.decompress import MAX_ENV, declared_size
from tests.support.committed import committed, gunzip_to
from tests.support.old_schema import older_copy

SQLITE = b"SQLite format 3\x00"
MIB = 1 << 20
STREAM = 16 * MIB  # one xz stream of zeros: ~2.5 KB compressed
SMALL = ROOT / "examples" / "transpose" / "results" / "transpose_h100.sqlite.xz"


def cli(*args: str, tmpdir: Path, fsize: int | None = None, **env: str) -> subprocess.CompletedProcess:
    """`python -m autotune ARGS` with TMPDIR=`tmpdir`; `fsize`: the largest file it may write (a larger write fails
    with EFBIG: SIGXFSZ is ignored)."""

    def limit() -> None:
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        preexec_fn=limit,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmpdir), "COLUMNS": "200", **env},
    )


def one_error(r: subprocess.CompletedProcess, *words: str) -> str:
    """The one `error:` line of a refused command (exit 2, no traceback), which holds each of `words`."""
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, r.stderr
    for word in words:
        assert word in r.stderr, (word, r.stderr)
    return errors[0]


def left_in(folder: Path) -> list[str]:
    """Every file under `folder` (the temporary folder of a command)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _xz_bomb(path: Path, first: bytes, streams: int) -> Path:
    """An xz file of `streams` concatenated streams of 16 MiB of zeros, the first starting with `first`: a few KB per
    stream, decompressing to streams x 16 MiB (xz and Python read concatenated streams as one file)."""
    head = lzma.compress(first + bytes(STREAM - len(first)), format=lzma.FORMAT_XZ, preset=0)
    rest = lzma.compress(bytes(STREAM), format=lzma.FORMAT_XZ, preset=0)
    path.write_bytes(head + rest * (streams - 1))
    return path


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bombs")
    return {
        "database": _xz_bomb(folder / "bomb.sqlite.xz", SQLITE, 64),  # 1 GiB that starts as a database
        "not_database": _xz_bomb(folder / "page.sqlite.xz", b"<html>not a database</html>", 64),  # 1 GiB
    }


def test_an_xz_bomb_is_refused_before_anything_is_written(bombs: dict[str, Path], tmp_path: Path) -> None:
    """A ~170 KB .sqlite.xz that decompresses to 1 GiB: refused from the size its index declares, with the knob
    named, before a byte is written (the command may write no file over 16 MiB)."""
    bomb = bombs["database"]
    assert bomb.stat().st_size < 300_000 and declared_size(bomb) == 64 * STREAM
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "tmp").mkdir()
    for args in (("query", "SELECT 1", "--db", str(bomb)), ("db", "unpack", str(bomb), "--out", str(out / "x.sqlite"))):
        r = cli(*args, tmpdir=tmp_path / "tmp", fsize=16 * MIB)
        one_error(r, str(bomb), MAX_ENV, "1,073,741,824 bytes")
        assert left_in(tmp_path / "tmp") == [] and left_in(out) == []


def test_a_bomb_that_declares_no_size_is_stopped_at_the_limit(tmp_path: Path) -> None:
    """gzip declares no size that can be trusted: the copy is counted while it is written and stopped at the limit
    (here AUTOTUNE_MAX_UNPACKED_MB=4), and the partial copy is removed."""
    member = gzip.compress(bytes(STREAM), compresslevel=1, mtime=0)
    bomb = tmp_path / "bomb.sqlite.gz"
    bomb.write_bytes(gzip.compress(SQLITE + bytes(STREAM - len(SQLITE)), compresslevel=1, mtime=0) + member * 3)
    (tmp_path / "tmp").mkdir()
    r = cli("query", "SELECT 1", "--db", str(bomb), tmpdir=tmp_path / "tmp", fsize=8 * MIB, **{MAX_ENV: "4"})
    one_error(r, str(bomb), f"{MAX_ENV}=")
    assert left_in(tmp_path / "tmp") == []
    bad = cli("query", "SELECT 1", "--db", str(bomb), tmpdir=tmp_path / "tmp", **{MAX_ENV: "lots"})
    one_error(bad, MAX_ENV, "lots")


def test_a_file_that_is_not_a_database_is_refused_from_its_first_bytes(bombs: dict[str, Path], tmp_path: Path) -> None:
    """1 GiB of something else inside xz, with the size limit off: refused from the first bytes decompressed, before
    it is written out (the command may write no file over 1 MiB)."""
    page = bombs["not_database"]
    (tmp_path / "tmp").mkdir()
    for args in (("query", "SELECT 1", "--db", str(page)), ("db", "unpack", str(page), "--out", str(tmp_path / "x"))):
        r = cli(*args, tmpdir=tmp_path / "tmp", fsize=MIB, **{MAX_ENV: "off"})
        one_error(r, str(page), "does not hold an SQLite database", "<html>")
        assert left_in(tmp_path / "tmp") == [] and not (tmp_path / "x").exists()


def test_a_file_that_is_not_xz_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    text = tmp_path / "notes.sqlite.xz"
    text.write_text("these are my notes, not a database\n" * 100)
    (tmp_path / "tmp").mkdir()
    r = cli("db", "unpack", str(text), "--out", str(tmp_path / "notes.sqlite"), tmpdir=tmp_path / "tmp")
    one_error(r, str(text), "neither xz nor gzip")
    assert not (tmp_path / "notes.sqlite").exists()  # no 0-byte output
    q = cli("query", "SELECT 1", "--db", str(text), tmpdir=tmp_path / "tmp")
    one_error(q, str(text), "not a compressed database")
    assert left_in(tmp_path / "tmp") == [] and sorted(p.name for p in tmp_path.iterdir()) == ["notes.sqlite.xz", "tmp"]


def test_a_truncated_file_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    whole = committed("default").read_bytes()
    cut = tmp_path / "cut.sqlite.xz"
    cut.write_bytes(whole[: len(whole) // 2])
    (tmp_path / "tmp").mkdir()
    r = cli("db", "unpack", str(cut), "--out", str(tmp_path / "cut.sqlite"), tmpdir=tmp_path / "tmp")
    one_error(r, str(cut), "damaged or cut off")
    q = cli("query", "SELECT COUNT(*) FROM measurements", "--db", str(cut), tmpdir=tmp_path / "tmp")
    one_error(q, str(cut), "damaged or cut off")
    assert left_in(tmp_path / "tmp") == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.sqlite.xz", "tmp"]  # no .part left beside the output


def test_a_damaged_database_inside_good_xz_is_not_unpacked(tmp_path: Path) -> None:
    """The xz is whole, the database in it is not (pages overwritten): `db unpack` checks it before it names the
    output, and writes none."""
    data = bytearray(gunzip_to(SMALL, tmp_path / "good.sqlite").read_bytes())
    data[4096 * 2 : 4096 * 6] = os.urandom(4096 * 4)
    damaged = tmp_path / "damaged.sqlite.xz"
    damaged.write_bytes(lzma.compress(bytes(data), format=lzma.FORMAT_XZ))
    (tmp_path / "tmp").mkdir()
    r = cli("db", "unpack", str(damaged), "--out", str(tmp_path / "d.sqlite"), tmpdir=tmp_path / "tmp")
    one_error(r, str(damaged), "damaged SQLite database")
    assert not (tmp_path / "d.sqlite").exists() and not [p for p in tmp_path.iterdir() if ".part" in p.name]


def test_db_pack_says_a_packed_or_compressed_file_is_packed_already(tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    packed = tmp_path / "t.sqlite.xz"
    shutil.copyfile(SMALL, packed)
    r = cli("db", "pack", str(packed), tmpdir=tmp_path / "tmp")
    one_error(r, str(packed), "compressed already")
    gz = tmp_path / "t.sqlite.gz"
    gz.write_bytes(gzip.compress(lzma.decompress(packed.read_bytes())))
    r = cli("db", "pack", str(gz), "--out", str(tmp_path / "again.sqlite.xz"), tmpdir=tmp_path / "tmp")
    one_error(r, str(gz), "compressed already")
    # an older autotune's packed file decompressed with plain xz (no rebuild): a table says it is packed
    legacy = tmp_path / "legacy.sqlite"
    legacy.write_bytes(lzma.decompress((ROOT / "tests" / "data" / "legacy_packed_transpose_h100.xz").read_bytes()))
    r = cli("db", "pack", str(legacy), tmpdir=tmp_path / "tmp")
    one_error(r, str(legacy), "autotune_packing", "autotune db unpack")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["legacy.sqlite", "t.sqlite.gz", "t.sqlite.xz", "tmp"]
    assert packed.read_bytes() == SMALL.read_bytes()


def test_unpack_over_an_existing_file_leaves_it_as_it_was(tmp_path: Path) -> None:
    """Without --force an existing output is refused; with it, a failed unpack leaves the file as it was, and a
    complete one replaces it in one rename."""
    mine = tmp_path / "mine.sqlite"
    mine.write_bytes(b"my own work")
    cut = tmp_path / "cut.sqlite.xz"
    cut.write_bytes(SMALL.read_bytes()[:5000])
    (tmp_path / "tmp").mkdir()
    for args, words in (((SMALL,), "exists"), ((cut, "--force"), "damaged or cut off")):
        r = cli("db", "unpack", *map(str, args), "--out", str(mine), tmpdir=tmp_path / "tmp")
        one_error(r, words)
        assert mine.read_bytes() == b"my own work"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.sqlite.xz", "mine.sqlite", "tmp"]
    r = cli("db", "unpack", str(SMALL), "--out", str(mine), "--force", tmpdir=tmp_path / "tmp")
    assert r.returncode == 0, r.stderr
    assert mine.read_bytes() == lzma.decompress(SMALL.read_bytes())


def test_a_disk_error_during_unpack_leaves_no_half_file(tmp_path: Path) -> None:
    """A write that fails half-way (the file size limit stands for a full disk): one line, and neither the output nor
    its temporary file is left (before, a half-restored output was left, which `report` then read as empty)."""
    big = ROOT / "results" / "complete_h100" / "complete_h100.sqlite.xz"  # 8 MB plain
    out = tmp_path / "out"
    out.mkdir()
    r = cli("db", "unpack", str(big), "--out", str(out / "c.sqlite"), tmpdir=tmp_path, fsize=2 * MIB)
    one_error(r, "cannot write", str(big))
    assert left_in(out) == []


def _cache(tmpdir: Path) -> list[Path]:
    folders = list(tmpdir.glob("autotune-gz-*"))
    return sorted(p for f in folders for p in f.iterdir() if p.name.endswith(".sqlite"))


def test_the_cache_of_decompressed_copies_is_bounded(tmp_path: Path) -> None:
    """Copies are content-addressed and reused; past twice AUTOTUNE_MAX_UNPACKED_MB (here 2 x 1 MiB) the least
    recently read are deleted, never the one just made."""
    files = [
        ROOT / "examples" / "transpose" / "results" / "transpose_h100.sqlite.xz",
        ROOT / "examples" / "softmax" / "results" / "softmax_h100.sqlite.xz",
        ROOT / "examples" / "stencil" / "results" / "stencil_h100.sqlite.xz",
        ROOT / "examples" / "transpose" / "results" / "validation" / "validation.sqlite.xz",
    ]
    (tmp_path / "tmp").mkdir()
    sizes = []
    for f in files:
        r = cli("query", "SELECT COUNT(*) FROM measurements", "--db", str(f), tmpdir=tmp_path / "tmp", **{MAX_ENV: "1"})
        assert r.returncode == 0, r.stderr
        sizes.append(sum(p.stat().st_size for p in _cache(tmp_path / "tmp")))
        assert sizes[-1] <= 2 * MIB, sizes
    copies = _cache(tmp_path / "tmp")
    newest = lzma.decompress(files[-1].read_bytes())
    assert any(p.read_bytes() == newest for p in copies)  # the copy just made is kept
    assert len(copies) < len(files)  # older ones went


def test_migrated_copies_of_a_plain_file_are_removed_at_exit(tmp_path: Path) -> None:
    """A user's own older database read through a migrated copy: the copy (autotune-migrated-*) is gone once the
    command ends, and the warning is one short line that names the file and the one command to migrate it."""
    old = older_copy(SMALL, tmp_path / "mine" / "old.sqlite", 2)
    (tmp_path / "tmp").mkdir()
    r = cli("query", "SELECT COUNT(*) AS n FROM measurements", "--db", str(old), tmpdir=tmp_path / "tmp")
    assert r.returncode == 0, r.stderr
    assert left_in(tmp_path / "tmp") == [] and not list((tmp_path / "tmp").glob("autotune-migrated-*"))
    warned = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(warned) == 1 and warned[0].startswith("warning:"), r.stderr
    assert f"autotune db upgrade {old}" in warned[0] and str(tmp_path / "tmp") not in warned[0]
    assert len(warned[0].replace(str(old), "")) < 120 and "repository" not in warned[0]


def test_the_warning_about_an_older_compressed_file_names_it_and_one_command(tmp_path: Path) -> None:
    old = older_copy(SMALL, tmp_path / "old.sqlite", 2)
    packed = tmp_path / "old.sqlite.xz"
    packed.write_bytes(lzma.compress(old.read_bytes(), format=lzma.FORMAT_XZ))
    (tmp_path / "tmp").mkdir()
    r = cli("query", "SELECT COUNT(*) AS n FROM measurements", "--db", str(packed), tmpdir=tmp_path / "tmp")
    assert r.returncode == 0, r.stderr
    warned = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(warned) == 1 and "autotune-gz" not in warned[0] and str(tmp_path / "tmp") not in warned[0], warned
    assert f"autotune db unpack {packed} --out {old} && autotune db upgrade {old}" in warned[0]


def test_a_legacy_packed_file_runs_no_sql_but_index_definitions(tmp_path: Path) -> None:
    """An older autotune's packed file lists its indexes as SQL to run when it is rebuilt: a file that lists other
    SQL there (here ATTACH, which creates a file where it names) is refused, and that file is never made."""
    plain = tmp_path / "legacy.sqlite"
    plain.write_bytes(lzma.decompress((ROOT / "tests" / "data" / "legacy_packed_transpose_h100.xz").read_bytes()))
    planted = tmp_path / "planted.db"
    with sqlite3.connect(plain) as conn:
        conn.execute(
            "UPDATE autotune_packing SET value = ? WHERE key = 'indexes'", (f"[\"ATTACH DATABASE '{planted}' AS x\"]",)
        )
    conn.close()
    hostile = tmp_path / "hostile.sqlite.xz"
    hostile.write_bytes(lzma.compress(plain.read_bytes(), format=lzma.FORMAT_XZ))
    (tmp_path / "tmp").mkdir()
    for args in (
        ("db", "unpack", str(hostile), "--out", str(tmp_path / "h.sqlite")),
        ("query", "SELECT 1", "--db", str(hostile)),
    ):
        r = cli(*args, tmpdir=tmp_path / "tmp")
        one_error(r, str(hostile), "not an index definition")
    assert not planted.exists() and not (tmp_path / "h.sqlite").exists() and left_in(tmp_path / "tmp") == []
