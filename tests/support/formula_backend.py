"""A deterministic Backend for testing the sweep loop where there is no GPU.

Times come from a formula of the instance's parameters; `die_at` kills the whole process with
SIGKILL right after the runner marked the N-th pair in flight (a real `kill -9`), `interrupt_at`
raises KeyboardInterrupt (Ctrl-C) at the N-th pair.
"""

from __future__ import annotations

import os
import signal
import zlib
from typing import Iterator, Sequence

from autotune.problems.base import ProblemKind, Scalars
from autotune.vocab import DeviceInfo, Measurement, Status, TestPoint
from autotune.sweep.backends.base import Backend, Job

INFO = DeviceInfo(
    name="formula-gpu",
    uuid="GPU-formula",
    sm_count=1,
    cc=90,
    sm_clock_mhz=None,
    mem_clock_mhz=None,
    l2_bytes=1 << 20,
    copy_bandwidth=1e12,
    driver="0",
    cuda_runtime="0",
    nvrtc="0",
    cupy="0",
)


class FormulaBackend(Backend):
    def __init__(self, die_at: int | None = None, interrupt_at: int | None = None) -> None:
        self.die_at, self.interrupt_at = die_at, interrupt_at
        self.calls: list[tuple[str, TestPoint]] = []

    def device_info(self) -> DeviceInfo:
        return INFO

    def run(self, jobs: Sequence[Job]) -> Iterator[Measurement]:
        for job in jobs:
            for p in job.points:
                if self.before_measure:
                    self.before_measure(job.instance.id, p)
                self.calls.append((job.instance.id, p))
                if self.die_at is not None and len(self.calls) == self.die_at:
                    os.kill(os.getpid(), signal.SIGKILL)
                if self.interrupt_at is not None and len(self.calls) == self.interrupt_at:
                    raise KeyboardInterrupt
                h = zlib.crc32(job.instance.id.encode()) % 1000
                if h % 17 == 0:
                    yield Measurement(job.instance.id, p, Status.WRONG, error="formula says wrong", max_rel_err=1.0)
                    continue
                ms = 0.01 * (1 + h / 100) * p.m / 8
                yield Measurement(
                    job.instance.id,
                    p,
                    Status.OK,
                    median_ms=ms,
                    p20_ms=ms * 0.99,
                    p80_ms=ms * 1.01,
                    min_ms=ms * 0.98,
                    max_ms=ms * 1.02,
                    reps=3,
                    times_ms=[ms] * 3,
                    max_rel_err=0.0,
                )

    def baseline(self, kind: ProblemKind, point: TestPoint, scalars: Scalars, reps: int) -> Measurement:
        ms = 0.02 * point.m / 8
        return Measurement("cublas", point, Status.OK, median_ms=ms, reps=reps, times_ms=[ms] * reps)

    def close(self) -> None:
        pass
