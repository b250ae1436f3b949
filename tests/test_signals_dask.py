"""`sweep --scheduler`: the address checked before anything connects, the connect bounded
(AUTOTUNE_SCHEDULER_TIMEOUT), what answers there checked to be a Dask scheduler, and a stop (SIGTERM) while
connecting, while waiting for workers or mid-sweep over a local cluster (`--gpus 2 --replay`) within 5 s, exit
code 130, no traceback. Real processes, real TCP and HTTP servers, real Dask schedulers."""

from __future__ import annotations

import http.server
import signal
import socket
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from typer.testing import CliRunner

pytest.importorskip("distributed")

from autotune.cli.main import app  # noqa: E402
from tests.support.harness import invoke_cli  # noqa: E402
from tests.support.running import SLOW, Running, assert_interrupted, plain_recording, rows, sweep_args  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::ResourceWarning")


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plain_recording(tmp_path_factory.mktemp("scheduler"))


def sweep_at(recording: Path, db: Path, address: str, *more: str) -> list[str]:
    return sweep_args(recording, db, "--max-instances", "3", "--scheduler", address, *more)


@pytest.mark.parametrize(
    ("address", "said"),
    [
        ("", "--scheduler is empty"),
        ("   ", "--scheduler is empty"),
        ("file:///tmp/scheduler.json", "file:// is not a Dask scheduler's scheme"),
        ("http://127.0.0.1:8787/status", "http:// is not a Dask scheduler's scheme"),
        ("inproc://10.0.0.1/123/1", "inproc:// scheduler lives inside another Python process"),
        ("tcp://node01", "is not HOST:PORT"),
        ("tcp://node01:99999", "the port = '99999' is not a whole number from 1 to 65535"),
        ("::1:8786", "an IPv6 host goes in brackets"),
        ("/tmp/scheduler.json", "is not HOST:PORT"),
    ],
)
def test_a_scheduler_address_of_the_wrong_form_is_one_line(
    recording: Path, tmp_path: Path, address: str, said: str
) -> None:
    """Refused before anything connects (file:/// and an empty address were a Dask traceback, an empty one after
    the client's 120-s close)."""
    r = CliRunner().invoke(app, sweep_at(recording, tmp_path / "x.sqlite", address))
    assert r.exit_code == 2, r.output
    assert said in r.output and "what to do:" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "x.sqlite").exists()  # refused before the database was made


@pytest.fixture
def silent_service() -> Iterator[tuple[str, list[Any]]]:
    """A TCP service that accepts and says nothing: its address, and the connections it accepted (as they come)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[Any] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept())
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}", held
    stop.set()
    thread.join(5)
    for conn, _ in held:
        conn.close()
    server.close()


@pytest.fixture
def silent_server(silent_service: tuple[str, list[Any]]) -> str:
    return silent_service[0]


@pytest.fixture
def http_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def ended(run: Running, timeout: float) -> float:
    """Seconds from now until the process ends by itself (at most `timeout`)."""
    start = time.monotonic()
    try:
        run.proc.wait(timeout)
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()
    for t in run.readers:
        t.join(10)
    return time.monotonic() - start


@pytest.mark.parametrize("service", ["silent", "http", "closed"])
def test_a_connect_that_gets_no_scheduler_is_bounded(service: str, request: pytest.FixtureRequest) -> None:
    """A service that says nothing, an HTTP server, a closed port: one UserError naming the address and
    AUTOTUNE_SCHEDULER_TIMEOUT once it has passed. Before: the silent service and the HTTP server held
    `distributed.Client` for good (Dask bounds the TCP connect, not the handshake after it)."""
    from autotune.errors import UserError
    from autotune.sweep.backends.dask_backend import identify_scheduler

    address = closed_port() if service == "closed" else request.getfixturevalue(f"{service}_server")
    start = time.monotonic()
    with pytest.raises(UserError) as caught:
        identify_scheduler(address, 1.0)
    assert time.monotonic() - start < 10
    assert f"at {address} within AUTOTUNE_SCHEDULER_TIMEOUT=1 s" in caught.value.message
    if service == "closed":  # Dask retries a refused connect until its timeout: a loaded machine says "Timed out"
        assert "Connection refused" in caught.value.message or "Timed out" in caught.value.message


def test_the_command_line_gives_up_on_a_silent_service(silent_server: str, recording: Path, tmp_path: Path) -> None:
    """The same through `autotune sweep --scheduler` (in this process, as the tests of the address above): exit code 2
    and one line naming the knob, no traceback."""
    t0 = time.monotonic()
    r = invoke_cli(*sweep_at(recording, tmp_path / "x.sqlite", silent_server), AUTOTUNE_SCHEDULER_TIMEOUT="2")
    assert time.monotonic() - t0 < 90
    assert r.returncode == 2, r.stderr[-3000:]
    assert f"at {silent_server} within AUTOTUNE_SCHEDULER_TIMEOUT=2 s" in r.stderr and "what to do:" in r.stderr
    assert "Traceback" not in r.stderr


def test_sigterm_while_connecting_stops_at_once(
    silent_service: tuple[str, list[Any]], recording: Path, tmp_path: Path
) -> None:
    """SIGTERM while the client waits on a service that says nothing: exit code 130 within 5 s, no traceback.
    Before: 120 s (the half-made client's close), then a Dask traceback."""
    address, accepted = silent_service
    run = Running(*sweep_at(recording, tmp_path / "x.sqlite", address))
    end = time.monotonic() + 60  # (the process starts, plans, and connects: the default timeout is 30 s)
    while not accepted and run.proc.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    assert accepted, "the command never connected: " + run.stderr[-2000:]
    time.sleep(0.5)  # (connected: the client now waits for the handshake's answer)
    assert_interrupted(run, run.stop(signal.SIGTERM))


@pytest.fixture(scope="module")
def scheduler_only() -> Iterator[Any]:
    """A real Dask scheduler (in this process, on TCP) with one thread worker, which measures nothing."""
    from distributed import LocalCluster

    cluster = LocalCluster(n_workers=1, processes=False, protocol="tcp://", dashboard_address=":0")
    yield cluster
    cluster.close()


def test_a_dask_worker_is_not_a_scheduler(scheduler_only: Any, recording: Path, tmp_path: Path) -> None:
    worker = next(iter(scheduler_only.scheduler.workers))
    r = CliRunner().invoke(app, sweep_at(recording, tmp_path / "x.sqlite", worker))
    assert r.exit_code == 2 and "answers, and is a Dask Worker, not a scheduler" in r.output, r.output


def test_a_scheduler_without_workers_is_bounded_and_stops_on_sigterm(recording: Path, tmp_path: Path) -> None:
    """A scheduler no worker joins: exit code 2 after AUTOTUNE_SCHEDULER_TIMEOUT (was a RuntimeError traceback after
    60 s), and SIGTERM while waiting stops within 5 s."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, protocol="tcp://", dashboard_address=":0") as cluster:
        address = cluster.scheduler_address
        run = Running(*sweep_at(recording, tmp_path / "x.sqlite", address), env={"AUTOTUNE_SCHEDULER_TIMEOUT": "2"})
        ended(run, 90)
        assert run.proc.returncode == 2, run.stderr[-3000:]
        assert f"{address} has no worker after AUTOTUNE_SCHEDULER_TIMEOUT=2 s" in run.stderr
        assert "Traceback" not in run.stderr
        run = Running(*sweep_at(recording, tmp_path / "y.sqlite", address))
        end = time.monotonic() + 60
        while len(cluster.scheduler.clients) < 2 and time.monotonic() < end:  # (the cluster's own client is one)
            time.sleep(0.05)
        assert_interrupted(run, run.stop(signal.SIGTERM))


def test_sigterm_mid_sweep_on_a_local_cluster(recording: Path, tmp_path: Path) -> None:
    """`--gpus 2 --replay`, SIGTERM mid-sweep: the summary, exit code 130 within 5 s (the cluster's workers stop
    mid-chunk: 6.3 s here before), no pair in flight or crashed."""
    db = tmp_path / "cluster.sqlite"
    run = Running(*sweep_args(recording, db, "--max-instances", "30", "--gpus", "2"), env=SLOW)
    run.wait_for("first measurement", timeout=180)
    time.sleep(0.5)
    took = run.stop(signal.SIGTERM)
    assert_interrupted(run, took)
    assert "sweep 1: interrupted" in run.stdout
    assert rows(db, "select status from sweeps") == [("interrupted",)]
    assert rows(db, "select count(*) from inflight") == [(0,)]
    assert rows(db, "select count(*) from measurements where status = 'crashed'") == [(0,)]
    with sqlite3.connect(db) as c:
        assert c.execute("select count(*) from measurements").fetchone()[0] > 0


def test_a_worker_that_closes_mid_chunk_leaves_its_pairs_to_another(tmp_path: Path) -> None:
    """A worker retired mid-chunk ends its chunk at the next pair (`ChunkResult.closing`); what it left is measured by
    the other worker (the client sends the pairs a partial chunk left; a chunk whose worker left before answering
    runs again there): every pair once, none `crashed`."""
    from distributed import LocalCluster

    from autotune.space.spec import load_space
    from autotune.sweep.backends.dask_backend import DaskBackend
    from autotune.sweep.backends.dask_executors import ReplayExecutor
    from autotune.paths import ROOT
    from autotune.vocab import Status
    from tests.test_backend_conformance import STENCIL_DB, recorded_jobs

    jobs = recorded_jobs(STENCIL_DB, load_space(ROOT / "examples" / "stencil" / "space.yaml"), "fp32", 6)
    want = {(j.instance.id, p) for j in jobs for p in j.points}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        backend = DaskBackend(ReplayExecutor(str(STENCIL_DB), delay_s=0.1), cluster=cluster, chunk_jobs=len(jobs))
        closed: list[str] = []

        def close_the_busy_worker() -> None:  # once its chunk has measured a few pairs (0.1 s each)
            end = time.monotonic() + 60
            while not closed and time.monotonic() < end:
                busy = [a for a, ws in cluster.scheduler.workers.items() if ws.processing]
                if busy:
                    time.sleep(0.5)
                    closed.append(busy[0])
                    cluster.loop.add_callback(cluster.scheduler.retire_workers, workers=[busy[0]])
                time.sleep(0.02)

        try:
            results = backend.run(jobs)  # one chunk, on one worker
            closer = threading.Thread(target=close_the_busy_worker, daemon=True)
            closer.start()
            got = list(results)
            closer.join(10)
        finally:
            backend.close()
    assert closed
    assert sorted((m.instance_id, m.point) for m in got) == sorted(want)  # every pair once
    assert not [m for m in got if m.status == Status.CRASHED]
