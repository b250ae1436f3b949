"""Start-up: the sweep records and says how long after its start the first measurement came; the command line
starts without its heavy dependencies (`autotune --help` under 0.5 s: it imported pandas, 0.6-1.3 s)."""

import os
import subprocess
import sys
import time

import pytest

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

    with local.GpuBackend(local.LocalOptions(cache_dir=tmp_path / "cache", compile_workers=1)) as backend:
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


HEAVY = {"pandas", "numpy", "sqlalchemy", "scipy", "matplotlib", "plotly", "optuna", "yaml"}


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["space", "--help"], ["analyze", "--help"]])
def test_help_does_not_import_the_heavy_dependencies(args: list[str]) -> None:
    """The commands import pandas, numpy, SQLAlchemy and YAML where they use them, so help and --version need
    none of them (a check of sys.modules, not of wall time, which depends on the machine)."""
    from autotune.paths import ROOT

    code = (
        f"import sys\nsys.argv = ['autotune', *{args!r}]\nfrom autotune.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        f"print('IMPORTED', sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(HEAVY)!r})))"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[-1] == "IMPORTED []", r.stdout.splitlines()[-1]
