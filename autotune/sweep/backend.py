"""What the runner hands a backend (`Job`) and what a backend is (`Backend`): local GPU workers, a recorded
database (replay), or another machine."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Protocol, Sequence

from autotune.problems.base import ProblemKind
from autotune.space.instance import Instance
from autotune.space.spec import Space
from autotune.vocab import DeviceInfo, Measurement, TestPoint


@dataclass(frozen=True)
class Job:
    """One instance to measure on several test points (all compiled variants it needs)."""

    space: Space
    instance: Instance
    points: tuple[TestPoint, ...]
    alpha: float
    beta: float
    reps: int


class Backend(Protocol):
    """Where measurements come from: a real GPU (worker processes) or a recorded database (replay).

    `run` yields exactly one Measurement per (job.instance, point) pair, in any order, and may compile
    later jobs while it times earlier ones; the runner calls `cublas` for the jobs' points after `run`
    and before iterating, so a backend can compile meanwhile. Optional: `start()`, called first thing,
    and `seed_best(point, alpha, beta, ms)` (best times already known, for early stopping).
    """

    def device_info(self) -> DeviceInfo: ...

    def run(self, jobs: Sequence[Job]) -> Iterator[Measurement]: ...

    def baseline(self, kind: ProblemKind, point: TestPoint, alpha: float, beta: float, reps: int) -> Measurement: ...

    def close(self) -> None: ...
