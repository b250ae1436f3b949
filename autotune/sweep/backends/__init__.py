"""Executors: where an instance is measured (`base.Backend`, `base.Job`), loaded lazily by name.

- `gpu`: `local.GpuBackend`, the local GPU, through a compile pool and a GPU worker process (`gpu_worker`, `tasks`);
- `replay`: `replay.ReplayBackend`, the measurements recorded in a results database, without a GPU;
- `dask`: `dask_backend.DaskBackend`, several GPUs of this machine or a cluster (`dask_executors.dask_backend`).
`BACKENDS` maps a built-in name to "module:callable" (a class or a function that returns a `Backend`); installed
packages add theirs in the entry-point group `autotune.backends` (name = "package.module:callable"); a launcher may
also name "module:callable" directly (`make_backend`). A backend's module is imported only when it is chosen (a GPU
backend imports nothing of CuPy in the parent process). `Backend` and `Job` are loaded at their first use, so that
importing this package's light modules (`gpu_entry`: the GPU worker's entry, spawned at `autotune.kernel_tuner`'s
import) does not import the space machinery and NumPy first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    from autotune.sweep.backends.base import Backend, Job

ENTRY_POINT_GROUP = "autotune.backends"
BACKENDS: dict[str, str] = {
    "gpu": "autotune.sweep.backends.local:gpu_backend",
    "replay": "autotune.sweep.backends.replay:ReplayBackend",
    "dask": "autotune.sweep.backends.dask_executors:dask_backend",
}


def __getattr__(name: str) -> Any:
    if name in ("Backend", "Job"):
        from autotune.sweep.backends import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def backend_names() -> dict[str, str]:
    """Every backend a launcher may name: the built-ins, then installed entry points (name -> "module:callable")."""
    from autotune.sweep.registry import registered

    return registered(BACKENDS, ENTRY_POINT_GROUP)


def backend_factory(name: str) -> Callable[..., Any]:
    """The class or function registered as `name` (or given as "module:callable"), imported only now. UserError when
    the name or its target cannot be found (`autotune.sweep.registry.load`), or it is not callable."""
    from autotune.errors import UserError
    from autotune.sweep.registry import load

    factory = load(name, BACKENDS, ENTRY_POINT_GROUP, "backend", "callable")
    if not callable(factory):
        raise UserError(f"backend {name!r} is not callable", hint="register a Backend subclass or a function")
    return factory


def make_backend(name: str, **options: Any) -> Backend:
    """The backend `name`, built as `factory(**options)` (the built-ins: `gpu` takes `tol`, `device`, `hint`; `replay`
    takes `url`, `device`; `dask` takes `replay`, `tol`, `gpus`, `scheduler`). UserError as `backend_factory`, or when
    what it builds is not a `Backend`."""
    from autotune.errors import UserError
    from autotune.sweep.backends.base import Backend

    built = backend_factory(name)(**options)
    if not isinstance(built, Backend):
        built_close = getattr(built, "close", None)
        if callable(built_close):
            built_close()
        raise UserError(
            f"backend {name!r} built a {type(built).__name__}, not a Backend",
            hint="subclass autotune.sweep.backends.base.Backend (its docstring states what the runner calls)",
        )
    return built


__all__ = ["BACKENDS", "ENTRY_POINT_GROUP", "Backend", "Job", "backend_factory", "backend_names", "make_backend"]
