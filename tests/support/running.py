"""A command (`python -m autotune ...`) run in a process of its own, its output read as it comes, stopped by signals
(tests of `autotune.stopping`: tests/test_signals.py, tests/test_signals_dask.py)."""

from __future__ import annotations

import os
import queue
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from autotune.paths import ROOT
from autotune.store.engine import database_url
from autotune.store.migrate import upgrade
from tests.support.committed import committed, gunzip_to
from tests.support.harness import checkout_env

RECORDED = committed("default")  # results/default: a random sample of 300 SIMT batched GEMM instances, H100
STOP_S = 5.0  # every command stops within this many seconds of the signal
SLOW = {"AUTOTUNE_REPLAY_DELAY": "0.05"}  # seconds per replayed measurement: a GPU's pace


class Running:
    """`python -m autotune ARGS` started now, its output read as it comes."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autotune", *args],
            cwd=cwd,
            env=checkout_env(**(env or {})),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self.lines: queue.Queue = queue.Queue()
        self.readers = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for t in self.readers:
            t.start()

    def _pump(self, stream, into: list[str]) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            into.append(line)
            self.lines.put(line)

    def wait_for(self, text: str, timeout: float = 120.0) -> None:
        """Until a line of its output holds `text` (the command is where the test wants it)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if text in self.lines.get(timeout=0.2):
                    return
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
        self.proc.kill()
        raise AssertionError(f"no {text!r} in its output: {''.join(self.out)[-2000:]}{''.join(self.err)[-2000:]}")

    def stop(self, first: int, second: int | None = None, gap_s: float = 0.0) -> float:
        """Send `first` (and `second`, `gap_s` later); the seconds until the process ended."""
        assert self.proc.poll() is None, "the command ended before it could be stopped: " + "".join(self.err)[-2000:]
        end = time.monotonic() + 60  # a loaded machine may take seconds to start Python: stop a command, not its start
        while not catches(self.proc.pid, first) and self.proc.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
        assert self.proc.poll() is None, "the command ended before it could be stopped: " + "".join(self.err)[-2000:]
        sent = time.monotonic()
        os.kill(self.proc.pid, first)
        if second is not None:
            if gap_s:
                time.sleep(gap_s)
            os.kill(self.proc.pid, second)
        try:
            self.proc.wait(60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        took = time.monotonic() - sent
        for t in self.readers:
            t.join(10)
        return took

    @property
    def stdout(self) -> str:
        return "".join(self.out)

    @property
    def stderr(self) -> str:
        return "".join(self.err)


def assert_interrupted(run: Running, took: float) -> None:
    """Exit code 130 within STOP_S, `interrupted` said, no traceback and nothing Python swallowed."""
    assert run.proc.returncode == 130, f"exit code {run.proc.returncode}: {run.stderr[-3000:]}"
    assert took < STOP_S, f"stopped {took:.1f} s after the signal"
    text = run.stdout + run.stderr
    assert "interrupted" in text
    assert "Traceback" not in text and "Exception ignored" not in text, text[-3000:]


def plain_recording(folder: Path) -> Path:
    """results/default as a plain SQLite file at this schema in `folder` (each command opens it at once)."""
    path = gunzip_to(RECORDED, folder / "recorded.sqlite")
    upgrade(database_url(str(path), write=True))
    return path


def rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as c:
        return c.execute(sql).fetchall()


def sweep_args(recording: Path, db: Path, *more: str) -> list[str]:
    return ["sweep", "configs/default.yaml", "--replay", str(recording), "--db", str(db), "--quiet", *more]


def catches(pid: int, sig: int) -> bool:
    """Whether process `pid` has a handler for `sig` installed (Linux: /proc/PID/status, SigCgt); True where that
    cannot be read."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    line = next((x for x in status.splitlines() if x.startswith("SigCgt:")), None)
    return line is None or bool(int(line.split()[1], 16) >> (sig - 1) & 1)
