"""Sweep launching: a loaded sweep config measured on this machine's GPU, several GPUs (Dask), or a recorded database
(replay), into its database. `autotune sweep`, `autotune validate`, active tuning and `tune_kernel` run their sweeps
here; the runner itself is autotune/sweep/runner.py."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from autotune import stopping
from autotune.errors import UserError
from autotune.paths import sqlite_files

if TYPE_CHECKING:
    from autotune.store.store import Store
    from autotune.sweep.backends.base import Backend
    from autotune.sweep.config import SweepConfig
    from autotune.sweep.runner import Reporter, SweepSummary


@dataclass(frozen=True)
class Launch:
    """Where a sweep measures: this machine's GPU (the default), a recorded database (`replay`: the cards of one GPU
    model, or the model or card `replay_device` names), or several GPUs through Dask (`gpus`: of this machine;
    `scheduler`: a running cluster; autotune.sweep.backends.dask_backend). `early_stop=False` times every instance
    fully (no TOL early stop). `backend`: any registered backend instead (`autotune.sweep.backends.make_backend`:
    a name of the entry-point group `autotune.backends`, or module:callable), built with `backend_options` as its
    keyword arguments. `refuse_empty_replay`: a replay whose recording holds none of the planned pairs is one
    UserError naming it, before the sweep begins (`autotune sweep`); else it runs, empty (validate, active)."""

    replay: str | None = None
    early_stop: bool = True
    gpus: str | None = None
    scheduler: str | None = None
    replay_device: str | None = None
    backend: str | None = None
    backend_options: tuple[tuple[str, Any], ...] = ()
    refuse_empty_replay: bool = False


@dataclass
class Launched:
    summary: SweepSummary  # the runner's
    rates: list[Any] = field(default_factory=list)  # a sweep on several GPUs: each GPU's pairs and rate


@runtime_checkable
class ShowsRates(Protocol):
    """A reporter that shows each GPU's rate while a sweep on several GPUs runs (the bar of `autotune sweep`): its
    `rates` is set to the backend's `rates` function."""

    rates: Callable[[], list[Any]] | None


class Silent:
    """A reporter that reports nothing (a sweep launched from a script)."""

    def start(self, total_pairs: int, already_done: int) -> None: ...

    def measured(self, m: Any, best_ms: float | None) -> None: ...

    def note(self, text: str) -> None: ...


def launch_sweep(cfg: SweepConfig, launch: Launch | None = None, reporter: Reporter | None = None) -> Launched:
    """Run (or resume) a loaded sweep config where `launch` says, into its database; returns the runner's
    SweepSummary and, on several GPUs, their rates. A database that fails mid-sweep is one StoreError."""
    from sqlalchemy.exc import SQLAlchemyError

    from autotune.store.engine import refuse_gz
    from autotune.store.store import Store

    launch = launch or Launch()
    refuse_gz(cfg.database)  # the database is written: never into the decompressed copy of a .gz
    tol = cfg.tol if launch.early_stop else None
    backend = None
    made = _missing(cfg.database)
    try:
        with stopping.handling():  # (the command line's `main` has them already; an in-process call gets them here)
            backend = _backend(launch, tol)
            with Store.open(cfg.database) as store:
                recording = launch.replay if launch.refuse_empty_replay else None
                summary = sweep_into(cfg, store, backend, reporter or Silent(), recording)
        return Launched(summary, list(backend.rates()))
    except BaseException as exc:
        _remove_unused(made)
        if isinstance(exc, SQLAlchemyError):
            raise database_failure(cfg.database, exc) from None
        raise
    finally:
        if backend is not None:
            backend.close()


def _missing(database: str) -> list[Path]:
    """The SQLite file of `database` and the folders above it that do not exist yet (the file first), which
    opening the store makes: [] for a database that exists or is not a file."""
    from autotune.store.engine import database_url, sqlite_path

    path = sqlite_path(database_url(database, write=True))
    if path is None or Path(path).exists():
        return []
    file = Path(path).absolute()
    return [file, *[d for d in file.parents if not d.exists()]]


def _remove_unused(made: list[Path]) -> None:
    """Remove what a sweep that failed before it began made (`_missing`): its database file, only when it holds no
    sweep (a sweep that began keeps its record, `failed` or `interrupted`), and then its empty new folders."""
    import sqlite3

    if not made or not made[0].is_file():
        return
    try:
        with contextlib.closing(sqlite3.connect(made[0])) as con:
            if con.execute("SELECT count(*) FROM sweeps").fetchone()[0]:
                return
    except sqlite3.Error:
        return  # not the store's schema: left as it is
    for file in sqlite_files(made[0]):
        file.unlink(missing_ok=True)
    for folder in made[1:]:
        with contextlib.suppress(OSError):  # (not empty: something else is there now)
            folder.rmdir()


def sweep_into(
    cfg: SweepConfig, store: Store, backend: Backend, reporter: Reporter, recording: str | None = None
) -> SweepSummary:
    """The sweep of `cfg` on a started backend into an open store (`tune_kernel` reads the store before and after,
    and keeps its backend between calls); a reporter that shows rates is given the backend's. `recording`: see
    `run_sweep`."""
    from autotune.sweep.runner import run_sweep

    if isinstance(reporter, ShowsRates):
        reporter.rates = backend.rates
    return run_sweep(cfg, store, backend, reporter, recording=recording)


def _backend(launch: Launch, tol: float | None) -> Backend:
    """The backend `launch` names, from the registry (`autotune.sweep.backends.make_backend`): the one it names by
    `backend`, else Dask when it names GPUs or a scheduler, else a replay of `launch.replay`, else this machine's GPU."""
    from autotune.sweep.backends import make_backend

    if launch.backend is not None:
        if launch.replay or launch.gpus is not None or launch.scheduler is not None:
            raise UserError(
                f"backend {launch.backend!r} is named, and a replay, GPUs or a scheduler too",
                hint="name the backend alone, with its own options (backend_options)",
            )
        return make_backend(launch.backend, **dict(launch.backend_options))
    if launch.gpus is not None or launch.scheduler is not None:
        return make_backend("dask", replay=launch.replay, tol=tol, gpus=launch.gpus, scheduler=launch.scheduler)
    if launch.replay:
        return make_backend("replay", url=launch.replay, device=launch.replay_device)
    return make_backend("gpu", tol=tol, hint=GPU_HINT)


GPU_HINT = (
    "run on a machine with an NVIDIA GPU and `pip install -e .[cuda12]` (or .[cuda13]), or pass --replay DB to "
    "replay a recorded sweep"
)


def refuse_without_gpu(launch: Launch) -> None:
    """One UserError where `launch` measures on this machine's GPU (no backend, replay, GPUs or scheduler named)
    and there is none: for a command that writes files before its sweep starts (`validate`, `active`), checked
    before the first of them."""
    from autotune.devices import no_gpu_reason

    local = launch.backend is None and not launch.replay and launch.gpus is None and launch.scheduler is None
    if local and (why := no_gpu_reason()) is not None:
        raise UserError(f"no GPU to measure on: {why}", hint=GPU_HINT)


def database_failure(url: str, exc: Exception) -> UserError:
    """The results database failed mid-sweep (the runner recorded what it could): full, read-only or gone."""
    from sqlalchemy.engine import make_url

    from autotune.store.engine import StoreError, database_url, sqlite_path

    text = str(getattr(exc, "orig", None) or exc).strip()
    reason = text.splitlines()[0] if text else type(exc).__name__
    url = database_url(url)
    where = sqlite_path(url) or make_url(url).render_as_string()
    again = "then run the same command again: the measurements recorded so far are kept and not measured again"
    low = reason.lower()
    if "full" in low or "no space left" in low:  # SQLite: database or disk is full; PostgreSQL: could not extend file
        return StoreError(
            f"database full: cannot write {where} ({reason})",
            hint=f"free space on its disk (or set another `database:`), {again}",
        )
    if "readonly" in low.replace(" ", "").replace("-", ""):
        return StoreError(
            f"database read-only: cannot write {where} ({reason})",
            hint=f"make the file, its folder and its file system writable, {again}",
        )
    from autotune.store.retry import RETRY_ENV, DatabaseGone

    if isinstance(exc, DatabaseGone) and not exc.locked:
        return StoreError(
            f"database failed during the sweep: {where} ({reason})",
            hint=f"start the database server or make it reachable (or give it longer: {RETRY_ENV}="
            f"seconds to wait, now {exc.limit_s:g}), {again}",
        )
    return StoreError(
        f"database failed during the sweep: {where} ({reason})",
        hint=f"check that the database (for PostgreSQL, its server) is reachable, {again}",
    )
