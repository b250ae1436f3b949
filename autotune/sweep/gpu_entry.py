"""The GPU worker's entry point, light to import: the spawned process starts CuPy and the device's context in a
thread while it imports the worker's own modules (`autotune.sweep.backends.gpu_worker`: the problem kinds, the space
machinery, NumPy), then runs `gpu_worker.gpu_main`.

A spawned process imports its target's module before it runs anything. Through `autotune.sweep.backends` that
module loaded the space machinery first, then CuPy, then created the context, one after the other: on an H100 host
the worker's first line ran 0.55 s after its spawn, and CuPy's import and the context took 0.45 s more (Kernel
Tuner's stencil example, whose whole `tune_kernel` process took 2.5 s: results/bench/PROVENANCE.md). This module
imports nothing of autotune's at the top, so the child's first line runs at once; the context is made while the rest
is imported. A failure in the thread is left to `gpu_main`, which imports CuPy and makes the context itself and
reports what went wrong.
"""

from __future__ import annotations

import threading
import time
from typing import Any


def _context(device: int, stamps: dict[str, float]) -> None:
    try:
        import cupy as cp

        stamps["cupy_imported"] = time.monotonic()
        with cp.cuda.Device(device):
            cp.cuda.runtime.free(0)  # a no-op that needs the device's context: made now, in this thread
        stamps["context"] = time.monotonic()
    except BaseException:  # noqa: BLE001 - gpu_main does the same again and reports the error
        pass


def gpu_main(conn: Any, device: int, warm: bool = False) -> None:
    """`gpu_worker.gpu_main(conn, device, warm)`, with CuPy and the context started while it is imported."""
    stamps = {"started": time.monotonic()}
    thread = threading.Thread(target=_context, args=(device, stamps), name="autotune-gpu-context", daemon=True)
    thread.start()
    from autotune.sweep.backends import gpu_worker

    stamps["worker_imported"] = time.monotonic()
    thread.join()
    gpu_worker.gpu_main(conn, device, warm, stamps=stamps)
