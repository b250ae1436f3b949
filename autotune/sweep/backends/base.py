"""The executor interface: what the runner hands a backend (`Job`) and what a backend is (`Backend`).

A backend measures instances at test points somewhere: local GPU worker processes (`local.GpuBackend`), a
recorded database (`replay.ReplayBackend`), a cluster (`dask_backend.DaskBackend`). The runner never sees
how: it hands a batch of jobs to `run`, records each Measurement as it arrives, and asks for the kind's
baseline at the batch's points in between (`autotune.sweep.runner`). Any backend, built-in or third-party,
checks itself against `autotune.testing.backends`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, ClassVar, Iterator, Mapping, Sequence

from autotune.devices import DeviceLimits
from autotune.problems.base import ProblemKind, Scalars
from autotune.space.instance import Instance
from autotune.space.spec import Space
from autotune.vocab import DeviceInfo, Measurement, Status, TestPoint


@dataclass(frozen=True)
class Job:
    """One instance to measure at several test points (all compiled variants it needs).

    `scalars` are the run's scalars of the space's kind (`ProblemKind.scalars`: its defaults overridden by
    the config; GEMM: alpha, beta; {} for a kind without scalars); `reps` the timed repetitions."""

    space: Space
    instance: Instance
    points: tuple[TestPoint, ...]
    scalars: Mapping[str, float] = field(default_factory=dict)
    reps: int = 20


BeforeMeasure = Callable[[str, TestPoint], None]


class Backend(ABC):
    """Where measurements come from: every backend subclasses this class. The runner reads exactly the members
    below and calls each without probing: the four abstract ones every backend implements, the others have
    do-nothing defaults that a backend overrides where it has the feature. In the order the runner calls them:

    `deadline: float | None` (a `time.monotonic()` value; default None): the runner sets it from the config's
        `budget:`; past it, `run` may end without yielding the remaining pairs (the runner records nothing for
        them, so a resumed sweep measures them) and should stop work in progress (compiles). A backend without
        work to stop ignores it.
    `start()` (default: nothing): called first thing, before the spaces are generated, so a backend can start its
        processes (compile pool, GPU worker) meanwhile. Idempotent; returns nothing.
    `recorded_pairs() -> set[(instance_id, point)] | None` (default None: every pair): a backend that can measure
        only some pairs (a replay: those its recording holds) names them; the runner then plans only those
        (strategies never spend their budget on pairs that cannot be measured) and says how many it left out. Only
        a backend that names its pairs answers a space without a kernel (recorded measurements only).
    `device_info() -> DeviceInfo`: the device the measurements come from (the same object every call).
        Raises RuntimeError when the device cannot be reached.
    `devices() -> list[DeviceInfo]` (default []: only `device_info()`): an executor of several GPUs (Dask) names
        every GPU its measurements come from (`Measurement.device`: a uuid); the runner records them all.
    `on_device: Callable[[DeviceInfo], int] | None` (default None): the runner sets it; a backend whose GPUs may
        join mid-sweep calls it with a new GPU before yielding that GPU's first measurement.
    `seed_best(point, scalars, best_ms)` (default: nothing): the best verified median already known at a point
        with these scalars (a resumed sweep), for the early-stop rule. Never raises.
    `before_measure: Callable[[instance_id, point], None] | None` (default None): the runner sets it and the
        backend calls it just before each pair is measured (the runner marks the pair in flight, so a
        measurement that kills the sweep is never re-run blindly). A backend whose measurements run where a
        crash cannot take the sweep down (Dask's workers: a dead worker's chunk is recorded as crashed by the
        backend itself) states `marks_pairs = False` and never calls it.
    `after_abandon: Callable[[instance_id, point], None] | None` (default None): a backend that sends a pair to
        its device before the runner has taken the previous result (a pipeline) calls it for a pair it named to
        `before_measure` and will not yield, because the runner stopped taking results (a budget, a stopped space,
        an error); the runner removes the pair's in-flight note, and a resumed sweep measures it.
    `parallelism() -> int | None` (default None: one device): devices that measure at once; the runner asks a
        model-based strategy for twice as many instances at a time.
    `run(jobs) -> Iterator[Measurement]`: exactly one Measurement per (job.instance, point) pair of `jobs`,
        in any order, `instance_id` = the job's instance id and `point` one of the job's points. A failure is
        a Measurement with a failure status (`Status.COMPILE_ERROR`, `LAUNCH_ERROR`, `WRONG`, `TIMEOUT`,
        `CRASHED`; `SKIPPED` for an early stop), never an exception; a pair a replay's recording lacks is
        `SKIPPED` with the error `NOT_RECORDED` and no time (`not_recorded`: no measurement, never stored). Work
        may start when `run` is called (before the first `next`), so a backend can compile while the runner
        asks for baselines. An empty `jobs` yields nothing. The runner closes the iterator (`close()`, where it
        has one: a generator's) when it stops taking results.
    `baseline(kind, point, scalars, reps) -> Measurement`: the kind's baseline (`kind.baseline_name`, cuBLAS
        for GEMM) at `point`, `instance_id` = the baseline's name; a failure status as above when it cannot be
        measured (`SKIPPED` when the kind has none or a replay has none recorded). Called only for kinds
        with a `baseline_name`, between `run(jobs)` and iterating it.
    `close()`: release processes, files, connections. Idempotent: a second call does nothing.

    Read by the launchers around the runner (`autotune.workflows.sweeps`, `tune_kernel`), with the same defaults:
    `rates() -> list` (default []): each GPU's pairs and rate on several GPUs (Dask: `GpuRate`), shown on the bar;
    `device_limits() -> DeviceLimits | None` (default None: this process reads them itself) and
    `prepare_ahead(kind, point, convention, scalars)` (default: nothing), a GPU worker's own limits and a point's
    data built while the sweep plans; `timeline: Mapping[str, float]` (default empty): start-up events, seconds
    after `start`.

    A backend is chosen by name through the registry (`autotune.sweep.backends.make_backend`; entry-point group
    `autotune.backends`), and checks itself against `autotune.testing.backends`.
    """

    deadline: float | None = None
    on_device: Callable[[DeviceInfo], int] | None = None
    before_measure: BeforeMeasure | None = None
    after_abandon: BeforeMeasure | None = None
    marks_pairs: ClassVar[bool] = True  # whether `run` calls `before_measure` before each pair it measures
    timeline: Mapping[str, float] = MappingProxyType({})

    def start(self) -> None:
        return None

    def recorded_pairs(self) -> set[tuple[str, TestPoint]] | None:
        return None

    @abstractmethod
    def device_info(self) -> DeviceInfo: ...

    def devices(self) -> list[DeviceInfo]:
        return []

    def seed_best(self, point: TestPoint, scalars: Scalars, best_ms: float) -> None:
        return None

    def parallelism(self) -> int | None:
        return None

    @abstractmethod
    def run(self, jobs: Sequence[Job]) -> Iterator[Measurement]: ...

    @abstractmethod
    def baseline(self, kind: ProblemKind, point: TestPoint, scalars: Scalars, reps: int) -> Measurement: ...

    @abstractmethod
    def close(self) -> None: ...

    def rates(self) -> list[Any]:
        return []

    def device_limits(self) -> DeviceLimits | None:
        return None

    def prepare_ahead(self, kind: ProblemKind, point: TestPoint, convention: str, scalars: Scalars) -> None:
        return None


NOT_RECORDED = "not recorded"  # the error of a replay's answer for a pair its recording lacks


def not_recorded(m: Measurement) -> bool:
    """Whether `m` is a replay's answer for a pair its recording lacks: no measurement at all (the runner stores
    none and counts it as `not_recorded`), unlike a recorded early stop (`skipped`, with the times it took)."""
    return m.status == Status.SKIPPED and m.median_ms is None and m.error == NOT_RECORDED
