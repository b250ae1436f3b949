"""One sweep of a space through the real GpuBackend, for the GPU tier's user-kernel tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

from autotune.store.store import Store
from autotune.sweep.backends.local import GpuBackend, LocalOptions
from autotune.sweep.config import parse_config
from autotune.sweep.runner import run_sweep
from autotune.workflows.sweeps import Silent


def gpu_sweep(
    tmp_path: Path, space: Path, points: str, max_instances: int | None = None, repetitions: int = 5
) -> Store:
    """Sweep `space` at `points` (a YAML list) into tmp_path/db.sqlite (resumes when it exists); at most
    `max_instances` instances drawn at random (seed 0), else every instance."""
    entry = f"{{space: {space}, max_instances: {max_instances}}}" if max_instances else str(space)
    strategy = "strategy: random\n" if max_instances else ""
    cfg = parse_config(
        textwrap.dedent(f"""\
        name: t
        spaces: [{entry}]
        points: {points}
        repetitions: {repetitions}
        database: sqlite:///{tmp_path / "db.sqlite"}
        """)
        + strategy,
        file=tmp_path / "t.yaml",
    )
    store = Store.open(cfg.database)
    with GpuBackend(LocalOptions(cache_dir=tmp_path / "cache")) as backend:
        run_sweep(cfg, store, backend, Silent())
    return store
