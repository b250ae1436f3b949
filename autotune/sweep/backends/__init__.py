"""Executors: where an instance is measured (`base.Backend`, `base.Job`).

- `local.GpuBackend`: the local GPU, through a compile pool and a GPU worker process (`gpu_worker`, `tasks`);
- `replay.ReplayBackend`: the measurements recorded in a results database, without a GPU.
A Dask executor comes next, beside them. Implementations are imported by name where they are used (a GPU
backend imports nothing of CuPy in the parent process).
"""

from autotune.sweep.backends.base import Backend, Job

__all__ = ["Backend", "Job"]
