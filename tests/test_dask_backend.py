"""The Dask executor on a REAL local cluster (2 worker processes, each replaying a recorded database as its GPU):
the executor conformance suite, the same (instance, point) rows as a one-process sweep, a worker killed mid-sweep
losing and duplicating nothing, each measurement on its own GPU, GPU models never mixed by the analysis, and the
command line (`--gpus 2 --replay`) killed and resumed. One cluster serves the module (a start costs ~10 s here)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed")

from autotune.errors import UserError  # noqa: E402
from autotune.problems.base import ProblemKind, Scalars  # noqa: E402
from autotune.store.store import Store  # noqa: E402
from autotune.sweep.backends.base import Job  # noqa: E402
from autotune.sweep.backends.dask_backend import CompileAhead, DaskBackend, _new_info, gpu_list, local_cluster  # noqa: E402
from autotune.sweep.backends.dask_executors import ReplayExecutor  # noqa: E402
from autotune.sweep.backends.replay import ReplayBackend  # noqa: E402
from autotune.sweep.config import load_config  # noqa: E402
from autotune.store.packing import unpack  # noqa: E402
from autotune.sweep.runner import run_sweep  # noqa: E402
from autotune.testing.backends import BackendConformance  # noqa: E402
from autotune.vocab import Measurement, Status, TestPoint  # noqa: E402
from tests.support.harness import invoke_cli  # noqa: E402
from tests.test_backend_conformance import STENCIL_DB, recorded_jobs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TRANSPOSE = ROOT / "examples" / "transpose"
pytestmark = pytest.mark.filterwarnings(
    "ignore:.*schema version", "ignore::DeprecationWarning", "ignore::ResourceWarning"
)

_CLUSTER: list[Any] = []


def cluster() -> Any:
    """The module's cluster: a scheduler, 2 measuring worker processes (gpu0, gpu1) and a compile worker
    (compile0, which never measures), started on first use."""
    if not _CLUSTER:
        _CLUSTER.append(local_cluster(["0", "1"], compile_workers=1))
    return _CLUSTER[0]


WORKERS = {"gpu0": {"GPU": 1}, "gpu1": {"GPU": 1}, "compile0": {"compile": 1}}  # each worker's resources
_CLIENT: list[Any] = []  # a client of the test module's own, for `assert_cluster_intact`


@pytest.fixture(scope="module", autouse=True)
def _close_cluster() -> Any:
    yield
    while _CLIENT:
        _CLIENT.pop().close()
    while _CLUSTER:
        _CLUSTER.pop().close()


@pytest.fixture(autouse=True)
def _cluster_intact() -> Any:
    """After each test that used the cluster: every worker back (a killed one restarted), each with its resources,
    and no error in any worker's log."""
    yield
    if _CLUSTER:
        assert_cluster_intact()


def assert_cluster_intact(wait_s: float = 60.0) -> None:
    """The cluster has exactly its workers gpu0, gpu1 and compile0 (waiting up to `wait_s` for a killed one to be
    restarted by its Nanny), each with its own resources (on the scheduler, and on the worker: total and still
    available to its tasks), and no worker logged an error (as `KeyError: 'GPU'` when a task restricted to the
    resource GPU reached the compile worker, which then left the cluster for good)."""
    import distributed

    if not _CLIENT:
        _CLIENT.append(distributed.Client(cluster(), set_as_default=False, timeout=60))
    client = _CLIENT[0]
    deadline = time.monotonic() + wait_s
    while True:
        workers = (client.scheduler_info(n_workers=-1) if _new_info(client) else client.scheduler_info())["workers"]
        names = {str(w["name"]): (addr, w.get("resources") or {}) for addr, w in workers.items()}
        if set(names) == set(WORKERS) and len(workers) == len(WORKERS) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert {n: r for n, (_, r) in names.items()} == WORKERS, "the cluster lost a worker or its resources"

    def resources(dask_worker: Any) -> tuple[dict, dict]:
        return dict(dask_worker.state.total_resources), dict(dask_worker.state.available_resources)

    on_workers = client.run(resources)
    for name, (addr, declared) in names.items():
        total, available = on_workers[addr]
        assert total == declared and set(available) == set(declared), (name, total, available)
    errors = {
        addr: [msg for level, msg in logs if level in ("ERROR", "CRITICAL")]
        for addr, logs in client.get_worker_logs().items()
    }
    assert not any(errors.values()), errors


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The recorded transpose sweep (52 instances x 3 points, H100), as a plain SQLite file."""
    path = tmp_path_factory.mktemp("rec") / "transpose.sqlite"
    unpack(TRANSPOSE / "results" / "transpose_h100.sqlite.xz", path)
    return str(path)


class Quiet:
    def __init__(self, on_measured: Any = None) -> None:
        self.count, self.notes, self.on_measured = 0, [], on_measured

    def start(self, total_pairs: int, already_done: int) -> None:
        pass

    def measured(self, m: Measurement, best_ms: float | None) -> None:
        self.count += 1
        if self.on_measured is not None:
            self.on_measured(self.count)

    def note(self, text: str) -> None:
        self.notes.append(text)


def rows(url: str) -> list[tuple[str, str, str]]:
    """(instance id, point key, device uuid) of every recorded measurement."""
    with Store.open(url, create=False, readonly=True) as store:
        frame = store.measurements()
        with store.engine.connect() as conn:
            from sqlalchemy import text

            uuid = dict(conn.execute(text("select id, uuid from devices")).all())
            raw = conn.execute(
                text(
                    "select m.instance_id, p.kind, p.precision, p.shape, p.sizes, m.device_id from "
                    "measurements m join test_points p on p.id = m.point_id"
                )
            ).all()
    assert len(frame) == len(raw)
    return [(iid, f"{k}:{prec}:{shape}:{sizes}", uuid[did]) for iid, k, prec, shape, sizes, did in raw]


def sweep(cfg_url: str, backend: Any, reporter: Any = None, **changes: Any) -> Any:
    cfg = dataclasses.replace(load_config(TRANSPOSE / "sweep.yaml"), database=cfg_url, **changes)
    with Store.open(cfg_url) as store:
        return run_sweep(cfg, store, backend, reporter or Quiet())


# ------------------------------------------------------------------------------------------------ the contract
class TestDaskOverReplay(BackendConformance):
    """The conformance suite: 2 worker processes, each replaying the stencil database as its own GPU."""

    def make_backend(self) -> DaskBackend:
        return DaskBackend(ReplayExecutor(str(STENCIL_DB), relabel=True), cluster=cluster(), chunk_jobs=2)

    def jobs(self) -> list[Job]:
        from autotune.space.spec import load_space

        return recorded_jobs(STENCIL_DB, load_space(ROOT / "examples" / "stencil" / "space.yaml"), "fp32", 6)

    def baseline_case(self) -> tuple[ProblemKind, TestPoint, Scalars]:
        job = self.jobs()[0]
        return job.space.kind, job.points[0], job.space.kind.scalars()


def test_measurements_name_their_worker_gpu() -> None:
    backend = DaskBackend(ReplayExecutor(str(STENCIL_DB), relabel=True), cluster=cluster(), chunk_jobs=1)
    try:
        uuids = {d.uuid for d in backend.devices()}
        assert len(uuids) == 2 and backend.device_info().uuid in uuids
        got = list(backend.run(TestDaskOverReplay().jobs()))
        assert {m.device for m in got} <= uuids
        assert sum(r.pairs for r in backend.rates()) == len(got)
    finally:
        backend.close()


def test_baselines_wait_for_a_gpu_worker_while_the_compile_worker_is_idle() -> None:
    """Both GPU workers busy with queued chunks, the compile worker idle: each baseline waits for a GPU worker. (With
    `allow_other_workers`, work stealing gave the queued baseline to the idle compile worker, which lacks the
    resource GPU: `KeyError: 'GPU'` in its log, and the worker gone: `_cluster_intact` checks both.)"""
    backend = DaskBackend(ReplayExecutor(str(STENCIL_DB), delay_s=0.1, relabel=True), cluster=cluster(), chunk_jobs=3)
    try:
        jobs = TestDaskOverReplay().jobs()
        kind, point, scalars = TestDaskOverReplay().baseline_case()
        backend.device_info()
        pending = backend.run(jobs * 4)  # (the same pairs 4 times: 4 chunks of ~1 s per GPU worker)
        got = [backend.baseline(kind, point, scalars, 3) for _ in range(3)]
        assert len(list(pending)) == sum(len(j.points) for j in jobs)
    finally:
        backend.close()
    assert [m.status for m in got] == [Status.OK] * 3, [m.error for m in got]
    assert_cluster_intact(wait_s=5)


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_compiles_ahead_on_a_compile_worker_into_the_shared_cache(tmp_path: Path) -> None:
    """With compile workers, each chunk is compiled (real nvcc) on a CPU worker into the shared, content-addressed
    cache before a GPU worker takes it: every request the GPU worker's GpuBackend makes is then a cache hit."""
    from autotune.devices import get_device
    from autotune.space.generator import generate
    from autotune.space.spec import load_space
    from autotune.sweep.backends.local import GpuBackend, LocalOptions, task_of
    from autotune.sweep.compile.nvrtc import compile_batch
    from tests.test_nvcc_compile import SPACE

    (tmp_path / "fill.cu").write_text(
        'extern "C" __global__ void plain_fill(const float* inp, float* out, int n)'
        " { int i = blockIdx.x * 128 + threadIdx.x; if (i < n) out[i / 128] = ITEMS; }\n"
    )
    (tmp_path / "ref.py").write_text("def block_sum(arrays, sizes):\n    return arrays['out']\n")
    (tmp_path / "space.yaml").write_text(
        SPACE.replace("cub_block_sum.cu", "fill.cu").replace("EXTRA", "  compiler: nvcc")
    )
    space = load_space(tmp_path / "space.yaml")
    point = space.kind.point("fp32", "", {"n": 1000})
    jobs = [Job(space, i, (point,)) for i in generate(space, get_device("H100"), "fp32").instances()]
    cache = tmp_path / "cache"
    backend = DaskBackend(
        ReplayExecutor(str(STENCIL_DB)),
        cluster=cluster(),
        compiles=CompileAhead(compile_ahead=True, compile_cache=str(cache)),
        chunk_jobs=1,
    )
    try:
        got = list(backend.run(jobs))  # the replay has none of them: `skipped`, not recorded
        arch = backend.device_info().cc
        names = backend._worker_names()
        threads = {names[a]: n for a, n in backend.client.run(threading.active_count).items()}
    finally:
        backend.close()
    assert len(got) == len(jobs) == 2
    assert [p.error for p in backend.compiled] == [None, None] and {p.worker for p in backend.compiled} == {"compile0"}
    assert [p.failed for p in backend.compiled] == [0, 0]
    # the condition that crashed NVRTC on a GPU host: the compile worker's own process is multithreaded, so a compile
    # forked from it (compile.with_time_limit) may die; its compiles ran in single-threaded spawned processes instead
    assert threads["compile0"] > 1 and len({p.worker_pid for p in backend.compiled}) == 1
    for p in backend.compiled:
        assert p.processes and p.worker_pid not in p.processes and p.threads == 1
    for request in GpuBackend(LocalOptions(cache_dir=cache))._requests([task_of(j) for j in jobs], arch):
        assert all(ck.ok and ck.cached for ck in compile_batch(request, cache))


# ------------------------------------------------------------------------------------------------ whole sweeps
def test_two_workers_record_the_same_rows_as_one_process(recorded: str, tmp_path: Path) -> None:
    one, two = f"sqlite:///{tmp_path / 'one.sqlite'}", f"sqlite:///{tmp_path / 'two.sqlite'}"
    local = ReplayBackend(recorded)
    try:
        assert sweep(one, local).status == "done"
    finally:
        local.close()
    backend = DaskBackend(ReplayExecutor(recorded, relabel=True), cluster=cluster(), chunk_jobs=4)
    try:
        summary = sweep(two, backend)
        devices = {d.uuid for d in backend.devices()}
    finally:
        backend.close()
    assert summary.status == "done"
    a, b = rows(one), rows(two)
    assert len(a) == 156 and Counter((i, p) for i, p, _ in b) == Counter((i, p) for i, p, _ in a)
    assert {d for _, _, d in b} == devices  # both GPUs measured, each measurement recorded on its own


class CountingBaselines(DaskBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked: list[list[TestPoint]] = []  # the points of each baseline task submitted

    def _submit_baselines(self, kind: ProblemKind, points: list[TestPoint], scalars: Scalars, reps: int) -> Any:
        self.asked.append(list(points))
        return super()._submit_baselines(kind, points, scalars, reps)


def test_a_batchs_baselines_are_one_task_and_a_resumed_sweep_asks_none(recorded: str, tmp_path: Path) -> None:
    """The runner asks for the baseline of each of the batch's 3 points in turn: ONE task measures all three (one
    round trip to a GPU instead of three), each recorded as the replayed one; resumed, nothing is asked again."""
    url = f"sqlite:///{tmp_path / 'base.sqlite'}"
    for run in range(2):
        backend = CountingBaselines(ReplayExecutor(recorded, relabel=True), cluster=cluster(), chunk_jobs=8)
        try:
            assert sweep(url, backend).status == "done"
        finally:
            backend.close()
        assert [len(a) for a in backend.asked] == ([3] if run == 0 else [])
    with sqlite3.connect(tmp_path / "base.sqlite") as c:
        got = c.execute("select count(*), count(distinct point_id), sum(status = 'ok') from baselines").fetchone()
    assert got == (3, 3, 3)


def test_best_times_seed_only_workers_of_the_same_gpu_model() -> None:
    """A best time (a resumed sweep's, or one measured on a worker) feeds the early stop of the workers of that GPU
    model only: on a slower model it would stop every instance early."""
    executor = ReplayExecutor(str(STENCIL_DB), relabel=True, models=(("gpu0", "GPU-A"), ("gpu1", "GPU-B")))
    backend = DaskBackend(executor, cluster=cluster(), chunk_jobs=1)
    try:
        jobs = TestDaskOverReplay().jobs()
        assert backend.device_info().name == "GPU-A"
        point = jobs[0].points[0]
        backend.seed_best(point, jobs[0].scalars, 1e-6)
        list(backend.run(jobs))
        from autotune.sweep.backends.dask_worker import executor_attribute

        told = backend.client.run(executor_attribute, "seeds")
        names = {addr: info.name for addr, info in backend._addresses().items()}
        assert set(names.values()) == {"GPU-A", "GPU-B"}  # (the compile worker has no executor)
        for addr in names:
            seeds = told[addr]
            if names[addr] == "GPU-A":
                assert (point.key, 1e-6) in seeds
            else:
                assert all(ms != 1e-6 for _, ms in seeds)
    finally:
        backend.close()


def test_gpu_models_are_never_mixed(recorded: str, tmp_path: Path) -> None:
    """Two GPU models in one sweep: each measurement on its own model; the best times of one model never come
    from the other; the analysis refuses the mixed database unless a --device is named."""
    from autotune import load_results

    url = f"sqlite:///{tmp_path / 'mixed.sqlite'}"
    backend = DaskBackend(
        ReplayExecutor(recorded, relabel=True, models=(("gpu0", "GPU-A"), ("gpu1", "GPU-B"))), cluster=cluster()
    )
    try:
        assert sweep(url, backend).status == "done"
    finally:
        backend.close()
    with Store.open(url, create=False, readonly=True) as store:
        frame = store.measurements()
        assert set(frame["device"]) == {"GPU-A", "GPU-B"}
        for model in ("GPU-A", "GPU-B"):
            mine = set(frame[frame["device"] == model]["instance_id"])
            assert {iid for iid, _ in store.best_times(model).values()} <= mine
    with pytest.raises(UserError, match="several GPUs"):
        load_results(str(tmp_path / "mixed.sqlite"), None, None, recorded_spaces=False)
    only = load_results(str(tmp_path / "mixed.sqlite"), "GPU-B", None, recorded_spaces=False)
    assert set(only.frame["device"]) == {"GPU-B"}


def test_an_interrupted_sweep_resumes_with_nothing_lost_or_twice(recorded: str, tmp_path: Path) -> None:
    """Ctrl-C (SIGTERM) of the client after 20 measurements: those stay recorded, chunks in flight are dropped;
    the same sweep run again measures exactly the rest."""
    url = f"sqlite:///{tmp_path / 'stopped.sqlite'}"

    def interrupt(count: int) -> None:
        if count == 20:
            raise KeyboardInterrupt

    first = DaskBackend(ReplayExecutor(recorded, delay_s=0.01, relabel=True), cluster=cluster(), chunk_jobs=2)
    try:
        s1 = sweep(url, first, Quiet(interrupt))
    finally:
        first.close()
    assert s1.status == "interrupted" and len(rows(url)) == 20
    again = DaskBackend(ReplayExecutor(recorded, relabel=True), cluster=cluster())
    try:
        s2 = sweep(url, again)
    finally:
        again.close()
    got = Counter((i, p) for i, p, _ in rows(url))
    assert s2.status == "done" and s2.skipped_done == 20 and s2.measured == 136
    assert len(got) == 156 and set(got.values()) == {1}


def test_past_the_deadline_run_stops_and_drops_its_chunks() -> None:
    backend = DaskBackend(ReplayExecutor(str(STENCIL_DB), delay_s=0.05), cluster=cluster(), chunk_jobs=1)
    try:
        jobs = TestDaskOverReplay().jobs()
        backend.deadline = time.monotonic() - 1  # the budget is spent
        assert len(list(backend.run(jobs))) < sum(len(j.points) for j in jobs)
        backend.deadline = None
        assert len(list(backend.run(jobs))) == sum(len(j.points) for j in jobs)
    finally:
        backend.close()


class Wide(ReplayBackend):
    """A replay that says it measures on 5 GPUs at once and notes how many jobs each `run` gets."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.sizes: list[int] = []

    def parallelism(self) -> int:
        return 5

    def run(self, jobs: Any) -> Any:
        self.sizes.append(len(jobs))
        return super().run(jobs)


def test_a_model_based_strategy_asks_enough_for_every_gpu(recorded: str, tmp_path: Path) -> None:
    """TPE on an executor of 5 GPUs asks 10 instances at a time (2 per GPU; its default is 4), unless the config
    sets `batch:`."""
    from autotune.sweep.strategies.options import SearchOptions

    url = f"sqlite:///{tmp_path / 'tpe.sqlite'}"
    backend = Wide(recorded)
    try:
        assert sweep(url, backend, strategy="tpe", seed=1, search=SearchOptions(budget=12)).status == "done"
    finally:
        backend.close()
    assert max(backend.sizes) == 10 and len(rows(url)) == 36


# (a killed worker's Nanny restarts it: `_cluster_intact` waits for it. The Nanny "closed after losing its
# scheduler connection" once seen here was the compile worker's: a baseline with loose restrictions stolen onto it)
def test_a_worker_killed_mid_sweep_loses_and_duplicates_nothing(recorded: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'killed.sqlite'}"
    backend = DaskBackend(ReplayExecutor(recorded, delay_s=0.01, relabel=True), cluster=cluster(), chunk_jobs=3)
    killed: list[int] = []

    def kill_a_busy_worker(count: int) -> None:
        if killed:
            return
        client = backend.client
        gpus = backend._gpu_workers()  # (never the compile worker)
        busy = [a for a, keys in client.processing().items() if keys and a in gpus]
        if busy:
            pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    try:
        summary = sweep(url, backend, Quiet(kill_a_busy_worker))
    finally:
        backend.close()
    assert killed, "no worker was busy when the first measurement came back"
    assert summary.status == "done"
    got = Counter((i, p) for i, p, _ in rows(url))
    assert len(got) == 156 and set(got.values()) == {1}


def test_a_baseline_waiting_for_a_killed_worker_goes_to_its_restart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two GPU models: the baseline waits for the worker of the sweep's model (by address). That worker killed, its
    Nanny restarts it at another address: the baseline is submitted again there, and measured on that model."""
    import threading

    from autotune.sweep.backends import dask_backend

    monkeypatch.setattr(dask_backend, "BASELINE_CHECK_S", 0.5)
    executor = ReplayExecutor(str(STENCIL_DB), delay_s=0.2, relabel=True, models=(("gpu0", "GPU-A"), ("gpu1", "GPU-B")))
    backend = DaskBackend(executor, cluster=cluster())
    try:
        jobs = TestDaskOverReplay().jobs()
        kind, point, scalars = TestDaskOverReplay().baseline_case()
        assert backend.device_info().name == "GPU-A"
        gpu0 = [a for a, n in backend._gpu_workers().items() if n == "gpu0"]
        from autotune.sweep.backends.dask_worker import run_chunk

        busy = backend.client.submit(run_chunk, jobs, None, workers=gpu0, pure=False)  # ~4 s on gpu0
        got: list[Measurement] = []
        waiting = threading.Thread(target=lambda: got.append(backend.baseline(kind, point, scalars, 3)), daemon=True)
        waiting.start()
        deadline = time.monotonic() + 30
        while not any(str(k).startswith("worker_baseline") for k in backend.client.processing(gpu0)[gpu0[0]]):
            assert time.monotonic() < deadline, "the baseline never reached gpu0"
            time.sleep(0.05)
        assert not got  # (queued behind gpu0's chunk)
        busy.cancel()  # (else, run again on the restarted gpu0, it would hold the baseline ~4 s)
        os.kill(backend.client.run(os.getpid, workers=gpu0)[gpu0[0]], signal.SIGKILL)
        waiting.join(90)
        assert not waiting.is_alive(), "the baseline still waits for the killed worker's old address"
        assert got[0].status == Status.OK, got[0].error
    finally:
        backend.close()


# ------------------------------------------------------------------------------------------------ command line
def test_gpu_list() -> None:
    assert gpu_list("3", replay=True) == ["0", "1", "2"] and gpu_list("all", replay=True) == ["0", "1"]
    for bad in ("0", "two"):
        with pytest.raises(UserError):
            gpu_list(bad, replay=True)


# `python -c KILLED N ARGS...`: `autotune ARGS...`, whose process SIGKILLs itself once N measurements are recorded
# (the runner records each measurement before it asks the backend for the next: at the N+1-th, N are in the database)
KILLED = """
import itertools, os, signal, sys
from autotune.sweep.backends.dask_backend import DaskBackend
after, sys.argv = int(sys.argv[1]), ["autotune", *sys.argv[2:]]
collect, counter = DaskBackend._collect, itertools.count()
def _collect(self, pending):
    for m in collect(self, pending):
        if next(counter) == after:
            os.kill(os.getpid(), signal.SIGKILL)
        yield m
DaskBackend._collect = _collect
from autotune.cli.main import main
main()
"""


def test_the_command_line_killed_and_resumed(recorded: str, tmp_path: Path) -> None:
    """`autotune sweep --scheduler ADDRESS --replay` killed with SIGKILL mid-sweep (once 10 of its 156 pairs are
    recorded: whatever the machine's load, chunks are still in flight or queued), then run again (in this process:
    invoke_cli): every pair once. (`--gpus N` starts the same cluster as `local_cluster`, which every other test here
    uses.)"""
    db = tmp_path / "cli.sqlite"
    args = [
        "sweep",
        str(TRANSPOSE / "sweep.yaml"),
        "--replay",
        recorded,
        "--database",
        str(db),
        "--scheduler",
        cluster().scheduler_address,
        "--quiet",
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT), AUTOTUNE_REPLAY_DELAY="0.01", PYTHONWARNINGS="ignore")
    killed = subprocess.run(
        [sys.executable, "-c", KILLED, "10", *args], env=env, capture_output=True, text=True, timeout=180
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert _count(db) == 10
    again = invoke_cli(*args, AUTOTUNE_REPLAY_DELAY="0")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "per GPU" in again.stderr
    with sqlite3.connect(db) as c:
        n, distinct = c.execute("select count(*), count(distinct instance_id || point_id) from measurements").fetchone()
    assert n == distinct == 156


def _count(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as c:
            return c.execute("select count(*) from measurements").fetchone()[0]
    except sqlite3.Error:
        return 0
