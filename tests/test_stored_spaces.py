"""A database's recorded spaces resolve in the checkout in use, never at the absolute path the database recorded:
with two copies of a space folder (two clones), the copy beside the database (or the current directory) is
read; built-in spaces come from the running package; the recorded text is the fallback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autotune import paths
from autotune.space import spec
from autotune.space.spec import load_space
from autotune.store.spaces import use_stored_spaces
from autotune.store.store import Store
from autotune.sweep.provenance import space_record

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _forget_stored():
    yield
    spec.STORED.clear()


def _clone(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name / "examples" / "transpose"
    shutil.copytree(ROOT / "examples" / "transpose", folder, ignore=shutil.ignore_patterns("results"))
    return folder


def _record(space_file: Path, db: Path) -> str:
    """A database at `db` that recorded the space file (its absolute path, its text and its kernel source)."""
    db.parent.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{db}"
    with Store.open(url) as store:
        store.upsert_space(space_record(load_space(space_file)))
    return url


def test_the_copy_beside_the_database_wins_over_the_recorded_path(tmp_path: Path) -> None:
    first, second = _clone(tmp_path, "clone1"), _clone(tmp_path, "clone2")
    url = _record(first / "space.yaml", tmp_path / "clone2" / "results" / "t.sqlite")
    assert use_stored_spaces(url) == {}  # identical: used as it is
    assert spec.STORED["transpose_tiled"] == (second / "space.yaml").resolve()


def test_a_differing_copy_gives_the_recorded_text_with_the_checkouts_python_files(tmp_path: Path) -> None:
    first, second = _clone(tmp_path, "clone1"), _clone(tmp_path, "clone2")
    url = _record(first / "space.yaml", tmp_path / "clone2" / "results" / "t.sqlite")
    space = second / "space.yaml"
    space.write_text(space.read_text().replace("name: transpose_kernel", "name: transpose_kernel_v2"))
    with pytest.warns(UserWarning, match=f"{second / 'space.yaml'} differs from the version measured"):
        taken = use_stored_spaces(url)
    old = load_space(taken["transpose_tiled"])
    assert old.kernel.template == "transpose_kernel"  # the recorded version
    assert old.kind.reference_fn == f"{(second / 'reference.py').resolve()}:transpose"  # beside the checkout's copy
    assert str(first) not in taken["transpose_tiled"].read_text()


def test_the_current_directory_is_the_checkout_when_the_database_is_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _clone(tmp_path, "clone1"), _clone(tmp_path, "clone2")
    url = _record(first / "space.yaml", tmp_path / "shared" / "t.sqlite")
    monkeypatch.chdir(tmp_path / "clone2")
    assert use_stored_spaces(url) == {}
    assert spec.STORED["transpose_tiled"] == (second / "space.yaml").resolve()


def test_the_recorded_text_when_no_copy_is_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # not a checkout (this one holds examples/transpose too)
    first = _clone(tmp_path, "clone1")
    url = _record(first / "space.yaml", tmp_path / "clone2" / "results" / "t.sqlite")
    (first / "space.yaml").unlink()
    taken = use_stored_spaces(url)
    assert set(taken) == {"transpose_tiled"} and taken["transpose_tiled"].parent.parent != first.parent
    assert load_space(taken["transpose_tiled"]).kernel.template == "transpose_kernel"


def test_a_built_in_space_comes_from_the_running_package(tmp_path: Path) -> None:
    other = tmp_path / "clone1" / "spaces"
    other.mkdir(parents=True)
    shutil.copy(paths.SPACES_DIR / "gemm_tiny_simt.yaml", other)
    url = _record(other / "gemm_tiny_simt.yaml", tmp_path / "clone2" / "results" / "t.sqlite")
    assert use_stored_spaces(url) == {}
    assert spec.STORED["gemm_tiny_simt"] == (paths.SPACES_DIR / "gemm_tiny_simt.yaml").resolve()


def test_a_copy_that_differs_only_in_comments_is_the_recorded_version(tmp_path: Path) -> None:
    first, second = _clone(tmp_path, "clone1"), _clone(tmp_path, "clone2")
    url = _record(first / "space.yaml", tmp_path / "clone2" / "results" / "t.sqlite")
    space = second / "space.yaml"
    space.write_text("# edited after the sweep\n" + space.read_text())
    assert use_stored_spaces(url) == {}
    assert spec.STORED["transpose_tiled"] == space.resolve()


def test_every_differing_space_is_written_apart_from_the_checkout(tmp_path: Path) -> None:
    first, second = tmp_path / "clone1" / "examples", tmp_path / "clone2" / "examples"
    for name in ("transpose", "stencil"):
        for root in (first, second):
            shutil.copytree(ROOT / "examples" / name, root / name, ignore=shutil.ignore_patterns("results"))
    db = tmp_path / "clone2" / "results" / "t.sqlite"
    _record(first / "transpose" / "space.yaml", db)
    url = _record(first / "stencil" / "space.yaml", db)
    for name in ("transpose", "stencil"):
        (second / name / "space.yaml").write_text((second / name / "space.yaml").read_text() + "description: v2\n")
    with pytest.warns(UserWarning):
        taken = use_stored_spaces(url)
    assert set(taken) == {"transpose_tiled", "convolution_5x5"}
    for file in taken.values():
        assert tmp_path not in file.parents and load_space(file).kernel is not None


def test_a_committed_database_copied_elsewhere_finds_its_spaces_in_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Committed results record space files relative to the repository (no machine paths): a copy of such a
    database in another folder, read from another directory, still uses the example's files of the checkout."""
    from tests.support.committed import gunzip_to

    monkeypatch.chdir(tmp_path)
    rec = gunzip_to(
        paths.PACKAGE.parent / "examples" / "stencil" / "results" / "stencil_h100.sqlite.xz", tmp_path / "r.sqlite"
    )
    assert use_stored_spaces(f"sqlite:///{rec}") == {}
    assert spec.STORED["convolution_5x5"] == (paths.PACKAGE.parent / "examples" / "stencil" / "space.yaml").resolve()


def test_report_of_a_database_whose_space_files_are_gone_still_writes_the_table(tmp_path: Path) -> None:
    """A recorded space whose files cannot be found anywhere: `report` warns that its Python (the reference) is not
    run and writes the table and its plots from the recorded text."""
    import sqlite3
    import subprocess
    import sys

    from tests.support.committed import gunzip_to

    rec = gunzip_to(
        paths.PACKAGE.parent / "examples" / "stencil" / "results" / "stencil_h100.sqlite.xz", tmp_path / "r.sqlite"
    )
    with sqlite3.connect(rec) as db:
        db.execute(
            "update spaces set yaml_path = 'gone/space.yaml', "
            "problem = replace(problem, 'examples/stencil/reference.py', 'gone/reference.py')"
        )
    fixed = ["--tols", "0.05", "--structure", "regions"]  # the files written are checked, not the structure chosen
    out = subprocess.run(
        [sys.executable, "-m", "autotune", "report", str(rec), *fixed, "--out", str(tmp_path / "rep")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "analyzed without running it" in out.stderr and "no space file" not in out.stderr
    assert (tmp_path / "rep" / "dispatch.json").is_file() and (tmp_path / "rep" / "perf_vs_size.png").is_file()
