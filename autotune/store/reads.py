"""The reads of a results database that the runner and the analyzer need: what is measured, the fastest, the
baselines, the devices; and the DataFrame reads. Part of `autotune.store.store.Store`.

The DataFrame reads give measurements and baseline times with one column per size of the kinds present. A frame of a
GEMM database has the columns m, n, k, batch after `shape`; a stencil's has ny, nx; a database holding several kinds
has the size names of each (in the order the rows bring them), empty where a row's kind has no such size. The sizes
come from each point's canonical `sizes` JSON (parsed once per distinct point).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from autotune.vocab import RECORDED_AS_GIVEN, TIME_STATS, DeviceInfo, Measurement, Status, TestPoint
from autotune.store import views
from autotune.store.base import StoreBase
from autotune.store.engine import StoreError
from autotune.store.schema import (
    STACK,
    BaselineRow,
    Device,
    InstanceRow,
    MeasurementRow,
    Point,
    Software,
    Sweep,
    fields,
)

if TYPE_CHECKING:  # pandas is imported where a frame is made: a sweep (the store's import) never needs it
    import pandas as pd

RESULT_COLUMNS = (  # a measurement row's results: all but its log (long text, read where a row is shown)
    "status",
    *TIME_STATS,
    "reps",
    "gflops",
    "gbs",
    "roofline_frac",
    *(name for name in RECORDED_AS_GIVEN if name != "log"),
    "sweep_id",
)
# the fixed columns of Store.measurements(); the size columns of the kinds present come after `shape`, and a
# parameter named like any column (fixed or size) becomes param_NAME
MEASUREMENT_COLUMNS = ("device", "space", "instance_id", "instance", "kind", "precision", "shape", *RESULT_COLUMNS)
BASELINE_RESULTS = ("library", "status", "median_ms", "p20_ms", "p80_ms", "roofline_frac", "gflops", "gbs", "error")


class StoreReads(StoreBase):
    """The reads of a `Store`."""

    def done_pairs(self, device_id: int) -> set[tuple[str, TestPoint]]:
        """Every (instance id, point) already measured on the device, whatever its status (crashed included)."""
        q = (
            select(MeasurementRow.instance_id, Point)
            .join(Point, Point.id == MeasurementRow.point_id)
            .where(MeasurementRow.device_id == device_id)
        )
        return self.transact(lambda s: {(iid, p.point()) for iid, p in s.execute(q)})

    def recorded_at(self, sweep_id: int, point: TestPoint, same_model: bool = False) -> dict[str, list[Measurement]]:
        """What is recorded at `point` on the sweep's GPU (with `same_model`, on every GPU of its model), by
        instance id, as Measurements of status and median: what a search is told of an instance it proposes that
        an earlier run measured (a resumed sweep, or Kernel Tuner's simulation mode on an imported cache)."""
        device_id = self._sweep(sweep_id).device_id
        devices = self.same_model(device_id) if same_model else [device_id]
        pid = self.upsert_points([point])[point]
        q = select(MeasurementRow.instance_id, MeasurementRow.status, MeasurementRow.median_ms).where(
            MeasurementRow.point_id == pid, MeasurementRow.device_id.in_(devices)
        )
        out: dict[str, list[Measurement]] = {}
        for iid, status, median in self.transact(lambda s: s.execute(q).all()):
            out.setdefault(iid, []).append(Measurement(iid, point, Status(status), median_ms=median))
        return out

    def best_times(self, device: str) -> dict[TestPoint, tuple[str, float]]:
        """The fastest verified (instance id, median ms) at each test point on one device (name or uuid)."""
        out: dict[TestPoint, tuple[str, float]] = {}
        for point, iid, ms in self._verified(device):
            if ms is not None:  # (always so where the status is ok; the column is nullable for failures)
                out.setdefault(point, (iid, float(ms)))
        return out

    def ranked_instances(self, device: str) -> dict[TestPoint, list[str]]:
        """Per test point, the instance ids verified there on one device (name or uuid), fastest first (median,
        then id)."""
        out: dict[TestPoint, list[str]] = {}
        for point, iid, _ in self._verified(device):
            out.setdefault(point, []).append(iid)
        return out

    def _verified(self, device: str) -> list[tuple[TestPoint, str, float | None]]:
        """(point, instance id, median ms) of each verified measurement on one device (name or uuid), fastest first
        (median, then id)."""
        m, p, d = MeasurementRow, Point, Device
        q = (
            select(p, m.instance_id, m.median_ms)
            .join(m, m.point_id == p.id)
            .join(d, d.id == m.device_id)
            .where(m.status == Status.OK.value, (d.name == device) | (d.uuid == device))
            .order_by(m.median_ms, m.instance_id)
        )
        return self.transact(lambda s: [(row.point(), iid, ms) for row, iid, ms in s.execute(q)])

    def baseline_times(self, device_id: int) -> dict[TestPoint, float]:
        """The verified baseline (library) median (ms) of each test point that has one on the device."""
        b = BaselineRow
        q = (
            select(Point, b.median_ms)
            .join(b, b.point_id == Point.id)
            .where(b.device_id == device_id, b.status == Status.OK.value)
        )
        return self.transact(lambda s: {p.point(): ms for p, ms in s.execute(q) if ms is not None})  # (ok: never None)

    def same_model(self, device_id: int) -> list[int]:
        """The device and every other recorded GPU of the same name, SM count and compute capability (its id
        first): what `resume: model` treats as one."""

        def work(s: Session) -> list[int]:
            me = s.get_one(Device, device_id)
            return list(
                s.scalars(
                    select(Device.id).where(
                        Device.name == me.name,
                        Device.sm_count == me.sm_count,
                        Device.cc == me.cc,
                        Device.id != device_id,
                    )
                )
            )

        return [device_id, *sorted(self.transact(work))]

    def device_id(self, device: str | None = None) -> int:
        """The id of the device whose uuid or name is `device`; None = the only device. Raises StoreError."""
        with self.session() as s:
            rows = s.scalars(select(Device)).all()
        found = [d for d in rows if device is None or device in (d.uuid, d.name)]
        if len(found) != 1:
            names = ", ".join(f"{d.name} ({d.uuid})" for d in rows) or "none"
            raise StoreError(
                f"{'no' if not found else 'more than one'} device matches {device or 'any'} in {self.url}",
                hint=f"name one of the recorded devices: {names}",
            )
        return found[0].id

    def device_info(self, device_id: int) -> DeviceInfo:
        """The device and the software of its latest sweep, as the runner recorded them."""
        with self.session() as s:
            d = s.get(Device, device_id)
            sw = s.scalars(
                select(Software)
                .join(Sweep, Sweep.software_id == Software.id)
                .where(Sweep.device_id == device_id)
                .order_by(Sweep.id.desc())
            ).first()
        if d is None:
            raise StoreError(f"no device {device_id} in {self.url}")
        values: dict[str, Any] = {name: getattr(d, name) for name in fields(Device)}
        values.update({name: getattr(sw, name) if sw else "" for name in STACK})
        return DeviceInfo(**values)

    def measurements(self, device: str | None = None, space: str | None = None) -> pd.DataFrame:
        """Every measurement (without `times_ms` and `log`) joined with its device name, test point (one column per
        size name of the kinds present, e.g. m, n, k, batch), instance (id, name, space) and one column per
        instance parameter; filters by device name/uuid and space name. One row per (device, instance, point).
        Columns: `MEASUREMENT_COLUMNS` with the size columns after `shape`, then the parameters."""
        import pandas as pd

        m, p, i, d = MeasurementRow, Point, InstanceRow, Device
        cols: list[Any] = [d.name.label("device"), i.space, m.instance_id, i.name.label("instance")]
        cols += [p.kind, p.precision, p.shape, p.sizes, *(getattr(m, c) for c in RESULT_COLUMNS), i.params]
        q = select(*cols).join(p, p.id == m.point_id).join(i, i.id == m.instance_id).join(d, d.id == m.device_id)
        if device is not None:
            q = q.where((d.name == device) | (d.uuid == device))
        if space is not None:
            q = q.where(i.space == space)
        with self.engine.connect() as conn:
            frame = pd.DataFrame(conn.execute(q.order_by(m.id)).mappings().all(), columns=[c.key for c in cols])
        frame = size_columns(frame)
        params = pd.DataFrame([_as_dict(x) for x in frame.pop("params")], index=frame.index)
        params.columns = [c if c not in frame.columns else f"param_{c}" for c in params.columns]
        return pd.concat([frame, params], axis=1)

    def measured(self, kind: str | None = None) -> list[tuple[str, str, str]]:
        """Each (device name, device uuid, space) with measurements (of `kind`: None, any), sorted."""
        m = MeasurementRow
        q = (
            select(Device.name, Device.uuid, InstanceRow.space)
            .distinct()
            .join(Device, Device.id == m.device_id)
            .join(InstanceRow, InstanceRow.id == m.instance_id)
        )
        if kind is not None:
            q = q.join(Point, Point.id == m.point_id).where(Point.kind == kind)
        with self.session() as s:
            return sorted((str(name), str(uuid), str(space)) for name, uuid, space in s.execute(q.select_from(m)).all())

    def kind_sizes(self) -> dict[str, tuple[str, ...]]:
        """Each problem kind with test points in the database and its size names, in the kind's order."""
        with self.engine.connect() as conn:
            return views.kind_sizes(conn)

    def baselines(self, device: str | None = None) -> pd.DataFrame:
        """Every baseline time (the kind's library, e.g. cuBLAS for GEMM) joined with its device name and test
        point, one column per size as in `measurements()`: device, kind, precision, shape, sizes..., library,
        status, median_ms, p20_ms, p80_ms, roofline_frac, gflops, gbs, error. Filters by device name/uuid."""
        import pandas as pd

        b, p, d = BaselineRow, Point, Device
        cols = [
            d.name.label("device"),
            p.kind,
            p.precision,
            p.shape,
            p.sizes,
            *(getattr(b, c) for c in BASELINE_RESULTS),
        ]
        q = select(*cols).join(p, p.id == b.point_id).join(d, d.id == b.device_id)
        if device is not None:
            q = q.where((d.name == device) | (d.uuid == device))
        with self.engine.connect() as conn:
            result = conn.execute(q.order_by(b.id))
            frame = pd.DataFrame(result.mappings().all(), columns=list(result.keys()))
        return size_columns(frame)


def size_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """Replace the `sizes` JSON column by one column per size name, after `shape`, in the kinds' order (a size named
    like a fixed column, e.g. `status`, is the column size_NAME)."""
    parsed: dict[str, dict] = {}
    sizes = [parsed.get(x) or parsed.setdefault(x, json.loads(x)) for x in frame.pop("sizes")]
    names = list(dict.fromkeys(n for d in parsed.values() for n in d))
    at = frame.columns.get_loc("shape") + 1
    for offset, name in enumerate(names):
        column = name if name not in frame.columns else f"size_{name}"
        frame.insert(at + offset, column, [d.get(name) for d in sizes])
    return frame


def _as_dict(value: object) -> dict:
    return json.loads(value) if isinstance(value, str) else dict(value or {})  # type: ignore[call-overload]
