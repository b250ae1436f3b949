"""The backend registry (`autotune.sweep.backends`): the built-ins by name, installed packages' backends through the
entry-point group `autotune.backends`, and a launch (`autotune.workflows.sweeps.Launch(backend=...)`) that measures
with one. A backend that implements only `Backend`'s four abstract members sweeps: the runner reads the others'
defaults, it probes nothing."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from autotune.errors import UserError
from autotune.sweep.backends import BACKENDS, backend_factory, backend_names, make_backend
from autotune.sweep.backends.base import Backend
from autotune.workflows.sweeps import Launch, launch_sweep
from tests.test_runner import Quiet, config

ROOT = Path(__file__).resolve().parent.parent
STENCIL_DB = ROOT / "examples" / "stencil" / "results" / "stencil_h100.sqlite.xz"


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package installed beside the project (a dist-info on sys.path) that registers two backends: the formula
    backend of the tests, and a factory that builds something that is not a Backend."""
    site = tmp_path / "site-packages"
    (site / "plugbackends").mkdir(parents=True)
    (site / "plugbackends" / "__init__.py").write_text(
        "from tests.support.formula_backend import FormulaBackend\n\n\ndef not_a_backend():\n    return object()\n"
    )
    info = site / "plugbackends-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plugbackends\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[autotune.backends]\nformula = plugbackends:FormulaBackend\nnothing = plugbackends:not_a_backend\n"
    )
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    yield site
    sys.modules.pop("plugbackends", None)


def test_the_built_ins_load_by_name_without_a_gpu() -> None:
    from autotune.sweep.backends.dask_executors import dask_backend
    from autotune.sweep.backends.local import gpu_backend
    from autotune.sweep.backends.replay import ReplayBackend

    assert set(BACKENDS) == {"gpu", "replay", "dask"}
    assert backend_factory("gpu") is gpu_backend
    assert backend_factory("replay") is ReplayBackend
    assert backend_factory("dask") is dask_backend
    backend = make_backend("replay", url=str(STENCIL_DB))
    try:
        assert isinstance(backend, ReplayBackend) and backend.device_info().name
    finally:
        backend.close()


def test_an_installed_backend_is_listed_and_a_launch_measures_with_it(installed: Path, tmp_path: Path) -> None:
    assert backend_names()["formula"] == "plugbackends:FormulaBackend"
    cfg = config(tmp_path, f"sqlite:///{tmp_path}/r.sqlite")
    rep = Quiet()
    done = launch_sweep(cfg, Launch(backend="formula"), rep)
    assert done.summary.status == "done" and done.summary.measured == 90 and rep.seen == 90
    assert done.rates == []  # the default of a backend that measures on one device


def test_options_reach_the_backend(tmp_path: Path) -> None:
    """`backend_options` are the factory's keyword arguments (here the formula backend's Ctrl-C at the 5th pair)."""
    cfg = config(tmp_path, f"sqlite:///{tmp_path}/r.sqlite")
    launch = Launch(backend="tests.support.formula_backend:FormulaBackend", backend_options=(("interrupt_at", 5),))
    done = launch_sweep(cfg, launch)
    assert done.summary.status == "interrupted" and done.summary.measured == 4


def test_an_unknown_name_says_which_there_are() -> None:
    with pytest.raises(UserError) as err:
        make_backend("no-such-backend")
    assert "unknown backend 'no-such-backend'" in err.value.message
    assert "gpu, replay, dask" in (err.value.hint or "")


def test_a_target_that_is_not_a_backend_is_refused(installed: Path) -> None:
    with pytest.raises(UserError, match="not a Backend") as err:
        make_backend("nothing")
    assert "subclass autotune.sweep.backends.base.Backend" in (err.value.hint or "")
    with pytest.raises(UserError, match="cannot load backend"):
        make_backend("plugbackends:missing")


def test_a_named_backend_with_a_replay_too_is_refused(tmp_path: Path) -> None:
    cfg = config(tmp_path, f"sqlite:///{tmp_path}/r.sqlite")
    with pytest.raises(UserError, match="named, and a replay"):
        launch_sweep(cfg, Launch(backend="formula", replay=str(STENCIL_DB)))


def test_the_optional_members_have_do_nothing_defaults() -> None:
    """What a backend inherits for the members it does not implement (`Backend`'s docstring)."""

    class Bare(Backend):
        def device_info(self):  # type: ignore[no-untyped-def]
            raise AssertionError

        def run(self, jobs):  # type: ignore[no-untyped-def]
            return iter(())

        def baseline(self, kind, point, scalars, reps):  # type: ignore[no-untyped-def]
            raise AssertionError

        def close(self) -> None:
            pass

    b = Bare()
    assert b.start() is None and b.recorded_pairs() is None and b.devices() == [] and b.parallelism() is None
    assert b.rates() == [] and b.device_limits() is None and dict(b.timeline) == {} and b.marks_pairs
    assert b.deadline is None and b.on_device is None and b.before_measure is None and b.after_abandon is None
    with pytest.raises(TypeError):
        Backend()  # type: ignore[abstract]
