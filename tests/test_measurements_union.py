"""scripts/measurements_union.py: several results databases' measurements as one CSV that `autotune emit` reads in
place of a database (results/rect_h100's table was made so). From the two committed rect_h100 databases (two
H100 cards, two sweeps)."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from autotune.store.store import Store
from autotune.workflows.results import source_url

ROOT = Path(__file__).resolve().parents[1]
DBS = [
    ROOT / "results" / "rect_h100" / "rect_h100.sqlite.xz",
    ROOT / "results" / "rect_h100" / "rect_h100_part2.sqlite.xz",
]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_union_holds_every_measurement_and_emit_picks_kernels_of_both(tmp_path):
    out = tmp_path / "union.csv"
    r = run("scripts/measurements_union.py", str(out), *map(str, DBS))
    assert r.returncode == 0, r.stderr
    union = pd.read_csv(out)
    counts = []
    for db in DBS:
        with Store.open(source_url(str(db)), create=False, readonly=True) as store:
            counts.append(len(store.measurements()))
    assert len(union) == sum(counts) and min(counts) > 0
    assert union["device"].nunique() == 1  # two cards of one model: one device name
    table = tmp_path / "t.json"
    structure = ("--structure", "cost:0.05:1:4")  # as results/rect_h100 (choosing one by leave-one-out takes ~45 s)
    r = run("-m", "autotune", "emit", str(out), "-f", "json", "--tol", "0.1", *structure, "-o", str(table))
    assert r.returncode == 0, r.stderr
    kernels = {k["instance_id"] for k in json.loads(table.read_text())["kernels"]}
    # the first database holds 49 of the 100 points, the second the other 51: the table's kernels come from both
    points = union[union["instance_id"].isin(kernels)][["m", "n", "k"]].drop_duplicates()
    assert len(points) > 51


def test_a_missing_database_is_an_error_and_writes_nothing(tmp_path):
    out = tmp_path / "union.csv"
    (tmp_path / "junk.sqlite").write_text("junk")
    for bad in ("none.sqlite", "junk.sqlite"):
        r = run("scripts/measurements_union.py", str(out), str(DBS[0]), str(tmp_path / bad))
        assert r.returncode == 1 and not out.exists()
        assert r.stderr.startswith("error: ") and bad in r.stderr and "Traceback" not in r.stderr
