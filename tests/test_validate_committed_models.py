"""The committed validations of the selection-model tables (issue 32) replay byte for byte: `autotune validate
--replay` on the committed validation database (measured on two H100 cards of one model, as committed) re-derives
validation.csv and the figures of validation_summary.json exactly, with the arguments the PROVENANCE names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.committed import gunzip_to

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
# table folder -> (tuning database, --seed, --workload): the arguments of scripts/model_tables_h100.sh
MODELS = {
    "small_tables_h100/model": ("small_tables_h100/small_tables_h100.sqlite.xz", 3202, "small_h100"),
    "fp16_model_h100": ("fp16_model_h100/fp16_model_h100.sqlite.xz", 3201, "fp16_h100"),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_validation_replays_byte_for_byte(name: str, tmp_path: Path) -> None:
    d = RESULTS / name
    tuning, seed, workload = MODELS[name]
    recorded = gunzip_to(d / "validation" / "validation.sqlite.xz", tmp_path / "recorded.sqlite")
    out = tmp_path / "out"
    args = ["validate", str(d / "dispatch.json"), "--db", str(RESULTS / tuning), "--random", "200"]
    args += ["--seed", str(seed), "--workload", f"configs/workloads/{workload}.yaml", "--pool-bk", "3"]
    args += ["--repetitions", "10", "--out", str(out), "--replay", f"sqlite:///{recorded}", "--quiet"]
    r = subprocess.run([sys.executable, "-m", "autotune", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (out / "validation.csv").read_bytes() == (d / "validation" / "validation.csv").read_bytes()
    mine = json.loads((out / "validation_summary.json").read_text())
    committed = json.loads((d / "validation" / "validation_summary.json").read_text())
    assert mine["summary"] == committed["summary"]
    assert mine["provenance"]["candidates"] == committed["provenance"]["candidates"]
    assert mine["summary"][-1]["problems"] == 200 and mine["summary"][-1]["not_measured"] == 0
