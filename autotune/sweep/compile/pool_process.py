"""One compile process of `compile_pool.CompilePool`: the loop it runs (`serve`: each call received, its result or
its exception sent back) and the parent's handle on it (`PoolProcess`)."""

from __future__ import annotations

import os
import signal
import time
import traceback
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Any, Callable

from autotune.sweep.compile.nvrtc import SUPERVISED_ENV, CompileFailed
from autotune.sweep.compile.spawning import start_process


def serve(conn: Connection, initializer: Callable[[], None] | None) -> None:
    """A worker: run each (fn, args) received, send back ("ok", result) or ("error", exception)."""
    os.environ[SUPERVISED_ENV] = "1"  # compile_batch: the time limit is the parent's
    if initializer is not None:
        initializer()
    try:
        conn.send(("ready", None))  # calls come only now (CompilePool._dispatch)
    except (OSError, ValueError):
        return
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        fn, args = message
        try:
            reply: tuple = ("ok", fn(*args))
        except BaseException as exc:  # noqa: BLE001 - the caller's future gets it
            reply = ("error", portable(exc))
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return


def portable(exc: BaseException) -> BaseException:
    """The exception, or (when it cannot be pickled) a CompileFailed with its traceback."""
    import pickle

    try:
        pickle.dumps(exc)
        return exc
    except Exception:  # noqa: BLE001
        return CompileFailed("".join(traceback.format_exception(exc)))


class PoolProcess:
    """One process of a `CompilePool`: its pipe, its state (ready, the call it runs) and how to kill it."""

    def __init__(self, ctx: Any, initializer: Callable[[], None] | None) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, args=(child, initializer), daemon=True)
        start_process(self.proc)
        child.close()
        self.ready = False  # its initializer done (it sent "ready"): only then is it handed calls
        self.spawned_at = time.monotonic()  # (time.monotonic(), as every stamp here: `CompilePool.profile`)
        self.ready_at: float | None = None
        self.started_at = 0.0  # when its current call was sent
        self.job: tuple[Future, float | None, str, float | None] | None = None  # (future, deadline, what, limit)

    def kill(self) -> None:
        try:
            if os.getpgid(self.proc.pid) == self.proc.pid:  # `warm_compile_process` made it a group leader
                os.killpg(self.proc.pid, signal.SIGKILL)
            else:
                self.proc.kill()
        except (OSError, ValueError):  # already gone
            pass
        self.proc.join(5)
        self.conn.close()
