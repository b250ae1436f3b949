"""The compile processes of `GpuBackend`: a pool whose parent enforces each call's time limit by killing its worker.

NVRTC runs in the worker process itself (no process per compile: forking a child for each compile's time limit cost
~70 ms per NVRTC compile on an H100 host, measured by scripts/bench_compile_fork.py: stencil 17 ms in process against
86-93 ms forked). The time limit is the parent's: a call still running at its deadline has its worker killed (with
the process group it leads: nvcc, cicc, ptxas) and replaced, and its future fails with `CompileTimeout`. A worker that
dies (a signal, a crash in the compiler) fails its call's future with `CompileFailed` and is replaced too. Neither
writes to the compile cache (the worker stores only what a compile call finished: deterministic compiler failures
are cached, a killed call never is).

A pool may start with fewer processes than it may have (`initial`: the GPU backend starts 4 beside its GPU worker,
whose start they would slow) and starts the rest once a call has waited `GROW_AFTER_S` in its queue (or when asked:
`grow`).

A call goes only to a process that said it is ready (its initializer done: NVRTC loaded, one warm-up compile). Handed
to processes still starting, the last 11 of Kernel Tuner's stencil example's 31 compiles (17-74 ms each) waited
0.3 s for the 11 processes the pool had just grown by, while the 4 started first sat idle (kt_switch_h100_kt6).
A process that dies while starting is dropped; with none left, the queued calls fail with its exit code; once as many
have died starting as the pool may have, it grows no more (it runs on those that started).

A call may answer `twins.Later(fn, args, after_s)` ("not now": a twin of its program compiles in another process):
the pool runs `fn(*args)` for the same future once `after_s` has passed, ahead of the queue, and its process takes
the next call meanwhile.

The futures are `concurrent.futures.Future`s: `wait`, `done`, `cancel` (of a call not yet started) work as with a
`ProcessPoolExecutor`; `cancel_all` kills every worker (a budget's end: `GpuBackend.cancel_compiles`).
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from collections import deque
from concurrent.futures import Future
from multiprocessing.connection import wait
from typing import Any, Callable

from autotune import untrusted
from autotune.sweep.compile.nvrtc import COMPILE_TIMEOUT_ENV, TIMEOUT_ERROR, CompileFailed, CompileTimeout, compile_nice
from autotune.sweep.compile.pool_process import PoolProcess
from autotune.sweep.compile.twins import Later


GROW_AFTER_S = 0.2  # a pool started with fewer than its processes starts the rest once a call waited this long
PROFILE_ENV = "AUTOTUNE_COMPILE_PROFILE"  # a file `GpuBackend` appends each pool's `profile` to (a benchmark's)
POOL_ENV = "AUTOTUNE_COMPILE_WORKERS"  # compile processes of a GPU backend or a compile worker (else its default)


MAX_POOL = 1024  # compile processes of one pool: more is a typo, not a machine


def env_workers(env: dict[str, str] | None = None) -> int | None:
    """$AUTOTUNE_COMPILE_WORKERS (in `env`, default os.environ) as a number of compile processes from 1 to MAX_POOL,
    None when unset; a UserError that names the variable for anything else (read by autotune.untrusted)."""
    text = (env if env is not None else os.environ).get(POOL_ENV, "").strip()
    if not text:
        return None
    return int(untrusted.number(text, name=POOL_ENV, integer=True, lo=1, hi=MAX_POOL, example="8"))


class CompilePool:
    """Up to `workers` processes (from `ctx`, each running `initializer` first); `submit` queues a call. `initial`
    of them start now (default: all); the others when a call has waited GROW_AFTER_S in the queue (`grow`)."""

    def __init__(
        self, workers: int, ctx: Any, initializer: Callable[[], None] | None = None, initial: int | None = None
    ) -> None:
        self._ctx, self._initializer = ctx, initializer
        compile_nice()  # its processes read $AUTOTUNE_COMPILE_NICE: a bad value is one error here, not dead processes
        self.size = max(1, workers)
        self._lock = threading.Lock()
        self._grow_lock = threading.Lock()
        # (future, fn, args, time limit, what, time.monotonic() at submit)
        self._queue: deque[tuple[Future, Callable, tuple, float | None, str, float]] = deque()
        self._later: list[tuple[float, Future, Callable, tuple, float | None, str]] = []  # (due, future, fn, ...)
        first = self.size if initial is None else max(1, min(initial, self.size))
        self._workers = [PoolProcess(ctx, initializer) for _ in range(first)]
        self._wake_r, self._wake_w = ctx.Pipe(duplex=False)
        self._closed = False
        self.killed = 0  # calls killed at their deadline
        self.start_deaths = 0  # processes that died before they were ready
        # what each process did (`profile`), kept only where $AUTOTUNE_COMPILE_PROFILE asks for it (an overnight
        # sweep's million compiles need not be remembered): calls (sent, answered, pid, outcome); every process
        self.recording = bool(os.environ.get(PROFILE_ENV, "").strip())
        self.spans: list[tuple[float, float, int, str]] = []
        self._every = list(self._workers) if self.recording else []
        self._thread = threading.Thread(target=self._loop, name="autotune-compile-pool", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------------------------------- API
    def submit(self, fn: Callable, *args: Any, timeout_s: float | None = None, what: str = "a compile call") -> Future:
        """Run fn(*args) in a worker; past `timeout_s` seconds after it started there, the worker is killed and the
        future fails with CompileTimeout."""
        fut: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the compile pool was shut down")
            self._queue.append((fut, fn, args, timeout_s, what, time.monotonic()))
        self._wake()
        return fut

    def grow(self) -> int:
        """Start the processes not started yet (up to `workers`); returns how many were started."""
        with self._grow_lock:
            with self._lock:
                missing = 0 if self._closed else self.size - len(self._workers)
            if missing <= 0:
                return 0
            new = [PoolProcess(self._ctx, self._initializer) for _ in range(missing)]  # outside the lock: spawning
            with self._lock:
                closed = self._closed
                if not closed:
                    self._workers.extend(new)
                    if self.recording:
                        self._every.extend(new)
            if closed:
                for w in new:
                    w.kill()
                return 0
        self._wake()
        return len(new)

    def grow_soon(self) -> None:
        """`grow` in a thread of its own (spawning takes the caller's time), unless one is already growing."""
        if len(self._workers) < self.size and not self._grow_lock.locked():
            threading.Thread(target=self.grow, name="autotune-compile-pool-grow", daemon=True).start()

    def busy(self) -> int:
        """Calls running now."""
        with self._lock:
            return sum(1 for w in self._workers if w.job is not None)

    def pids(self) -> list[int]:
        return [w.proc.pid for w in self._workers]

    def shutdown(self, kill: bool = True) -> int:
        """Stop the pool: queued calls are cancelled; running ones are killed (kill=True) or left to finish and
        their workers stopped after. Returns how many calls were running."""
        with self._lock:
            if self._closed:
                return 0
            self._closed = True
            queued = [q[0] for q in self._queue] + [q[1] for q in self._later]
            self._queue.clear()
            self._later.clear()
            workers = list(self._workers)
        for fut in queued:
            if not fut.cancel():  # asked again later (`Later`): running already
                _fail(fut, CompileFailed("error: compile cancelled (the sweep stopped)"))
        self._wake()
        self._thread.join(10)
        busy = 0
        for w in workers:
            if w.job is not None:
                busy += 1
                self._span(w, "cancelled")
                if not w.job[0].cancel():
                    _fail(w.job[0], CompileFailed("error: compile cancelled (the sweep stopped)"))
            if kill or w.job is not None:
                w.kill()
            else:
                try:
                    w.conn.send(None)
                except OSError:
                    pass
                w.proc.join(5)
                w.conn.close()
        return busy

    def profile(self, t0: float) -> dict[str, list]:
        """What the processes did (empty unless $AUTOTUNE_COMPILE_PROFILE was set when the pool was made), in seconds
        after `t0` (a time.monotonic()): `calls` [sent, answered, pid,
        outcome] (ok, error, later: asked again, killed: past its limit, died, cancelled: at shutdown) and `starts`
        [pid, spawned, ready: None when it never was] of every process the pool started (scripts/kt_switch_bound.py
        splits the processes' time with them)."""
        with self._lock:
            spans, every = list(self.spans), list(self._every)
        return {
            "calls": [[round(a - t0, 3), round(b - t0, 3), pid, what] for a, b, pid, what in spans],
            "starts": [
                [w.proc.pid, round(w.spawned_at - t0, 3), None if w.ready_at is None else round(w.ready_at - t0, 3)]
                for w in every
            ],
        }

    # ------------------------------------------------------------------------------------ internals
    def _span(self, w: PoolProcess, outcome: str) -> None:
        if not self.recording:
            return
        with self._lock:
            self.spans.append((w.started_at, time.monotonic(), w.proc.pid, outcome))

    def _wake(self) -> None:
        try:
            self._wake_w.send_bytes(b"w")
        except OSError:
            pass

    def _dispatch(self) -> None:
        with self._lock:
            for w in self._workers:
                while w.ready and w.job is None and self._queue:
                    fut, fn, args, timeout_s, what, _ = self._queue.popleft()
                    if not _take(fut):
                        continue
                    try:
                        w.conn.send((fn, args))
                    except Exception as exc:  # noqa: BLE001 - an unpicklable call, or a worker gone
                        _fail(fut, CompileFailed(f"error: could not hand {what} to a compile process: {exc}"))
                        continue
                    w.started_at = time.monotonic()
                    deadline = None if timeout_s is None else w.started_at + timeout_s
                    w.job = (fut, deadline, what, timeout_s)

    def _started(self, w: PoolProcess) -> None:
        """A starting process spoke: ready, or dead. A dead one is dropped, not replaced; with none left, every
        queued call fails with its exit code (nothing could run them)."""
        try:
            kind, _ = w.conn.recv()
            w.ready = kind == "ready"
            if w.ready:
                w.ready_at = time.monotonic()
                return
        except (EOFError, OSError, ValueError):
            pass
        w.kill()
        with self._lock:
            if w in self._workers:
                self._workers.remove(w)
            self.start_deaths += 1
            queued = [] if self._workers else list(self._queue)
            if not self._workers:
                self._queue.clear()
        for fut, *_ in queued:
            if _take(fut):
                _fail(fut, CompileFailed(f"error: compile processes die while starting (exit code {w.proc.exitcode})"))

    def _replace(self, w: PoolProcess) -> None:
        w.kill()
        with self._lock:
            i = self._workers.index(w)
            self._workers[i] = PoolProcess(self._ctx, self._initializer)
            if self.recording:
                self._every.append(self._workers[i])

    def _loop(self) -> None:
        try:
            self._serve_calls()
        except BaseException:  # noqa: BLE001 - never leave a future waiting on a dead dispatcher
            log = f"error: the compile pool's dispatcher failed\n{traceback.format_exc()}"
            with self._lock:
                self._closed = True
                jobs = [w.job[0] for w in self._workers if w.job is not None] + [q[0] for q in self._queue]
                jobs += [q[1] for q in self._later]
                self._queue.clear()
                self._later.clear()
            for fut in jobs:
                _fail(fut, CompileFailed(log))

    def _grow_when_waiting(self, now: float) -> float | None:
        """Grow (in a thread) once the oldest queued call has waited GROW_AFTER_S; else when to look again."""
        if len(self._workers) >= self.size:  # grown (or started whole): nothing to lock for on every loop
            return None
        with self._lock:
            if len(self._workers) >= self.size or not self._queue:
                return None
            if self._workers and self.start_deaths >= self.size:  # new ones keep dying: run on those that started
                return None
            waited = now - self._queue[0][5]
        if waited < GROW_AFTER_S:
            return now + GROW_AFTER_S - waited
        self.grow_soon()
        return None

    def _requeue_due(self, now: float) -> float | None:
        """Put the `Later` calls now due at the head of the queue; returns when the next one is due."""
        if not self._later:  # (the dispatcher's every turn: no lock taken when nothing waits)
            return None
        with self._lock:
            due = [q for q in self._later if q[0] <= now]
            self._later = [q for q in self._later if q[0] > now]
            for _, fut, fn, args, timeout_s, what in sorted(due, key=lambda q: q[0], reverse=True):
                self._queue.appendleft((fut, fn, args, timeout_s, what, now))
            return min((q[0] for q in self._later), default=None)

    def _serve_calls(self) -> None:
        while not self._closed:
            next_due = self._requeue_due(time.monotonic())
            self._dispatch()
            now = time.monotonic()
            deadlines = [w.job[1] for w in self._workers if w.job is not None and w.job[1] is not None]
            if next_due is not None:
                deadlines.append(next_due)
            look = self._grow_when_waiting(now)
            if look is not None:
                deadlines.append(look)
            timeout = None if not deadlines else max(0.0, min(deadlines) - now)
            busy = [w for w in self._workers if w.job is not None]
            starting = [w for w in self._workers if not w.ready]
            ready = wait([self._wake_r, *(w.conn for w in busy + starting)], timeout)
            if self._closed:
                return
            if self._wake_r in ready:
                while self._wake_r.poll():
                    self._wake_r.recv_bytes()
            for w in starting:
                if w.conn in ready:
                    self._started(w)
            for w in busy:
                if w.conn not in ready or w.job is None:
                    continue
                fut = w.job[0]
                try:
                    kind, payload = w.conn.recv()
                except (EOFError, OSError):
                    w.proc.join(5)
                    what = w.job[2]
                    self._span(w, "died")
                    w.job = None
                    _fail(fut, CompileFailed(f"error: {what} died (exit code {w.proc.exitcode})"))
                    self._replace(w)
                    continue
                _, _, what, limit = w.job
                self._span(w, "later" if isinstance(payload, Later) else kind)
                w.job = None
                if kind == "ok" and isinstance(payload, Later):
                    with self._lock:
                        self._later.append(
                            (time.monotonic() + payload.after_s, fut, payload.fn, payload.args, limit, what)
                        )
                elif kind == "ok":
                    fut.set_result(payload)
                else:
                    _fail(fut, payload)
            now = time.monotonic()
            for w in list(self._workers):
                if w.job is not None and w.job[1] is not None and now >= w.job[1]:
                    fut, _, what, limit = w.job
                    self._span(w, "killed")
                    w.job = None
                    self.killed += 1
                    self._replace(w)
                    _fail(
                        fut,
                        CompileTimeout(
                            f"{TIMEOUT_ERROR}: {what} ran past {limit:g} s and was killed "
                            f"(the limit: ${COMPILE_TIMEOUT_ENV}, or LocalOptions(compile_timeout_s=...))"
                        ),
                    )


def request_limit(request: Any) -> float | None:
    """The time limit of one `compile_batch(request)` call in a pool: the compile time limit per compiler call the
    request may make (a precheck's fast build, a failed batch's instances one by one), plus 2 s to start; None
    without a limit."""
    if request.timeout_s is None:
        return None
    n = len(request.name_expressions)
    calls = (1 if n == 1 else n + 1) * (2 if request.precheck else 1)
    return float(request.timeout_s * calls + 2.0)


def request_what(request: Any) -> str:
    """How a pool's errors name one `compile_batch(request)` call."""
    return f"compiling {len(request.name_expressions)} instance(s) of {request.source.name}"


def _take(fut: Future) -> bool:
    """Mark a queued call's future running; False when it was cancelled. One asked again (`Later`) runs already."""
    return fut.running() or fut.set_running_or_notify_cancel()


def _fail(fut: Future, exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)


def kill_executor(pool: Any) -> int:
    """Stop a concurrent.futures process pool now, killing what it runs (a compile process started by
    `compile.warm_compile_process` leads its own process group: nvcc, cicc and ptxas go with it); returns how many
    calls were running."""
    procs = list((getattr(pool, "_processes", None) or {}).values())  # CPython keeps them here (3.8-3.14)
    busy = sum(1 for f in getattr(pool, "_pending_work_items", {}).values() if f.future.running())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        try:
            if os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except (OSError, ValueError):  # already gone
            pass
    deadline = time.monotonic() + 5
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
    return busy
