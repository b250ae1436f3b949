"""`autotune db bake` (autotune/workflows/bake.py): a tuning database with spent validations replayed into it, on the
committed softmax H100 tuning database and the committed seed-3603 validation (real SQLite files, nothing mocked):
the baked file holds the tuning database's rows and the validation's problems, a plain or packed tuning file bakes
alike, and a missing or non-database input, a folder that is no validation's and an existing output are refused
without writing anything."""

from __future__ import annotations

import lzma
import shutil
import sqlite3
from contextlib import closing
import warnings
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.errors import UserError
from autotune.paths import ROOT
from autotune.store.engine import StoreError
from autotune.store.packing import unpack
from autotune.workflows.bake import bake
from autotune.workflows.tables import TableOptions

TUNING = ROOT / "results/tables5_h100/softmax/softmax_model_h100.sqlite.xz"
SPENT = ROOT / "results/tables4_h100/softmax_3603/validation"  # validate_sweep.yaml and validation.sqlite.xz
PACKED_SWEEP = ROOT / "results/tables7_h100/softmax/validation"  # validate_sweep.yaml.xz, validation.sqlite.xz


def _problems(db: Path) -> set[tuple[int, int]]:
    with closing(sqlite3.connect(db)) as conn:
        return set(conn.execute("SELECT rows, cols FROM points_softmax").fetchall())


def _count(db: Path, table: str) -> int:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("plain") / "tuning.sqlite"
    unpack(TUNING, out)
    return out


def _first_problems(folder: Path, count: int, out: Path, *, packed: bool = False) -> Path:
    """A validation folder `out` like `folder` (its recording, copied as it is) whose sweep config keeps only its
    first `count` problems, written plain or packed (validate_sweep.yaml.xz): a replay of it adds those problems
    only (a bake replays about 250 recorded measurements a second; the committed folders hold 1,600-2,660)."""
    from autotune.workflows.bake import validation_database, validation_sweep

    validation_sweep(folder)  # the folder's own config reads
    plain_file, packed_file = folder / "validate_sweep.yaml", folder / "validate_sweep.yaml.xz"
    text = plain_file.read_text() if plain_file.is_file() else lzma.decompress(packed_file.read_bytes()).decode()
    doc = yaml.safe_load(text)
    assert len(doc["points"]) > count
    doc["points"] = doc["points"][:count]
    for entry in doc["spaces"]:  # a space file named relative to the checkout, as the committed configs do
        entry["space"] = str(ROOT / entry["space"])
    out.mkdir()
    text = yaml.safe_dump(doc, sort_keys=False)
    if packed:
        (out / "validate_sweep.yaml.xz").write_bytes(lzma.compress(text.encode()))
    else:
        (out / "validate_sweep.yaml").write_text(text)
    recording = validation_database(folder)
    shutil.copy(recording, out / recording.name)
    return out


@pytest.fixture(scope="module")
def spent_few(tmp_path_factory) -> Path:
    """SPENT with its first 12 of 200 problems: for the tests of the command line and of counts per source."""
    return _first_problems(SPENT, 12, tmp_path_factory.mktemp("spent") / "validation")


@pytest.fixture(scope="module")
def packed_few(tmp_path_factory) -> Path:
    """PACKED_SWEEP (validate_sweep.yaml.xz) with its first 12 of 100 problems, packed again."""
    return _first_problems(PACKED_SWEEP, 12, tmp_path_factory.mktemp("packed") / "validation", packed=True)


def test_bake_adds_the_validation_problems(plain, spent_few, tmp_path):
    """The packed tuning database with 12 of SPENT's problems replayed into it (its 200 take the same path, with
    17x the measurements): every tuning point kept, the problems added, the table built from all of them."""
    out = tmp_path / "baked.sqlite"
    done = bake(TUNING, [spent_few], out)
    assert done.database == out and done.sources == (spent_few,) and done.added[0] > 0
    assert _problems(plain) < _problems(out)  # every tuning point kept, the validation's problems added
    assert _count(out, "measurements") == _count(plain, "measurements") + done.added[0]
    assert [p.name for p in tmp_path.iterdir()] == ["baked.sqlite"]  # no temporary file left beside it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = done.table(TableOptions(bk=10, tol=0.1, structure="cost:0.1:1:1"))
    points = {(int(p["sizes"]["rows"]), int(p["sizes"]["cols"])) for p in table.data["points"]}
    assert points == _problems(out)


def test_a_plain_tuning_file_and_a_packed_sweep_file_bake_alike(plain, packed_few, tmp_path):
    """A packed (.sqlite.xz) and a plain tuning file with the same packed sweep (12 of PACKED_SWEEP's problems)
    bake alike; no folder gives a copy; --force replaces that copy with the bake of the plain file."""
    from_packed = bake(TUNING, [packed_few], tmp_path / "a.sqlite")
    assert bake(plain, [], tmp_path / "c.sqlite").added == ()  # no folder: a copy of the tuning database
    assert _problems(tmp_path / "c.sqlite") == _problems(plain)
    from_plain = bake(plain, [packed_few], tmp_path / "c.sqlite", replace=True)  # --force
    assert from_plain.database == tmp_path / "c.sqlite"
    assert from_packed.added == from_plain.added and from_packed.added[0] > 0
    assert _problems(plain) < _problems(tmp_path / "a.sqlite") == _problems(tmp_path / "c.sqlite")


def test_bad_inputs_are_refused_and_write_nothing(plain, tmp_path):
    out = tmp_path / "out.sqlite"
    with pytest.raises(StoreError, match="no tuning database at"):
        bake(tmp_path / "missing.sqlite.xz", [SPENT], out)
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database\n")
    with pytest.raises(StoreError, match="is not a results database"):
        bake(text, [SPENT], out)
    with pytest.raises(UserError, match="holds no validate_sweep.yaml"):
        bake(plain, [tmp_path], out)
    (tmp_path / "validate_sweep.yaml").write_bytes((SPENT / "validate_sweep.yaml").read_bytes())
    with pytest.raises(UserError, match="holds no validation.sqlite"):
        bake(plain, [tmp_path], out)
    assert not out.exists()
    out.write_text("kept")
    with pytest.raises(StoreError, match="exists"):
        bake(plain, [], out)
    assert out.read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.sqlite", "out.sqlite", "validate_sweep.yaml"]


def test_the_command(plain, spent_few, tmp_path):
    out = tmp_path / "baked.sqlite"
    got = CliRunner().invoke(app, ["db", "bake", str(plain), str(spent_few), "-o", str(out)])
    assert got.exit_code == 0, got.output
    assert "replayed" in got.output and f"wrote {out}" in got.output.replace("\n", "")
    assert _problems(plain) < _problems(out)
    got = CliRunner().invoke(app, ["db", "bake", str(tmp_path / "nope.sqlite"), "-o", str(tmp_path / "x.sqlite")])
    assert got.exit_code == 2 and "no tuning database at" in got.output


def _replayed(recording: Path, points: slice, db: Path) -> Path:
    """`db`: the recorded config's sweep at `points` of its points, replayed from `recording` (nothing measured)."""
    import dataclasses

    from autotune.store.engine import database_url
    from autotune.workflows.bake import recorded_sweeps
    from autotune.workflows.sweeps import Launch, launch_sweep

    (cfg,) = recorded_sweeps(recording)
    cfg = dataclasses.replace(cfg, points=cfg.points[points], database=database_url(str(db), write=True))
    assert launch_sweep(cfg, Launch(replay=str(recording))).summary.status == "done"
    return db


def test_a_results_database_with_per_point_studies_bakes_in(tmp_path):
    """A results database in place of a validation folder: each of its sweeps replays from the config it recorded,
    with its library times. The committed rect_h100_part2 sweep searched each point with the hybrid strategy, whose
    Optuna studies live in the database (their pooled connections once kept the file locked: 'database is
    locked' when the baked file took its name)."""
    recording = ROOT / "results/rect_h100/rect_h100_part2.sqlite.xz"
    tuning = _replayed(recording, slice(0, 1), tmp_path / "tuning.sqlite")
    more = _replayed(recording, slice(1, 2), tmp_path / "more.sqlite")  # one point of each: a study per point
    done = bake(tuning, [more], tmp_path / "baked.sqlite")
    assert done.sources == (more,) and done.added[0] == _count(more, "measurements") > 0
    assert _count(done.database, "measurements") == _count(tuning, "measurements") + done.added[0]
    assert _count(done.database, "baselines") == _count(tuning, "baselines") + _count(more, "baselines") == 2
    with pytest.raises(StoreError, match="no validation folder or results database"):
        bake(tuning, [tmp_path / "missing.sqlite"], tmp_path / "never.sqlite")
    with pytest.raises(StoreError, match="is not a results database"):
        bake(tuning, [_text(tmp_path)], tmp_path / "never.sqlite")
    assert not (tmp_path / "never.sqlite").exists()


def _text(folder: Path) -> Path:
    path = folder / "notes.sqlite"
    path.write_text("not a database\n")
    return path


def test_a_source_given_twice_counts_twice(plain, spent_few, tmp_path):
    """Each source has its own count, in order, even when one is named twice (the second replay adds nothing)."""
    done = bake(plain, [spent_few, spent_few], tmp_path / "twice.sqlite")
    assert done.sources == (spent_few, spent_few) and done.added[0] > 0 and done.added[1] == 0
