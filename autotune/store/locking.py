"""The sweep lock: one sweep at a time writes to a database, and what it was measuring when it died is known.

`begin_sweep` takes a lock row (pid, host, heartbeat) and refuses a second live sweep; a dead sweep's lock is taken
over. The in-flight notes (`mark_inflight`) name the pair a sweep is measuring, so that a resumed sweep records the
pair that killed its process as `crashed` instead of running it again. Part of `autotune.store.store.Store`.
"""

from __future__ import annotations

import os
import socket
import time
import uuid as uuidlib
from datetime import datetime, timezone

from sqlalchemy import Delete, delete, insert, select, update
from sqlalchemy.orm import Session

from autotune.vocab import Status, TestPoint
from autotune.store.base import StoreBase
from autotune.store.engine import SweepLockedError
from autotune.store.schema import Inflight, MeasurementRow, Point, Sweep, SweepLock, SweepStart, now

LOCK_STALE_S = 120.0  # a lock whose heartbeat is older than this belongs to a dead sweep


class SweepLocking(StoreBase):
    """The sweep lock and the in-flight notes of a `Store`."""

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
        the same transaction, forget its in-flight notes (the pairs were not at fault: a resume measures
        them), so that no stop leaves a status without the notes cleared, or the reverse."""
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
