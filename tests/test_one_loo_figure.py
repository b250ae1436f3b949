"""One figure per thing: `autotune analyze` and `autotune report` give the same leave-one-out worst loss for the same
database, TOL and table structure, and each says which structure its figure is of. On the committed default
database the two once printed 48.7% (analyze: the regions tables, unsaid) and 32.4% (report: the selection model it
chose) for TOL 5%. Both commands run in this process (`invoke_cli`: the figures and the lines printed are what is
compared, not the process)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests.support.committed import committed
from tests.support.harness import invoke_cli

DB = committed("default")


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    r = invoke_cli(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


@pytest.mark.parametrize("structure", [None, "regions"], ids=["default", "regions"])
def test_analyze_and_report_print_the_same_figure_for_the_same_structure(tmp_path: Path, structure: str | None) -> None:
    given = ["--structure", structure] if structure else []
    a = cli(tmp_path, "analyze", str(DB), "--tols", "0.05", *given, "--out", "a")
    r = cli(tmp_path, "report", str(DB), "--tol", "0.05", *given, "--out", "r")
    row = pd.read_csv(tmp_path / "a" / "tol_table.csv").set_index("method").loc["exact"]
    said = " ".join(r.stdout.split())  # (the console wraps long lines)
    printed = re.search(r"leave-one-out worst loss ([0-9.]+)% of the (.+?) table \(exact, BK 10, TOL 5%", said)
    assert printed is not None, said
    assert f"{100 * row['loo_worst_loss']:.2f}" == printed.group(1)
    assert row["loo_structure"] == printed.group(2)
    assert f"LOO worst: the leave-one-out worst loss of the {printed.group(2)} tables" in " ".join(a.stdout.split())
    reported = pd.read_csv(tmp_path / "r" / "tol_table.csv").set_index(["method", "tol"]).loc[("exact", 0.05)]
    assert reported["loo_worst_loss"] == row["loo_worst_loss"] and reported["loo_structure"] == row["loo_structure"]
    if structure == "regions":
        assert printed.group(2) == "regions, library margin 0%"
