"""scripts/compile_bound_search.py without a GPU: its accounting, and the whole pipeline on the replay backend."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import compile_bound_search as cb  # noqa: E402


def test_reach_counts_evaluations_and_seconds_by_own_and_by_sweep_times() -> None:
    def res(bx: int, t: float | None, at: str) -> dict:
        return {"params": {"block_size_x": bx}, "time": t, "timestamp": at}

    run = {
        "call_start": cb.epoch("2026-01-01 00:00:00"),
        "process_start": cb.epoch("2025-12-31 23:59:50"),
        "results": [
            res(16, None, "2026-01-01 00:00:01"),  # a failure counts as an evaluation
            res(32, 1.015, "2026-01-01 00:00:02"),  # within 2% of 1.0 by its own time, 5% by the sweep's
            res(64, 1.03, "2026-01-01 00:00:04.5"),  # 1% by the sweep's time
        ],
    }
    sweep = {cb.key({"block_size_x": 32}): 1.05, cb.key({"block_size_x": 64}): 1.01}
    got = cb.reach(run, 1.02, sweep)
    assert (got["evals_to_2pct"], got["call_s_to_2pct"], got["process_s_to_2pct"]) == (2, 2.0, 12.0)
    assert (got["evals_to_2pct_by_sweep_times"], got["call_s_to_2pct_by_sweep_times"]) == (3, 4.5)
    none = cb.reach({**run, "results": run["results"][:1]}, 1.02, sweep)
    assert none["evals_to_2pct"] is None and none["evals_to_2pct_by_sweep_times"] is None


def test_the_synthetic_space_is_the_scripts_1080_configurations(tmp_path: Path) -> None:
    doc = json.loads(cb.synthetic_cache(tmp_path / "c.json").read_text())
    assert len(doc["cache"]) == cb.SPACE_SIZE == 1080
    assert all(e["block_size_x"] * e["block_size_y"] <= 1024 for e in doc["cache"].values())


def test_simulated_run_sweeps_the_space_then_searches_seed_by_seed(tmp_path: Path) -> None:
    out, work = tmp_path / "out", tmp_path / "work"

    def run(seeds: int, folder: Path) -> None:
        res = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "compile_bound_search.py"), "--simulate", "--out", str(folder)]
            + ["--work", str(work), "--total", "170", "--seed-cap", "20", "--seeds", str(seeds), "--budget", "40"],
            capture_output=True,
            text=True,
            timeout=600,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "1"},
        )
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]

    run(1, tmp_path / "first")
    run(2, out)  # the same WORK again: the sweep resumes (nothing left), seed 0 is kept, seed 1 runs
    first = json.loads((tmp_path / "first" / "search_0.json").read_text())
    assert json.loads((out / "search_0.json").read_text())["results"] == first["results"]
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["complete"] and sweep["recorded"] == 1080 and sweep["verified"] < 1080  # failures recorded too
    rows = list(csv.DictReader((out / "compile_bound_search.csv").open()))
    assert [r["seed"] for r in rows] == ["0", "1"]
    for r in rows:  # the proposals of each search, distinct, the budget's worth; its best is no better than the sweep's
        run = json.loads((out / f"search_{r['seed']}.json").read_text())
        assert int(r["evals"]) == 40 == len({cb.key(x["params"]) for x in run["results"]})
        assert float(r["best_ms"]) >= sweep["best_ms"]
    assert "1080 configurations" in (out / "PROVENANCE.md").read_text()
