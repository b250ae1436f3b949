"""A Backend that answers from a recorded results database instead of a GPU.

The runner, resume and search strategies then run end to end without a GPU, on real recorded data:
each (instance, test point) gets the measurement recorded for it on the chosen device, failures
included; a pair the database never saw comes back as Status.SKIPPED with error "not recorded".
"""

from __future__ import annotations

import time
from typing import Callable, Iterator, Sequence

from sqlalchemy import select

from autotune.problems.base import ProblemKind, Scalars
from autotune.sweep.backends.base import Job
from autotune.vocab import DeviceInfo, Measurement, Status, TestPoint
from autotune.store.schema import BaselineRow, MeasurementRow, Point, sizes_json
from autotune.store.store import Store

NOT_RECORDED = "not recorded"


class ReplayBackend:
    """Replays the measurements of one device of the database at `url` (opened read-only).

    `device` is a device name or UUID; None picks the only device (StoreError when there are several)."""

    def __init__(self, url: str, device: str | None = None, delay_s: float | None = None) -> None:
        import os

        self.url = url
        # like the GPU backend: the runner sets this to mark each pair in flight before it is measured
        self.before_measure: Callable[[str, TestPoint], None] | None = None
        # seconds per measurement (AUTOTUNE_REPLAY_DELAY): a GPU's pace, for tests of interrupts and demos
        self.delay_s = float(os.environ.get("AUTOTUNE_REPLAY_DELAY", 0) or 0) if delay_s is None else delay_s
        self._store = Store.open(url, readonly=True)
        self._device_id = self._store.device_id(device)
        self._info = self._store.device_info(self._device_id)

    def device_info(self) -> DeviceInfo:
        return self._info

    def run(self, jobs: Sequence[Job]) -> Iterator[Measurement]:
        """Exactly one Measurement per (job.instance, point), in job order."""
        recorded = self._recorded([job.instance.id for job in jobs])
        for job in jobs:
            for point in job.points:
                if self.before_measure is not None:
                    self.before_measure(job.instance.id, point)
                if self.delay_s > 0:
                    time.sleep(self.delay_s)
                yield recorded.get((job.instance.id, point)) or Measurement(
                    job.instance.id, point, Status.SKIPPED, error=NOT_RECORDED
                )

    def baseline(self, kind: ProblemKind, point: TestPoint, scalars: Scalars, reps: int) -> Measurement:
        """The recorded baseline time of `point` on the device (scalars and reps are those of the recording)."""
        name = kind.baseline_name or "baseline"
        with self._store.session() as s:
            row = s.scalars(
                select(BaselineRow)
                .join(Point, Point.id == BaselineRow.point_id)
                .where(
                    BaselineRow.device_id == self._device_id,
                    Point.kind == point.kind,
                    Point.precision == point.precision,
                    Point.shape == point.shape,
                    Point.sizes == sizes_json(point),
                )
            ).first()
            if row is None:
                return Measurement(name, point, Status.SKIPPED, error=NOT_RECORDED)
            return Measurement(
                name,
                point,
                Status(row.status),
                median_ms=row.median_ms,
                p20_ms=row.p20_ms,
                p80_ms=row.p80_ms,
                min_ms=row.min_ms,
                max_ms=row.max_ms,
                reps=row.reps,
                times_ms=list(row.times_ms or []),
                error=row.error,
                l2_protection=row.l2_protection,
            )

    def close(self) -> None:
        self._store.close()

    def _recorded(self, instance_ids: list[str]) -> dict[tuple[str, TestPoint], Measurement]:
        out: dict[tuple[str, TestPoint], Measurement] = {}
        ids = list(dict.fromkeys(instance_ids))
        with self._store.session() as s:
            for start in range(0, len(ids), 500):
                rows = s.execute(
                    select(MeasurementRow, Point)
                    .join(Point, Point.id == MeasurementRow.point_id)
                    .where(
                        MeasurementRow.device_id == self._device_id,
                        MeasurementRow.instance_id.in_(ids[start : start + 500]),
                    )
                ).all()
                for m, p in rows:
                    point = p.point()
                    out[(m.instance_id, point)] = Measurement(
                        m.instance_id,
                        point,
                        Status(m.status),
                        median_ms=m.median_ms,
                        p20_ms=m.p20_ms,
                        p80_ms=m.p80_ms,
                        min_ms=m.min_ms,
                        max_ms=m.max_ms,
                        reps=m.reps,
                        times_ms=list(m.times_ms or []),
                        error=m.error,
                        log=m.log,
                        max_rel_err=m.max_rel_err,
                        registers=m.registers,
                        shared_bytes=m.shared_bytes,
                        local_bytes=m.local_bytes,
                        compile_s=m.compile_s,
                        l2_protection=m.l2_protection,
                    )
        return out
