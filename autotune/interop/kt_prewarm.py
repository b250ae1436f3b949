"""Start the GPU backend when `autotune.kernel_tuner` is imported, so a Kernel Tuner script's own preparation (its
data, its answer: often seconds) overlaps the start of the compile processes and the GPU worker (Python, CuPy, the
device's context and description), and `tune_kernel` finds them ready.

The GPU worker is spawned first, before this imports the engine (`gpu_entry.spawn_worker`, standard library only:
on an H100 host the engine's import took ~0.35 s before the worker's spawn), then adopted by the backend.

Only in a main process (a spawned child re-imports the script: it must not start processes of its own), only where
CuPy is installed, and not with AUTOTUNE_PREWARM=0. `take(device)` hands the started backend to the first
`tune_kernel` call on that device (a later call, or another device, starts its own); one never taken is closed when
the interpreter exits. Its timeline (`GpuBackend.timeline`) counts from the import, and says so (`prewarmed_s`: how
long before the call the backend was started).

With the backend, a thread imports what the call itself imports (`CALL_MODULES`: the space machinery, SQLAlchemy's
store, the runner; 1.6 s inside a stencil call on an H100 host while the compile processes started), so that the
script's own preparation overlaps it too; a call that comes first waits on Python's import lock of the module the
thread is loading, never loads it twice. The thread competes for the GIL with a script that imports heavy Python
modules itself meanwhile (Kernel Tuner's reduction example imports `kernel_tuner.util`); AUTOTUNE_PREWARM_IMPORTS=0
turns the thread alone off.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import multiprocessing as mp
import os
import threading
import time
from typing import Any

ENV = "AUTOTUNE_PREWARM"
IMPORTS_ENV = "AUTOTUNE_PREWARM_IMPORTS"  # "0": no import thread (the backend is still pre-started)
CALL_MODULES = (  # what tune_kernel's call imports (autotune.interop.kt_sweep): loaded by `_import_call`
    "yaml",
    "autotune.store.store",
    "autotune.space.spec",
    "autotune.sweep.config",
    "autotune.sweep.runner",
    "autotune.workflows.sweeps",
    "autotune.sweep.plan",
    "autotune.sweep.compile.failstop",
    "autotune.sweep.compile.nvcc",
    "autotune.interop.kerneltuner",
    "autotune.interop.kt_export",
    "autotune.interop.kt_space",
    "autotune.interop.kt_store",
    "autotune.interop.kt_sweep",
)
_backend: Any = None
_started_at: float | None = None


def enabled(env: str = ENV) -> bool:
    """Whether AUTOTUNE_PREWARM (or `env`) leaves the head start on: anything but 0, off, no or false."""
    return os.environ.get(env, "1").strip().lower() not in ("0", "off", "no", "false")


def start(device: int = 0) -> bool:
    """Start a GpuBackend for `device` now, without waiting for it; True when one was started (idempotent)."""
    global _backend, _started_at
    if _backend is not None:
        return True
    if not enabled() or mp.parent_process() is not None or importlib.util.find_spec("cupy") is None:
        return False
    try:  # the worker first, from a module of the standard library alone: its start is the longest
        from autotune.sweep.backends.gpu_entry import spawn_worker

        spawned_at, since = time.monotonic(), time.perf_counter()
        proc, conn = spawn_worker(mp.get_context("spawn"), device, warm=True)
    except Exception:  # noqa: BLE001 - only a head start: tune_kernel starts (and reports) its own
        return False
    try:
        from autotune.sweep.backends.local import GpuBackend, LocalOptions

        backend = GpuBackend(LocalOptions(device=device, warm_checks=True))
        backend.adopt_worker(proc, conn, spawned_at)
        backend.start()
    except Exception:  # noqa: BLE001
        proc.kill()
        conn.close()
        return False
    _backend, _started_at = backend, since
    atexit.register(_close)
    if enabled(IMPORTS_ENV):
        threading.Thread(target=_import_call, name="autotune-prewarm-imports", daemon=True).start()
    return True


def _import_call() -> None:
    """Import CALL_MODULES (a thread of `start`); a failure is left to the call, which imports them again."""
    for name in CALL_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - only a head start
            return


def take(device: int) -> tuple[Any, float | None]:
    """(the pre-started backend for `device`, seconds since it was started), or (None, None); it is then the
    caller's to close. A backend for another device is closed."""
    global _backend, _started_at
    backend, since = _backend, _started_at
    _backend = _started_at = None
    if backend is None:
        return None, None
    if backend.device != device:
        backend.close()
        return None, None
    return backend, time.perf_counter() - since  # type: ignore[operator]


def _close() -> None:
    backend, _ = take(-1 if _backend is None else _backend.device)
    if backend is not None:
        try:
            backend.close()
        except Exception:  # noqa: BLE001 - at exit
            pass


__all__ = ["CALL_MODULES", "ENV", "IMPORTS_ENV", "enabled", "start", "take"]
