"""Active tuning (issue 32 item 2) on the CPU: `autotune active` replays the committed fp32/fp64 H100 sweep. The
table starts from a few of its tuned points; each round validates at fresh held-out problems drawn from the others,
adds the worst as tuned points (measured into the tuning database by a replayed sweep) and rebuilds."""

import json
import subprocess
from pathlib import Path

import pandas as pd
import yaml
from autotune.store.packing import unpack
from tests.support.harness import invoke_cli

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "results" / "small_tables_h100"


def test_active_tuning_adds_the_worst_held_out_problems_and_reports_fresh_ones(tmp_path):
    recorded = tmp_path / "recorded.sqlite"
    unpack(SMALL / "small_tables_h100.sqlite.xz", recorded)
    points = json.loads((SMALL / "dispatch.json").read_text())["points"]
    start = [p for i, p in enumerate(points) if i % 8 == 0 or p["precision"] == "fp32" and i % 8 == 1]
    pool = [p for p in points if p not in start and p["precision"] == "fp64"]  # added problems: fp64 only
    doc = yaml.safe_load((ROOT / "configs" / "small_tables_h100.yaml").read_text())
    doc["points"] = [
        {"precisions": [p["precision"]], "shapes": ["NN"], "sizes": {n: [v] for n, v in p["sizes"].items()}}
        for p in start
    ]
    tuning = tmp_path / "tuning.sqlite"
    doc["database"] = f"sqlite:///{tuning}"
    config = tmp_path / "tuning.yaml"
    config.write_text(yaml.safe_dump(doc, sort_keys=False))

    def run(*args: str) -> subprocess.CompletedProcess:  # in this process: the commands are tested, not a start
        return invoke_cli(*args, cwd=ROOT)

    r = run("sweep", str(config), "--replay", f"sqlite:///{recorded}", "-q")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    pool_csv = tmp_path / "pool.csv"
    pd.DataFrame([{"precision": "fp64", "shape": "NN", **p["sizes"]} for p in pool]).to_csv(pool_csv, index=False)
    fp64_start = sum(p["precision"] == "fp64" for p in start)
    out = tmp_path / "active"
    r = run(
        "active",
        str(tuning),
        "--config",
        str(config),
        "--out",
        str(out),
        "--rounds",
        "2",
        "--add",
        "4",
        "--heldout",
        "12",
        "--points",
        str(pool_csv),
        "--replay",
        f"sqlite:///{recorded}",
        "--structure",
        "model:0.05",
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rounds = json.loads((out / "active.json").read_text())
    assert [x["round"] for x in rounds] == [0, 1] or rounds[0]["figures"]["meets_targets"]
    first = rounds[0]
    assert first["tuned_points"] == len(start) and first["figures"]["problems"] == 12 and fp64_start
    if len(rounds) == 2:
        added = {(a["m"], a["n"], a["k"]) for a in first["added"]}
        assert len(added) == 4
        losses = [a["loss_vs_best"] for a in first["added"]]
        frame = pd.read_csv(out / "round0" / "validation" / "validation.csv")
        assert losses == sorted(frame["loss_vs_best"].dropna(), reverse=True)[:4]  # the largest measured losses
        assert rounds[1]["tuned_points"] == len(start) + 4  # measured into the tuning database and rebuilt
        table = json.loads((out / "round1" / "dispatch.json").read_text())
        assert added <= {(p["sizes"]["m"], p["sizes"]["n"], p["sizes"]["k"]) for p in table["points"]}
        held0 = pd.read_csv(out / "round0" / "heldout.csv")
        held1 = pd.read_csv(out / "round1" / "heldout.csv")
        keys0 = set(map(tuple, held0[["m", "n", "k"]].to_numpy().tolist()))
        keys1 = set(map(tuple, held1[["m", "n", "k"]].to_numpy().tolist()))
        assert not keys0 & keys1  # every round's figures are on fresh problems
        tuned = {
            (p["sizes"]["m"], p["sizes"]["n"], p["sizes"]["k"]) for p in table["points"] if p["precision"] == "fp64"
        }
        assert not keys1 & tuned and set(held1["precision"]) == {"fp64"}
