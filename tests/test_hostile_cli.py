"""Common mistakes and hostile inputs on the real command line (`python -m autotune ...` in a subprocess): each is
one `error:` line with what to do, exit code 2, no traceback, and nothing unbounded (memory, workers, bytes)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from autotune.paths import ROOT
from tests.support.harness import run_cli

EXAMPLE = ROOT / "examples" / "transpose"
EXAMPLE_DB = EXAMPLE / "results" / "transpose_h100.sqlite.xz"
EXAMPLE_TABLE = EXAMPLE / "results" / "dispatch.json"


def one_line(r: subprocess.CompletedProcess, *words: str) -> str:
    """The `error:` line of a command that failed as a user mistake (exit 2, no traceback), checked for `words`."""
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, r.stderr[-3000:]
    for word in words:
        assert word in r.stderr, (word, r.stderr[-3000:])
    return errors[0]


# ------------------------------------------------------------------------------------------------ TOL as a percent
@pytest.mark.parametrize(
    "args",
    [
        ("report", str(EXAMPLE_DB), "--tol", "5", "-o", "{tmp}/rep"),
        ("emit", str(EXAMPLE_DB), "--tol", "5"),
        ("emit", str(EXAMPLE_DB), "--tol", "nan"),
        ("emit", str(EXAMPLE_DB), "--tol", "-0.1"),
        ("emit", str(EXAMPLE_DB), "--tol", "1"),
        ("emit", str(EXAMPLE_DB), "--structure", "cost:5"),
        ("analyze", str(EXAMPLE_DB), "--tols", "0,5"),
        ("analyze", str(EXAMPLE_DB), "--tols", "0,nan"),
        ("report", str(EXAMPLE_DB), "--tols", "0,0.05,10", "-o", "{tmp}/rep"),
        ("validate", str(EXAMPLE_TABLE), "--tol", "10", "--random", "3", "-o", "{tmp}/val"),
        ("active", str(EXAMPLE_DB), "--tol", "10", "-o", "{tmp}/act"),
        ("sweep", str(ROOT / "configs" / "default.yaml"), "--roofline-tol", "5", "--replay", str(EXAMPLE_DB)),
    ],
)
def test_a_tol_given_as_a_percent_is_one_line(tmp_path: Path, args: tuple[str, ...]) -> None:
    r = run_cli(*(a.format(tmp=tmp_path) for a in args), cwd=tmp_path)
    one_line(r, "TOL is a fraction: 0.05 = 5%")
    assert not list(tmp_path.iterdir()), "the option is checked before anything is written"
