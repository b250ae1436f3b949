"""Riding out a database outage: a store transaction cut by a lost connection is retried, not fatal.

A PostgreSQL server that restarts (or a network that drops) mid-sweep cuts the statement in flight. The store's
transactions run through `Retrier.run`: on such an error the transaction is rolled back (the session does it;
the server drops an unfinished transaction of a lost connection), the retrier waits with an exponential back-off
(`backoff`: doubling from BASE_S, capped at CAP_S, each wait jittered), and the whole transaction runs again on a
fresh connection. One `warning: ...` line is printed when an outage starts and one line when the database is back.
It gives up once the outage has lasted AUTOTUNE_DB_RETRY_S seconds (default DEFAULT_RETRY_S), raising
`DatabaseGone`; a later transaction that fails again gives up at once, so a failing sweep ends without waiting again.

SQLite's "database is locked" (another writer held the file past the 30 s busy timeout) takes the same path with at
most LOCKED_RETRY_S. Every other error (a full disk, a read-only file, a constraint) is raised at once.
The transactions themselves must be safe to run twice: a commit whose reply was lost may have been applied.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from typing import Callable, Iterator, TypeVar

from sqlalchemy.exc import DBAPIError, DisconnectionError, SQLAlchemyError

from autotune import untrusted
from autotune.errors import UserError
from autotune.store.engine import StoreError, first_line

T = TypeVar("T")

RETRY_ENV = "AUTOTUNE_DB_RETRY_S"
DEFAULT_RETRY_S = 120.0
MAX_RETRY_S = 7 * 86400.0  # a week: longer is a typo
LOCKED_RETRY_S = 30.0  # SQLite "database is locked": at most this long, on top of its own busy timeout
BASE_S, CAP_S = 0.25, 8.0  # the first wait, and the longest

# SQLSTATEs of a server that went away or is not yet back: class 08 (connection exception), admin shutdown,
# crash shutdown, cannot connect now (starting up or shutting down)
_GONE_STATES = frozenset({"57P01", "57P02", "57P03"})


def retry_limit() -> float:
    """How long (seconds) a sweep waits for a lost database to come back: AUTOTUNE_DB_RETRY_S, default 120.
    Raises StoreError when the variable is not a number >= 0."""
    try:
        return float(untrusted.env_number(RETRY_ENV, DEFAULT_RETRY_S, lo=0.0, hi=MAX_RETRY_S) or 0.0)
    except UserError as exc:
        raise StoreError(
            exc.message,
            hint=f"set {RETRY_ENV} to how long a sweep may wait for a lost database (default "
            f"{DEFAULT_RETRY_S:.0f}; 0 stops at the first lost connection)",
        ) from None


def transient(exc: BaseException) -> str | None:
    """Why `exc` may pass if the transaction runs again: "lost" (the connection or the server went away, or the
    server is starting up or shutting down), "locked" (SQLite: another writer holds the file); None otherwise
    (a full disk, a read-only database, a constraint, a bad statement...)."""
    if isinstance(exc, DisconnectionError):
        return "lost"
    if not isinstance(exc, DBAPIError):
        return None
    if exc.connection_invalidated:  # SQLAlchemy recognised a disconnect (and dropped the connection)
        return "lost"
    orig = exc.orig
    if isinstance(orig, sqlite3.OperationalError):
        return "locked" if "locked" in str(orig).lower() else None
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if state is not None:
        return "lost" if state.startswith("08") or state in _GONE_STATES else None
    # no SQLSTATE: the driver failed without the server's word (connection refused, server closed the connection)
    return "lost" if type(orig).__name__ == "OperationalError" and type(orig).__module__.startswith("psycopg") else None


def backoff(rng: random.Random, base: float = BASE_S, cap: float = CAP_S) -> Iterator[float]:
    """The waits between attempts: the n-th is drawn from [c/2, c] with c = min(cap, base * 2**n) ("equal
    jitter": never shorter than half the exponential step, so many sweeps on one server spread out)."""
    n = 0
    while True:
        step = min(cap, base * 2.0 ** min(n, 60))
        yield step / 2 + rng.uniform(0, step / 2)
        n += 1


class DatabaseGone(SQLAlchemyError):
    """The database stayed unreachable (or locked) for the whole retry limit."""

    def __init__(self, reason: str, waited_s: float, limit_s: float, locked: bool) -> None:
        self.reason, self.waited_s, self.limit_s, self.locked = reason, waited_s, limit_s, locked
        knob = f"{RETRY_ENV}={limit_s:g}" if not locked else f"at most {limit_s:g} s for a locked SQLite file"
        super().__init__(f"{reason}; gave up after waiting {waited_s:.0f} s for it ({knob})")


class Retrier:
    """Runs transactions, riding out outages (see the module). `notify` gets the warning lines; `limit_s` (default:
    `retry_limit()`, read once) bounds each outage; `rng`, `sleep` and `clock` are for tests."""

    def __init__(
        self,
        notify: Callable[[str], None],
        limit_s: float | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.notify = notify
        self.limit_s = retry_limit() if limit_s is None else limit_s
        self._rng = rng or random.Random()
        self._sleep, self._clock = sleep, clock
        self._lock = threading.Lock()
        self._since: float | None = None  # when the current outage started (None: no outage)
        self._waits: Iterator[float] = iter(())
        self.outages = 0  # how many outages this Retrier has seen (for tests and summaries)

    def run(self, attempt: Callable[[], T]) -> T:
        """`attempt()` (one whole transaction), again after each transient failure until the outage has lasted the
        limit; then DatabaseGone. Other exceptions pass at once."""
        while True:
            try:
                result = attempt()
            except SQLAlchemyError as exc:
                why = transient(exc)
                if why is None or isinstance(exc, DatabaseGone):
                    raise
                self._wait(exc, why)
                continue
            self._back()
            return result

    def _wait(self, exc: SQLAlchemyError, why: str) -> None:
        limit = self.limit_s if why == "lost" else min(self.limit_s, LOCKED_RETRY_S)
        with self._lock:
            now = self._clock()
            if self._since is None:
                self._since, self._waits = now, backoff(self._rng)
                self.outages += 1
                what = "lost the database connection" if why == "lost" else "the database is locked"
                self.notify(
                    f"warning: {what} ({first_line(exc)}); retrying for up to {limit:g} s "
                    f"({RETRY_ENV if why == 'lost' else 'locked SQLite file'})"
                )
            waited = now - self._since
            left = limit - waited
            wait = next(self._waits)
        if left <= 0:
            raise DatabaseGone(first_line(exc), waited, limit, why == "locked") from exc
        self._sleep(min(wait, left))

    def _back(self) -> None:
        if self._since is None:
            return
        with self._lock:
            if self._since is None:
                return
            waited = self._clock() - self._since
            self._since = None
        self.notify(f"database back after {waited:.1f} s; the sweep goes on")
