"""scripts/gpu_side_by_side.py: two GPUs' results side by side (issue 54 item 4), on a real committed database and
a copy of it relabelled as another GPU with one kernel made slower there."""

from __future__ import annotations

import lzma
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd

from autotune.paths import ROOT

SCRIPT = ROOT / "scripts" / "gpu_side_by_side.py"
A_DB = ROOT / "results" / "default" / "default.sqlite.xz"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_winners_that_differ_and_the_loss_of_the_first_gpus_winners(tmp_path: Path) -> None:
    first = tmp_path / "a.csv"
    alone = run(str(A_DB), str(A_DB), "--b-device", "NVIDIA H100 80GB HBM3", "--csv", str(first))
    assert alone.returncode == 0, alone.stderr
    same = pd.read_csv(first)  # a GPU against itself: every winner the same, no loss
    assert len(same) > 0 and same["same_winner"].all() and (same["loss_a_on_b"].abs() < 1e-12).all()
    slowed = str(same["a_instance"].value_counts().index[0])  # the winner of the most points

    b_db = tmp_path / "b.sqlite"
    b_db.write_bytes(lzma.decompress(A_DB.read_bytes()))
    with sqlite3.connect(b_db) as con:
        con.execute("UPDATE devices SET name = 'Test GPU B', uuid = 'GPU-test-b'")
        con.execute("UPDATE measurements SET median_ms = 2 * median_ms WHERE instance_id = ?", (slowed,))
    out_csv = tmp_path / "ab.csv"
    out = run(str(A_DB), str(b_db), "--csv", str(out_csv))
    assert out.returncode == 0, out.stderr
    both = pd.read_csv(out_csv)
    hit = both["a_instance"] == slowed
    assert hit.any() and not both.loc[hit, "same_winner"].any()
    assert ((both.loc[hit, "a_winner_on_b_ms"] / both.loc[hit, "a_ms"] - 2).abs() < 1e-9).all()
    assert (both.loc[hit, "loss_a_on_b"] > 0).all()
    assert both.loc[~hit, "same_winner"].all() and (both.loc[~hit, "loss_a_on_b"].abs() < 1e-12).all()
    assert f"winners that differ: {int(hit.sum())} of {len(both)} points" in out.stdout
    assert "NVIDIA H100 80GB HBM3 (A) and Test GPU B (B)" in out.stdout
    worst = both["loss_a_on_b"].max()
    assert f"max {worst:.2%}" in out.stdout


def test_one_gpu_alone_is_one_line_saying_what_to_give() -> None:
    out = run(str(A_DB), str(A_DB))
    assert out.returncode == 2 and out.stderr.startswith("error: ") and "--b-device" in out.stderr
