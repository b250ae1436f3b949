"""The executor interface: what the runner hands a backend (`Job`) and what a backend is (`Backend`).

A backend measures instances at test points somewhere: local GPU worker processes (`local.GpuBackend`), a
recorded database (`replay.ReplayBackend`), a cluster (a Dask executor comes next). The runner never sees
how: it hands a batch of jobs to `run`, records each Measurement as it arrives, and asks for the kind's
baseline at the batch's points in between (`autotune.sweep.runner`). Any backend, built-in or third-party,
checks itself against `autotune.testing.backends`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Protocol, Sequence

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


class Backend(Protocol):
    """Where measurements come from. Methods the runner calls, in this order:

    `start()` (optional): called first thing, before the spaces are generated, so a backend can start its
        processes (compile pool, GPU worker) meanwhile. Idempotent; returns nothing.
    `device_info() -> DeviceInfo`: the device the measurements come from (the same object every call).
        Raises RuntimeError when the device cannot be reached.
    `seed_best(point, scalars, best_ms)` (optional): the best verified median already known at a point
        with these scalars (a resumed sweep), for the early-stop rule. Never raises.
    `run(jobs) -> Iterator[Measurement]`: exactly one Measurement per (job.instance, point) pair of `jobs`,
        in any order, `instance_id` = the job's instance id and `point` one of the job's points. A failure is
        a Measurement with a failure status (`Status.COMPILE_ERROR`, `LAUNCH_ERROR`, `WRONG`, `TIMEOUT`,
        `CRASHED`; `SKIPPED` for an early stop), never an exception; a pair a replay's recording lacks is
        `SKIPPED` with the error `NOT_RECORDED` and no time (`not_recorded`: no measurement, never stored). Work
        may start when `run` is called (before the first `next`), so a backend can compile while the runner
        asks for baselines. An empty `jobs` yields nothing.
    `baseline(kind, point, scalars, reps) -> Measurement`: the kind's baseline (`kind.baseline_name`, cuBLAS
        for GEMM) at `point`, `instance_id` = the baseline's name; a failure status as above when it cannot be
        measured (`SKIPPED` when the kind has none or a replay has none recorded). Called only for kinds
        with a `baseline_name`, between `run(jobs)` and iterating it.
    `close()`: release processes, files, connections. Idempotent: a second call does nothing.

    Optional attribute `before_measure: Callable[[instance_id, point], None] | None`: when a backend has it,
    the runner sets it and the backend calls it just before each pair is measured (the runner marks the pair
    in flight, so a measurement that kills the sweep is never re-run blindly).
    Optional attribute `after_abandon: Callable[[instance_id, point], None] | None`: a backend that sends a pair
    to its device before the runner has taken the previous result (a pipeline) calls it for a pair it named to
    `before_measure` and will not yield, because the runner stopped taking results (a budget, a stopped space,
    an error); the runner removes the pair's in-flight note, and a resumed sweep measures it.
    Optional attribute `deadline: float | None` (a `time.monotonic()` value): when a backend has it, the runner
    sets it from the config's `budget:`; past it, `run` may end without yielding the remaining pairs (the runner
    records nothing for them, so a resumed sweep measures them) and should stop work in progress (compiles).
    Optional method `recorded_pairs() -> set[(instance_id, point)] | None`: a backend that can measure only some
    pairs (a replay: those its recording holds) names them; the runner then plans only those (strategies never
    spend their budget on pairs that cannot be measured) and says how many it left out. None: every pair.
    """

    def device_info(self) -> DeviceInfo: ...

    def run(self, jobs: Sequence[Job]) -> Iterator[Measurement]: ...

    def baseline(self, kind: ProblemKind, point: TestPoint, scalars: Scalars, reps: int) -> Measurement: ...

    def close(self) -> None: ...


BeforeMeasure = Callable[[str, TestPoint], None]

NOT_RECORDED = "not recorded"  # the error of a replay's answer for a pair its recording lacks


def not_recorded(m: Measurement) -> bool:
    """Whether `m` is a replay's answer for a pair its recording lacks: no measurement at all (the runner stores
    none and counts it as `not_recorded`), unlike a recorded early stop (`skipped`, with the times it took)."""
    return m.status == Status.SKIPPED and m.median_ms is None and m.error == NOT_RECORDED
