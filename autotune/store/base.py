"""What every part of a `Store` shares: the engine, the retried transactions, the caches of test point and sweep ids.

`autotune.store.store.Store` is made of this base, the sweep lock (`autotune.store.locking`), the reads
(`autotune.store.reads`) and the writes of its own module.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, TypeVar

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from autotune.vocab import TestPoint
from autotune.store import views
from autotune.store.engine import StoreError
from autotune.store.retry import Retrier
from autotune.store.schema import Point, PointSize, Sweep

T = TypeVar("T")


def print_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class StoreBase:
    """An open results database's engine, sessions and id caches (the parts of `Store` every other part uses)."""

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
        self.notify: Callable[[str], None] = print_line  # where outage warnings go (the runner sets its reporter's)
        self.retrier = Retrier(lambda line: self.notify(line))  # rides out a lost connection: autotune.store.retry

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
                key = Point.columns(p)
                row = s.scalars(select(Point).filter_by(**key)).first()
                if row is None:
                    row = Point(**key)
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

    def _sweep(self, sweep_id: int) -> Sweep:
        if sweep_id not in self._sweeps:
            row = self.transact(lambda s: s.get(Sweep, sweep_id))
            if row is None:
                raise StoreError(f"no sweep {sweep_id} in {self.url}")
            self._sweeps[sweep_id] = row
        return self._sweeps[sweep_id]
