"""Start-up: the sweep records and says how long after its start the first measurement came."""

import time

from autotune.sweep.runner import run_sweep
from autotune.store.store import Store
from tests.support.formula_backend import FormulaBackend
from tests.test_runner import Quiet, config


class SlowStart(FormulaBackend):
    """The formula backend whose first measurement comes `delay` seconds after `run` is first called."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay, self.started = delay, False

    def run(self, jobs):
        if not self.started:
            self.started = True
            time.sleep(self.delay)
        return super().run(jobs)


def test_the_sweep_records_and_notes_its_time_to_the_first_measurement(tmp_path):
    cfg = config(tmp_path, f"sqlite:///{tmp_path}/r.sqlite")
    rep = Quiet()
    with Store.open(cfg.database) as store:
        summary = run_sweep(cfg, store, SlowStart(0.3), rep)
    assert summary.measured == 90
    assert 0.3 <= summary.first_measurement_s < summary.seconds
    notes = [n for n in rep.notes if n.startswith("first measurement")]
    assert notes == [f"first measurement {summary.first_measurement_s:.1f} s after the sweep's start"]


def test_a_point_prepared_ahead_is_taken_by_the_first_run(tmp_path, monkeypatch):
    """`GpuBackend.prepare_ahead` (tune_kernel: the point's data while the sweep plans) sends the request without
    waiting; the first run's own prepare takes that answer instead of asking again, unless its point differs."""
    import functools
    from types import SimpleNamespace

    from autotune.problems.gemm import gemm_point
    from autotune.sweep.backends import local
    from tests.support.fake_gpu_worker import fake_gpu_main

    trace = tmp_path / "trace.txt"
    monkeypatch.setattr(local, "gpu_main", functools.partial(fake_gpu_main, faults={}, trace=str(trace)))
    kind = SimpleNamespace(baseline_name=None)
    first, other = gemm_point("fp32", "NN", 64, 64, 64, 1), gemm_point("fp32", "NN", 128, 64, 64, 1)

    def task(point):  # what _prepare reads of a KernelTask
        return SimpleNamespace(kind=kind, variants=[SimpleNamespace(point=point)], convention="c", scalars={})

    with local.GpuBackend(cache_dir=tmp_path / "cache", compile_workers=1) as backend:
        backend.prepare_ahead(kind, first, "c", {})  # type: ignore[arg-type]
        assert backend._ahead is not None and backend._info is not None  # the description was asked for first
        backend._prepare(task(first))  # type: ignore[arg-type]
        assert backend._ahead is None
        prepares = [ln for ln in trace.read_text().splitlines() if ln.split()[1] == "prepare"]
        assert len(prepares) == 1, prepares
        backend.prepare_ahead(kind, first, "c", {})  # type: ignore[arg-type]
        backend._prepare(task(other))  # type: ignore[arg-type]  # another point: asked again
        prepares = [ln for ln in trace.read_text().splitlines() if ln.split()[1] == "prepare"]
        assert [ln.split()[3] for ln in prepares[1:]] == [first.key, other.key], prepares


def test_version_prints_the_package_version() -> None:
    from autotune import __version__
    from tests.support.harness import run_cli

    r = run_cli("--version")
    assert r.returncode == 0 and r.stdout == f"autotune {__version__}\n", (r.stdout, r.stderr)
