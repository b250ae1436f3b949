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
# table folder -> the arguments of its validation (scripts/model_tables_h100.sh, scripts/softmax_model_h100.sh)
GEMM_ARGS = ["--pool-bk", "3", "--repetitions", "10", "--random", "200"]
MODELS = {
    "small_tables_h100/model": [
        *("--db", str(RESULTS / "small_tables_h100" / "small_tables_h100.sqlite.xz"), "--seed", "3202"),
        *("--workload", "configs/workloads/small_h100.yaml", *GEMM_ARGS),
    ],
    "fp16_model_h100": [
        *("--db", str(RESULTS / "fp16_model_h100" / "fp16_model_h100.sqlite.xz"), "--seed", "3201"),
        *("--workload", "configs/workloads/fp16_h100.yaml", *GEMM_ARGS),
    ],
    # a kind other than GEMM (committed once scripts/softmax_model_h100.sh has run on a GPU)
    "softmax_model_h100": [
        *("--db", str(RESULTS / "softmax_model_h100" / "softmax_model_h100.sqlite.xz"), "--seed", "3203"),
        *("--random", "200", "--pool-bk", "1", "--repetitions", "10"),
        *("--space", str(ROOT / "examples" / "softmax" / "space.yaml")),
    ],
}

# scripts/tables2_h100.sh's output as committed (results/tables2_h100/TABLE/...): round 0 of `autotune active`, its
# table validated at the 200 fresh problems of active/round0/heldout.csv (seeds 3301, 3303, 3302)
T2 = RESULTS / "tables2_h100"
# The tuning databases: the committed ones plus the points that run added; fp32/fp64's replaced the committed one in
# place, fp16's and softmax's are kept beside (their earlier validations' candidates are every tuned point's best).
TABLES2 = {
    "fp16": (T2 / "fp16" / "fp16_model_h100.sqlite.xz", ["--pool-bk", "3", "--repetitions", "10"]),
    "softmax": (
        T2
        / "softmax"
        / "softmax_model_h100.sqlite.xz",  # kept beside: softmax's candidates are every tuned point's best
        ["--pool-bk", "1", "--repetitions", "10", "--space", "examples/softmax/space.yaml"],
    ),
    "small": (RESULTS / "small_tables_h100" / "small_tables_h100.sqlite.xz", ["--pool-bk", "3", "--repetitions", "10"]),
}
for _t, (_db, _args) in TABLES2.items():
    _r0 = T2 / _t / "active" / "round0"
    MODELS[f"tables2_h100/{_t}/active/round0"] = [*("--db", str(_db), "--points", str(_r0 / "heldout.csv"), *_args)]

# scripts/tables4_h100.sh's output (results/tables4_h100/TABLE/validation): the committed tables2 tables (round 0,
# not copied) validated at fresh random seeds 3401-3403 against their tuning databases
TABLE_OF: dict[str, Path] = {}
T4 = RESULTS / "tables4_h100"
TABLES4 = {
    "fp16": ("3401", ["--workload", "configs/workloads/fp16_h100.yaml"]),
    "small": ("3402", ["--workload", "configs/workloads/small_h100.yaml"]),
    "softmax": ("3403", []),
}
for _t, (_seed, _extra) in TABLES4.items():
    _db, _args = TABLES2[_t]
    MODELS[f"tables4_h100/{_t}"] = [*("--db", str(_db), "--random", "200", "--seed", _seed, *_extra, *_args)]
    TABLE_OF[f"tables4_h100/{_t}"] = T2 / _t / "active" / "round0" / "dispatch.json"

# scripts/tables4_small_h100.sh's output: one active round of the fp32/fp64 table from seed 3402's 15 worst problems
# (its grown tuning database kept beside, the table packed as dispatch.json.xz), validated at fresh seed 3502
_SA = "tables4_h100/small_active/active/round0"
MODELS[_SA] = [
    *("--db", str(T4 / "small_active" / "small_tables_h100.sqlite.xz")),
    *("--points", str(RESULTS / _SA / "heldout.csv"), "--pool-bk", "3", "--repetitions", "10"),
]
TABLE_OF[_SA] = RESULTS / _SA / "dispatch.json.xz"

# scripts/tables5_softmax_h100.sh's output: the softmax table tuned again after the timing fix (its fresh tuning
# database beside it), validated at the 200 fresh problems of seed 3703; scripts/tables5_revalidate_h100.sh: the same
# table validated again at those problems, unsteady repetitions timed again
_T5 = "tables5_h100/softmax/active/round0"
_T5_ARGS = [
    *("--db", str(RESULTS / "tables5_h100" / "softmax" / "softmax_model_h100.sqlite.xz")),
    *("--points", str(RESULTS / _T5 / "heldout.csv"), "--pool-bk", "1", "--repetitions", "10"),
    *("--space", "examples/softmax/space.yaml"),
]
MODELS[_T5] = _T5_ARGS
MODELS["tables5_h100/revalidate_3703"] = _T5_ARGS
TABLE_OF["tables5_h100/revalidate_3703"] = RESULTS / _T5 / "dispatch.json"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_validation_replays_byte_for_byte(name: str, tmp_path: Path) -> None:
    d = RESULTS / name
    if not (d / "validation" / "validation.sqlite.xz").is_file():
        pytest.skip(f"no committed validation in results/{name}")
    recorded = gunzip_to(d / "validation" / "validation.sqlite.xz", tmp_path / "recorded.sqlite")
    out = tmp_path / "out"
    args = ["validate", str(TABLE_OF.get(name, d / "dispatch.json")), *MODELS[name]]
    args += ["--out", str(out), "--replay", f"sqlite:///{recorded}", "--quiet"]
    r = subprocess.run([sys.executable, "-m", "autotune", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (out / "validation.csv").read_bytes() == (d / "validation" / "validation.csv").read_bytes()
    mine = json.loads((out / "validation_summary.json").read_text())
    committed = json.loads((d / "validation" / "validation_summary.json").read_text())
    assert mine["summary"] == committed["summary"]
    assert mine["provenance"]["candidates"] == committed["provenance"]["candidates"]
    assert mine["summary"][-1]["problems"] == 200
    if not name.startswith(
        ("tables2_h100/", "tables4_h100/")
    ):  # a tables2 validation cut by its time limit says so in its figures
        assert mine["summary"][-1]["not_measured"] == 0
