"""GPU tier: `autotune validate --random 5` on an example kind (the stencil's convolution5x5): a table made by
`autotune report` from the committed H100 recording, validated at 5 problems drawn within its tuned range and
measured on this GPU, with the kind's baseline as the library answer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.support.committed import gunzip_to
from tests.support.harness import checkout_env

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "stencil"


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=1200,
        env=checkout_env(),
    )


def test_validate_random_on_the_gpu(tmp_path: Path) -> None:
    rec = gunzip_to(EXAMPLE / "results" / "stencil_h100.sqlite.xz", tmp_path / "recording.sqlite")
    r = cli(tmp_path, "report", str(rec), "--out", "rep")
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli(
        tmp_path,
        "validate",
        "rep/dispatch.json",
        "--db",
        str(rec),
        "--random",
        "5",
        "--seed",
        "0",
        "--space",
        str(EXAMPLE / "space.yaml"),
        "--pool-bk",
        "1",
        "--repetitions",
        "5",
        "--out",
        "out",
        "--quiet",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    print(r.stdout)
    frame = pd.read_csv(tmp_path / "out" / "validation.csv", keep_default_na=False, na_values=[""])
    assert len(frame) == 5 and list(frame.columns[:5]) == ["kind", "precision", "shape", "ny", "nx"]
    assert (frame["kind"] == "convolution5x5").all()
    assert frame["table_ms"].notna().all() and frame["best_ms"].notna().all()
    assert frame["baseline_ms"].notna().all()  # the kind's baseline (CuPy) was timed: the library is an answer
    assert (frame["loss_vs_best"] >= 0).all() and (frame["loss_vs_best"] < 1).all()
    assert (frame["best_ms"] <= frame["table_ms"] * (1 + 1e-9)).all()
    assert ((frame["ny"] >= 4000) & (frame["ny"] <= 4096) & (frame["nx"] >= 3001) & (frame["nx"] <= 4096)).all()
