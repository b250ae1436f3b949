"""GPU tier: the Dask executor on real GPUs (one worker process per GPU, each a GpuBackend): the conformance suite
and a small sweep whose measurements are spread over both GPUs, each recorded on its own (skipped with fewer than 2
GPUs), and compiling ahead on CPU compile workers (every GPU there is, one at least). Skipped without
`distributed`."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed")

from autotune.problems.base import ProblemKind, Scalars  # noqa: E402
from autotune.problems.gemm import GEMM, gemm_point  # noqa: E402
from autotune.space.instance import Instance  # noqa: E402
from autotune.space.spec import load_space  # noqa: E402
from autotune.store.store import Store  # noqa: E402
from autotune.sweep.backends.base import Job  # noqa: E402
from autotune.sweep.backends.dask_backend import CompileAhead, DaskBackend, local_cluster, visible_gpus  # noqa: E402
from autotune.sweep.backends.dask_executors import GpuExecutor  # noqa: E402
from autotune.sweep.config import load_config  # noqa: E402
from autotune.sweep.runner import run_sweep  # noqa: E402
from autotune.testing.backends import BackendConformance  # noqa: E402
from autotune.vocab import Measurement, Status, TestPoint  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.gpu]
two_gpus = pytest.mark.skipif(len(visible_gpus()) < 2, reason="needs 2 GPUs")
_CLUSTER: list[Any] = []


def cluster() -> Any:
    if not _CLUSTER:
        _CLUSTER.append(local_cluster(visible_gpus()[:2]))
    return _CLUSTER[0]


@pytest.fixture(scope="module", autouse=True)
def _close_cluster() -> Any:
    yield
    while _CLUSTER:
        _CLUSTER.pop().close()


@two_gpus
class TestDaskGemm(BackendConformance):
    space = load_space("gemm_naive")
    points = (gemm_point("fp32", "NT", 64, 48, 32, 300), gemm_point("fp64", "TN", 33, 17, 9, 100))

    def make_backend(self) -> DaskBackend:
        return DaskBackend(GpuExecutor(compile_workers=4), cluster=cluster(), chunk_jobs=1)

    def jobs(self) -> list[Job]:
        instances = [Instance.of("gemm_naive", {"BLOCK_X": x, "BLOCK_Y": y}) for x, y in ((16, 8), (32, 4))]
        return [Job(self.space, i, self.points, GEMM.scalars({"beta": 0.5}), 5) for i in instances]

    def baseline_case(self) -> tuple[ProblemKind, TestPoint, Scalars]:
        return GEMM, self.points[0], GEMM.scalars()

    def test_every_measurement_is_verified_on_its_gpu(self) -> None:
        backend = self.make_backend()
        try:
            uuids = {d.uuid for d in backend.devices()}
            assert len(uuids) == 2, "the two workers must see two different GPUs (CUDA_VISIBLE_DEVICES per worker)"
            got = list(backend.run(self.jobs()))
            assert all(m.status == Status.OK for m in got), [(m.status, m.error) for m in got]
            assert {m.device for m in got} <= uuids
        finally:
            backend.close()


class Count:
    def __init__(self) -> None:
        self.n = 0

    def start(self, total_pairs: int, already_done: int) -> None:
        pass

    def measured(self, m: Measurement, best_ms: float | None) -> None:
        self.n += 1

    def note(self, text: str) -> None:
        pass


@two_gpus
def test_a_sweep_over_two_gpus_records_each_measurement_on_its_gpu() -> None:
    url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='autotune-dask-')) / 'two.sqlite'}"
    cfg = dataclasses.replace(load_config(ROOT / "examples" / "transpose" / "sweep.yaml"), database=url)
    backend = DaskBackend(GpuExecutor(per_host=2), cluster=cluster(), chunk_jobs=4)
    try:
        with Store.open(url) as store:
            summary = run_sweep(cfg, store, backend, Count())
            frame = store.measurements()
        uuids = {d.uuid for d in backend.devices()}
    finally:
        backend.close()
    assert summary.status == "done" and len(frame) == summary.measured > 0
    with Store.open(url, create=False, readonly=True) as store, store.engine.connect() as conn:
        from sqlalchemy import text

        n, distinct = conn.execute(
            text("select count(*), count(distinct instance_id || '@' || point_id) from measurements")
        ).one()
        used = {
            u
            for (u,) in conn.execute(
                text("select distinct d.uuid from measurements m join devices d on d.id = m.device_id")
            )
        }
    assert n == distinct == len(frame)  # nothing measured twice
    assert used == uuids and len(uuids) == 2  # both GPUs measured, each measurement recorded on its own


@pytest.mark.skipif(not visible_gpus(), reason="needs a GPU")
def test_compiles_ahead_on_cpu_workers_and_the_gpus_only_time(tmp_path: Path) -> None:
    """A GPU worker per GPU (2 at most) and 2 compile workers: each chunk compiles on a compile worker into a fresh
    shared cache, then a GPU worker measures it, finding every kernel in the cache."""
    url = f"sqlite:///{tmp_path / 'ahead.sqlite'}"
    cfg = dataclasses.replace(load_config(ROOT / "examples" / "transpose" / "sweep.yaml"), database=url)
    cache = str(tmp_path / "cache")
    gpus = visible_gpus()[:2]
    with local_cluster(gpus, compile_workers=2) as ahead:
        ahead.wait_for_workers(len(gpus) + 2, timeout=120)
        backend = DaskBackend(
            GpuExecutor(per_host=len(gpus), cache_dir=cache),
            cluster=ahead,
            chunk_jobs=4,
            compiles=CompileAhead(compile_ahead=True, compile_cache=cache),
        )
        try:
            with Store.open(url) as store:
                summary = run_sweep(cfg, store, backend, Count())
                frame = store.measurements()
        finally:
            backend.close()
    assert summary.status == "done" and len(frame) == summary.measured > 0
    assert backend.compiled and all(p.error is None for p in backend.compiled)
    assert {p.worker for p in backend.compiled} <= {"compile0", "compile1"}
    # compiled in the compile workers' spawned pools, never in a (multithreaded) Dask worker process
    assert all(p.processes and p.worker_pid not in p.processes for p in backend.compiled), backend.compiled
    errors = frame.loc[frame["status"] != "ok", "error"].astype(str).unique()[:3]
    assert (frame["status"] == "ok").sum() > 0, f"nothing measured ok; first errors: {list(errors)}"
