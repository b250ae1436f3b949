"""A results database is data: nothing read from one decides where a file is written or which code runs.

`autotune analyze/report/emit` write the spaces a database recorded into this process's temporary folder
(autotune.store.spaces, autotune.store.recorded_files). Each hostile database here starts from a committed one (the
transpose example) with its `spaces` row edited: files named absolute or with `..`, a space named like a path, Python
named by the database (a file beside the recorded space path, a module in the current directory), a link leading out
of the database's folder, NUL in a name, 100,000 headers, a 17 MiB header, a space file that is not YAML or nested
20,000 deep, headers that are not JSON. None may write outside the temporary folder or run the code; each is refused
in one warning line, and the analysis goes on with the measurements."""

from __future__ import annotations

import json
import lzma
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from autotune import paths
from autotune.problems.allowed_paths import ALLOW_ENV, NOT_RUN
from autotune.space.spec import RefusedSpace, load_space
from autotune.store.spaces import use_stored_spaces
from tests.support.committed import gunzip_to

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "examples" / "transpose" / "results" / "transpose_h100.sqlite.xz"
NAME = "transpose_tiled"


def marker_code(marker: Path) -> str:
    """Python that proves it ran by creating `marker`."""
    return f"open({str(marker)!r}, 'w').close()\n"


_BASE: list[Path] = []  # the committed database, unpacked once for the module


@pytest.fixture(autouse=True, scope="module")
def _base(tmp_path_factory: pytest.TempPathFactory):
    _BASE.append(gunzip_to(BASE, tmp_path_factory.mktemp("base") / "base.sqlite"))
    yield
    _BASE.clear()


@pytest.fixture(autouse=True)
def _no_allowed_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOW_ENV, raising=False)


def recorded_text() -> str:
    """The transpose space's YAML as the committed database recorded it."""
    with sqlite3.connect(_BASE[0]) as db:
        return db.execute("select yaml_text from spaces where name = ?", (NAME,)).fetchone()[0]


def with_kind(kind: str) -> str:
    """The transpose space's recorded text with its declared problem replaced by `problem: KIND`."""
    text = recorded_text()
    return text[: text.index("problem:")] + f"problem: {kind}\n" + text[text.index("kernel:") :]


def hostile(tmp_path: Path, **columns: object) -> Path:
    """The committed transpose database (plain SQLite, in tmp/db/) with its space row's `columns` set."""
    db = tmp_path / "db" / "hostile.sqlite"
    db.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_BASE[0], db)
    with sqlite3.connect(db) as conn:
        for column, value in columns.items():
            conn.execute(f"update spaces set {column} = ?", (value,))
    return db


def stored(db: Path) -> list[str]:
    """use_stored_spaces on `db`: the warnings it gave (one line each)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        use_stored_spaces(f"sqlite:///{db}")
    lines = [str(w.message) for w in caught if "schema version" not in str(w.message)]
    assert all("\n" not in line for line in lines), lines
    return lines


def refused(db: Path, name: str, why: str, marker: Path | None = None) -> None:
    """The database's version of `name` is refused, saying `why` in one line, and does not load (nor run the
    Python that would create `marker`)."""
    try:
        lines = stored(db)
        with pytest.raises(RefusedSpace, match=re.escape(why)):
            load_space(name)
    finally:
        assert marker is None or not marker.exists(), "the database's Python ran"
    assert any(why in line and "left out" in line for line in lines), lines


def cli(tmp_path: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != ALLOW_ENV}
    env["TMPDIR"] = str(tmp_path / "tmp")
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        capture_output=True,
        text=True,
        cwd=cwd or tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )


# ------------------------------------------------------------------------------------------- where files land
def test_a_header_named_with_an_absolute_path_is_not_written_there(tmp_path: Path) -> None:
    target = tmp_path / "outside" / "evil.py"
    db = hostile(tmp_path, yaml_path="gone/space.yaml", headers=json.dumps({str(target): "x = 1\n"}))
    refused(db, NAME, "must be relative")
    assert not target.exists() and not target.parent.exists()


def test_a_header_named_with_dotdot_is_not_written_there(tmp_path: Path) -> None:
    target = tmp_path / "dotdot.txt"
    name = "../" * 40 + str(target).lstrip("/")
    db = hostile(tmp_path, yaml_path="gone/space.yaml", headers=json.dumps({name: "x"}))
    refused(db, NAME, "no `..`")
    assert not target.exists()


def test_a_space_named_like_a_path_writes_nothing_there(tmp_path: Path) -> None:
    named = tmp_path / "named"
    db = hostile(tmp_path, name=str(named), yaml_path="gone/space.yaml")
    stored(db)
    assert not named.exists()
    assert load_space(str(named)).name == NAME  # the recorded version, from the temporary folder, under that name


@pytest.mark.parametrize("source", ["..", "sub/..", "."])
def test_a_kernel_source_named_dotdot_is_refused(tmp_path: Path, source: str) -> None:
    text = recorded_text().replace("source: transpose.cu", f"source: {source!r}")
    db = hostile(tmp_path, yaml_path="gone/space.yaml", yaml_text=text)
    refused(db, NAME, "its kernel source")


@pytest.mark.parametrize(
    "headers, why",
    [
        ({"a\0b.cuh": "x"}, "control character"),
        ({f"h{i}.cuh": "" for i in range(100_000)}, "100,000 recorded headers"),
        ({"big.cuh": "x" * (17 << 20)}, "bytes (at most"),
        ({"a.cuh": "x", "a.cuh/b.cuh": "y"}, "cannot be written as named"),
        ({"transpose.cu": "x"}, "like another of its files"),
        ({"space.yaml": "name: other\n"}, "like its space file"),
        ({"x.cuh": 42}, "is not text"),
        ({"": "x"}, "without a name"),
    ],
    ids=["nul", "100k-headers", "17MiB-header", "file-and-folder", "source-twice", "space-yaml", "not-text", "empty"],
)
def test_recorded_headers_break_no_rule(tmp_path: Path, headers: dict, why: str) -> None:
    db = hostile(tmp_path, yaml_path="gone/space.yaml", headers=json.dumps(headers))
    start = time.monotonic()
    refused(db, NAME, why)
    assert time.monotonic() - start < 60


@pytest.mark.parametrize(
    "column, value, why",
    [
        ("yaml_text", "name: x\nkernel: [unclosed\n  - {", "not valid YAML"),
        ("yaml_text", "a: " + "[" * 20_000 + "]" * 20_000, "nested too deep"),
        ("yaml_text", "- a\n- b\n", "not a mapping"),
        ("yaml_text", b"\x00\xff\xfe binary", "is not text"),
        ("yaml_text", "description: " + "x" * (2 << 20), "bytes (at most"),
        ("headers", "{not json", "not valid JSON"),
        ("headers", "[1, 2]", "not a mapping"),
        ("headers", "[" * 100_000 + "]" * 100_000, "not valid JSON"),
    ],
    ids=["not-yaml", "deep-yaml", "yaml-list", "binary", "2MiB-yaml", "headers-not-json", "headers-list", "deep-json"],
)
def test_recorded_space_files_that_are_not_space_files_are_refused(
    tmp_path: Path, column: str, value: object, why: str
) -> None:
    db = hostile(tmp_path, yaml_path="gone/space.yaml", **{column: value})
    refused(db, NAME, why)


# ------------------------------------------------------------------------------------------------ what code runs
def shipped(tmp_path: Path, marker: Path, kind: str = "evil.py:Evil") -> Path:
    """A database whose recorded space is a Python kind in a file beside the recorded space path (as if shipped with
    the database: the file is there)."""
    folder = tmp_path / "shipped"
    folder.mkdir()
    (folder / "evil.py").write_text(marker_code(marker))
    return hostile(tmp_path, yaml_path=str(folder / "space.yaml"), yaml_text=with_kind(kind))


def test_a_python_kind_beside_the_recorded_path_is_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "RAN"
    db = shipped(tmp_path, marker)
    refused(db, NAME, "'evil.py:Evil' is Python that only the database names", marker)


def test_a_python_kind_runs_where_the_user_allowed_its_folder(tmp_path: Path, monkeypatch) -> None:
    marker = tmp_path / "RAN"
    db = shipped(tmp_path, marker)
    monkeypatch.setenv(ALLOW_ENV, str(tmp_path / "shipped"))
    stored(db)
    with pytest.raises(Exception):  # noqa: B017 - evil.py defines no Evil: importing it is what counts
        load_space(NAME)
    assert marker.exists()


def test_a_python_kind_an_absolute_header_wrote_is_not_run(tmp_path: Path) -> None:
    """The first finding: a header written at an absolute path next to the recorded space path, then run as its
    kind, all from one database."""
    pwn, marker = tmp_path / "pwn", tmp_path / "RAN"
    db = hostile(
        tmp_path,
        yaml_path=str(pwn / "space.yaml"),
        yaml_text=with_kind("evil.py:Evil"),
        headers=json.dumps({str(pwn / "evil.py"): marker_code(marker)}),
    )
    refused(db, NAME, "must be relative", marker)
    assert not (pwn / "evil.py").exists()


def test_a_module_kind_the_work_tree_does_not_name_is_not_imported(tmp_path: Path, monkeypatch) -> None:
    marker = tmp_path / "RAN"
    (tmp_path / "evilmod_hostile.py").write_text(marker_code(marker))
    monkeypatch.syspath_prepend(str(tmp_path))  # as `python -m autotune` run here has it
    db = hostile(tmp_path, yaml_path="gone/space.yaml", yaml_text=with_kind("evilmod_hostile:Evil"))
    refused(db, NAME, "'evilmod_hostile:Evil' is Python that only the database names", marker)
    assert "evilmod_hostile" not in sys.modules


def test_a_space_name_that_climbs_out_of_spaces_does_not_pick_a_file(tmp_path: Path) -> None:
    """A built-in space is looked up by name under spaces/: a recorded name with `..` does not reach a space file
    (and its Python) elsewhere."""
    marker, pwn = tmp_path / "RAN", tmp_path / "pwn"
    pwn.mkdir()
    text = with_kind("evil.py:Evil")
    (pwn / "space.yaml").write_text(text)
    (pwn / "evil.py").write_text(marker_code(marker))
    (pwn / "transpose.cu").write_text((ROOT / "examples" / "transpose" / "transpose.cu").read_text())
    name = os.path.relpath(pwn / "space", paths.SPACES_DIR)
    db = hostile(tmp_path, name=name, yaml_path="a/space.yaml", yaml_text=text)
    refused(db, name, "only the database names", marker)


def test_a_link_leading_out_of_the_databases_folder_is_not_the_work_tree(tmp_path: Path) -> None:
    marker, outside = tmp_path / "RAN", tmp_path / "outside" / "examples" / "t"
    outside.mkdir(parents=True)
    text = with_kind("evil.py:Evil")
    (outside / "space.yaml").write_text(text)
    (outside / "evil.py").write_text(marker_code(marker))
    db = hostile(tmp_path, yaml_path="/nowhere/examples/t/space.yaml", yaml_text=text)
    (db.parent / "examples").symlink_to(outside.parent, target_is_directory=True)
    refused(db, NAME, "only the database names", marker)


def test_functions_outside_the_allowed_folders_are_replaced_and_the_space_still_loads(tmp_path: Path) -> None:
    marker = tmp_path / "RAN"
    (tmp_path / "evil.py").write_text(marker_code(marker) + "def f(*a):\n    pass\n")
    text = recorded_text().replace("reference: reference.py:transpose", f"reference: {tmp_path / 'evil.py'}:f")
    db = hostile(tmp_path, yaml_path="gone/space.yaml", yaml_text=text)
    lines = stored(db)
    assert any("analyzed without running it" in line for line in lines), lines
    kind = load_space(NAME).kind
    assert kind.reference_fn == NOT_RUN and not marker.exists()


# --------------------------------------------------------------------------------------------- the commands
@pytest.mark.parametrize("command", ["report", "analyze", "emit"])
@pytest.mark.parametrize("packed", [False, True], ids=["sqlite", "sqlite.xz"])
def test_the_commands_neither_write_nor_run_what_a_database_names(tmp_path: Path, command: str, packed: bool) -> None:
    pwn, marker = tmp_path / "pwn", tmp_path / "RAN"
    pwn.mkdir()
    (pwn / "evil.py").write_text(marker_code(marker))  # a kind file beside the recorded path, as if shipped
    db = hostile(
        tmp_path,
        yaml_path=str(pwn / "space.yaml"),
        yaml_text=with_kind("evil.py:Evil"),
        headers=json.dumps({"ok.cuh": "// fine\n"}),
    )
    if packed:
        xz = db.with_name("hostile.sqlite.xz")
        xz.write_bytes(lzma.compress(db.read_bytes()))
        db.unlink()
        db = xz
    # one TOL and a fixed structure (analyze: no leave-one-out): what is checked is what the recorded space makes the
    # command write and run, which happens as the database is opened, before any table is built
    fixed = ["--tols", "0.05", "--structure", "regions"]
    extra = {
        "report": [*fixed, "--out", str(tmp_path / "rep")],
        "analyze": ["--tols", "0.05", "--no-loo"],
        "emit": fixed[2:],
    }
    r = cli(tmp_path, command, str(db), *extra[command])
    assert r.returncode == 0, r.stderr[-3000:]
    assert not marker.exists()
    lines = [line for line in r.stderr.splitlines() if "only the database names" in line]
    assert len(lines) == 1 and "--allow-path" in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    if command == "report":  # once: --allow-path is the command line's, before any command (emit: no plots drawn)
        allowed = cli(tmp_path, "--allow-path", str(pwn), "emit", str(db), *fixed[2:])
        assert marker.exists(), allowed.stderr[-2000:]  # the user allowed the folder: its Python is run


def test_a_deep_recorded_space_file_is_one_error_when_exported_as_a_kernel_tuner_cache(tmp_path: Path) -> None:
    """`autotune export kerneltuner` reads the recorded space file too: nested 20,000 deep it is one UserError (the
    bounded loader), not a RecursionError from PyYAML's composer."""
    from autotune.errors import UserError
    from autotune.interop.kt_export import export_cache
    from autotune.store.store import Store

    db = hostile(tmp_path, yaml_text="a: " + "[" * 20_000 + "]" * 20_000)
    start = time.monotonic()
    with Store.open(str(db), readonly=True) as store, pytest.raises(UserError, match="nests deeper than 100 levels"):
        export_cache(store, NAME, point="transpose:fp32:-:4096x4096")
    assert time.monotonic() - start < 30


def test_the_bounded_loader_reads_what_safe_load_reads_and_stops_at_its_depth() -> None:
    import yaml

    from autotune import yamlfile

    text = "name: x\nparameters: {A: [1, 2], B: [[3], {c: 4}]}\n"
    assert yamlfile.safe_load(text) == yaml.safe_load(text)
    at_bound = "[" * (yamlfile.MAX_DEPTH - 1) + "]" * (yamlfile.MAX_DEPTH - 1)
    assert yamlfile.safe_load(at_bound) == yaml.safe_load(at_bound)
    with pytest.raises(yamlfile.TooDeep, match="line 1"):
        yamlfile.safe_load("[" * (yamlfile.MAX_DEPTH + 1) + "]" * (yamlfile.MAX_DEPTH + 1))
