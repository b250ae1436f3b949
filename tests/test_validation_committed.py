"""The committed H100 validations replay: `autotune validate` on the recorded validation database (the replay
backend) reproduces the committed validation.csv byte for byte, and the figures the README and PROVENANCE quote
come out of it."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from tests.support.committed import plain_bytes

ROOT = Path(__file__).resolve().parents[1]
# table dir -> workload: the arguments of scripts/h100_tables.sh validate-*
TABLES = {"fp16_tables_h100": "fp16_h100", "small_tables_h100": "small_h100"}


def _unzip(src: Path, dst: Path) -> Path:
    dst.write_bytes(plain_bytes(src))
    return dst


@pytest.mark.parametrize("name", sorted(TABLES))
def test_validation_replays_byte_for_byte(name, tmp_path):
    d = ROOT / "results" / name
    if not (d / "validation" / "validation.sqlite.xz").is_file():
        pytest.skip(f"no committed validation for {name}")
    tuning = _unzip(d / f"{name}.sqlite.xz", tmp_path / "tuning.sqlite")
    recorded = _unzip(d / "validation" / "validation.sqlite.xz", tmp_path / "recorded.sqlite")
    out = tmp_path / "out"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "autotune",
            "validate",
            str(d / "dispatch.json"),
            "--db",
            str(tuning),
            "--random",
            "200",
            "--seed",
            "1",
            "--workload",
            f"configs/workloads/{TABLES[name]}.yaml",
            "--pool-bk",
            "3",
            "--out",
            str(out),
            "--replay",
            f"sqlite:///{recorded}",
            "--validation-db",
            f"sqlite:///{tmp_path / 'v.sqlite'}",
            "--quiet",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "validation.csv").read_bytes() == (d / "validation" / "validation.csv").read_bytes()
    frame = pd.read_csv(out / "validation.csv")
    assert len(frame) == 200 and frame["table_ms"].notna().all()
    assert (frame["loss_vs_best"] >= 0).all() and frame["best_ms"].notna().all()


# the examples' validations (examples/NAME/results/validation/, made on a GPU by `autotune validate
# examples/NAME/results/dispatch.json --db examples/NAME/results/NAME_h100.sqlite.xz --random 200 --seed 1
# --pool-bk 3 --space examples/NAME/space.yaml --out examples/NAME/results/validation`)
@pytest.mark.parametrize("name", ["softmax", "stencil", "transpose"])
def test_example_validation_replays_byte_for_byte(name, tmp_path):
    d = ROOT / "examples" / name / "results"
    if not (d / "validation" / "validation.sqlite.xz").is_file():
        pytest.skip(f"no committed validation for examples/{name}")
    recorded = _unzip(d / "validation" / "validation.sqlite.xz", tmp_path / "recorded.sqlite")
    out = tmp_path / "out"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "autotune",
            "validate",
            str(d / "dispatch.json"),
            "--db",
            str(d / f"{name}_h100.sqlite.xz"),
            "--random",
            "200",
            "--seed",
            "1",
            "--pool-bk",
            "3",
            "--space",
            str(ROOT / "examples" / name / "space.yaml"),
            "--out",
            str(out),
            "--replay",
            f"sqlite:///{recorded}",
            "--validation-db",
            f"sqlite:///{tmp_path / 'v.sqlite'}",
            "--quiet",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "validation.csv").read_bytes() == (d / "validation" / "validation.csv").read_bytes()
    frame = pd.read_csv(out / "validation.csv")
    assert len(frame) == 200 and frame["table_ms"].notna().all() and frame["baseline_ms"].notna().all()
