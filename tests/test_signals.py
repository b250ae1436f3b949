"""SIGINT and SIGTERM stop every command alike (`autotune.stopping`): within 5 s, `interrupted`, exit code 130, and a
sweep leaves no pair `crashed` that was only interrupted, whatever a second signal does. Real processes
(`python -m autotune ...`) on real databases; a replay made slow by AUTOTUNE_REPLAY_DELAY stands for the GPU."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable

import pytest

from autotune.paths import ROOT
from tests.support.committed import committed
from tests.support.running import SLOW, Running, assert_interrupted, plain_recording, rows, sweep_args


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plain_recording(tmp_path_factory.mktemp("signals"))


# ---- the mechanism, in a process of its own (the standard library and autotune.stopping only) ----------------------


def stopping_script(body: str) -> subprocess.CompletedProcess:
    code = "import os, signal, sys, time\nfrom autotune import stopping\nstopping.install(process=True)\n"
    return subprocess.run(
        [sys.executable, "-c", code + textwrap.dedent(body)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_stop_that_python_swallows_is_raised_again() -> None:
    """A signal whose KeyboardInterrupt is raised inside a `__del__` (or a weakref callback: `analyze` ran to its end
    after one, 18 s after SIGTERM, exit code 0) stops the process all the same."""
    r = stopping_script(
        """
        class Signals:
            def __del__(self):
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(10000):  # the handler runs in here, where Python cannot raise
                    pass

        try:
            Signals()
            start = time.monotonic()
            while time.monotonic() - start < 10:
                pass
            print("went on")
        except KeyboardInterrupt:
            print(f"stopped after {time.monotonic() - start:.3f} s")
        """
    )
    assert r.stdout.startswith("stopped after") and float(r.stdout.split()[2]) < 1.0, r.stdout + r.stderr
    assert "Exception ignored" not in r.stderr


def test_a_second_signal_never_cuts_the_cleanup_and_a_deferred_block_holds_the_first() -> None:
    r = stopping_script(
        """
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            os.kill(os.getpid(), signal.SIGTERM)  # a second signal at once, in the cleanup
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(100000):
                pass
            print("cleanup finished")
        stopping.uninstall()
        stopping.install()
        try:
            with stopping.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(100000):
                    pass
                print("deferred block finished")
            print("not raised")
        except KeyboardInterrupt:
            print("raised after the block")
        """
    )
    assert r.stdout.split("\n")[:3] == ["cleanup finished", "deferred block finished", "raised after the block"], (
        r.stdout + r.stderr
    )


# ---- a sweep ------------------------------------------------------------------------------------------------------


# (first signal, second signal, seconds between them): a second signal at once, or within milliseconds. Each of the
# four orders of SIGINT and SIGTERM, the gaps spread from 0 to 50 ms (each run is a process start of ~2.5 CPU-s:
# three more gaps, 1, 6 and 30 ms, in between these, were dropped)
DOUBLE = [
    (signal.SIGINT, signal.SIGTERM, 0.0),
    (signal.SIGTERM, signal.SIGINT, 0.003),
    (signal.SIGTERM, signal.SIGTERM, 0.01),
    (signal.SIGINT, signal.SIGINT, 0.02),
    (signal.SIGINT, signal.SIGTERM, 0.05),
]


def test_a_second_signal_at_once_leaves_no_pair_crashed(recording: Path, tmp_path: Path) -> None:
    """The same sweep stopped 5 times by two signals at once (SIGINT then SIGTERM, two SIGINTs, ... a few ms apart),
    each run resuming the one before: every run ends `interrupted` (exit code 130, its summary printed), its pairs in
    flight forgotten, and no pair is ever recorded `crashed` (a leftover in-flight note becomes one when the next run
    resumes). Before: 10 of 12 such stops ended by the signal (exit code -15, after the summary) or left the sweep
    `running`."""
    db = tmp_path / "double.sqlite"
    for n, (first, second, gap) in enumerate(DOUBLE, start=1):
        run = Running(*sweep_args(recording, db, "--max-instances", "30"), env=SLOW)
        run.wait_for("first measurement")
        took = run.stop(first, second, gap)
        assert_interrupted(run, took)
        assert f"sweep {n}: interrupted" in run.stdout
        assert rows(db, "select status from sweeps order by id") == [("interrupted",)] * n
        assert rows(db, "select count(*) from inflight") == [(0,)]
        assert rows(db, "select count(*) from sweep_lock") == [(0,)]
    assert rows(db, "select count(*) from measurements where status = 'crashed'") == [(0,)]
    total, distinct = rows(db, "select count(*), count(distinct instance_id || point_id) from measurements")[0]
    assert total == distinct > 0


# ---- every other command ----------------------------------------------------------------------------------------


def kt_cache(path: Path, entries: int) -> Path:
    """A Kernel Tuner cache of `entries` configurations (long enough to import that a signal lands mid-import)."""
    import json

    xs, ys = range(1, entries // 100 + 1), range(1, 101)
    cache = {
        f"{x},{y}": {
            "block_size_x": x,
            "block_size_y": y,
            "time": 1.0 + x / 100 + y / 1000,
            "times": [1.0, 1.1, 1.2],
            "compile_time": 300.0,
            "verification_time": 0,
            "benchmark_time": 3.3,
            "timestamp": "2026-03-02 14:05:17.120034+00:00",
        }
        for x in xs
        for y in ys
    }
    doc = {
        "device_name": "NVIDIA A100-PCIE-40GB",
        "kernel_name": "k",
        "problem_size": [4096],
        "tune_params_keys": ["block_size_x", "block_size_y"],
        "tune_params": {"block_size_x": list(xs), "block_size_y": list(ys)},
        "objective": "time",
        "cache": cache,
    }
    path.write_text(json.dumps(doc))
    return path


HELD_OUT = (8, 16, 32)


def points_csv(path: Path) -> Path:
    """Held-out problems the recording holds (square NN sizes 8, 16, 32 in fp64 and fp32)."""
    path.write_text(
        "precision,shape,m,n,k\n" + "".join(f"{p},NN,{s},{s},{s}\n" for p in ("fp64", "fp32") for s in HELD_OUT)
    )
    return path


BIG = committed("complete_h100")  # analyze takes ~8 s of CPU on it, explore ~3 s


def _long_commands(
    recording: Path, tmp: Path
) -> dict[str, tuple[list[str], dict[str, str], Callable[[Running], None]]]:
    """Command name -> (arguments, environment, how to wait until it is at work)."""

    def after(seconds: float) -> Callable[[Running], None]:
        return lambda run: time.sleep(seconds)

    def file_made(path: Path) -> Callable[[Running], None]:
        def wait(run: Running) -> None:
            end = time.monotonic() + 120
            while not path.exists() and run.proc.poll() is None and time.monotonic() < end:
                time.sleep(0.02)

        return wait

    tuning = tmp / "tuning.sqlite"  # the recording without the held-out sizes (active draws from the others)
    tuning.write_bytes(recording.read_bytes())
    with sqlite3.connect(tuning) as c:
        ids = ",".join(str(i) for (i,) in c.execute(f"SELECT id FROM points_gemm WHERE m IN {HELD_OUT}"))
        for t in ("measurements", "baselines", "inflight", "point_sizes"):
            c.execute(f"DELETE FROM {t} WHERE point_id IN ({ids})")
        c.execute(f"DELETE FROM test_points WHERE id IN ({ids})")
    points = points_csv(tmp / "points.csv")
    return {
        "analyze": (["analyze", str(BIG)], {}, after(2.0)),
        "explore": (["explore", str(BIG), "-o", str(tmp / "report.html")], {}, after(1.0)),
        "import": (
            ["import", "kerneltuner", str(kt_cache(tmp / "cache.json", 20_000)), "--db", str(tmp / "imported.sqlite")],
            {},
            file_made(tmp / "imported.sqlite"),
        ),
        "validate": (
            [
                "validate",
                str(ROOT / "results" / "default" / "dispatch.json"),
                "--points",
                str(points),
                "--replay",
                str(recording),
                "--out",
                str(tmp / "validation"),
                "--quiet",
            ],
            SLOW,
            lambda run: run.wait_for("first measurement"),
        ),
        "active": (
            [
                "active",
                str(tuning),
                "--config",
                "configs/default.yaml",
                "--replay",
                str(recording),
                "--points",
                str(points),
                "--out",
                str(tmp / "active"),
                "--rounds",
                "1",
                "--heldout",
                "4",
            ],
            SLOW,
            lambda run: run.wait_for("first measurement"),
        ),
    }


@pytest.mark.parametrize("command", ["analyze", "explore", "import", "validate", "active"])
def test_every_command_stops_on_sigterm(command: str, recording: Path, tmp_path: Path) -> None:
    """SIGTERM mid-command: `interrupted`, exit code 130, within 5 s. Before: every command but `sweep` ended by the
    signal (exit code -15, no word; `analyze` once ran on to its end, exit code 0); `validate --quiet` and `active`
    said nothing of the stop (`active`: an error, exit code 2)."""
    args, env, at_work = _long_commands(recording, tmp_path)[command]
    run = Running(*args, env=env, cwd=tmp_path)
    at_work(run)
    assert_interrupted(run, run.stop(signal.SIGTERM))
    if command == "import":  # nothing half-imported is left
        assert not (tmp_path / "imported.sqlite").exists()


def test_dashboard_stops_on_sigterm(recording: Path, tmp_path: Path) -> None:
    """optuna-dashboard's server ends quietly on a stop; the command says `interrupted`, exit code 130 (was 0)."""
    pytest.importorskip("optuna_dashboard")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = Running("dashboard", str(recording), "--port", str(port), cwd=tmp_path)
    run.wait_for("optuna-dashboard at")
    time.sleep(0.5)  # the server starts
    assert_interrupted(run, run.stop(signal.SIGTERM))
