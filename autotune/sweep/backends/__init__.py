"""Executors: where an instance is measured (`base.Backend`, `base.Job`).

- `local.GpuBackend`: the local GPU, through a compile pool and a GPU worker process (`gpu_worker`, `tasks`);
- `replay.ReplayBackend`: the measurements recorded in a results database, without a GPU.
A Dask executor comes next, beside them. Implementations are imported by name where they are used (a GPU
backend imports nothing of CuPy in the parent process). `Backend` and `Job` are loaded at their first use, so that
importing this package's light modules (`gpu_entry`: the GPU worker's entry, spawned at `autotune.kernel_tuner`'s
import) does not import the space machinery and NumPy first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from autotune.sweep.backends.base import Backend, Job


def __getattr__(name: str) -> Any:
    if name in ("Backend", "Job"):
        from autotune.sweep.backends import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Backend", "Job"]
