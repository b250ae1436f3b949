"""scripts/kernel_status.py: issue 54's check over committed results (best kernel per point, the worst named).

The script's main() runs in this process (what it prints and writes is checked, not its process: no interpreter start
and imports for each run)."""

from __future__ import annotations

import contextlib
import io
import subprocess
from pathlib import Path

import pandas as pd

from autotune.paths import ROOT
from tests.support.harness import load_script

COLUMNS = "precision,shape,m,n,k,batch,instance,ms,roofline_frac,cublas_ms,speedup_vs_cublas"


def run(*args: str) -> subprocess.CompletedProcess:
    """`python scripts/kernel_status.py ARGS` as its main() runs it: exit code, standard output and error."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = load_script("kernel_status").main(list(args))
    return subprocess.CompletedProcess(["kernel_status.py", *args], code, out.getvalue(), err.getvalue())


def _summary(path: Path, rows: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([COLUMNS, *rows]) + "\n")


def test_committed_h100_results_give_every_group_and_its_worst_point(tmp_path: Path) -> None:
    out = run("--csv", str(tmp_path / "points.csv"))
    assert out.returncode == 0, out.stderr
    points = pd.read_csv(tmp_path / "points.csv")
    fp16 = points[points["group"] == "fp16 square n = 2..128"]
    assert sorted(fp16["m"]) == list(range(2, 129))  # one best row per size
    final = pd.read_csv(ROOT / "results/tc_final_h100/summary.csv").set_index("m")
    # the best row is never worse than the complete run's own row at that point
    assert (fp16.set_index("m")["speedup"] >= final["speedup_vs_cublas"] - 1e-9).all()
    worst = fp16.loc[fp16["speedup"].idxmin()]
    line = next(x for x in out.stdout.splitlines() if x.startswith("| fp16 square"))
    assert f"{worst['speedup']:.3f}x at fp16 NN {worst['m']}x{worst['n']}x{worst['k']}" in line
    assert f"| {int((fp16['speedup'] < 1).sum())} |" in line
    assert set(points["group"]) == {
        "fp16 square n = 2..128",
        "fp32/fp64 square n = 2..32",
        "fixed K = 8, 16, 32",
        "TSM2 (n = 2..16)",
        "ISM2 (k = n = 8, 16)",
        "fp16 rectangles, tuned points",
        "fp16 rectangles, held out (tables6 validation)",
        "fp16 rectangles, held out (seed 3911)",
        "fp16 rectangles, held out (seed 4011)",
    }
    # the rectangular bounds' tuned points: one row per non-cube point of results/rect_h100, never worse than its
    # own summary row there
    rect = points[points["group"] == "fp16 rectangles, tuned points"].set_index(["m", "n", "k"])
    own = pd.read_csv(ROOT / "results/rect_h100/summary.csv")
    own = own[(own["m"] != own["n"]) | (own["n"] != own["k"])].set_index(["m", "n", "k"])
    assert sorted(rect.index) == sorted(own.index)
    assert (rect["speedup"] >= own.loc[rect.index, "speedup_vs_cublas"] - 1e-9).all()


def test_a_better_source_at_the_same_point_counts_and_other_points_do_not(tmp_path: Path) -> None:
    results = tmp_path / "results"
    _summary(
        results / "tc_final_h200/summary.csv",
        ["fp16,NN,64,64,64,1000,a,0.2,0.5,0.1,0.5", "fp16,NN,65,65,65,1000,b,0.1,0.9,0.2,2.0"],
    )
    # a faster kernel at n = 64, and a point outside the group's own points (n = 66): only the first counts
    _summary(
        results / "flat_s0_h200/summary.csv",
        ["fp16,NN,64,64,64,1000,c,0.08,0.88,0.1,1.25", "fp16,NN,66,66,66,1000,d,0.01,0.99,0.1,10.0"],
    )
    out = run("--results", str(results), "--gpu", "h200", "--csv", str(tmp_path / "p.csv"))
    assert out.returncode == 0, out.stderr
    points = pd.read_csv(tmp_path / "p.csv").set_index("m")
    assert list(points.index) == [64, 65]
    assert points.loc[64, "instance"] == "c" and points.loc[64, "source"] == "flat_s0_h200/summary.csv"
    line = next(x for x in out.stdout.splitlines() if x.startswith("| fp16 square"))
    assert "| 2 | 0 | 0 | 0 |" in line and "0.880 at fp16 NN 64x64x64 b1000" in line  # both meet both targets
    assert "not measured on h200" in next(x for x in out.stdout.splitlines() if x.startswith("| fixed K"))
    # the seed reproductions are H100 results: never read as another GPU's
    assert "not measured on h200" in next(x for x in out.stdout.splitlines() if x.startswith("| ISM2"))
