"""A Backend that answers from a recorded results database instead of a GPU.

The runner, resume and search strategies then run end to end without a GPU, on real recorded data:
each (instance, test point) gets the measurement recorded for it on the chosen device, failures
included; a pair the database never saw comes back as Status.SKIPPED with error "not recorded" and no time
(`base.not_recorded`: the runner stores none of them), and `recorded_pairs` names the pairs it holds, so the runner
plans only those.

A database may hold several cards of one GPU model (a sweep that went on on another card, `resume: model`): they
replay as one device, the first recorded card's (its DeviceInfo). Where two cards measured the same pair, the
verified measurement of the first recorded card (lowest device id) wins, then any of the first card.
Cards of different models are refused unless `device` names one model (its name) or one card (its uuid).
"""

from __future__ import annotations

import functools
import json
import time
from typing import Callable, Iterator, Sequence

from sqlalchemy import Text, select, type_coerce
from sqlalchemy.orm import defer

from autotune.errors import UserError
from autotune.problems.base import ProblemKind, Scalars
from autotune.sweep.backends.base import NOT_RECORDED, Backend, Job
from autotune.vocab import RECORDED_AS_GIVEN, TIME_STATS, DeviceInfo, Measurement, Status, TestPoint
from autotune.store.schema import BaselineRow, MeasurementRow, Point, sizes_json
from autotune.store.store import Store
from autotune.untrusted import number, numbers

REPLAY_DELAY_ENV = "AUTOTUNE_REPLAY_DELAY"


class ReplayBackend(Backend):
    """Replays the measurements of one GPU model of the database at `url` (opened read-only).

    `device` is a device name (every card of that model) or UUID (that card only); None: every recorded card,
    which must all be of one model (StoreError otherwise)."""

    def __init__(self, url: str, device: str | None = None, delay_s: float | None = None) -> None:
        self.url = url
        # like the GPU backend: the runner sets this to mark each pair in flight before it is measured
        self.before_measure: Callable[[str, TestPoint], None] | None = None
        # seconds per measurement (AUTOTUNE_REPLAY_DELAY): a GPU's pace, for tests of interrupts and demos
        self.delay_s = replay_delay_s() if delay_s is None else delay_s
        self._store = Store.open(url, readonly=True)
        self._device_ids = replayed_devices(self._store, device)
        self._device_id = self._device_ids[0]
        self._info = self._store.device_info(self._device_id)

    def device_info(self) -> DeviceInfo:
        return self._info

    def recorded_pairs(self) -> set[tuple[str, TestPoint]]:
        """Every (instance id, point) the replayed cards hold a measurement of (`Backend.recorded_pairs`)."""
        with self._store.session() as s:
            points = {p.id: p.point() for p in s.scalars(select(Point))}
            rows = s.execute(
                select(MeasurementRow.instance_id, MeasurementRow.point_id)
                .where(MeasurementRow.device_id.in_(self._device_ids))
                .distinct()
            )
            return {(iid, points[pid]) for iid, pid in rows}

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
            found = s.execute(
                select(BaselineRow, type_coerce(BaselineRow.times_ms, Text))
                .options(defer(BaselineRow.times_ms))
                .join(Point, Point.id == BaselineRow.point_id)
                .where(
                    BaselineRow.device_id.in_(self._device_ids),
                    Point.kind == point.kind,
                    Point.precision == point.precision,
                    Point.shape == point.shape,
                    Point.sizes == sizes_json(point),
                )
            ).all()
            pick = min(found, key=lambda rt: _preference(rt[0]), default=None)
            if pick is None:
                return Measurement(name, point, Status.SKIPPED, error=NOT_RECORDED)
            row, times = pick
            return Measurement(
                name,
                point,
                Status(row.status),
                **self._timing(f"baselines row {row.id}", row, times),
                error=row.error,
                l2_protection=row.l2_protection,
            )

    def close(self) -> None:
        self._store.close()

    @functools.cached_property
    def _label(self) -> str:
        """The database as messages name it: the user's file (a compressed one's, not its decompressed copy)."""
        from autotune.store.engine import shown, sqlite_path

        try:
            return shown(sqlite_path(self._store.url) or self.url)
        except Exception:  # noqa: BLE001 - a URL SQLAlchemy cannot parse: name it as given
            return shown(self.url)

    def _timing(self, where: str, row: MeasurementRow | BaselineRow, times: object) -> dict:
        """The recorded times and their statistics of one row, each number read by `autotune.untrusted.number`
        (a time is finite and not negative, reps a count); UserError naming the database and the row otherwise."""
        name = f"{self._label}: {where}"
        hint = (
            "the recording is damaged at that row: measure the pair again, or replay another database (a "
            ".sqlite.xz packed by an older autotune and decompressed with plain xz holds `ns:` times: read the "
            ".sqlite.xz itself, or `autotune db unpack` it)"
        )
        try:
            parsed = json.loads(times) if isinstance(times, str) else times
        except ValueError:
            parsed = None
        if parsed is not None and not isinstance(parsed, list):
            parsed = None
        if parsed is None and times is not None:
            shown_text = str(times)[:40]
            raise UserError(f"{name}: times_ms is not a JSON list of times ({shown_text!r})", hint=hint)
        try:
            values = numbers(parsed or [], name=f"{name}: times_ms", lo=0)
            stats = {
                c: None if getattr(row, c) is None else number(getattr(row, c), name=f"{name}: {c}", lo=0)
                for c in TIME_STATS
            }
            reps = int(number(row.reps, name=f"{name}: reps", integer=True, lo=0))
        except UserError as exc:
            raise UserError(exc.message, hint=hint) from None
        return {**stats, "reps": reps, "times_ms": values}

    def _recorded(self, instance_ids: list[str]) -> dict[tuple[str, TestPoint], Measurement]:
        out: dict[tuple[str, TestPoint], Measurement] = {}
        ids = list(dict.fromkeys(instance_ids))
        with self._store.session() as s:
            for start in range(0, len(ids), 500):
                rows = s.execute(
                    select(MeasurementRow, Point, type_coerce(MeasurementRow.times_ms, Text))
                    .options(defer(MeasurementRow.times_ms))
                    .join(Point, Point.id == MeasurementRow.point_id)
                    .where(
                        MeasurementRow.device_id.in_(self._device_ids),
                        MeasurementRow.instance_id.in_(ids[start : start + 500]),
                    )
                ).all()
                for m, p, times in sorted(rows, key=lambda mp: _preference(mp[0]), reverse=True):  # preferred last
                    point = p.point()
                    out[(m.instance_id, point)] = Measurement(
                        m.instance_id,
                        point,
                        Status(m.status),
                        **self._timing(f"measurements row {m.id}", m, times),
                        **{name: getattr(m, name) for name in RECORDED_AS_GIVEN},
                    )
        return out


def replay_delay_s() -> float:
    """Seconds a replay waits per measurement ($AUTOTUNE_REPLAY_DELAY, default 0): a GPU's pace for demos and tests
    of interrupts."""
    from autotune.untrusted import env_number

    return env_number(REPLAY_DELAY_ENV, 0.0, lo=0.0, hi=3600.0, example="0.05") or 0.0


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
