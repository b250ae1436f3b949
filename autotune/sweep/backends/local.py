"""`GpuBackend`, the local executor: compile in a process pool, verify and time in a GPU worker process that can die.

The parent (the runner's process) never touches the GPU. It
- starts its compile pool and the GPU worker together (`start`, called by the runner before it plans),
  so CuPy's import in every process overlaps the planning and the GPU's start;
- compiles instances ahead in a `compile_pool.CompilePool` (spawn; `compile.compile_batch`: NVRTC in the compile
  process itself, or nvcc for a space's `compiler: nvcc`; a call past the compile time limit has its process killed
  and replaced, its instances recorded as compile timeouts, never cached), stops at its `deadline` (the config's
  budget) killing what still compiles (`cancel_compiles`), keeping
  2 x workers compile calls in flight from the moment `run` is called (refilled after every measurement, so no
  core waits while the GPU works through a long list); the GPU measures what has compiled
  (never waiting on a slow compile while other work is ready), one test point at a time (`next_point`).
  One instance per NVRTC call by default: with NVRTC 13.0.88 three gemm_batched instances in one program
  took 0.60 s against 0.68 s in three calls (the front end is ~25 ms; code generation dominates), and
  single instances keep every core busy to the end of a batch;
- sends one request per (instance, test point) to the GPU worker process and waits on a watchdog:
  the deadline is `timeout_s` (default 30 s) until the worker reports the verified launch's time, then
  max(timeout_s, timeout_factor (10) x expected time of warm-up + repetitions);
- records a CUDA error (illegal address, launch failure, out of resources) as LAUNCH_ERROR and replaces
  the worker (a faulting kernel poisons its context); a worker that dies as CRASHED; a worker past its
  deadline is killed and the measurement recorded as TIMEOUT; out of device memory as LAUNCH_ERROR
  ("out of memory") after the worker dropped its cached data and retried once;
- calls `before_measure(instance_id, point)` before each GPU measurement, so the runner can mark the
  work in flight durably (a measurement that kills the whole sweep is then never re-run blindly);
- pipelines the GPU worker's requests (`pipeline`, on by default): the next measure request is sent before the
  answer to the one the worker runs is read, so the worker starts it the moment it is done, while this process
  records the previous result (Kernel Tuner's reduction example, profiled with scripts/pyprofile before this on an
  H100 host: the worker waited about 2.8 s for requests during the 20-s call, while this process spent 2.1 s in 965
  database transactions, an in-flight note and a result per measurement). The next request's early-stop bound misses
  the one result before it (a looser bound: it never stops what would be within TOL). A request whose answer is
  never read, because the consumer stopped taking results, is `after_abandon`ed (the runner removes its in-flight
  note; a resumed sweep measures it); one sent to a worker that died before it ran is sent again.

The GPU worker keeps loaded modules, problem data (launch.ProblemData) and references between requests.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from autotune import paths
from autotune.sweep.timing import TimingPlan
from autotune.sweep.compile.nvrtc import COMPILE_CACHE_ENV, DEFAULT_OPTIONS, CompiledKernel, CompileRequest, batches
from autotune.sweep.compile.compile_pool import CompilePool, env_workers
from autotune.sweep.compile.nvrtc import compile_timeout_s as compile_timeout_s_of, screen_options
from autotune.sweep.backends.base import Backend, Job
from autotune.sweep.backends.local_compile import LocalCompiles, task_of
from autotune.errors import UserError
from autotune.sweep.backends.gpu_entry import gpu_main, spawn_worker
from autotune.sweep.backends.gpu_worker import ProblemFault
from autotune.sweep.backends.tasks import KernelTask, MeasureRequest, Variant
from autotune.problems.base import ProblemKind, Scalars, scalars_key
from autotune.vocab import DeviceInfo, Measurement, Status, TestPoint
from autotune.devices import DeviceLimits, know_gpu

DEFAULT_CACHE_DIR = Path(os.environ.get(COMPILE_CACHE_ENV) or paths.CACHE_DIR / "compile")
STARTUP_TIMEOUT_S = 180.0


def next_point(ready: dict[TestPoint, list], current: TestPoint | None) -> TestPoint:
    """The test point the GPU measures next: the one with the most compiled work waiting, staying on the
    current one at a tie. A point's data (up to GBs) and float64 reference are built when the GPU worker
    first needs them and dropped when memory runs short; measuring point by point builds each once per
    visit rather than once per instance (instances are measured on every point they serve)."""
    return max(ready, key=lambda p: (len(ready[p]), p == current))


@dataclass
class _Sent:
    """A measure request sent to the GPU worker whose answer is not read yet (the pipeline's next one)."""

    task: KernelTask
    variant: Variant
    compiled: CompiledKernel
    request: MeasureRequest
    worker: int | None  # the worker it went to (`GpuBackend._generation`; None: not delivered): no other answers it
    answer: tuple[str, Any] | None = None  # read early (`_settle`), when another request needed the pipe


@dataclass(frozen=True)
class LocalOptions:
    """How a `GpuBackend` compiles and measures (each field: the backend's attribute of the same name).

    `device`: the CUDA device; `cache_dir`: the compile cache (None: `DEFAULT_CACHE_DIR`); `compile_workers`: compile
    processes (None: $AUTOTUNE_COMPILE_WORKERS, else the host's cores less one); `compile_batch_size`: instances per
    compiler call; `tol`: the early stop; `timeout_s`, `timeout_factor`: the GPU worker's watchdog (module docstring);
    `include_dirs`, `options`: the compiler's; `arch`: the compute capability to compile for (None: the device's);
    `compile_timeout_s`: a compiler call's limit ("env": $AUTOTUNE_COMPILE_TIMEOUT's; None: none); `warm_checks`: the
    GPU worker compiles CuPy's comparison kernels while idle; `pipeline`: send the next measure request early."""

    device: int = 0
    cache_dir: Path | None = None
    compile_workers: int | None = None
    compile_batch_size: int = 1
    tol: float | None = None
    timeout_s: float = 30.0
    timeout_factor: float = 10.0
    include_dirs: tuple[Path, ...] = (paths.KERNELS_DIR,)
    options: tuple[str, ...] = DEFAULT_OPTIONS
    arch: int | None = None
    compile_timeout_s: float | None | str = "env"
    warm_checks: bool = False
    pipeline: bool = True


class GpuBackend(LocalCompiles, Backend):
    """`autotune.sweep.backends.base.Backend` on the local GPU (see the module docstring); `options`: `LocalOptions`
    (None: its defaults)."""

    def __init__(
        self,
        options: LocalOptions | None = None,
        *,
        before_measure: Callable[[str, TestPoint], None] | None = None,
    ) -> None:
        o = options if options is not None else LocalOptions()
        self.device = o.device
        self.warm_checks = o.warm_checks
        self.cache_dir = Path(o.cache_dir) if o.cache_dir is not None else DEFAULT_CACHE_DIR  # (read now: tests set it)
        self.compile_workers = o.compile_workers or env_workers() or max(1, (os.cpu_count() or 2) - 1)
        self.compile_batch_size, self.tol = o.compile_batch_size, o.tol
        self.timeout_s, self.timeout_factor = o.timeout_s, o.timeout_factor
        self.before_measure, self.include_dirs, self.arch = before_measure, o.include_dirs, o.arch
        # a pair `before_measure` named whose result `run` will not yield (the consumer stopped taking results)
        self.after_abandon: Callable[[str, TestPoint], None] | None = None
        self.pipeline = o.pipeline  # the next measure request is sent while the worker runs the one before it
        # the compiler's options, then $AUTOTUNE_COMPILE_SCREEN's (a measured experiment, off by default)
        self.options = (*o.options, *screen_options())
        # a compiler call running longer is killed and its instances recorded as compile errors ("compile timeout")
        self.compile_timeout_s = compile_timeout_s_of() if o.compile_timeout_s == "env" else o.compile_timeout_s
        self.restarts = 0  # GPU worker processes replaced after a fault, crash or timeout
        # kernel files one of whose instances failed on static shared memory: their next compiles start with a fast
        # build that finds such instances cheaply (compile.resource_failure; $AUTOTUNE_COMPILE_PRECHECK=0: never)
        self.precheck_sources: set[Path] = set()
        self.precheck = os.environ.get("AUTOTUNE_COMPILE_PRECHECK", "1").strip() not in ("0", "off")
        self.deadline: float | None = None  # time.monotonic() at which `run` stops and kills its compiles (budget)
        self.cancelled = 0  # compile calls killed unfinished (a budget's end, a space stopped early)
        self._ctx = mp.get_context("spawn")
        self._proc: Any = None
        self._conn: Any = None
        self._ready = False
        self._pool: CompilePool | Executor | None = None
        self._info: DeviceInfo | None = None
        self._limits: DeviceLimits | None | bool = None  # False: the worker could not read them
        self._best: dict[tuple[TestPoint, tuple[tuple[str, float], ...]], float] = {}  # (point, scalars_key)
        self._t0: float | None = None  # time.monotonic() at `start`
        self._ahead: tuple | None = None  # (point, convention, scalars key) of a `prepare_ahead` not yet answered
        self._generation = 0  # counts the workers killed: a request sent to an earlier one is never answered
        self._queued: _Sent | None = None  # the pipeline's request, sent while the worker ran the one before it
        self._stale: _Sent | None = None  # a request abandoned unanswered: its answer is read and dropped
        # start-up, seconds after `start`: worker_ready, device_info, first_submit, prepared, first_compiled,
        # first_measured (the target: the first measurement within 3 s of the sweep's start on a warm machine)
        self.timeline: dict[str, float] = {}

    def _mark(self, event: str) -> None:
        if self._t0 is not None and event not in self.timeline:
            self.timeline[event] = round(time.monotonic() - self._t0, 3)

    # ------------------------------------------------------------------ lifecycle of the GPU worker
    def start(self) -> None:
        """Start the compile processes and the GPU worker without waiting for either (idempotent)."""
        if self._t0 is None:
            self._t0 = time.monotonic()
        if self._proc is None:  # first: its start (CuPy, the context, the description) is the longest
            self._spawn()
        if self._pool is None:  # STARTING_COMPILE_WORKERS now (each loads NVRTC and compiles once: warm_nvrtc), the
            self._compile_pool()  # rest when compiles queue up (compile_pool.GROW_AFTER_S; both: local_compile)
            self._mark("pool_spawned")

    def ready(self, hint: str = "") -> None:
        """Wait until the GPU worker has started (`start` spawned it): a worker that cannot start (no GPU, CuPy
        without a driver) is one UserError, as `gpu_backend`'s check gives."""
        if self._proc is None:
            self._spawn()
        if self._ready:
            return
        try:
            self._wait_ready()
        except RuntimeError as exc:
            lines = [ln for ln in str(exc).splitlines() if ln.strip()]
            raise UserError(
                f"no GPU available to CuPy ({lines[-1].strip() if lines else exc})",
                hint=hint or "run on a machine with an NVIDIA GPU and CuPy",
            ) from None

    def _spawn(self) -> None:
        self._proc, self._conn = spawn_worker(self._ctx, self.device, self.warm_checks, gpu_main)
        self._ready = False
        self._mark("worker_spawned")

    def adopt_worker(self, proc: Any, conn: Any, spawned_at: float) -> None:
        """Take a GPU worker started by `gpu_entry.spawn_worker` for this backend's device (at time.monotonic()
        `spawned_at`: the timeline counts from it) as this backend's, before `start`: `kt_prewarm` spawns it before it
        imports this module."""
        if self._proc is not None:
            raise RuntimeError("this backend has a GPU worker already")
        self._t0 = spawned_at
        self.timeline["worker_spawned"] = 0.0
        self._mark("worker_adopted")
        self._proc, self._conn, self._ready = proc, conn, False

    def _wait_ready(self) -> None:
        parent = self._conn
        if not parent.poll(STARTUP_TIMEOUT_S):
            self._kill()
            raise RuntimeError(f"the GPU worker did not start within {STARTUP_TIMEOUT_S:.0f} s")
        try:
            kind, payload = parent.recv()
        except EOFError:
            code = self._exit_code()
            self._kill()
            raise RuntimeError(f"the GPU worker died while starting (exit code {code})") from None
        if kind != "ready":
            self._kill()
            raise RuntimeError(f"the GPU worker could not start: {payload}")
        self._ready = True
        self._mark("worker_ready")
        if isinstance(payload, dict) and self._t0 is not None:  # the worker's own stamps (time.monotonic, system-wide)
            for event, at in payload.items():
                self.timeline.setdefault(f"worker.{event}", round(at - self._t0, 3))

    def _exit_code(self) -> int | None:
        """The exit code of a worker whose pipe closed: its pipe closes a moment before the process can be
        reaped, so wait for that (up to 5 s) rather than read None."""
        if self._proc is None:
            return None
        self._proc.join(5)
        return self._proc.exitcode

    def _kill(self) -> None:
        self._ahead = self._stale = None  # a dead worker answers nothing
        self._generation += 1
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join(10)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None
        self._ready = False

    def prepare_ahead(self, kind: ProblemKind, point: TestPoint, convention: str, scalars: Scalars) -> None:
        """Have the GPU worker build this point's data and reference now, without waiting for its answer (a caller
        that knows the first point before the sweep plans: `tune_kernel`); the first `run` takes the answer."""
        if self._ahead is not None:
            return
        self.device_info()  # asked first (the worker described the GPU when it started): the sweep's plan needs it
        self._conn.send(("prepare", kind, point, convention, dict(scalars)))
        self._ahead = (point, convention, scalars_key(scalars))

    def _take_ahead(self) -> tuple[tuple, tuple[str, Any]] | None:
        """The answer to `prepare_ahead`'s request (its key, the answer), or None when none is pending."""
        if self._ahead is None:
            return None
        key, self._ahead = self._ahead, None
        return key, self._reply(None)

    def _call(self, message: tuple, expected: Callable[[float], float] | None = None) -> tuple[str, Any]:
        """Send one request; ("result", payload) or ("timeout"|"crashed", reason)."""
        self._settle()  # (the pipeline's request was sent first: its answer comes first)
        if self._send(message) is None:  # the worker had died between requests: a new one takes it
            reason = self._lost()
            if self._send(message) is None:
                return "crashed", reason
        return self._reply(expected)

    def _lost(self) -> str:
        """Reap a worker whose pipe closed (it died) and count the restart; the reason to record."""
        code = self._exit_code()
        self._kill()
        self.restarts += 1
        return f"GPU worker process died (exit code {code})"

    def _send(self, message: tuple) -> int | None:
        """Send one request without reading its answer (answers come in the order the requests were sent); the
        worker it went to (`_generation`), or None when its pipe was closed (it died, maybe running the request
        before: that one's answer says so)."""
        self._take_ahead()  # (a data build asked for ahead and not taken: its answer comes first)
        self._drop_stale()
        if self._proc is None:
            self._spawn()
        if not self._ready:
            self._wait_ready()
        try:
            self._conn.send(message)
        except OSError:  # BrokenPipeError, ConnectionResetError
            return None
        return self._generation

    def _settle(self) -> None:
        """Read the answer of the pipeline's request now (kept for `_finish`): another request needs the pipe."""
        q = self._queued
        if q is not None and q.answer is None and q.worker == self._generation:
            q.answer = self._reply(_expected(q.task))

    def _drop_stale(self) -> None:
        """Read and drop the answer of a request abandoned unanswered (`_abandon`)."""
        stale, self._stale = self._stale, None
        if stale is not None and stale.worker == self._generation:
            self._reply(_expected(stale.task))

    def _reply(self, expected: Callable[[float], float] | None) -> tuple[str, Any]:
        deadline = time.monotonic() + self.timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill()
                self.restarts += 1
                return (
                    "timeout",
                    f"no answer within the watchdog's deadline ({self.timeout_s:.0f} s or more); worker killed",
                )
            try:
                ready = self._conn.poll(min(left, 0.5))
                if not ready and self._proc.is_alive():
                    continue
                kind, payload = self._conn.recv()
            except (EOFError, OSError):
                return "crashed", self._lost()
            if kind == "progress":
                extra = expected(payload) if expected else 0.0
                deadline = time.monotonic() + max(self.timeout_s, self.timeout_factor * extra)
                continue
            if kind == "fatal":  # the worker reported a poisoned context and exits
                self._kill()
                self.restarts += 1
            return "result", payload

    # ---------------------------------------------------------------------------- Backend protocol
    def device_info(self) -> DeviceInfo:
        if self._info is None:
            kind, payload = self._call(("device_info",))
            if kind != "result" or not isinstance(payload, DeviceInfo):
                raise RuntimeError(f"could not read the GPU's description: {payload}")
            self._info = payload
            self._mark("device_info")
        return self._info

    def device_limits(self) -> DeviceLimits | None:
        """The GPU's limits (`autotune.devices.detect_gpu`: planning, and every instance's geometry and defines),
        read by the GPU worker, which has CuPy and the device already; on device 0 they become this process's
        (`devices.know_gpu`), so it neither imports CuPy nor initializes CUDA to plan (`get_device` did both: ~0.3 s
        of a 31-configuration tune_kernel call on an H100 host). None where the worker cannot read them (then
        this process reads them itself, as before). tune_kernel asks once the worker is ready and before
        `prepare_ahead` (a request waits behind the data build asked ahead)."""
        if self._limits is None:
            kind, payload = self._call(("device_limits",))
            self._limits = payload if kind == "result" and isinstance(payload, DeviceLimits) else False
            if isinstance(self._limits, DeviceLimits) and self.device == 0:
                know_gpu(self._limits)
        return self._limits if isinstance(self._limits, DeviceLimits) else None

    def run(self, jobs: Sequence[Job]) -> Iterator[Measurement]:
        return self.run_tasks([task_of(j) for j in jobs])

    def seed_best(self, point: TestPoint, scalars: Scalars, best_ms: float) -> None:
        """Tell the early-stop rule the best median already known at a point (a resumed sweep)."""
        key = (point, scalars_key(scalars))
        self._best[key] = min(best_ms, self._best.get(key, best_ms))

    def run_tasks(self, tasks: Sequence[KernelTask]) -> Iterator[Measurement]:
        """One Measurement per (task, variant). Compiling starts now (not at the first `next`). The GPU
        measures compiled work point by point (`next_point`), so results do not come in task order."""
        arch = self.arch or self.device_info().cc
        todo = list(enumerate(batches(list(tasks), self.compile_batch_size)))
        todo.reverse()  # popped from the end: submission keeps the task order
        inflight: dict[int, tuple[list[KernelTask], list[tuple[CompileRequest, Future]]]] = {}
        window = 2 * self.compile_workers

        def refill() -> None:
            while todo and len(inflight) < window:
                i, chunk = todo.pop()
                inflight[i] = (chunk, [(r, self._submit(r)) for r in self._requests(chunk, arch)])

        refill()
        self._mark("first_submit")
        if tasks:
            self._prepare(tasks[0])
        return self._drain(inflight, refill)

    def _prepare(self, task: KernelTask) -> None:
        """Have the GPU worker build the first point's data and reference while the pool compiles (its answer is
        awaited here: the compiles run meanwhile). The problem's own fault stops the sweep as a measurement's
        would; a timeout or crash is left to the measurement that needs the data."""
        v = task.variants[0]
        ahead = self._take_ahead()
        if ahead is not None and ahead[0] == (v.point, task.convention, scalars_key(task.scalars)):
            kind, payload = ahead[1]
        else:
            kind, payload = self._call(("prepare", task.kind, v.point, task.convention, dict(task.scalars)))
        if kind == "result" and isinstance(payload, ProblemFault):
            self.cancel_compiles()
            raise problem_error(payload)
        self._mark("prepared")
        if kind == "result" and isinstance(payload, dict) and self._t0 is not None:  # the worker's own steps
            for event, at in payload.items():
                self.timeline.setdefault(f"worker.{event}", round(at - self._t0, 3))

    def _drain(
        self,
        inflight: dict[int, tuple[list[KernelTask], list[tuple[CompileRequest, Future]]]],
        refill: Callable[[], None],
    ) -> Iterator[Measurement]:
        ready: dict[TestPoint, list[tuple[KernelTask, Variant, CompiledKernel]]] = {}
        current: TestPoint | None = None

        def harvest() -> None:  # move every finished compile into `ready`, by test point
            for i in sorted(i for i, (_, reqs) in inflight.items() if all(f.done() for _, f in reqs)):
                chunk, reqs = inflight.pop(i)
                compiled = self._collect(reqs)  # (replaces a broken pool before the refill uses it)
                self._mark("first_compiled")
                for task in chunk:
                    for v in task.variants:
                        ready.setdefault(v.point, []).append(
                            (task, v, compiled[(*self._request_key(task, v), v.name_expression)])
                        )
            refill()

        def left() -> float | None:
            return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

        def answered(sent: _Sent) -> Measurement:  # a sent request, answered (the worker then runs the next)
            if self._queued is sent:
                self._queued = None
            m = self._finish(sent)
            self._mark("first_measured")
            harvest()  # compiles that finished meanwhile free their cores for the next ones at once
            return m

        try:
            while inflight or ready or self._queued is not None:
                harvest()
                if left() == 0.0:
                    return
                if not ready:
                    if self._queued is not None:  # nothing compiled to send meanwhile: its answer first
                        yield answered(self._queued)
                        continue
                    wait(
                        [f for _, reqs in inflight.values() for _, f in reqs],
                        timeout=left(),
                        return_when=FIRST_COMPLETED,
                    )
                    continue
                current = next_point(ready, current)
                for task, v, ck in ready.pop(current):
                    if left() == 0.0:
                        return
                    previous = self._queued
                    started = self._start(task, v, ck)  # sent now: the worker runs it once `previous` is done
                    if isinstance(started, _Sent):
                        self._queued = started
                    if previous is not None:
                        yield answered(previous)
                    if isinstance(started, Measurement):  # a compile failure: nothing ran
                        yield started
                    elif not self.pipeline:
                        yield answered(started)
        finally:  # ended early (budget, a space stopped, Ctrl-C): what still compiles is for pairs left unmeasured
            if self._queued is not None:
                self._abandon(self._queued)
            running = [f for _, reqs in inflight.values() for _, f in reqs if not f.cancel() and not f.done()]
            if running:
                self.cancel_compiles()

    def baseline(self, problem: ProblemKind, point: TestPoint, scalars: Scalars, reps: int) -> Measurement:
        """The kind's baseline on the same data as the kernels, verified and timed the same way."""
        kind, payload = self._call(
            ("baseline", problem, point, dict(scalars), reps), lambda est: est * (reps + 50) / 1e3
        )
        if kind == "result" and isinstance(payload, ProblemFault):
            raise problem_error(payload)
        if kind == "result":
            return payload
        return Measurement(
            problem.baseline_name or "baseline",
            point,
            Status.TIMEOUT if kind == "timeout" else Status.CRASHED,
            error=payload,
        )

    def close(self) -> None:
        if self._conn is not None and self._proc is not None and self._proc.is_alive():
            try:  # a second for a clean exit, then killed (the driver frees a killed process's context)
                self._conn.send(("stop",))
                self._proc.join(1.0)
            except (OSError, BrokenPipeError):
                pass
        self._kill()
        self.cancel_compiles()

    def __enter__(self) -> "GpuBackend":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------------------------- internals
    def _abandon(self, sent: _Sent) -> None:
        """A request whose result `run` will not yield: its answer, when it comes, is dropped (`_drop_stale`), and
        `after_abandon` tells the runner (its in-flight note goes: the pair was not at fault)."""
        self._queued = None
        if sent.answer is None and sent.worker == self._generation:
            self._stale = sent
        if self.after_abandon is not None:
            try:
                self.after_abandon(sent.task.instance_id, sent.variant.point)
            except Exception:  # noqa: BLE001 - on the way out of `run`: the error that ended it, if any, matters more
                pass

    def _start(self, task: KernelTask, v: Variant, ck: CompiledKernel) -> Measurement | _Sent:
        """Send a compiled pair's measure request (after `before_measure`), or its compile failure as a
        Measurement (nothing is sent)."""
        if not ck.ok and f'identifier "{v.name_expression}" is undefined' in ck.log:
            raise UserError(
                f"{task.source} has no kernel named {v.name_expression!r} (NVRTC: identifier is undefined)",
                hint="correct the space's `kernel: name:` (or the source), and run the same command "
                "again (nothing was recorded)",
            )
        if not ck.ok or ck.lowered_name is None:
            lines = ck.log.strip().splitlines() or ["compile error"]
            first = next((ln for ln in lines if "error" in ln), lines[-1])
            return Measurement(
                task.instance_id, v.point, Status.COMPILE_ERROR, error=first[:300], log=ck.log, compile_s=ck.compile_s
            )
        key = (v.point, scalars_key(task.scalars))
        plan = TimingPlan(task.reps, self._best.get(key), self.tol)
        req = MeasureRequest(
            task.instance_id,
            v,
            task.convention,
            task.kind,
            str(ck.blob),
            ck.lowered_name,
            dict(task.scalars),
            plan,
            ck.compile_s,
            dict(task.params),
        )
        if self.before_measure is not None:
            self.before_measure(task.instance_id, v.point)
        return _Sent(task, v, ck, req, self._send(("measure", req)))

    def _finish(self, sent: _Sent) -> Measurement:
        """The answer to a sent measure request, as a Measurement; one sent to a worker that was replaced before it
        answered (the request before it crashed or timed out) is sent to the new worker."""
        task, v, ck = sent.task, sent.variant, sent.compiled
        if sent.answer is not None:
            kind, payload = sent.answer
        elif sent.worker == self._generation:
            kind, payload = self._reply(_expected(task))
        else:
            kind, payload = self._call(("measure", sent.request), _expected(task))
        if kind != "result":
            status = Status.TIMEOUT if kind == "timeout" else Status.CRASHED
            return Measurement(task.instance_id, v.point, status, error=payload, compile_s=ck.compile_s)
        if isinstance(payload, ProblemFault):
            raise problem_error(payload)
        m: Measurement = payload
        m.compile_s = ck.compile_s if m.compile_s is None else m.compile_s
        if m.status == Status.OK and m.median_ms is not None:
            key = (v.point, scalars_key(task.scalars))
            self._best[key] = min(m.median_ms, self._best.get(key, m.median_ms))
        return m


def _expected(task: KernelTask) -> Callable[[float], float]:
    """The watchdog's extension for a measure request, from its verified launch's time (`_reply`)."""
    return lambda est: est * (task.reps + 50) / 1e3


def problem_error(fault: ProblemFault) -> UserError:
    """What the sweep stops with when the problem's own code failed on the GPU (nothing is recorded for the pair)."""
    return UserError(
        str(fault),
        hint="fix the problem's reference, buffer shapes or kernel name and run the same "
        "command again (nothing was recorded for this pair)",
    )


def gpu_backend(*, device: int = 0, tol: float | None = None, hint: str = "") -> "GpuBackend":
    """A GpuBackend on `device`, after checking that CuPy sees a GPU: else one UserError (`hint`: what to do)."""
    try:
        from cupy.cuda import runtime

        if runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
    except Exception as exc:  # noqa: BLE001 - any failure here means: no usable GPU
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise UserError(
            f"no GPU available to CuPy ({type(exc).__name__}{': ' + first if first else ''})",
            hint=hint or "run on a machine with an NVIDIA GPU and `pip install -e .[cuda12]` (or .[cuda13])",
        ) from None
    return GpuBackend(LocalOptions(device=device, tol=tol))
