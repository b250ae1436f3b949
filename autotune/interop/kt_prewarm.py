"""Start the GPU backend when `autotune.kernel_tuner` is imported, so a Kernel Tuner script's own preparation (its
data, its answer: often seconds) overlaps the start of the compile processes and the GPU worker (Python, CuPy, the
device's context and description), and `tune_kernel` finds them ready.

Only in a main process (a spawned child re-imports the script: it must not start processes of its own), only where
CuPy is installed, and not with AUTOTUNE_PREWARM=0. `take(device)` hands the started backend to the first
`tune_kernel` call on that device (a later call, or another device, starts its own); one never taken is closed when
the interpreter exits. Its timeline (`GpuBackend.timeline`) counts from the import, and says so (`prewarmed_s`: how
long before the call the backend was started).
"""

from __future__ import annotations

import atexit
import importlib.util
import multiprocessing as mp
import os
import time
from typing import Any

ENV = "AUTOTUNE_PREWARM"
_backend: Any = None
_started_at: float | None = None


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "off", "no", "false")


def start(device: int = 0) -> bool:
    """Start a GpuBackend for `device` now, without waiting for it; True when one was started (idempotent)."""
    global _backend, _started_at
    if _backend is not None:
        return True
    if not enabled() or mp.parent_process() is not None or importlib.util.find_spec("cupy") is None:
        return False
    try:
        from autotune.sweep.backends.local import GpuBackend

        backend = GpuBackend(device=device, warm_checks=True)
        backend.start()
    except Exception:  # noqa: BLE001 - only a head start: tune_kernel starts (and reports) its own
        return False
    _backend, _started_at = backend, time.perf_counter()
    atexit.register(_close)
    return True


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


__all__ = ["ENV", "enabled", "start", "take"]
