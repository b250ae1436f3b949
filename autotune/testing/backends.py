"""A conformance suite for executors (`autotune.sweep.backends.base.Backend`).

Subclass it in a test module, with a name pytest collects, and say how to build the backend and what to
measure with it:
```
from autotune.testing.backends import BackendConformance

class TestMyBackend(BackendConformance):
    def make_backend(self): return MyBackend(...)
    def jobs(self): return [Job(space, instance, points, scalars, reps), ...]   # a few small jobs
    def baseline_case(self): return (kind, point, scalars)                         # one point of a kind
```
Each `test_*` method checks one clause of the contract in `Backend`'s docstring. The built-in executors run it
on the CPU (the replay backend over a committed database: tests/test_backend_conformance.py) and on a GPU (the
local backend: tests/gpu/test_backend_conformance_gpu.py).
"""

from __future__ import annotations

from collections import Counter
from typing import Iterator, Sequence

import pytest

from autotune.problems.base import ProblemKind, Scalars
from autotune.sweep.backends.base import Backend, Job
from autotune.vocab import DeviceInfo, Measurement, Status, TestPoint

FAILED = {Status.COMPILE_ERROR, Status.LAUNCH_ERROR, Status.WRONG, Status.TIMEOUT, Status.CRASHED}


def pairs_of(jobs: Sequence[Job]) -> Counter:
    """Each (instance id, point) pair the jobs ask for, with how many times (once, for well-formed jobs)."""
    return Counter((job.instance.id, p) for job in jobs for p in job.points)


def check_measurement(m: Measurement) -> None:
    """What every Measurement a backend returns must satisfy, whatever its status."""
    assert isinstance(m, Measurement), f"{m!r} is not a Measurement"
    assert isinstance(m.status, Status) or m.status in {s.value for s in Status}, f"unknown status {m.status!r}"
    status = Status(m.status)
    if status == Status.OK:
        assert m.median_ms is not None and m.median_ms > 0, f"an ok measurement without a time: {m}"
    if status in FAILED:
        assert m.error, f"a {status.value} measurement without an error message: {m.instance_id} at {m.point.key}"


class BackendConformance:
    """The checks; see the module docstring. Implement `make_backend`, `jobs` and `baseline_case`."""

    def make_backend(self) -> Backend:
        raise NotImplementedError("return a fresh backend")

    def jobs(self) -> list[Job]:
        raise NotImplementedError("return a few jobs the backend can measure")

    def baseline_case(self) -> tuple[ProblemKind, TestPoint, Scalars]:
        raise NotImplementedError("return (kind, point, scalars) of one baseline to measure")

    @pytest.fixture
    def backend(self) -> Iterator[Backend]:
        b = self.make_backend()
        assert isinstance(b, Backend), "a backend subclasses autotune.sweep.backends.base.Backend"
        b.start()
        try:
            yield b
        finally:
            b.close()

    # ---------------------------------------------------------------- the contract
    def test_device_info(self, backend: Backend) -> None:
        info = backend.device_info()
        assert isinstance(info, DeviceInfo) and info.name and info.uuid
        assert backend.device_info() == info

    def test_one_measurement_per_pair(self, backend: Backend) -> None:
        jobs = self.jobs()
        assert jobs, "jobs() must give at least one job"
        got = list(backend.run(jobs))
        seen = Counter((m.instance_id, m.point) for m in got)
        want = pairs_of(jobs)
        assert seen == want, (
            f"missing {sorted(k[0] for k in want - seen)[:5]}, "
            f"unexpected or repeated {sorted(k[0] for k in seen - want)[:5]}"
        )

    def test_statuses_are_valid(self, backend: Backend) -> None:
        for m in backend.run(self.jobs()):
            check_measurement(m)

    def test_nothing_to_run_yields_nothing(self, backend: Backend) -> None:
        assert list(backend.run([])) == []

    def test_before_measure_marks_each_pair(self, backend: Backend) -> None:
        """Every pair that reaches the device is named to `before_measure` first (none where the backend states
        `marks_pairs = False`), and only pairs asked for."""
        marked: list[tuple[str, TestPoint]] = []
        backend.before_measure = lambda iid, p: marked.append((iid, p))
        jobs = self.jobs()
        got = list(backend.run(jobs))
        assert Counter(marked) <= pairs_of(jobs), "before_measure named a pair that was not asked for"
        if not backend.marks_pairs:
            assert not marked, "a backend that states marks_pairs = False called before_measure"
            return
        failed_early = sum(1 for m in got if Status(m.status) == Status.COMPILE_ERROR)  # never reached the device
        assert len(marked) >= len(got) - failed_early, "a pair was measured without before_measure"

    def test_a_run_closed_early_accounts_for_each_marked_pair_and_the_next_run_is_clean(self, backend: Backend) -> None:
        """The runner stops taking results (a budget, a stopped space): a pair named to `before_measure` was either
        taken or handed to `after_abandon` (a pipelined backend's queued pair), never left in flight; and the next
        run yields every pair once, each answer its own (a late answer of the abandoned pair is not taken for
        another's)."""
        jobs = self.jobs()
        if sum(pairs_of(jobs).values()) < 2:
            pytest.skip("jobs() gives one pair: nothing can be left behind it")
        marked: list[tuple[str, TestPoint]] = []
        abandoned: list[tuple[str, TestPoint]] = []
        backend.before_measure = lambda iid, p: marked.append((iid, p))
        backend.after_abandon = lambda iid, p: abandoned.append((iid, p))
        results = backend.run(jobs)
        first = next(iter(results))
        close = getattr(results, "close", None)
        if close is not None:
            close()
        taken = (first.instance_id, first.point)
        assert taken not in abandoned, "a pair was both taken and abandoned"
        assert Counter(marked) <= Counter([taken, *abandoned]), (
            "a pair marked in flight was neither taken nor abandoned"
        )
        got = list(backend.run(jobs))
        seen = Counter((m.instance_id, m.point) for m in got)
        assert seen == pairs_of(jobs), f"after a run closed early: {sorted(seen.items())[:4]}"

    def test_baseline_measurement_for_a_point(self, backend: Backend) -> None:
        kind, point, scalars = self.baseline_case()
        m = backend.baseline(kind, point, scalars, 5)
        check_measurement(m)
        assert m.point == point
        assert m.instance_id == (kind.baseline_name or "baseline")

    def test_seed_best_is_quiet(self, backend: Backend) -> None:
        kind, point, scalars = self.baseline_case()
        backend.seed_best(point, scalars, 1e9)  # a best no measurement is slower than: changes nothing measured later

    def test_the_optional_members_answer_as_stated(self, backend: Backend) -> None:
        """The members with defaults in `Backend` answer with the types its docstring states (a backend that
        overrides one keeps its contract): named pairs are (instance id, point), devices are DeviceInfo, a
        parallelism is a positive count."""
        held = backend.recorded_pairs()
        assert held is None or all(isinstance(i, str) and isinstance(p, TestPoint) for i, p in held)
        assert all(isinstance(d, DeviceInfo) for d in backend.devices())
        width = backend.parallelism()
        assert width is None or (isinstance(width, int) and width >= 1)
        assert isinstance(backend.rates(), list)
        assert all(isinstance(k, str) and isinstance(v, float | int) for k, v in backend.timeline.items())

    def test_close_is_idempotent(self) -> None:
        b = self.make_backend()
        b.device_info()
        b.close()
        b.close()
