"""Starting autotune's child processes (the GPU worker, compile processes): the standard library only, so that
`autotune.kernel_tuner`'s import can spawn the GPU worker before it imports the rest of the engine
(`autotune.sweep.backends.gpu_entry`)."""

from __future__ import annotations

import signal
import threading
from typing import Any

_START_LOCK = threading.Lock()


def start_process(proc: Any) -> None:
    """`proc.start()` for a spawned autotune process, without the child re-running the user's main script:
    multiprocessing's spawn imports `__main__` in every child (so that functions defined there unpickle), which runs
    a Kernel Tuner script's top-level code (its imports: Kernel Tuner, pandas, ...; its data, where not guarded by
    `if __name__ == "__main__"`) once per compile process and GPU worker, all at once while the script prepares its
    data. autotune's processes run autotune's functions only, so they need none of it."""
    from multiprocessing import spawn

    if getattr(proc, "_start_method", None) != "spawn":  # fork/forkserver: nothing is re-imported per process
        proc.start()
        return
    original = spawn.get_preparation_data

    def without_main(name: str) -> dict:
        data = original(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    with _START_LOCK:
        spawn.get_preparation_data = without_main  # type: ignore[assignment]
        try:
            proc.start()
        finally:
            spawn.get_preparation_data = original  # type: ignore[assignment]


def ignore_sigint() -> None:
    """Pool initializer: Ctrl-C belongs to the sweep's main process, which stops the pool itself.

    Without it every compile process receives the terminal's SIGINT too, prints a traceback and can
    leave the pool's shutdown waiting on a broken queue."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
