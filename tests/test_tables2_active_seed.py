"""`autotune active --seed-from` on the CPU, for a kind declared in a space file (softmax): the worst problems of the
softmax example's committed validation (examples/softmax/results/validation, seed 1) become tuned points before round
0, replayed from that validation's own database; round 0 draws fresh problems. The tuning database's recorded space
file is made to point nowhere, as on another machine: `--space` names it. (This ran on results/softmax_model_h100,
whose databases were retired: docs/results.md.)"""

import json
import sqlite3
from pathlib import Path

import pandas as pd
from autotune.store.packing import unpack
from tests.support.harness import invoke_cli

ROOT = Path(__file__).resolve().parents[1]
SOFTMAX = ROOT / "examples" / "softmax" / "results"


def test_seed_from_an_earlier_validation_adds_its_worst_problems(tmp_path):
    tuning = tmp_path / "tuning.sqlite"
    unpack(SOFTMAX / "softmax_h100.sqlite.xz", tuning)
    with sqlite3.connect(tuning) as conn:
        conn.execute("UPDATE spaces SET yaml_path = 'gone/examples/softmax/space.yaml'")
    out = tmp_path / "active"
    args = [
        *("active", str(tuning), "--config", "examples/softmax/sweep.yaml", "--out", str(out)),
        *("--seed-from", str(SOFTMAX / "validation"), "--add", "5", "--rounds", "1", "--heldout", "12"),
        *("--seed", "3303", "--structure", "nearest:0.05", "--pool-bk", "1", "--repetitions", "10"),
        *("--space", "examples/softmax/space.yaml", "--include-dir", "examples/softmax"),
        *("--replay", str(SOFTMAX / "validation" / "validation.sqlite.xz")),
    ]
    r = invoke_cli(*args, cwd=ROOT)  # in this process: the command is tested, not a process's start
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    earlier = pd.read_csv(SOFTMAX / "validation" / "validation.csv")
    worst = earlier.sort_values("loss_vs_best", ascending=False, kind="stable").head(5)
    added = json.loads((out / "seed" / "added.json").read_text())
    assert [(a["rows"], a["cols"]) for a in added] == list(zip(worst["rows"], worst["cols"], strict=True))
    assert added[0]["loss_vs_best"] > 0.5  # the committed worst, 64.3%
    table = json.loads((out / "round0" / "dispatch.json").read_text())
    tuned = {(p["sizes"]["rows"], p["sizes"]["cols"]) for p in table["points"]}
    assert {(a["rows"], a["cols"]) for a in added} <= tuned and len(tuned) == 4 + 5  # measured, then rebuilt
    held = pd.read_csv(out / "round0" / "heldout.csv")
    assert list(held.columns) == ["precision", "rows", "cols"] and len(held) == 12  # softmax has no shapes
    assert not set(zip(held["rows"], held["cols"], strict=True)) & tuned  # round 0's problems are fresh
    rounds = json.loads((out / "active.json").read_text())
    assert rounds[0]["tuned_points"] == 9 and rounds[0]["figures"]["problems"] == 12
