"""The results database's operations: the few writes and reads the runner and the analyzer need.

Every session goes through `Store.session()`. One sweep at a time may write to a database:
`begin_sweep` takes a lock row (pid, host, heartbeat) and refuses a second live sweep. Measurements
are unique per (instance, test point, device), so a resumed sweep never measures a pair twice.
The tables are in `autotune.store.schema`, URLs and engines in `autotune.store.engine`, the per-kind point views
in `autotune.store.views`, the DataFrame reads in `autotune.store.frames`.
"""

from __future__ import annotations

import math
import os
import socket
import sys
import time
import uuid as uuidlib
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

from sqlalchemy import Delete, bindparam, delete, insert, inspect, select, update
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from autotune.vocab import DeviceInfo, Measurement, Status, TestPoint
from autotune.store import frames, views
from autotune.store.boundary import checked
from autotune.store.engine import (
    SchemaVersionError,
    StoreError,
    SweepLockedError,
    database_url,
    make_engine,
    sqlite_path,
)
from autotune.store.frames import MEASUREMENT_COLUMNS
from autotune.store.retry import Retrier
from autotune.store.schema import (
    SCHEMA_VERSION,
    BaselineRow,
    Device,
    Inflight,
    InstanceParam,
    InstanceRow,
    MeasurementRow,
    Point,
    PointSize,
    SchemaMeta,
    Software,
    SpaceRecord,
    SpaceVersion,
    Sweep,
    SweepLock,
    SweepStart,
    figures,
    now,
    sizes_json,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # (only in annotations: autotune.store.frames imports it where a frame is made)

    from autotune.space.instance import Instance

RECORD_BEAT_S = 1.0  # `record` refreshes the heartbeat (and checks the lock is still its) at most this often
LOCK_STALE_S = 120.0  # a lock whose heartbeat is older than this belongs to a dead sweep
T = TypeVar("T")


def _print_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Store:
    """An open results database. Create with `Store.open(url)`; close with `close()` (or `with`)."""

    def __init__(self, url: str, engine: Engine) -> None:
        self.url = url
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._sweeps: dict[int, Sweep] = {}
        self._devices: dict[str, tuple[int, float]] = {}  # uuid -> (id, copy bandwidth): `_device_of`
        self._points: dict[TestPoint, int] = {}
        self._viewed: set[str] = set()  # kinds whose point view this Store has checked
        self._lock_token: str | None = None
        self._beaten_at = float("-inf")  # time.monotonic() of the last heartbeat written (`record` skips closer ones)
        self.notify: Callable[[str], None] = _print_line  # where outage warnings go (the runner sets its reporter's)
        self.retrier = Retrier(lambda line: self.notify(line))  # rides out a lost connection: autotune.store.retry

    @classmethod
    def open(cls, url: str, *, create: bool = True, readonly: bool = False) -> "Store":
        """Open `url`; create the schema in an empty database when `create`; check the schema version.

        Raises StoreError (unreachable, read-only when writing, a gzipped `*.gz` file unless `readonly`,
        not an autotune database) or
        SchemaVersionError, each with a hint, and writes nothing in those cases."""
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
        if path is not None and readonly:
            from autotune.store.migrate import readable_copy

            url = readable_copy(url, path)
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
            reason = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
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

    @contextmanager
    def session(self) -> Iterator[Session]:
        """One transaction: commits on success, rolls back on any exception. Not retried (see `transact`)."""
        with self._sessions.begin() as s:
            yield s

    def transact(self, work: Callable[[Session], T]) -> T:
        """`work(session)` in one transaction, run again from the start when a lost connection (a PostgreSQL
        restart) or a locked SQLite file cuts it, after a back-off, until the outage outlasts AUTOTUNE_DB_RETRY_S
        (`autotune.store.retry`). `work` must be safe to run twice: a commit whose reply was lost may have landed."""

        def once() -> T:
            with self._sessions.begin() as s:
                return work(s)

        return self.retrier.run(once)

    def _check_schema(self, create: bool) -> None:
        from autotune.store.migrate import check, database_version

        tables = set(inspect(self.engine).get_table_names())
        if "schema_meta" not in tables:
            if tables:
                raise SchemaVersionError(
                    f"{self.url} is not an autotune results database (tables: {', '.join(sorted(tables)[:5])})",
                    hint="give another database URL",
                )
            if not create:
                raise StoreError(f"{self.url} holds no results yet", hint="run a sweep into it first")
            from autotune.store.create import create_schema  # race-safe: another process may be creating it

            if create_schema(self.engine):
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
                row = Device(uuid=info.uuid)
                s.add(row)
            row.name, row.sm_count, row.cc, row.l2_bytes = info.name, info.sm_count, info.cc, info.l2_bytes
            row.sm_clock_mhz, row.mem_clock_mhz = info.sm_clock_mhz, info.mem_clock_mhz
            row.copy_bandwidth = info.copy_bandwidth
            s.flush()
            return row.id

        return self.transact(work)

    def upsert_software(self, info: DeviceInfo, autotune_version: str, git_commit: str | None) -> int:
        """The id of this exact software stack (driver, CUDA runtime, NVRTC, CuPy, autotune, commit)."""
        key = dict(
            driver=info.driver,
            cuda_runtime=info.cuda_runtime,
            nvrtc=info.nvrtc,
            cupy=info.cupy,
            autotune_version=autotune_version,
            git_commit=git_commit or "",
        )

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
                row = SpaceVersion(
                    name=rec.name,
                    yaml_path=rec.yaml_path,
                    yaml_hash=rec.yaml_hash,
                    source_path=rec.source_path,
                    source_hash=rec.source_hash,
                    yaml_text=rec.yaml_text,
                    kind=rec.kind,
                    source_text=rec.source_text,
                    headers=rec.headers,
                    problem=rec.problem,
                )
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

    def upsert_points(self, points: Iterable[TestPoint]) -> dict[TestPoint, int]:
        """The ids of the given test points, inserting the new ones (with their point_sizes rows, and the view of a
        kind not seen before: `autotune.store.views`)."""
        wanted = [p for p in dict.fromkeys(points) if p not in self._points]
        if not wanted:
            return dict(self._points)
        kinds = {p.kind for p in wanted} - self._viewed

        def work(s: Session) -> dict[TestPoint, int]:  # the caches are filled once it committed
            found = {}
            for p in wanted:
                row = s.scalars(
                    select(Point).filter_by(kind=p.kind, precision=p.precision, shape=p.shape, sizes=sizes_json(p))
                ).first()
                if row is None:
                    row = Point(**Point.columns(p))
                    s.add(row)
                    s.flush()
                    s.add_all([PointSize(point_id=row.id, name=name, value=int(v)) for name, v in p.sizes])
                found[p] = row.id
            s.flush()
            if kinds:
                views.ensure_views(s.connection(), kinds)
            return found

        self._points.update(self.transact(work))
        self._viewed |= kinds
        return dict(self._points)

    def begin_sweep(self, start: SweepStart, stale_s: float = LOCK_STALE_S) -> int:
        """Take the database's sweep lock and record a running sweep; returns its id.

        Raises SweepLockedError when another sweep holds the lock and is alive (its heartbeat is newer
        than `stale_s`, and its process exists when it runs on this host). A dead sweep's lock is taken over."""
        token, host, pid, t = uuidlib.uuid4().hex, socket.gethostname(), os.getpid(), now()

        def take(s: Session) -> None:
            held = s.get(SweepLock, 1)
            if held is not None and held.token == token:
                return  # taken by an earlier run of this transaction whose commit reply was lost
            if held is None:
                s.add(SweepLock(id=1, token=token, host=host, pid=pid, acquired_at=t, heartbeat_at=t))
            else:
                age = (t - _utc(held.heartbeat_at)).total_seconds()
                alive = age < stale_s and (held.host != host or _pid_alive(held.pid))
                if alive:
                    raise SweepLockedError(
                        f"another sweep (id {held.sweep_id}, pid {held.pid} on {held.host}) is writing to "
                        f"{self.url}; its last heartbeat was {age:.0f} s ago",
                        hint="wait for it to finish or stop it (Ctrl-C); a crashed sweep's lock expires "
                        f"{stale_s:.0f} s after its last heartbeat",
                    )
                if held.sweep_id is not None:  # its sweep died without finishing
                    s.execute(
                        update(Sweep).where(Sweep.id == held.sweep_id, Sweep.status == "running").values(status="died")
                    )
                taken = s.execute(
                    update(SweepLock)
                    .where(SweepLock.id == 1, SweepLock.token == held.token)
                    .values(token=token, host=host, pid=pid, acquired_at=t, heartbeat_at=t)
                )
                if taken.rowcount != 1:  # type: ignore[attr-defined]
                    raise SweepLockedError(
                        f"another sweep took {self.url} at the same moment", hint="run one sweep per database"
                    )

        self.transact(take)
        self._lock_token = token  # from here on, close() releases the lock
        d = start.device

        def record_start(s: Session) -> Sweep:
            lock = s.get(SweepLock, 1)
            if lock is not None and lock.token == token and lock.sweep_id is not None:
                return s.get_one(Sweep, lock.sweep_id)  # an earlier run of this transaction committed it
            sweep = Sweep(
                config_name=start.config_name,
                config_text=start.config_text,
                started_at=t,
                status="running",
                device_id=start.device_id,
                software_id=start.software_id,
                scalars=dict(start.scalars),
                reps=start.reps,
                sm_clock_mhz=d.sm_clock_mhz,
                mem_clock_mhz=d.mem_clock_mhz,
                copy_bandwidth=d.copy_bandwidth,
                host=host,
                pid=pid,
            )
            s.add(sweep)
            s.flush()
            s.execute(update(SweepLock).where(SweepLock.token == token).values(sweep_id=sweep.id))
            return sweep

        sweep = self.transact(record_start)
        self._sweeps[sweep.id] = sweep
        return sweep.id

    def heartbeat(self) -> None:
        """Refresh the lock's heartbeat (the runner calls this at least every LOCK_STALE_S / 4 seconds;
        `record` does it too). Raises SweepLockedError if another sweep has taken the lock over."""
        self.transact(self._beat)

    def _beat(self, s: Session) -> None:
        if self._lock_token is None:
            raise SweepLockedError("this Store holds no sweep lock", hint="call begin_sweep before writing results")
        res = s.execute(update(SweepLock).where(SweepLock.token == self._lock_token).values(heartbeat_at=now()))
        if res.rowcount != 1:  # type: ignore[attr-defined]
            self._lock_token = None
            raise SweepLockedError(
                f"the sweep lock on {self.url} was taken over by another sweep",
                hint="this sweep stopped after a heartbeat gap; resume it when the other ends",
            )
        self._beaten_at = time.monotonic()

    def finish_sweep(self, sweep_id: int, status: str, forget_inflight: bool = False) -> None:
        """Mark the sweep finished ("done", "interrupted" or "failed") and release the lock; with `forget_inflight`, in
        the same transaction, forget its in-flight notes (`clear_inflight`: the pairs were not at fault, a resume
        measures them), so that no stop leaves a status without the notes cleared, or the reverse."""
        token = self._lock_token

        def work(s: Session) -> None:
            if forget_inflight:
                s.execute(delete(Inflight).where(Inflight.sweep_id == sweep_id))
            s.execute(update(Sweep).where(Sweep.id == sweep_id).values(status=status, finished_at=now()))
            if token is not None:
                s.execute(delete(SweepLock).where(SweepLock.token == token))

        self.transact(work)
        self._lock_token = None

    def mark_inflight(self, sweep_id: int, space_id: int, instance_id: str, point: TestPoint) -> None:
        """Note that (instance, point) is being measured now; `record` clears it. If the process dies,
        `recover_inflight` turns the note into a `crashed` measurement so that pair is never re-run."""
        key, forget = self._inflight_note(sweep_id, instance_id, point)

        def work(s: Session) -> None:  # Core statements (the ORM's merge cost ~2 ms more per measurement)
            s.execute(forget)
            s.execute(insert(Inflight.__table__).values(**key, sweep_id=sweep_id, space_id=space_id, started_at=now()))

        self.transact(work)

    def unmark_inflight(self, sweep_id: int, instance_id: str, point: TestPoint) -> None:
        """Forget the in-flight note of one pair: sent to the GPU but abandoned unmeasured (the sweep stopped taking
        results; a resumed sweep measures it)."""
        _, forget = self._inflight_note(sweep_id, instance_id, point)
        self.transact(lambda s: s.execute(forget))

    def _inflight_note(self, sweep_id: int, instance_id: str, point: TestPoint) -> tuple[dict, Delete]:
        """(the key columns of a pair's in-flight note on the sweep's device, the statement deleting that note)."""
        pid = self.upsert_points([point])[point]
        table = Inflight.__table__
        key = dict(instance_id=instance_id, point_id=pid, device_id=self._sweep(sweep_id).device_id)
        return key, table.delete().where(*(table.c[k] == v for k, v in key.items()))

    def clear_inflight(self, sweep_id: int) -> int:
        """Forget the in-flight notes of `sweep_id` (after Ctrl-C the pairs were not at fault, so a resume
        measures them again); returns how many there were."""
        return self.transact(lambda s: int(s.execute(delete(Inflight).where(Inflight.sweep_id == sweep_id)).rowcount))  # type: ignore[attr-defined]

    def recover_inflight(self, device_id: int) -> list[tuple[str, TestPoint]]:
        """Record the pair left in flight on `device_id` (by a sweep that died) as `crashed`; returns it. A GPU runs
        one pair at a time, and a pipelined backend (`GpuBackend.pipeline`) marks the next pair before the running
        one has answered: only the earliest note of a device was running, the later ones were queued behind it
        (their notes go; a resumed sweep measures them). Notes of the same instant all count as running."""

        def work(s: Session) -> list[tuple[str, TestPoint]]:
            out = []
            rows = s.execute(
                select(Inflight, Point)
                .join(Point, Point.id == Inflight.point_id)
                .where(Inflight.device_id == device_id)
            ).all()
            first = min((_utc(fl.started_at) for fl, _ in rows), default=None)
            for fl, pt in rows:
                if _utc(fl.started_at) != first:  # queued behind the running one: not at fault
                    s.delete(fl)
                    continue
                out.append((fl.instance_id, pt.point()))
                s.add(
                    MeasurementRow(
                        sweep_id=fl.sweep_id,
                        instance_id=fl.instance_id,
                        point_id=fl.point_id,
                        device_id=device_id,
                        space_id=fl.space_id,
                        status=Status.CRASHED.value,
                        reps=0,
                        times_ms=[],
                        measured_at=now(),
                        error="the sweep died while measuring this pair (found in flight on resume)",
                    )
                )
                s.delete(fl)
            return out

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
                f = figures(*_work(m, sweep.scalars), m.median_ms if m.status == Status.OK else None, bandwidth)
                rows.append(
                    dict(
                        sweep_id=sweep_id,
                        instance_id=m.instance_id,
                        point_id=ids[m.point],
                        device_id=device_id,
                        space_id=space_id,
                        status=Status(m.status).value,
                        **_timings(m),
                        gflops=f.gflops,
                        gbs=f.gbs,
                        roofline_frac=f.roofline_frac,
                        max_rel_err=m.max_rel_err,
                        registers=m.registers,
                        shared_bytes=m.shared_bytes,
                        local_bytes=m.local_bytes,
                        compile_s=m.compile_s,
                        l2_protection=m.l2_protection,
                        error=m.error,
                        log=m.log,
                        measured_at=now(),
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
        f = figures(*_work(m, sweep.scalars), m.median_ms if m.status == Status.OK else None, sweep.copy_bandwidth)
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
                    status=Status(m.status).value,
                    **_timings(m),
                    gflops=f.gflops,
                    gbs=f.gbs,
                    roofline_frac=f.roofline_frac,
                    l2_protection=m.l2_protection,
                    error=m.error,
                    measured_at=now(),
                )
            )

        self.transact(work)

    # ---- reads ----

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
        m, p, d = MeasurementRow, Point, Device
        q = (
            select(p, m.instance_id, m.median_ms)
            .join(m, m.point_id == p.id)
            .join(d, d.id == m.device_id)
            .where(m.status == Status.OK.value, (d.name == device) | (d.uuid == device))
            .order_by(m.median_ms, m.instance_id)
        )

        def work(s: Session) -> dict[TestPoint, tuple[str, float]]:
            out: dict[TestPoint, tuple[str, float]] = {}
            for row, iid, ms in s.execute(q):
                if ms is not None:  # (always so where the status is ok; the column is nullable for failures)
                    out.setdefault(row.point(), (iid, float(ms)))
            return out

        return self.transact(work)

    def ranked_instances(self, device: str) -> dict[TestPoint, list[str]]:
        """Per test point, the instance ids verified there on one device (name or uuid), fastest first (median,
        then id)."""
        m, p, d = MeasurementRow, Point, Device
        q = (
            select(p, m.instance_id)
            .join(m, m.point_id == p.id)
            .join(d, d.id == m.device_id)
            .where(m.status == Status.OK.value, (d.name == device) | (d.uuid == device))
            .order_by(m.median_ms, m.instance_id)
        )

        def work(s: Session) -> dict[TestPoint, list[str]]:
            out: dict[TestPoint, list[str]] = {}
            for row, iid in s.execute(q):
                out.setdefault(row.point(), []).append(iid)
            return out

        return self.transact(work)

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
        return DeviceInfo(
            name=d.name,
            uuid=d.uuid,
            sm_count=d.sm_count,
            cc=d.cc,
            sm_clock_mhz=d.sm_clock_mhz,
            mem_clock_mhz=d.mem_clock_mhz,
            l2_bytes=d.l2_bytes,
            copy_bandwidth=d.copy_bandwidth,
            driver=sw.driver if sw else "",
            cuda_runtime=sw.cuda_runtime if sw else "",
            nvrtc=sw.nvrtc if sw else "",
            cupy=sw.cupy if sw else "",
        )

    def measurements(self, device: str | None = None, space: str | None = None) -> pd.DataFrame:
        """Every measurement (without `times_ms` and `log`) joined with its device name, test point (one column per
        size name of the kinds present, e.g. m, n, k, batch), instance (id, name, space) and one column per
        instance parameter; filters by device name/uuid and space name. One row per (device, instance, point).
        Columns: `frames.MEASUREMENT_COLUMNS` with the size columns after `shape`, then the parameters."""
        return frames.measurements(self.engine, device, space)

    def kind_sizes(self) -> dict[str, tuple[str, ...]]:
        """Each problem kind with test points in the database and its size names, in the kind's order."""
        with self.engine.connect() as conn:
            return views.kind_sizes(conn)

    def baselines(self, device: str | None = None) -> pd.DataFrame:
        """Every baseline time (the kind's library, e.g. cuBLAS for GEMM) joined with its device name and test
        point, one column per size as in `measurements()`: device, kind, precision, shape, sizes..., library,
        status, median_ms, p20_ms, p80_ms, roofline_frac, gflops, gbs, error. Filters by device name/uuid."""
        return frames.baselines(self.engine, device)

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

    def _sweep(self, sweep_id: int) -> Sweep:
        if sweep_id not in self._sweeps:
            row = self.transact(lambda s: s.get(Sweep, sweep_id))
            if row is None:
                raise StoreError(f"no sweep {sweep_id} in {self.url}")
            self._sweeps[sweep_id] = row
        return self._sweeps[sweep_id]


def _not_recorded(s: Session, sweep_id: int, rows: list[dict]) -> list[dict]:
    """The measurement rows that `sweep_id` has not recorded yet: when `record`'s transaction runs again after a
    lost connection, its first run may have committed (only the reply was lost), and must not be inserted twice.
    Rows carry their own device (a sweep over several GPUs records each measurement on the GPU that took it)."""
    m = MeasurementRow
    ids = sorted({r["instance_id"] for r in rows})
    have = set(
        s.execute(
            select(m.instance_id, m.point_id, m.device_id).where(m.sweep_id == sweep_id, m.instance_id.in_(ids))
        ).tuples()
    )
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


def _timings(m: Measurement) -> dict:
    return dict(
        median_ms=m.median_ms,
        p20_ms=m.p20_ms,
        p80_ms=m.p80_ms,
        min_ms=m.min_ms,
        max_ms=m.max_ms,
        reps=m.reps,
        times_ms=list(m.times_ms),
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


def _utc(t: datetime) -> datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)  # SQLite returns naive datetimes


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
