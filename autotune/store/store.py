"""The results database's operations: the few writes and reads the runner and the analyzer need.

Every session goes through `Store.session()`. One sweep at a time may write to a database: the sweep lock and the
in-flight notes are in `autotune.store.locking`, the reads in `autotune.store.reads`, the engine and the retried
transactions in `autotune.store.base`; this module opens a database and holds the writes. Measurements
are unique per (instance, test point, device), so a resumed sweep never measures a pair twice.
The tables are in `autotune.store.schema`, URLs and engines in `autotune.store.engine`, the per-kind point views
in `autotune.store.views`.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from sqlalchemy import bindparam, delete, insert, inspect, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from autotune.vocab import RECORDED_AS_GIVEN, TIME_STATS, DeviceInfo, Measurement, Status
from autotune.store import views
from autotune.store.boundary import checked
from autotune.store.engine import (
    SchemaVersionError,
    StoreError,
    SweepLockedError,
    database_url,
    first_line,
    make_engine,
    refuse_empty_file,
    sqlite_path,
)
from autotune.store.locking import LOCK_STALE_S, SweepLocking
from autotune.store.migrate import check, create_schema, database_version, readable_copy
from autotune.store.reads import MEASUREMENT_COLUMNS, StoreReads
from autotune.store.schema import (
    SCHEMA_VERSION,
    STACK,
    BaselineRow,
    Device,
    Inflight,
    InstanceParam,
    InstanceRow,
    MeasurementRow,
    SchemaMeta,
    Software,
    SpaceRecord,
    SpaceVersion,
    SweepLock,
    SweepStart,
    fields,
    figures,
    now,
)

if TYPE_CHECKING:  # pragma: no cover
    from autotune.space.instance import Instance

RECORD_BEAT_S = 1.0  # `record` refreshes the heartbeat (and checks the lock is still its) at most this often


class Store(SweepLocking, StoreReads):
    """An open results database. Create with `Store.open(url)`; close with `close()` (or `with`)."""

    @classmethod
    def open(cls, url: str, *, create: bool = True, readonly: bool = False) -> "Store":
        """Open `url`; create the schema in an empty database when `create`; check the schema version.

        Raises StoreError (unreachable, read-only when writing, a gzipped `*.gz` file unless `readonly`, not an
        autotune database) or SchemaVersionError, each with a hint, and writes nothing in those cases."""
        url = database_url(url, write=not readonly)  # a gzipped database is only read (through its copy)
        path = sqlite_path(url)
        if path is not None and readonly and not Path(path).is_file():
            raise StoreError(
                f"no SQLite database at {path}",
                hint="give the results database of a sweep (a config names it under `database:`; "
                "the default is results/<config name>.sqlite)",
            )
        if path is not None and create and not readonly:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        elif path is not None:  # read: a 0-byte file is no database
            refuse_empty_file(path)
            if readonly:
                url = readable_copy(url, path)  # an older schema: read through its migrated copy
        engine = make_engine(url, readonly=readonly)
        store = cls(url, engine)
        try:
            store._check_schema(create=create and not readonly)
            if not readonly:  # fail now, not at the first measurement, when the database is read-only
                with store.session() as s:
                    s.execute(
                        update(SchemaMeta).where(SchemaMeta.key == "schema_version").values(value=SchemaMeta.value)
                    )
                    views.ensure_views(s.connection())  # a database upgraded offline (--sql) gets its kinds' views
        except StoreError:
            engine.dispose()
            raise
        except SQLAlchemyError as exc:
            engine.dispose()
            reason = first_line(exc)
            hint = (
                "check that the server is running and the URL, user and password are right"
                if path is None
                else "check that the directory exists and that you may write the file"
            )
            if "readonly" in reason.replace(" ", "").lower() or "read-only" in reason:
                hint = "open a database you may write to (set `database:` in the config)"
            raise StoreError(f"cannot open database {make_url(url).render_as_string()}: {reason}", hint=hint) from exc
        return store

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        try:
            self.close()
        except SQLAlchemyError:
            if exc_type is None:
                raise
            # leaving on an error already (often the same failing database): that error is the one to report

    def close(self) -> None:
        """Release the sweep lock if this Store holds it, and dispose of the engine (even when the release fails:
        then the lock expires like a dead sweep's)."""
        try:
            token = self._lock_token
            if token is not None:
                self.transact(lambda s: s.execute(delete(SweepLock).where(SweepLock.token == token)))
        finally:
            self._lock_token = None
            self.engine.dispose()

    def _check_schema(self, create: bool) -> None:
        tables = set(inspect(self.engine).get_table_names())
        if "schema_meta" not in tables:
            if tables:
                raise SchemaVersionError(
                    f"{self.url} is not an autotune results database (tables: {', '.join(sorted(tables)[:5])})",
                    hint="give another database URL",
                )
            if not create:
                raise StoreError(f"{self.url} holds no results yet", hint="run a sweep into it first")
            if create_schema(self.engine):  # race-safe: another process may be creating it
                return
        with self.engine.connect() as conn:
            version = database_version(conn)
        assert version is not None
        check(version, self.url)

    # ---- writes (the runner; one writer per database, guarded by the sweep lock) ----

    def upsert_device(self, info: DeviceInfo) -> int:
        """The id of the device with `info.uuid`, created or refreshed (clocks, bandwidth: last seen)."""
        self._devices.pop(info.uuid, None)

        def work(s: Session) -> int:
            row = s.scalars(select(Device).where(Device.uuid == info.uuid)).first()
            if row is None:
                row = Device()
                s.add(row)
            for name in fields(Device):
                setattr(row, name, getattr(info, name))
            s.flush()
            return row.id

        return self.transact(work)

    def upsert_software(self, info: DeviceInfo, autotune_version: str, git_commit: str | None) -> int:
        """The id of this exact software stack (driver, CUDA runtime, NVRTC, CuPy, autotune, commit)."""
        key = {name: getattr(info, name) for name in STACK}
        key.update(autotune_version=autotune_version, git_commit=git_commit or "")

        def work(s: Session) -> int:
            row = s.scalars(select(Software).filter_by(**key)).first()
            if row is None:
                row = Software(**key)
                s.add(row)
                s.flush()
            return row.id

        return self.transact(work)

    def upsert_space(self, rec: SpaceRecord) -> int:
        """The id of this version of a space (same name, YAML text and kernel source text)."""

        def work(s: Session) -> int:
            row = s.scalars(
                select(SpaceVersion).filter_by(name=rec.name, yaml_hash=rec.yaml_hash, source_hash=rec.source_hash)
            ).first()
            if row is None:
                row = SpaceVersion(**{name: getattr(rec, name) for name in fields(SpaceVersion)})
                s.add(row)
                s.flush()
            return row.id

        return self.transact(work)

    def upsert_instances(self, instances: Iterable["Instance"]) -> int:
        """Insert the instances not yet stored (with one instance_params row per parameter); returns
        how many were new. An instance's id already encodes its space and parameters."""
        given = {i.id: i for i in instances}

        def work(s: Session) -> int:
            todo, ids = dict(given), list(given)
            for start in range(0, len(ids), 500):
                for known in s.scalars(select(InstanceRow.id).where(InstanceRow.id.in_(ids[start : start + 500]))):
                    todo.pop(known)
            if todo:
                s.execute(
                    insert(InstanceRow.__table__),
                    [dict(id=i.id, space=i.space, name=i.name, params=dict(i.params)) for i in todo.values()],
                )
                s.execute(
                    insert(InstanceParam.__table__),
                    [_param_row(i.id, name, value) for i in todo.values() for name, value in i.params],
                )
            return len(todo)

        return self.transact(work)

    def record(self, sweep_id: int, space_id: int, measurements: Sequence[Measurement]) -> None:
        """Store measurements of instances of the space version `space_id` (instances already upserted),
        with GFLOP/s, GB/s and roofline fraction from the sweep's scalars and measured bandwidth, in one
        transaction; clears their in-flight notes and refreshes the lock heartbeat. Raises StoreError (and
        writes none of them) if a pair was already measured on this device; SweepLockedError without the lock."""
        sweep = self._sweep(sweep_id)
        measurements = [checked(m) for m in measurements]
        ids = self.upsert_points([m.point for m in measurements])
        try:
            rows, done = [], []
            for m in measurements:
                device_id, bandwidth = (
                    self._device_of(m.device) if m.device else (sweep.device_id, sweep.copy_bandwidth)
                )
                rows.append(
                    dict(
                        sweep_id=sweep_id,
                        instance_id=m.instance_id,
                        point_id=ids[m.point],
                        device_id=device_id,
                        space_id=space_id,
                        **_result(m, sweep.scalars, bandwidth),
                        **{name: getattr(m, name) for name in RECORDED_AS_GIVEN},
                    )
                )
                done.append(dict(iid=m.instance_id, pid=ids[m.point], did=device_id))
            if not rows:
                return
            inflight = Inflight.__table__
            runs = 0

            def work(s: Session) -> None:  # Core statements: one executemany each, however many measurements
                nonlocal runs
                runs += 1
                if self._lock_token is None or runs > 1 or time.monotonic() - self._beaten_at >= RECORD_BEAT_S:
                    self._beat(s)
                todo = rows if runs == 1 else _not_recorded(s, sweep_id, rows)
                if todo:
                    s.execute(insert(MeasurementRow.__table__), todo)
                s.execute(
                    inflight.delete().where(
                        inflight.c.instance_id == bindparam("iid"),
                        inflight.c.point_id == bindparam("pid"),
                        inflight.c.device_id == bindparam("did"),
                    ),
                    done,
                )

            self.transact(work)
        except IntegrityError as exc:
            raise StoreError(
                f"cannot record measurements: {str(exc.orig).splitlines()[0]}",
                hint="a pair was measured twice (consult done_pairs) or its instance was not upserted",
            ) from exc

    def record_baseline(self, sweep_id: int, m: Measurement) -> None:
        """Store (or replace) the baseline time of `m.point` on the sweep's device; `m.instance_id` names the library
        (backends set it to the kind's `baseline_name`, e.g. cublas)."""
        sweep = self._sweep(sweep_id)
        m = checked(m)
        pid = self.upsert_points([m.point])[m.point]
        result = _result(m, sweep.scalars, sweep.copy_bandwidth)
        b = BaselineRow

        def work(s: Session) -> None:  # delete, then insert: the same row however often it runs
            self._beat(s)
            s.execute(delete(b).where(b.device_id == sweep.device_id, b.point_id == pid))
            s.add(
                b(
                    device_id=sweep.device_id,
                    point_id=pid,
                    sweep_id=sweep_id,
                    library=m.instance_id,
                    **result,
                    l2_protection=m.l2_protection,
                    error=m.error,
                )
            )

        self.transact(work)

    def _device_of(self, uuid: str) -> tuple[int, float]:
        """(id, copy bandwidth) of the recorded device `uuid` (a measurement's own GPU; `upsert_device` first)."""
        if uuid not in self._devices:
            row = self.transact(lambda s: s.scalars(select(Device).where(Device.uuid == uuid)).first())
            if row is None:
                raise StoreError(
                    f"cannot record a measurement of device {uuid}: no such device in {self.url}",
                    hint="the runner records each executor's devices (upsert_device) before measuring",
                )
            self._devices[uuid] = (row.id, row.copy_bandwidth)
        return self._devices[uuid]


def _not_recorded(s: Session, sweep_id: int, rows: list[dict]) -> list[dict]:
    """The measurement rows that `sweep_id` has not recorded yet: when `record`'s transaction runs again after a
    lost connection, its first run may have committed (only the reply was lost), and must not be inserted twice.
    Rows carry their own device (a sweep over several GPUs records each measurement on the GPU that took it)."""
    m = MeasurementRow
    ids = sorted({r["instance_id"] for r in rows})
    q = select(m.instance_id, m.point_id, m.device_id).where(m.sweep_id == sweep_id, m.instance_id.in_(ids))
    have = {tuple(row) for row in s.execute(q)}
    return [r for r in rows if (r["instance_id"], r["point_id"], r["device_id"]) not in have]


def _work(m: Measurement, scalars: Mapping[str, float] | None) -> tuple[float | None, int | None]:
    """(flops, fewest bytes) of a measurement's point: as the runner set them from the point's kind, else from a
    built-in kind of that name with the sweep's scalars (a measurement written through the API without them).
    A negative or non-finite count (a kind's mistake) raises StoreError rather than store negative figures."""
    if m.flops is not None or m.bytes_moved is not None:
        flops, nbytes = m.flops, m.bytes_moved
    else:
        from autotune.problems.registry import BUILT_IN

        kind = BUILT_IN.get(m.point.kind)
        if kind is None:
            return None, None
        flops, nbytes = kind.flops(m.point), kind.bytes_moved(m.point, kind.own_scalars(scalars))
    for what, v in (("flops", flops), ("bytes moved", nbytes)):
        if v is not None and not (math.isfinite(v) and v >= 0):
            raise StoreError(
                f"the kind {m.point.kind} counts {v!r} {what} at {m.point.key}",
                hint=f"its {what} must be a finite number >= 0 (fix the kind's formula)",
            )
    return flops, nbytes


def _result(m: Measurement, scalars: Mapping[str, float] | None, bandwidth: float) -> dict:
    """The columns a measurement row and a baseline row share: status, times and their statistics, figures (of an
    ok time), when."""
    f = figures(*_work(m, scalars), m.median_ms if m.status == Status.OK else None, bandwidth)
    stats = {name: getattr(m, name) for name in TIME_STATS}
    return dict(
        status=Status(m.status).value, **stats, reps=m.reps, times_ms=list(m.times_ms), **f._asdict(), measured_at=now()
    )


def _param_row(instance_id: str, name: str, value: int | float | str) -> dict:
    """One instance_params row: int_value for integers (booleans as 0/1), real_value for every number."""
    row: dict = dict(instance_id=instance_id, name=name, int_value=None, real_value=None, text_value=None)
    if isinstance(value, (bool, int)):
        row.update(int_value=int(value), real_value=float(value))
    elif isinstance(value, float):
        row.update(real_value=value)
    else:
        row.update(text_value=str(value))
    return row


__all__ = [
    "LOCK_STALE_S",
    "MEASUREMENT_COLUMNS",
    "SCHEMA_VERSION",
    "Store",
    "StoreError",
    "SchemaVersionError",
    "SweepLockedError",
    "SpaceRecord",
    "SweepStart",
]
