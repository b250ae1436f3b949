"""`DaskBackend`: one sweep over every GPU of a node (`--gpus all|N`) or of a cluster (`--scheduler ADDRESS`).

The client (the runner's process, the only writer to the database) cuts each batch of jobs into chunks and
submits one Dask task per chunk; the scheduler hands chunks to whichever worker is free (and steals queued ones
from a slow worker for a fast one), so a faster GPU takes more. Each worker holds one long-lived executor built
once per worker process by a worker plugin (`dask_worker.ExecutorPlugin`): on GPUs a `local.GpuBackend` on the
worker's one visible GPU, with its own compile pool and its GPU process (crash and hang isolation as on one GPU);
without GPUs a replay of a recorded database (`dask_executors`). A chunk's Measurements come back to the client,
each naming its GPU (`Measurement.device`), and the runner records them on that GPU.

Guarantees (docs/scale-out.md):
- a worker that dies (killed, out of memory, node lost) loses nothing: the scheduler runs its chunk again on
  another worker, and as a chunk's results only reach the client when it completes, nothing is recorded twice;
  a chunk that killed `distributed.scheduler.allowed-failures` + 1 workers is recorded as `crashed`;
- a killed client loses at most the chunks in flight (nothing of them is recorded; the resumed sweep measures them);
- one measurement per (instance, point) per `run`, whatever the retries (`test_one_measurement_per_pair`).

Reaching the GPUs (`--gpus`, a local cluster, `--scheduler`) is `autotune.sweep.backends.dask_cluster`.
"""

from __future__ import annotations

import dataclasses
import math
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from autotune import stopping
from autotune.errors import UserError
from autotune.problems.base import ProblemKind, Scalars, scalars_key
from autotune.sweep.backends.base import Backend, Job
from autotune.vocab import DeviceInfo, Measurement, Status, TestPoint
from autotune.sweep.backends.dask_cluster import (
    CONNECT_TIMEOUT_S,
    INSTALL_HINT,
    MAX_LOCAL_WORKERS,
    SCHEDULER_HINT,
    SCHEDULER_TIMEOUT_ENV,
    SCHEDULER_TIMEOUT_S,
    SCHEMES,
    gpu_list,
    identify_scheduler,
    local_cluster,
    require_distributed,
    scheduler_address,
    scheduler_timeout_s,
    visible_gpus,
    why,
)

CLOSE_TIMEOUT_S = 3.0  # for the client's close (a stop waits for it)
BASELINE_CHECK_S = 5.0  # how often a baseline waiting for named workers checks that they are still there
CHUNKS_PER_WORKER = 2  # chunks each worker gets of one batch: enough to balance, few enough to keep chunks long


@dataclass
class GpuRate:
    """What one worker (one GPU) measured in this process: pairs, seconds busy, chunks."""

    worker: str
    device: str  # the GPU's name
    pairs: int = 0
    seconds: float = 0.0
    chunks: int = 0

    @property
    def per_s(self) -> float:
        return self.pairs / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class CompileAhead:
    """How a `DaskBackend` compiles ahead of its GPU workers. `compile_workers`: CPU workers the local cluster adds.
    `compile_ahead`: compile each chunk on a compile worker (resource `compile`) into the shared compile cache
    `compile_cache` before a GPU worker (resource `GPU`) takes it; None: when the cluster has compile workers."""

    compile_workers: int = 0
    compile_ahead: bool | None = False
    compile_cache: str | None = None


class DaskBackend(Backend):
    """`autotune.sweep.backends.base.Backend` over a Dask cluster (see the module docstring).

    `executor`: a factory from `dask_executors` (what each worker measures with). Exactly one of `devices` (start
    a local cluster, one worker per entry: a CUDA_VISIBLE_DEVICES value) and `scheduler` (the address of a running
    scheduler whose workers each see one GPU). `chunk_jobs`: jobs per task (default: a batch split into
    `chunks_per_worker` chunks per worker, default `CHUNKS_PER_WORKER`). `cluster`: an already running cluster object to use instead.
    `compiles`: `CompileAhead` (None: its defaults, no compile workers and no compiling ahead)."""

    marks_pairs = False  # its workers measure and never reach the database: a dead worker's chunk is recorded crashed

    def __init__(
        self,
        executor: Any,
        *,
        devices: Sequence[str] | None = None,
        scheduler: str | None = None,
        chunk_jobs: int | None = None,
        chunks_per_worker: int = CHUNKS_PER_WORKER,
        cluster: Any = None,
        compiles: CompileAhead | None = None,
    ) -> None:
        if (devices is None) == (scheduler is None) and cluster is None:
            raise ValueError("give exactly one of devices (a local cluster) and scheduler (an address)")
        ahead = compiles if compiles is not None else CompileAhead()
        self.executor, self.devices_wanted, self.scheduler = executor, list(devices or []), scheduler
        self.chunk_jobs, self.chunks_per_worker = chunk_jobs, max(1, chunks_per_worker)
        self.compile_workers, self.compile_ahead = ahead.compile_workers, ahead.compile_ahead
        self.compile_cache = ahead.compile_cache
        self.compiled: list[Any] = []  # dask_worker.Precompiled of each chunk compiled ahead
        self.deadline: float | None = None  # time.monotonic(): chunks get the time left; results past it are dropped
        self.on_device: Any = None  # the runner sets it to record a GPU that joins mid-sweep (Store.upsert_device)
        self._cluster, self._own_cluster = cluster, cluster is None and scheduler is None
        self._client: Any = None
        self._infos: dict[str, DeviceInfo] = {}  # worker name -> its GPU
        self._rates: dict[str, GpuRate] = {}
        self._primary: DeviceInfo | None = None
        self._best: dict[tuple[str, TestPoint, tuple], float] = {}  # (GPU name, point, scalars key) -> best ms
        # baselines: (kind, scalars key, reps) -> the points of the last run's jobs; (kind, scalars key, reps, point)
        # -> (the future measuring it with others, its index there)
        self._batch_points: dict[tuple, list[TestPoint]] = {}
        self._baselines: dict[tuple, tuple[Any, int]] = {}
        self._closed = False
        self._complete = False  # every local worker has been seen once (later, one is enough: a dead one restarts)

    # ------------------------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Start (or connect to) the cluster and install the executor on every worker; returns without waiting
        for the workers (`device_info` waits). Idempotent."""
        if self._client is not None:
            return
        distributed = require_distributed()
        from autotune.sweep.backends.dask_worker import ExecutorPlugin

        if self._cluster is None and self.scheduler is None:
            self._cluster = local_cluster(self.devices_wanted, compile_workers=self.compile_workers)
        timeout = CONNECT_TIMEOUT_S
        if self._cluster is None:  # a scheduler elsewhere: what answers there first, bounded (identify_scheduler)
            timeout = scheduler_timeout_s()
            identify_scheduler(self.scheduler, timeout)  # type: ignore[arg-type]
        try:
            target = self._cluster if self._cluster is not None else self.scheduler
            # a stop waits for the constructor (bounded by `timeout`; the scheduler has answered already): one that
            # cut it left a client nobody could close, whose `__del__` hung the process at its exit (`_abandon`)
            with stopping.deferred():
                self._client = distributed.Client(target, timeout=timeout, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise UserError(
                f"cannot reach the Dask scheduler at {self.scheduler} within {SCHEDULER_TIMEOUT_ENV}={timeout:g} s: "
                f"{exc}",
                hint=SCHEDULER_HINT,
            ) from None
        plugin = ExecutorPlugin(self.executor)
        register = getattr(self._client, "register_plugin", None) or self._client.register_worker_plugin
        register(plugin, name=plugin.name)

    @property
    def client(self) -> Any:
        self.start()
        return self._client

    def workers(self) -> int:
        """Workers (GPUs) the cluster has now, after waiting for the local ones (or, for a scheduler, for one)."""
        want = len(self.devices_wanted) + self.compile_workers if self._own_cluster and not self._complete else 1
        timeout = scheduler_timeout_s() if self.scheduler is not None else CONNECT_TIMEOUT_S
        try:
            self.client.wait_for_workers(want, timeout=timeout)
        except TimeoutError:
            if self.scheduler is not None:
                raise UserError(
                    f"the Dask scheduler at {self.scheduler} has no worker after {SCHEDULER_TIMEOUT_ENV}={timeout:g} s",
                    hint=f"start one per GPU (`dask worker {self.scheduler} --nthreads 1 --resources GPU=1`, see "
                    "docs/scale-out.md), or give them longer",
                ) from None
            raise RuntimeError(f"the Dask cluster has fewer than {want} worker(s) after {timeout:.0f} s") from None
        self._complete = True
        return len(self._gpu_workers())

    def parallelism(self) -> int:
        """Chunks the cluster measures at once (its GPU workers): the runner asks a model-based strategy for
        2 x this many instances at a time (the config's `strategy: {batch: N}` overrides)."""
        return max(1, self.workers())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._client is not None:
            try:
                if self._own_cluster:  # the plugin's teardown closes each executor (GPU processes, pools)
                    self._client.unregister_worker_plugin(_plugin_name())
            except Exception:  # noqa: BLE001 - closing: a worker already gone is fine
                pass
            # bounded: a stop (Ctrl-C, SIGTERM) waits for this, a scheduler gone must not hold it
            _abandon(self._client)
        if self._own_cluster and self._cluster is not None:
            self._cluster.close()

    # ---------------------------------------------------------------------------------- the protocol
    def device_info(self) -> DeviceInfo:
        """The first worker's GPU (by name), with the least free memory of all workers' GPUs (the runner checks
        that the points fit). Every worker's GPU: `devices()`."""
        if self._primary is None:
            self._discover()
            first = self._infos[sorted(self._infos)[0]]
            free = [i.free_bytes for i in self._infos.values() if i.free_bytes is not None]
            self._primary = dataclasses.replace(first, free_bytes=min(free) if free else None)
        return self._primary

    def devices(self) -> list[DeviceInfo]:
        """Each distinct GPU of the cluster's workers (by uuid), the runner records them all."""
        self.device_info()
        return list({i.uuid: i for i in self._infos.values()}.values())

    def recorded_pairs(self) -> set[tuple[str, TestPoint]] | None:
        """The pairs the workers' executor can measure, where it names them (a replay: its recording's), else None
        (`Backend.recorded_pairs`)."""
        named = getattr(self.executor, "recorded_pairs", None)
        return named() if named is not None else None

    def rates(self) -> list[GpuRate]:
        """Per worker (GPU): pairs measured and the time its chunks took, in this process."""
        return [self._rates[k] for k in sorted(self._rates)]

    def seed_best(self, point: TestPoint, scalars: Scalars, best_ms: float) -> None:
        """A best median already known on the GPU model of `device_info()`: sent with each chunk to the workers of
        that model (a best time of another model must not stop instances early). Never raises."""
        try:
            self._tell_best(self.device_info().name, point, scalars, best_ms)
        except Exception:  # noqa: BLE001 - the protocol: without seeds, only fewer early stops
            pass

    def baseline(self, kind: ProblemKind, point: TestPoint, scalars: Scalars, reps: int) -> Measurement:
        """The kind's baseline, measured on a GPU of the sweep's device's model (the first that is free: it waits
        for the chunk running there); recorded as the sweep's device's.

        Asked for one point, it measures in ONE task the baselines of every point of the last `run`'s jobs that it
        has not measured yet (the runner asks for them one after the other, each only where it has none): one
        round trip to the GPU instead of one per point, during which the GPU would idle and the client could not
        record the chunks that came back. The runner's next asks find them done. Where the runner has some of them
        already (a resumed sweep), those are measured once more and never recorded.

        Its restrictions are hard (never `allow_other_workers`): Dask lets a task with loose restrictions go to ANY
        worker, resources included, so work stealing handed a queued baseline to the idle compile worker, which
        lacks the resource GPU (the worker failed with `KeyError: 'GPU'` and left the cluster). Where the workers
        of the sweep's model are named by address (several GPU models), a restarted worker has a new address: the
        baseline is submitted again, to the workers of that model there are then (any GPU worker if none)."""
        self.device_info()
        key = (kind.name, scalars_key(scalars), reps)
        if (*key, point) not in self._baselines:
            todo = [point] + [
                q for q in self._batch_points.get(key, ()) if q != point and (*key, q) not in self._baselines
            ]
            fut = self._submit_baselines(kind, todo, scalars, reps)
            for i, q in enumerate(todo):
                self._baselines[(*key, q)] = (fut, i)
        fut, i = self._baselines[(*key, point)]
        try:
            m = fut.result()[i]
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failure is a Measurement, never an exception
            for k in [k for k, (f, _) in self._baselines.items() if f is fut]:
                del self._baselines[k]  # asked again, each is measured again
            return Measurement(kind.baseline_name or "baseline", point, Status.CRASHED, error=why(exc))
        m.device = None  # recorded as the sweep's device's baseline (the first worker's)
        return m

    def _submit_baselines(self, kind: ProblemKind, points: list[TestPoint], scalars: Scalars, reps: int) -> Any:
        """One task measuring the baselines of `points` (before the chunks queued on its worker); a finished (or
        failed) future, resubmitted while named workers disappear (see `baseline`)."""
        from autotune.sweep.backends.dask_worker import worker_baselines

        while True:
            where = self._baseline_workers()
            fut = self.client.submit(
                worker_baselines,
                kind,
                points,
                dict(scalars),
                reps,
                workers=where,
                allow_other_workers=False,
                resources=self._gpu_resource(),
                pure=False,
                priority=100,
            )  # before the chunks queued there
            done, gone = threading.Event(), False
            fut.add_done_callback(lambda _, done=done: done.set())
            while where is not None and not done.wait(BASELINE_CHECK_S):
                gone = not set(where) & set(self._scheduler_workers())  # (a restarted one has a new address)
                if gone:
                    fut.cancel()
                    break
            if not gone:
                return fut

    def _baseline_workers(self) -> list[str] | None:
        """Addresses of the measuring workers of the sweep's GPU model, or None where any measuring worker will do
        (one model, and the resource GPU keeps the task off compile workers)."""
        measuring = self._gpu_workers()
        names = self._addresses()
        first = [a for a in measuring if a in names and names[a].name == self._primary.name]  # type: ignore[union-attr]
        if first and len(first) < len(measuring):
            return first
        if self._gpu_resource() is None and len(measuring) < len(self._scheduler_workers()):
            return list(measuring)  # compile workers without any worker declaring GPU: name the measuring ones
        return None

    def run(self, jobs: Sequence[Job]) -> Iterator[Measurement]:
        """Submit every chunk now (the workers start at once); yield each chunk's measurements as it completes."""
        if not jobs:
            return iter(())
        from autotune.sweep.backends.dask_worker import run_chunk

        self._batch_points.clear()
        for job in jobs:
            if job.space.kind.baseline_name is not None:
                key = (job.space.kind.name, scalars_key(job.scalars), job.reps)
                self._batch_points.setdefault(key, []).extend(p for p in job.points)
        self._batch_points = {k: list(dict.fromkeys(v)) for k, v in self._batch_points.items()}
        size = self.chunk_jobs or max(1, math.ceil(len(jobs) / (self.chunks_per_worker * max(1, self.workers()))))
        chunks = [list(jobs[i : i + size]) for i in range(0, len(jobs), size)]
        left = self._left()
        if not self._ahead():  # (where workers declare GPU, chunks go only to them: never to a compile worker)
            gpu = self._gpu_resource()
            futures = {
                self.client.submit(run_chunk, chunk, left, self._seeds(chunk), resources=gpu, pure=False): chunk
                for chunk in chunks
            }
            return self._collect(futures)
        from autotune.sweep.backends.dask_worker import precompile

        archs = sorted({d.cc for d in self.devices()})
        cache = self.compile_cache or str(_default_cache())
        futures = {}
        for chunk in chunks:  # a chunk becomes ready for a GPU once a compile worker has put its kernels in the cache
            ahead = self.client.submit(precompile, chunk, archs, cache, resources={"compile": 1}, pure=False)
            futures[
                self.client.submit(run_chunk, chunk, left, self._seeds(chunk), ahead, resources={"GPU": 1}, pure=False)
            ] = chunk
        return self._collect(futures)

    def _gpu_resource(self) -> dict[str, float] | None:
        """{"GPU": 1} where workers declare GPUs (a task then never lands on a compile worker), else None."""
        declared = any("GPU" in (w.get("resources") or {}) for w in self._scheduler_workers().values())
        return {"GPU": 1} if declared else None

    def _ahead(self) -> bool:
        """Whether chunks compile ahead on compile workers (see `compile_ahead`)."""
        from autotune.sweep.backends.dask_worker import is_compile_worker

        resources = [w.get("resources") or {} for w in self._scheduler_workers().values()]
        have = any(is_compile_worker(r) for r in resources)
        if self.compile_ahead is False or (self.compile_ahead is None and not have):
            return False
        if not have:
            raise UserError(
                "compile ahead asks for compile workers, and the cluster has none",
                hint="start CPU workers with `dask worker ADDRESS --resources compile=1`",
            )
        if not any("GPU" in r for r in resources):
            raise UserError(
                "the cluster has compile workers, and no worker declares the resource GPU",
                hint="start each GPU worker with `--resources GPU=1`, so chunks never run on a CPU worker",
            )
        return True

    def _tell_best(self, model: str, point: TestPoint, scalars: Scalars, ms: float) -> None:
        key = (model, point, scalars_key(scalars))
        self._best[key] = min(ms, self._best.get(key, ms))

    def _seeds(self, chunk: Sequence[Job]) -> list[tuple[str, TestPoint, Scalars, float]]:
        """The best medians known so far (any GPU model) at the chunk's points, for the workers' early stop."""
        want = {(p, scalars_key(job.scalars)): dict(job.scalars) for job in chunk for p in job.points}
        return [(model, p, want[(p, k)], ms) for (model, p, k), ms in self._best.items() if (p, k) in want]

    # ---------------------------------------------------------------------------------- internals
    def _collect(self, pending: dict[Any, list[Job]]) -> Iterator[Measurement]:
        finished: queue.Queue = queue.Queue()
        for fut in pending:
            fut.add_done_callback(finished.put)
        seen: set[tuple[str, TestPoint]] = set()
        try:
            while pending:
                left = self._left()
                try:  # past the deadline only what has already come back is yielded
                    fut = finished.get(block=left != 0.0, timeout=left)
                except queue.Empty:
                    return  # the budget ran out: the rest stays unmeasured (the resumed sweep measures it)
                chunk = pending.pop(fut, None)
                if chunk is not None:
                    measured, rest = self._results(fut, chunk)
                    if rest:  # left by a worker that closed mid-chunk: another worker measures them
                        from autotune.sweep.backends.dask_worker import run_chunk

                        again = self.client.submit(
                            run_chunk, rest, self._left(), self._seeds(rest), resources=self._gpu_resource(), pure=False
                        )
                        pending[again] = rest
                        again.add_done_callback(finished.put)
                    for m in measured:
                        key = (m.instance_id, m.point)
                        if key not in seen:
                            seen.add(key)
                            yield m
        finally:
            if pending:  # ended early (budget, a space stopped, Ctrl-C): queued chunks are dropped
                self.client.cancel(list(pending))

    def _results(self, fut: Any, chunk: list[Job]) -> tuple[list[Measurement], list[Job]]:
        """(the chunk's measurements, the jobs of the pairs left to measure). The measurements are exactly its pairs
        (a missing pair `crashed`), or all `crashed` when the chunk killed every worker that ran it; or, from a
        worker that began to close mid-chunk, those it measured, the rest left (never `crashed`: they were not at
        fault). Any other failure stops the sweep (RuntimeError) recording nothing."""
        distributed = require_distributed()
        want = [(job.instance.id, p) for job in chunk for p in job.points]
        try:
            res = fut.result()
        except UserError:
            raise  # the problem's own code failed (GpuBackend): the sweep stops, nothing recorded for the pair
        except distributed.KilledWorker as exc:
            return [
                Measurement(
                    iid,
                    p,
                    Status.CRASHED,
                    error=f"its Dask worker died each time it ran (distributed.scheduler.allowed-failures); {why(exc)}",
                )
                for iid, p in want
            ], []
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - the executor raised, the scheduler went away, the chunk was
            # cancelled: not the kernels' doing, so nothing is recorded (the resumed sweep measures them); the sweep
            # stops as a one-GPU sweep does when its executor raises
            raise RuntimeError(
                f"a chunk of {len(want)} pairs failed on the Dask cluster ({why(exc)}); nothing was "
                "recorded for it: run the same command again to resume"
            ) from exc
        self._learn(res.worker, res.device)
        if res.precompiled is not None:
            self.compiled.append(res.precompiled)
        rate = self._rates.setdefault(res.worker, GpuRate(res.worker, res.device.name))
        rate.pairs, rate.seconds, rate.chunks = (
            rate.pairs + len(res.measurements),
            rate.seconds + res.seconds,
            rate.chunks + 1,
        )
        wanted = set(want)
        got = {(m.instance_id, m.point): m for m in res.measurements if (m.instance_id, m.point) in wanted}
        scalars = {job.instance.id: job.scalars for job in chunk}
        for m in got.values():
            if m.status == Status.OK and m.median_ms is not None:
                self._tell_best(res.device.name, m.point, scalars[m.instance_id], m.median_ms)
        if res.closing:
            left = [
                dataclasses.replace(j, points=tuple(p for p in j.points if (j.instance.id, p) not in got))
                for j in chunk
            ]
            return list(got.values()), [j for j in left if j.points]
        if len(got) < len(want) and self._left() != 0.0:  # past the deadline the executor may stop early
            for iid, p in want:
                if (iid, p) not in got:
                    got[(iid, p)] = Measurement(
                        iid,
                        p,
                        Status.CRASHED,
                        error="the worker's executor returned no measurement for it",
                        device=res.device.uuid,
                    )
        return list(got.values()), []

    def _learn(self, worker: str, info: DeviceInfo) -> None:
        """A worker that joined after the start (a replacement, a new node): its GPU is recorded before its
        measurements (`on_device`, set by the runner)."""
        if self._infos.get(worker) == info:
            return
        known = {i.uuid for i in self._infos.values()}
        self._infos[worker] = info
        if info.uuid not in known and self.on_device is not None:
            self.on_device(info)

    def _discover(self) -> None:
        """Ask every worker for its GPU (in its thread pool: a GPU start-up takes seconds)."""
        from autotune.sweep.backends.dask_worker import worker_device

        self.workers()
        addresses = list(self._gpu_workers())
        futs = [
            self.client.submit(worker_device, workers=[a], allow_other_workers=False, pure=False) for a in addresses
        ]
        try:
            for name, info in self.client.gather(futs):
                self._infos[name] = info
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise RuntimeError(f"a Dask worker could not describe its GPU: {why(exc)}") from None

    def _scheduler_workers(self) -> dict[str, dict]:
        info = self.client.scheduler_info(n_workers=-1) if _new_info(self.client) else self.client.scheduler_info()
        return info["workers"]

    def _worker_names(self) -> dict[str, str]:
        return {addr: str(w.get("name", addr)) for addr, w in self._scheduler_workers().items()}

    def _gpu_workers(self) -> dict[str, str]:
        """Address -> name of the workers that measure (all but compile workers)."""
        from autotune.sweep.backends.dask_worker import is_compile_worker

        return {
            a: str(w.get("name", a))
            for a, w in self._scheduler_workers().items()
            if not is_compile_worker(w.get("resources") or {})
        }

    def _addresses(self) -> dict[str, DeviceInfo]:
        """Worker address -> its GPU, for the workers whose GPU is known."""
        return {a: self._infos[n] for a, n in self._worker_names().items() if n in self._infos}

    def _left(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())


def _default_cache() -> Any:
    from autotune.sweep.backends.local import DEFAULT_CACHE_DIR

    return DEFAULT_CACHE_DIR


def _new_info(client: Any) -> bool:
    import inspect

    return "n_workers" in inspect.signature(client.scheduler_info).parameters


def _abandon(client: Any) -> None:
    """Close a client now, while its event loop runs, bounded, and mark it closed whatever happened: one whose close
    (or constructor) a stop (Ctrl-C, SIGTERM) cut short was otherwise closed again by its `__del__` at the
    interpreter's exit, on a loop already stopped, and the process hung after `interrupted` (seen in CI, 60 s)."""
    try:
        client.close(timeout=CLOSE_TIMEOUT_S)
    except BaseException:  # noqa: BLE001 - closing: a scheduler gone or a second stop is fine
        pass
    finally:
        client.status = "closed"  # (its `__del__` closes nothing)


def _plugin_name() -> str:
    from autotune.sweep.backends.dask_worker import PLUGIN_NAME

    return PLUGIN_NAME


__all__ = [  # reaching the GPUs lives in dask_cluster; its names are imported from here too
    "CONNECT_TIMEOUT_S",
    "INSTALL_HINT",
    "MAX_LOCAL_WORKERS",
    "SCHEDULER_HINT",
    "SCHEDULER_TIMEOUT_ENV",
    "SCHEDULER_TIMEOUT_S",
    "SCHEMES",
    "DaskBackend",
    "GpuRate",
    "gpu_list",
    "identify_scheduler",
    "local_cluster",
    "require_distributed",
    "scheduler_address",
    "scheduler_timeout_s",
    "visible_gpus",
]
