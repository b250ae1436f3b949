"""GPU tier: a real GPU sweep (the README's default config) stopped by SIGTERM to its process, or by SIGINT to its
whole process group (Ctrl-C in a terminal: the GPU worker and the compile processes get it too), exits with 130
within 5 s, says `interrupted`, leaves no pair `crashed`, and the same command then resumes it to the end. The CPU
tests (tests/test_signals.py) stand a slowed replay in for the GPU; this is the real backend."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune.paths import ROOT
from tests.support.harness import checkout_env
from tests.support.running import STOP_S

pytestmark = pytest.mark.gpu


def _sweep(db: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "autotune", "sweep", "configs/default.yaml", "--db", str(db), "--quiet"],
        cwd=ROOT,
        env=checkout_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )


def _measured(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as c:
            return int(c.execute("SELECT COUNT(*) FROM measurements").fetchone()[0])
    except sqlite3.Error:  # not created yet
        return 0


def _statuses(db: Path) -> dict[str, int]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as c:
        return dict(c.execute("SELECT status, COUNT(*) FROM measurements GROUP BY status").fetchall())


@pytest.mark.parametrize("how", ["SIGTERM to the process", "SIGINT to its group"])
def test_a_real_sweep_stops_on_a_signal_and_resumes_to_the_end(how: str, tmp_path: Path) -> None:
    db = tmp_path / "sig.sqlite"
    proc = _sweep(db)
    end = time.monotonic() + 180
    while _measured(db) < 20 and proc.poll() is None and time.monotonic() < end:  # mid-sweep: measurements written
        time.sleep(0.2)
    assert proc.poll() is None, "the sweep ended before the signal: " + proc.stdout.read()[-2000:]  # type: ignore[union-attr]
    sent = time.monotonic()
    if how.startswith("SIGTERM"):
        proc.send_signal(signal.SIGTERM)
    else:
        os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert proc.returncode == 130 and took < STOP_S, f"exit {proc.returncode} after {took:.1f} s: {out[-3000:]}"
    assert "interrupted" in out and "Traceback" not in out, out[-3000:]
    first = _statuses(db)
    assert "crashed" not in first and sum(first.values()) >= 20, first

    resumed = subprocess.run(
        [sys.executable, "-m", "autotune", "sweep", "configs/default.yaml", "--db", str(db), "--quiet"],
        cwd=ROOT,
        env=checkout_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    after = _statuses(db)
    assert "crashed" not in after and sum(after.values()) > sum(first.values()), after
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        ended = [s for (s,) in c.execute("SELECT status FROM sweeps ORDER BY id")]
    assert ended == ["interrupted", "done"], ended
