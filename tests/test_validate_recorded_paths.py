"""`autotune validate` records the files the user gave, never a temporary copy: a `.sqlite.xz` tuning or replay
database is read through a decompressed copy in the temporary folder, but validation_summary.json names the user's
file, relative to the repository where it lies inside it (as the committed results do), else by its absolute
path. The command runs in this process (`invoke_cli`, from the folder each test names), on 20 random problems: what
is checked is the provenance it records, not the validation's figures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from autotune import paths
from tests.support.harness import invoke_cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = "examples/transpose/results"


def validate(tmp_path: Path, db: str, replay: str, cwd: Path, *extra: str) -> dict:
    out = tmp_path / "out"
    r = invoke_cli(
        *["validate", str(ROOT / EXAMPLE / "dispatch.json"), "--db", db, "--random", "20", "--seed", "1"],
        *["--pool-bk", "3", "--out", str(out), "--replay", replay, "--quiet", *extra],
        cwd=cwd,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    text = (out / "validation_summary.json").read_text()
    assert "autotune-gz" not in text, text[text.index("provenance") :]
    return json.loads(text)["provenance"]


def test_files_in_the_repository_are_named_relative_to_it(tmp_path: Path) -> None:
    prov = validate(
        tmp_path, f"{EXAMPLE}/transpose_h100.sqlite.xz", f"{EXAMPLE}/validation/validation.sqlite.xz", cwd=ROOT
    )
    if paths.IN_CHECKOUT:
        assert prov["tuning_database"] == f"{EXAMPLE}/transpose_h100.sqlite.xz"
        assert prov["replay"] == f"{EXAMPLE}/validation/validation.sqlite.xz"
        assert prov["table"] == f"{EXAMPLE}/dispatch.json"
    assert prov["validation_database"] == f"sqlite:///{(tmp_path / 'out' / 'validation.sqlite').resolve()}"


def test_files_outside_the_repository_are_named_by_their_own_path(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("transpose_h100.sqlite.xz", "validation/validation.sqlite.xz"):
        shutil.copy(ROOT / EXAMPLE / name, mine / Path(name).name)
    space = str(ROOT / "examples" / "transpose" / "space.yaml")
    prov = validate(
        tmp_path, "mine/transpose_h100.sqlite.xz", f"sqlite:///{mine}/validation.sqlite.xz", tmp_path, "--space", space
    )
    assert prov["tuning_database"] == str((mine / "transpose_h100.sqlite.xz").resolve())
    assert prov["replay"] == f"sqlite:///{(mine / 'validation.sqlite.xz').resolve()}"
