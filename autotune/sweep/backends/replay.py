"""A Backend that answers from a recorded results database instead of a GPU.

The runner, resume and search strategies then run end to end without a GPU, on real recorded data:
each (instance, test point) gets the measurement recorded for it on the chosen device, failures
included; a pair the database never saw comes back as Status.SKIPPED with error "not recorded".

A database may hold several cards of one GPU model (a sweep that went on on another card, `resume: model`): they
replay as one device, the first recorded card's (its DeviceInfo). Where two cards measured the same pair, the
verified measurement of the first recorded card (lowest device id) wins, then any of the first card.
Cards of different models are refused unless `device` names one model (its name) or one card (its uuid).
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


DELAY_ENV = "AUTOTUNE_REPLAY_DELAY"


def replay_delay() -> float:
    """$AUTOTUNE_REPLAY_DELAY: seconds a replay waits per measurement (a GPU's pace, for tests of interrupts and
    demos), from 0 to 60, default 0; read by autotune.untrusted."""
    from autotune.untrusted import env_number

    return float(env_number(DELAY_ENV, 0.0, lo=0.0, hi=60.0, example="0.05") or 0.0)


class ReplayBackend:
    """Replays the measurements of one GPU model of the database at `url` (opened read-only).

    `device` is a device name (every card of that model) or UUID (that card only); None: every recorded card,
    which must all be of one model (StoreError otherwise)."""

    def __init__(self, url: str, device: str | None = None, delay_s: float | None = None) -> None:
        self.url = url
        # like the GPU backend: the runner sets this to mark each pair in flight before it is measured
        self.before_measure: Callable[[str, TestPoint], None] | None = None
        # seconds per measurement (AUTOTUNE_REPLAY_DELAY): a GPU's pace, for tests of interrupts and demos
        self.delay_s = replay_delay() if delay_s is None else delay_s
        self._store = Store.open(url, readonly=True)
        self._device_ids = replayed_devices(self._store, device)
        self._device_id = self._device_ids[0]
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
            rows = s.scalars(
                select(BaselineRow)
                .join(Point, Point.id == BaselineRow.point_id)
                .where(
                    BaselineRow.device_id.in_(self._device_ids),
                    Point.kind == point.kind,
                    Point.precision == point.precision,
                    Point.shape == point.shape,
                    Point.sizes == sizes_json(point),
                )
            ).all()
            row = min(rows, key=_preference, default=None)
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
                        MeasurementRow.device_id.in_(self._device_ids),
                        MeasurementRow.instance_id.in_(ids[start : start + 500]),
                    )
                ).all()
                for m, p in sorted(rows, key=lambda mp: _preference(mp[0]), reverse=True):  # the preferred last
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


def _preference(row: MeasurementRow | BaselineRow) -> tuple[bool, int]:
    """Sort key of one pair's rows on several cards of a model: verified first, then the first recorded card."""
    return (row.status != Status.OK.value, row.device_id)


def replayed_devices(store: Store, device: str | None) -> list[int]:
    """The ids (ascending) of the recorded cards a replay answers from: those whose name or uuid is `device`
    (None: all), which must be of one GPU model (name, SM count, compute capability). Raises StoreError."""
    from autotune.store.engine import StoreError
    from autotune.store.schema import Device

    with store.session() as s:
        rows = sorted(s.scalars(select(Device)).all(), key=lambda d: d.id)
    found = [d for d in rows if device is None or device in (d.uuid, d.name)]
    listed = ", ".join(f"{d.name} ({d.uuid})" for d in rows) or "none"
    if not found:
        raise StoreError(
            f"no device matches {device} in {store.url}", hint=f"name one of the recorded devices: {listed}"
        )
    models = sorted({(d.name, d.sm_count, d.cc) for d in found})
    if len(models) > 1:
        raise StoreError(
            f"{store.url} holds measurements of {len(models)} GPU models ("
            + "; ".join(f"{n}, {sm} SMs, cc {cc}" for n, sm, cc in models)
            + "): a replay answers as one GPU",
            hint=f"name the model (its name) or a card (its uuid) to replay (validate: --replay-device): {listed}",
        )
    return [d.id for d in found]
