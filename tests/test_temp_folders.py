"""No `autotune-spaces-*` folder is left in $TMPDIR: `report`, `analyze` and `emit` on a committed database leave
nothing but the shared cache of decompressed databases (`autotune-gz-<uid>`, reused by the next command), also when
the recorded spaces were written out, when the command fails, and when it is interrupted (Ctrl-C).

The commands that run to their end read the softmax example's database (the same recorded space as the softmax
table's, 4 points instead of 64: what they leave does not depend on the size); the interrupted report reads the
softmax table's, which runs long enough to be interrupted while its recorded spaces are written out."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.committed import RESULTS, gunzip_to

ROOT = Path(__file__).resolve().parent.parent
SOFTMAX = RESULTS / "tables5_h100" / "softmax" / "softmax_model_h100.sqlite.xz"  # the softmax table's tuning database
SMALL = ROOT / "examples" / "softmax" / "results" / "softmax_h100.sqlite.xz"  # the same space, 4 points
CACHE = f"autotune-gz-{os.getuid()}"


def run(tmp: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        capture_output=True,
        text=True,
        cwd=cwd or tmp.parent,
        env={**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)},
        timeout=600,
    )


def left(tmp: Path) -> list[str]:
    """What a command left in the temporary folder `tmp`, but the cache of decompressed databases."""
    return sorted(p.name for p in tmp.iterdir() if p.name != CACHE)


def recorded_elsewhere(tmp_path: Path, packed: Path = SOFTMAX) -> Path:
    """A plain copy of the committed softmax database `packed` whose space file cannot be found: its recorded version
    is written to the temporary folder."""
    db = gunzip_to(packed, tmp_path / "db" / "softmax.sqlite")
    with sqlite3.connect(db) as conn:
        conn.execute("update spaces set yaml_path = 'gone/space.yaml'")
    return db


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir()
    return folder


@pytest.mark.parametrize(
    "args",
    [
        ("report", "--structure", "model:0.05", "--tols", "0.05", "--out", "rep"),  # one TOL: half the time
        ("analyze", "--tols", "0.05", "--no-loo"),
        ("emit", "--structure", "model:0.05"),
    ],
    ids=["report", "analyze", "emit"],
)
def test_a_command_on_a_committed_database_leaves_no_folder(tmp: Path, args: tuple[str, ...]) -> None:
    r = run(tmp, args[0], str(SMALL), *args[1:])
    assert r.returncode == 0, r.stderr[-3000:]
    assert left(tmp) == []


def test_recorded_spaces_written_out_are_removed_at_exit_and_after_an_error(tmp_path: Path, tmp: Path) -> None:
    db = recorded_elsewhere(tmp_path, SMALL)
    r = run(tmp, "emit", str(db), "--structure", "model:0.05", "--format", "json")
    assert r.returncode == 0 and '"kernels"' in r.stdout, r.stderr[-3000:]
    assert left(tmp) == []
    r = run(tmp, "emit", str(db), "--device", "nosuch")  # fails after the spaces were written
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert left(tmp) == []


def test_an_interrupted_report_leaves_no_folder(tmp_path: Path, tmp: Path) -> None:
    db = recorded_elsewhere(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "autotune", "report", str(db), "--out", str(tmp_path / "rep")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 120
        while not left(tmp) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert left(tmp), "the report never wrote its recorded spaces"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0, err[-2000:]  # interrupted, not finished
    assert left(tmp) == [], err[-2000:]
