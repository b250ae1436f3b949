"""The GPU worker's entry (`gpu_main`) and its spawn (`spawn_worker`), importing only the standard library, so that
`autotune.kernel_tuner`'s import spawns the worker before it imports the rest of the engine (NumPy, the space
machinery: ~0.35 s of a Kernel Tuner script's start on an H100 host), and the worker imports its own while the
parent does.

The worker's start, in order: NVML's start in a thread (pynvml's import and `nvmlInit`, ~0.1-0.2 s, which the
device's description needs: the clocks, the UUID, the driver) beside CuPy's import and the context; "ready" (with its
stamps); the description (`gpu_worker.GpuState.device_info`); then requests until "stop".
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from typing import Any


def spawn_worker(ctx: Any, device: int, warm: bool, target: Any = None) -> tuple[Any, Any]:
    """Start `target` (default `gpu_main`) for `device` in a process of `ctx` (spawn); (the process, the parent's end
    of its pipe)."""
    from autotune.sweep.compile.spawning import start_process

    parent, child = ctx.Pipe()
    kwargs = {"warm": True} if warm else {}
    proc = ctx.Process(target=target or gpu_main, args=(child, device), kwargs=kwargs, daemon=True)
    start_process(proc)
    child.close()
    return proc, parent


def _start_nvml() -> None:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - NVML is optional: the description falls back to the runtime's clocks
        pass


def gpu_main(conn: Any, device: int, warm: bool = False) -> None:
    """The worker's loop; `warm`: compile the device comparison in a thread meanwhile (`warm_comparisons`)."""
    from autotune.sweep.compile.spawning import ignore_sigint

    ignore_sigint()  # Ctrl-C is the parent's: it finishes or abandons the request in flight, then stops us
    stamps = {"started": time.monotonic()}  # sent with "ready": where the worker's start went (GpuBackend.timeline)
    nvml = threading.Thread(target=_start_nvml, name="autotune-nvml", daemon=True)
    nvml.start()
    try:
        import cupy as cp

        stamps["cupy_imported"] = time.monotonic()
        cp.cuda.Device(device).use()
        stamps["context"] = time.monotonic()
        from autotune.sweep.backends.gpu_worker import GpuState, warm_comparisons

        state = GpuState(cp, device)
        stamps["engine_imported"] = time.monotonic()
        conn.send(("ready", stamps))
    except BaseException:  # noqa: BLE001 - report anything, the parent decides
        conn.send(("error", traceback.format_exc()))
        return
    nvml.join(10.0)
    try:  # described now, while the parent still plans (the sweep asks for it first): not on its critical path
        state.info = state.device_info()
    except Exception:  # noqa: BLE001 - asked again (and reported) when the parent needs it
        state.info = None
    if warm:
        warm_comparisons(cp)
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message[0] == "stop":
            return
        result, fatal = state.handle(message, conn)
        conn.send(("fatal" if fatal else "result", result))
        if fatal:  # the context is poisoned: leave without running CUDA destructors
            conn.close()
            os._exit(3)
