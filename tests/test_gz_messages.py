"""Errors about a compressed database (gzipped .gz, packed .xz) name the user's file, never the private decompressed (or migrated) copy read
for it (it once said `error: no space 'transpose' in sqlite:////tmp/autotune-gz-0/2ca9...sqlite`)."""

from __future__ import annotations

import gzip
import lzma
import shutil
from pathlib import Path

import pytest

from autotune.paths import ROOT
from tests.support.harness import invoke_cli as cli
from tests.support.old_schema import older_copy

EXAMPLE_DB = ROOT / "examples" / "transpose" / "results" / "transpose_h100.sqlite.xz"  # xz of the plain database


@pytest.fixture
def current_gz(tmp_path: Path) -> Path:
    """A gzipped database of the current schema (read through its decompressed copy, not a migrated one)."""
    from autotune.store.store import Store

    plain = tmp_path / "made.sqlite"
    with Store.open(str(plain)):
        pass
    gz = tmp_path / "mine.sqlite.gz"
    with plain.open("rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    plain.unlink()
    return gz


@pytest.mark.parametrize("which", ["example (older schema: a migrated copy)", "current schema"])
@pytest.mark.parametrize(
    "args",
    [
        ("export", "kerneltuner", "{db}", "--space", "nosuch", "--out", "c.json"),
        ("query", "SELECT * FROM nosuch", "--db", "{db}"),
        ("report", "{db}", "--space", "nosuch"),
    ],
)
def test_an_error_about_a_gz_database_names_the_gz(tmp_path: Path, current_gz: Path, which: str, args: tuple) -> None:
    db = current_gz
    if which.startswith("example"):
        db = tmp_path / "theirs.sqlite.xz"  # an .xz of an older schema: read through a decompressed, migrated copy
        old = older_copy(EXAMPLE_DB, tmp_path / "old" / "theirs.sqlite", 2)
        db.write_bytes(lzma.compress(old.read_bytes(), format=lzma.FORMAT_XZ))
    r = cli(*(a.format(db=db) for a in args), cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, r.stderr
    assert "autotune-gz" not in r.stderr and str(db) in errors[0], r.stderr


def test_shown_maps_a_copy_back_to_its_gz(current_gz: Path) -> None:
    from autotune.store.engine import database_url, shown

    url = database_url(str(current_gz))
    copy = url[len("sqlite:///") :]
    assert "autotune-gz" in copy
    assert shown(f"cannot open {url}: locked; {copy} too") == f"cannot open {current_gz}: locked; {current_gz} too"
    assert shown("sqlite:////elsewhere/x.sqlite") == "sqlite:////elsewhere/x.sqlite"
