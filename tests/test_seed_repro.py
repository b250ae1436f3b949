"""scripts/seed_repro.py (issue 56's report figures) on a committed seed database: Table I rows per TOL and method,
one Figure 6 row per test point with the library's time, the sweep runs' wall times."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd

from autotune.paths import ROOT

DB = ROOT / "results/seed_repro/wmma_worklog/seed_wmma_worklog.sqlite.xz"


def test_seed_repro_writes_table1_fig6_and_sweeps(tmp_path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts/seed_repro.py"), str(DB), "--out", str(tmp_path), "--paper", "0:3,0.15:2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    table1 = pd.read_csv(tmp_path / "table1.csv")
    assert sorted(set(table1["tol"])) == [0, 0.05, 0.1, 0.15]
    assert set(table1["method"]) == {"greedy", "exact"}
    assert (table1.groupby("method")["kernels"].apply(lambda k: k.is_monotonic_decreasing)).all()
    assert table1.loc[table1["tol"] == 0, "paper_kernels"].tolist() == [3, 3]
    fig6 = pd.read_csv(tmp_path / "fig6.csv")
    assert len(fig6) == 4  # the config's four sizes
    assert (fig6["ms_high"] >= fig6["ms_tol0"]).all() and (fig6["drop"] >= 0).all()
    assert fig6["library_ms"].notna().all() and (fig6["speedup_tol0"] > 0).all()
    sweeps = pd.read_csv(tmp_path / "sweep.csv")
    # the whole space: every pair configs/seeds/wmma_worklog.yaml plans, in one run
    assert sweeps["n"].sum() == 6508 and (sweeps["wall_s"] > 0).all()
    assert (tmp_path / "fig6.png").stat().st_size > 0
    assert "whole experiment: 6,508 pairs in 372.3 s" in out.stdout


def test_the_plot_draws_one_series_per_independent_size() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from seed_repro import _series
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    square = pd.DataFrame({"precision": "fp16", "shape": "NN", "m": [16, 24, 32], "n": [16, 24, 32], "k": [16, 24, 32]})
    assert _series(square, ["m", "n", "k"]) == ("m", [])  # n = k = m: one series
    tall = pd.DataFrame(
        {
            "precision": ["fp32"] * 4 + ["fp64"] * 4,
            "shape": "NN",
            "m": [10**4, 10**5, 10**4, 10**5] * 2,
            "n": [8, 8, 16, 16] * 2,
            "k": [8, 8, 16, 16] * 2,
        }
    )
    assert _series(tall, ["m", "n", "k"]) == ("m", ["precision", "n", "k"])  # ISM2: 4 series
