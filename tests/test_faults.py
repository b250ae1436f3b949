"""Faults injected into a running sweep. Each test asserts no traceback, no hang, no loss.

1-3. The GPU backend's worker dies, hangs or reports a CUDA error: the real `GpuBackend` supervision (spawn,
     watchdog, kill, restart) runs against a fake worker that speaks the real pipe protocol
     (tests/support/fake_gpu_worker.py); compiles are stubbed, as there is no NVRTC here.
4.   The SQLite database fills up or turns read-only mid-sweep (tests/support/db_faults.py).
5.   The PostgreSQL server crashes and restarts mid-statement (the sweep reconnects with back-off), or stays down
     past AUTOTUNE_DB_RETRY_S (the sweep stops with a clear error, then resumes); needs AUTOTUNE_TEST_PG_URL and
     AUTOTUNE_TEST_PG_DIR.
6.   The whole sweep is killed with SIGKILL at random moments.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from typing import Any
import sqlalchemy as sa

from autotune.paths import ROOT
from autotune.store.store import Store
from autotune.sweep.backends import local, local_compile
from autotune.sweep.compile.nvrtc import CompiledKernel, CompileRequest
from autotune.sweep.config import parse_config
from autotune.sweep.backends.local import GpuBackend, LocalOptions
from autotune.sweep.runner import run_sweep
from pg import fresh_pg_url
from tests.support.fake_gpu_worker import CUDA_FAULT, fake_gpu_main
from tests.support.committed import committed
from tests.support.harness import invoke_cli

FIXTURES = (fresh_pg_url,)  # pytest finds this fixture by name in this module

# ---- 1-3. the GPU worker dies, hangs, or reports a CUDA error --------------------------------------------

SPACE = textwrap.dedent("""\
    name: fault_test
    kernel:
      source: gemm_naive.cuh
      template: autotune::gemm_naive
      template_args: [T, S, TRANS_A, TRANS_B, BLOCK_X, BLOCK_Y]
      convention: strided
      block: [BLOCK_X, BLOCK_Y, 1]
      grid: ["ceil(M / BLOCK_X)", "ceil(N / BLOCK_Y)", "min(batch, 65535)"]
      problems: {precisions: [fp64, fp32], shapes: [NN]}
    parameters:
      BLOCK_X: [8, 16]
      BLOCK_Y: [1, 2, 4, 8]
    derived:
      threads: BLOCK_X * BLOCK_Y
    hard:
      - {name: warp, expr: "threads >= 8", reason: test}
    """)
PAIRS = 8 * 4  # 8 instances x (2 precisions x 2 sizes)


def gpu_config(tmp_path: Path):  # type: ignore[no-untyped-def]
    (tmp_path / "fault_test.yaml").write_text(SPACE)
    text = textwrap.dedent(f"""\
        name: faults
        spaces: [fault_test.yaml]
        points:
          - precisions: [fp64, fp32]
            sizes: {{square: [8, 16]}}
            batch: 100
        database: sqlite:///{tmp_path}/faults.sqlite
        repetitions: 3
        """)
    return parse_config(text, file=tmp_path / "faults.yaml")


class Quiet:
    def start(self, total: int, done: int) -> None:
        pass

    def measured(self, m, best) -> None:  # type: ignore[no-untyped-def]
        pass

    def note(self, text: str) -> None:
        pass


class StubCompiles(GpuBackend):
    """The real GpuBackend but for its compile pool: threads running a stub compile (below), since NVRTC is
    absent; the GPU worker side (`_spawn`, `_call`, the watchdog, `_kill`, restarts) is untouched."""

    def _compile_pool(self):  # type: ignore[no-untyped-def]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(2)
        return self._pool


def use_compiles(monkeypatch: pytest.MonkeyPatch, fn: Any) -> None:
    """The backend compiles with `fn`: both names it calls (`compile_batch` in a stand-in executor,
    `compile_batch_deferring` in its CompilePool)."""
    monkeypatch.setattr(local_compile, "compile_batch", fn)
    monkeypatch.setattr(local_compile, "compile_batch_deferring", fn)


def stub_compile(blob: Path, req: CompileRequest, cache_dir: Path) -> list[CompiledKernel]:
    return [
        CompiledKernel(name, True, f"key{i}", f"lowered_{i}", blob, "cubin", "", 0.01)
        for i, name in enumerate(req.name_expressions)
    ]


def fake_gpu_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, faults: dict[int, str], timeout_s: float):
    """Run the sweep of `gpu_config` through StubCompiles with the fake worker; (summary, backend, trace lines)."""
    blob = tmp_path / "kernel.cubin"
    blob.write_bytes(b"\0" * 16)
    trace = tmp_path / "trace.txt"
    monkeypatch.setattr(local, "gpu_main", functools.partial(fake_gpu_main, faults=faults, trace=str(trace)))
    use_compiles(monkeypatch, functools.partial(stub_compile, blob))
    cfg = gpu_config(tmp_path)
    backend = StubCompiles(LocalOptions(compile_workers=2, timeout_s=timeout_s, cache_dir=tmp_path / "cache"))
    try:
        with Store.open(cfg.database) as store:
            summary = run_sweep(cfg, store, backend, Quiet())
    finally:
        backend.close()
    return summary, backend, [line.split() for line in trace.read_text().splitlines()]


def rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as c:
        return c.execute(sql).fetchall()


def measured_rows(tmp_path: Path) -> dict[tuple[str, str], tuple[str, str | None]]:
    """(instance id, point key) -> (status, error) of every measurement recorded."""
    with Store.open(f"sqlite:///{tmp_path}/faults.sqlite", create=False) as s:
        frame = s.measurements()
    keys = [f"gemm:{r.precision}:{r.shape}:{r.m}x{r.n}x{r.k}x{r.batch}" for r in frame.itertuples()]
    return {
        (iid, key): (st, err)
        for iid, key, st, err in zip(frame.instance_id, keys, frame.status, frame.error, strict=True)
    }


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize(
    "action, status, error",
    [
        ("die", "crashed", "GPU worker process died (exit code 9)"),
        ("hang", "timeout", "no answer within the watchdog's deadline (1 s or more); worker killed"),
        ("fatal", "launch_error", CUDA_FAULT),
    ],
)
def test_gpu_worker_fault_is_recorded_and_the_sweep_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, action: str, status: str, error: str
) -> None:
    t0 = time.monotonic()
    summary, backend, trace = fake_gpu_sweep(tmp_path, monkeypatch, {5: action}, timeout_s=1.0)
    took = time.monotonic() - t0
    assert summary.status == "done" and summary.measured == PAIRS
    assert summary.counts == Counter({"ok": PAIRS - 1, status: 1})
    assert backend.restarts == 1
    measures = [t for t in trace if t[1] == "measure"]
    assert len(measures) == PAIRS and [t[4] for t in measures].count(action) == 1
    pid, _, iid, key, _ = measures[4]
    # the pair the worker failed on is recorded with the reason; every other pair is ok, each once
    recorded = measured_rows(tmp_path)
    assert len(recorded) == PAIRS and recorded[(iid, key)] == (status, error)
    assert all(st == "ok" for k, (st, _) in recorded.items() if k != (iid, key))
    # the faulty worker is gone, and everything after it was served by one fresh worker
    assert gone(int(pid))
    before = {t[0] for t in trace[: trace.index(measures[4])]}
    after = {t[0] for t in trace[trace.index(measures[4]) + 1 :]}
    assert before == {pid} and len(after) == 1 and pid not in after
    db = tmp_path / "faults.sqlite"
    assert rows(db, "select count(*) from inflight") == [(0,)]
    assert rows(db, "select status from sweeps") == [("done",)]
    assert took < 60  # a hang costs the watchdog's deadline (1 s here), not the test's timeout


def test_gpu_watchdog_waits_longer_once_the_worker_reports_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that reported its verified launch (10 ms) gets max(timeout_s, 10 x 53 x 10 ms) = 5.3 s, so an
    answer after 1.5 s counts though timeout_s is 1 s; a hang later in the same sweep still times out."""
    summary, backend, trace = fake_gpu_sweep(tmp_path, monkeypatch, {3: "slow", 9: "hang"}, timeout_s=1.0)
    assert summary.status == "done" and summary.counts == Counter({"ok": PAIRS - 1, "timeout": 1})
    assert backend.restarts == 1
    measures = [t for t in trace if t[1] == "measure"]
    assert measured_rows(tmp_path)[(measures[2][2], measures[2][3])][0] == "ok"


# ---- 4. the database fills up or turns read-only mid-sweep -----------------------------------------------

RECORDED = committed("default")  # results/default/default.sqlite.xz, read as it is
ENV = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "80"}


def sweep_args(db: str) -> list[str]:
    """A replayed sweep of the default config (30 instances, 282 pairs) into `db`."""
    return ["sweep", "configs/default.yaml", "--replay", str(RECORDED), "--db", db, "--quiet", "--max-instances", "30"]


def autotune(*args: str) -> subprocess.CompletedProcess:
    """`autotune ARGS` in this process (tests/support/harness.py `invoke_cli`: exit code and output as a process's,
    without its ~1 s start), at full speed (no replay delay): the clean run and the resumes, whose checks read the
    exit code, the output and the database. The sweeps that are cut, stopped or killed run in processes."""
    return invoke_cli(*args, COLUMNS="80", AUTOTUNE_REPLAY_DELAY="0")


def query(url: str, sql: str) -> list[tuple]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as c:
            return [tuple(r) for r in c.exec_driver_sql(sql)]
    finally:
        engine.dispose()


def snapshot(url: str) -> dict[tuple[str, str], tuple]:
    """(instance id, point) -> (status, median_ms, sweep_id) of every measurement in the database."""
    return {
        (i, p): rest
        for i, p, *rest in query(
            url,
            "select m.instance_id, t.precision || t.shape || t.sizes, "
            "m.status, m.median_ms, m.sweep_id from measurements m "
            "join test_points t on t.id = m.point_id",
        )
    }


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str]:
    """(instance id, point) -> status of the same sweep run without a fault."""
    db = tmp_path_factory.mktemp("clean") / "clean.sqlite"
    r = autotune(*sweep_args(str(db)))
    assert r.returncode == 0, r.stderr
    return {k: v[0] for k, v in snapshot(f"sqlite:///{db}").items()}


def resume_and_check(
    url: str,
    before: dict[tuple[str, str], tuple],
    clean: dict[tuple[str, str], str],
    pending: int,
    crashed: int | None = None,
) -> None:
    """Rerun the sweep without the fault: it records the `pending` pairs left in flight as crashed, re-measures
    nothing recorded, and finishes with every pair of the clean run once, with the clean run's status but for
    `crashed` pairs (default: `pending`) that were in flight at a fault."""
    r = autotune(*sweep_args(url))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert f"{len(before) + pending:,} already in the database" in r.stderr
    after = snapshot(url)
    assert after.keys() == clean.keys() and all(after[k] == v for k, v in before.items())
    crashed = pending if crashed is None else crashed
    assert sum(after[k][0] != clean[k] for k in clean) == crashed
    assert query(url, "select count(*) from measurements where status = 'crashed'") == [(crashed,)]
    assert query(url, "select count(*) from inflight") == [(0,)]
    assert query(url, "select status from sweeps order by id")[-1] == ("done",)


@pytest.mark.parametrize(
    "fault, message",
    [
        ("full", "database full: cannot write"),
        ("readonly", "database read-only: cannot write"),
    ],
)
def test_database_full_or_read_only_stops_the_sweep_with_a_clear_error(
    tmp_path: Path, fault: str, message: str, clean_run: dict[tuple[str, str], str]
) -> None:
    db = tmp_path / "db.sqlite"
    # (a process of its own: the read-only database keeps the sweep's lock, which the resume takes over only once
    # the process that holds it is gone)
    r = subprocess.run(
        [sys.executable, "-m", "tests.support.db_faults", fault, "40", str(db), "--", *sweep_args(str(db))],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=ENV,
        timeout=120,
    )
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and f"error: {message} {db}" in r.stderr, r.stderr
    assert "run the same command again" in r.stderr
    assert rows(db, "PRAGMA integrity_check") == [("ok",)]
    before = snapshot(f"sqlite:///{db}")
    assert len(before) >= 40  # everything recorded before the fault is there
    left = rows(db, "select count(*) from inflight")[0][0]
    if fault == "full":  # the database still takes a delete: the pair in flight is freed for the resume
        assert left == 0 and rows(db, "select status from sweeps") == [("failed",)]
    else:  # nothing can be written: the pair in flight stays, and is recorded as crashed on resume
        assert left <= 1 and rows(db, "select status from sweeps") == [("running",)]
    resume_and_check(f"sqlite:///{db}", before, clean_run, left)
    assert rows(db, "PRAGMA integrity_check") == [("ok",)]


# ---- 5. the PostgreSQL server restarts mid-sweep, or stays down ---------------------------------------------


def pg_ctl(action: str, *options: str) -> None:
    """`pg_ctl ACTION` on the server of scripts/ci_postgres.sh (as its owner when we are root). `start` passes the
    options of the server's last start (its postmaster.opts: port, socket folder, listen address)."""
    import shlex

    home = Path(os.environ["AUTOTUNE_TEST_PG_DIR"])
    data = home / "data"
    command = [
        str(Path((home / "bindir").read_text().strip()) / "pg_ctl"),
        "-D",
        str(data),
        "-w",
        "-t",
        "60",
        "-l",
        str(data / "server.log"),
        *options,
        action,
    ]  # -l: the server must not write to our pipe
    if action == "start":
        words = shlex.split((data / "postmaster.opts").read_text())[1:]
        at = words.index("-D")
        command[1:1] = ["-o", shlex.join(words[:at] + words[at + 2 :])]
    owner = home.stat().st_uid
    if os.getuid() == 0 and owner != 0:
        import pwd

        command = ["runuser", "-u", pwd.getpwuid(owner).pw_name, "--", *command]
    subprocess.run(command, check=True, capture_output=True, timeout=90)


def server_up() -> bool:
    home = Path(os.environ["AUTOTUNE_TEST_PG_DIR"])
    return (home / "data" / "postmaster.pid").exists()


def wait_for(done, seconds: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def count(engine: sa.Engine, sql: str) -> int:
    try:
        with engine.connect() as c:
            return int(c.exec_driver_sql(sql).scalar_one())
    except sa.exc.SQLAlchemyError:  # tables not created yet, or the server is restarting
        return 0


def cut_mid_statement(url: str, proc: subprocess.Popen, action: str, *options: str) -> None:
    """Run `pg_ctl ACTION` while the sweep's INSERT into measurements is in flight: a transaction of ours holds
    an EXCLUSIVE lock on the table until the sweep's backend waits for it, then the server goes down under both
    (with -m immediate, as in a crash: no backend finishes its statement)."""
    locker, watch = sa.create_engine(url), sa.create_engine(url)
    try:
        conn = locker.connect()
        conn.exec_driver_sql("LOCK TABLE measurements IN EXCLUSIVE MODE")
        wait_for(
            lambda: (
                count(
                    watch,
                    "select count(*) from pg_stat_activity where datname = current_database() "
                    "and wait_event_type = 'Lock'",
                )
                > 0
                or proc.poll() is not None
            )
        )
        assert proc.poll() is None, "the sweep ended before the server went down"
        watch.dispose()
        pg_ctl(action, *options)
        with contextlib.suppress(sa.exc.SQLAlchemyError):
            conn.close()
    finally:
        locker.dispose()
        watch.dispose()


def start_sweep(url: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "autotune", *sweep_args(url)],
        cwd=ROOT,
        env={**ENV, "AUTOTUNE_REPLAY_DELAY": "0.01", **(env or {})},  # (282 pairs: 3 s or more)
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def need_pg_ctl() -> None:
    home = os.environ.get("AUTOTUNE_TEST_PG_DIR")
    if not home or not (Path(home) / "bindir").is_file():
        pytest.skip("AUTOTUNE_TEST_PG_DIR (printed by scripts/ci_postgres.sh) is not set: no pg_ctl to restart with")


@pytest.fixture
def pg_ctl_alone():  # type: ignore[no-untyped-def]
    """Hold an exclusive lock beside the test server for the whole test: the tests that restart or stop the one
    server never overlap (under pytest-xdist a stop by one was counted as an outage by the other)."""
    import fcntl

    need_pg_ctl()
    with (Path(os.environ["AUTOTUNE_TEST_PG_DIR"]) / "pg_ctl.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def no_duplicates(url: str) -> None:
    """Each (instance, point, device) once, one sweep row per run, nothing left in flight."""
    assert query(url, "select count(*) - count(distinct (instance_id, point_id, device_id)) from measurements") == [
        (0,)
    ]
    assert query(url, "select count(*) from inflight") == [(0,)]


RESTARTS = 3


def test_postgres_restarts_mid_statement_and_the_sweep_reconnects(
    pg_ctl_alone: None, fresh_pg_url: str, clean_run: dict[tuple[str, str], str]
) -> None:
    """The server crashes and comes back (pg_ctl restart -m immediate) three times while a measurement is being
    inserted: each time the sweep warns once, waits, reconnects, re-runs the cut transaction, and finishes with
    every pair once (exit 0), as the same sweep without a fault."""
    need_pg_ctl()
    watch = sa.create_engine(fresh_pg_url, pool_pre_ping=True)
    proc = start_sweep(fresh_pg_url)
    try:
        seen = 0
        for _ in range(RESTARTS):  # each after the sweep recorded 20 more pairs (so it was back)
            wait_for(
                lambda seen=seen: (
                    count(watch, "select count(*) from measurements") >= seen + 20 or proc.poll() is not None
                )
            )
            seen = count(watch, "select count(*) from measurements")
            cut_mid_statement(fresh_pg_url, proc, "restart", "-m", "immediate")
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        watch.dispose()
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert err.count("warning: lost the database connection") == RESTARTS, err  # one line per outage
    assert err.count("database back after") == RESTARTS, err
    assert "AUTOTUNE_DB_RETRY_S" in err
    after = snapshot(fresh_pg_url)
    assert {k: v[0] for k, v in after.items()} == clean_run  # every pair, with the clean run's status
    no_duplicates(fresh_pg_url)
    assert query(fresh_pg_url, "select status from sweeps") == [("done",)]
    assert query(fresh_pg_url, "select count(*) from sweep_lock") == [(0,)]


def test_postgres_down_past_the_retry_limit_stops_then_resumes(
    pg_ctl_alone: None, fresh_pg_url: str, clean_run: dict[tuple[str, str], str]
) -> None:
    """With AUTOTUNE_DB_RETRY_S=3 a server that stays down stops the sweep after about 3 s with the clear error
    naming the knob (exit 2, no traceback); once the server is back, the same command finishes the sweep and
    nothing recorded before the outage is lost or measured again."""
    need_pg_ctl()
    watch = sa.create_engine(fresh_pg_url, pool_pre_ping=True)
    proc = start_sweep(fresh_pg_url, {"AUTOTUNE_DB_RETRY_S": "3"})
    try:
        wait_for(lambda: count(watch, "select count(*) from measurements") >= 30 or proc.poll() is not None)
        watch.dispose()
        before = snapshot(fresh_pg_url)
        cut_mid_statement(fresh_pg_url, proc, "stop", "-m", "immediate")
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if not server_up():
            pg_ctl("start")
        watch.dispose()
    assert proc.returncode == 2 and "Traceback" not in err, err
    assert err.count("warning: lost the database connection") == 1, err
    assert "error: database failed during the sweep: postgresql+psycopg://" in err
    assert "AUTOTUNE_DB_RETRY_S=3" in err and "run the same command again" in err, err
    assert 2.5 < took < 30
    after = snapshot(fresh_pg_url)
    assert all(after[k] == v for k, v in before.items())
    pending = query(fresh_pg_url, "select count(*) from inflight")[0][0]
    assert pending <= 1
    resume_and_check(fresh_pg_url, after, clean_run, pending)
    no_duplicates(fresh_pg_url)


# ---- 6. kill -9 of the whole sweep at random moments -------------------------------------------------------


def test_kill_9_at_random_moments_loses_at_most_the_pairs_in_flight(
    tmp_path: Path, clean_run: dict[tuple[str, str], str]
) -> None:
    import random
    import signal

    rng = random.Random(16)
    db = tmp_path / "killed.sqlite"
    url = f"sqlite:///{db}"
    before: dict[tuple[str, str], tuple] = {}
    crashed = pending = 0
    for _ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-m", "autotune", *sweep_args(url)],
            cwd=ROOT,
            env={**ENV, "AUTOTUNE_REPLAY_DELAY": "0.005"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        engine = sa.create_engine(url)
        try:  # once this run measures, at a random moment within the next 0.5 s
            recorded = len(before) + pending  # (this run records the pair left in flight first)
            wait_for(
                lambda engine=engine, recorded=recorded, proc=proc: (
                    db.exists()
                    and count(engine, "select count(*) from measurements") > recorded
                    or proc.poll() is not None
                )
            )
            time.sleep(rng.uniform(0, 0.5))
            assert proc.poll() is None, "the sweep ended before the kill"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            engine.dispose()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == -signal.SIGKILL
        assert rows(db, "PRAGMA integrity_check") == [("ok",)]
        now = snapshot(url)  # what was recorded stays, and so does the pair the previous kill left in flight
        assert all(now[k] == v for k, v in before.items())
        assert len(now) >= len(before) + pending
        crashed += pending
        pending = query(url, "select count(*) from inflight")[0][0]
        assert pending <= 1  # at most one pair was in flight
        before = now
    resume_and_check(url, before, clean_run, pending, crashed + pending)
