"""The store rides out a lost database connection (autotune.store.retry).

The back-off schedule and the give-up rule run on a recorded clock (deterministic); which errors count as an outage
is checked on the drivers' own exception classes; the re-run transactions are checked on a real SQLite file whose
commit "reply is lost" once (the commit lands, then the connection error is raised), the case where re-running
must not record anything twice. The PostgreSQL server itself restarting is in tests/test_faults.py, part 5.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from autotune.store.engine import StoreError
from autotune.store.retry import (
    BASE_S,
    CAP_S,
    LOCKED_RETRY_S,
    RETRY_ENV,
    DatabaseGone,
    Retrier,
    backoff,
    retry_limit,
    transient,
)
from autotune.problems.gemm import gemm_point
from autotune.store.store import Store, SweepStart
from autotune.vocab import Measurement, Status
from pg import device_info, instances, record_sample


def lost() -> OperationalError:
    """What SQLAlchemy raises when psycopg loses the server mid-statement."""
    psycopg = pytest.importorskip("psycopg")
    return OperationalError(
        "INSERT INTO measurements ...",
        {},
        psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly"),
        connection_invalidated=True,
    )


def test_backoff_doubles_from_base_to_the_cap_with_seeded_jitter() -> None:
    waits = backoff(random.Random(30))
    got = [round(next(waits), 4) for _ in range(8)]
    assert got == [0.1924, 0.3223, 0.515, 1.6536, 2.42, 5.0291, 5.5888, 6.5663]  # the same seed, the same waits
    steps = [min(CAP_S, BASE_S * 2**n) for n in range(200)]
    for seed in range(20):  # every wait lies in [step/2, step] of its exponential step, capped
        waits = backoff(random.Random(seed))
        assert all(step / 2 <= next(waits) <= step for step in steps)


class Clock:
    """A clock that moves only when the retrier sleeps."""

    def __init__(self) -> None:
        self.now, self.sleeps = 1000.0, []

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


def retrier(limit_s: float, clock: Clock, lines: list[str]) -> Retrier:
    return Retrier(lines.append, limit_s=limit_s, rng=random.Random(30), sleep=clock.sleep, clock=lambda: clock.now)


def failing(times: int, exc: Exception):  # type: ignore[no-untyped-def]
    calls = []

    def attempt() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise exc
        return "committed"

    return attempt, calls


def test_an_outage_waits_the_schedule_warns_once_and_says_when_it_is_back() -> None:
    clock, lines = Clock(), []
    r = retrier(120, clock, lines)
    attempt, calls = failing(4, lost())
    assert r.run(attempt) == "committed" and len(calls) == 5
    waits = backoff(random.Random(30))
    assert clock.sleeps == [next(waits) for _ in range(4)]
    assert len(lines) == 2 and lines[0].startswith("warning: lost the database connection (consuming input failed")
    assert f"retrying for up to 120 s ({RETRY_ENV})" in lines[0]
    assert lines[1] == f"database back after {sum(clock.sleeps):.1f} s; the sweep goes on"
    attempt, calls = failing(2, lost())  # a second outage: a second warning, and the schedule starts over
    r.run(attempt)
    assert len(lines) == 4 and r.outages == 2 and BASE_S / 2 <= clock.sleeps[4] <= BASE_S


def test_an_outage_past_the_limit_gives_up_naming_the_knob_and_then_fails_at_once() -> None:
    clock, lines = Clock(), []
    r = retrier(3, clock, lines)
    attempt, calls = failing(10**6, lost())
    with pytest.raises(DatabaseGone) as info:
        r.run(attempt)
    assert sum(clock.sleeps) == pytest.approx(3)  # never waits past the limit
    assert f"({RETRY_ENV}=3)" in str(info.value) and "server closed the connection unexpectedly" in str(info.value)
    assert isinstance(info.value.__cause__, OperationalError) and len(lines) == 1
    tries = len(calls)
    with pytest.raises(DatabaseGone):  # the outage goes on: the next transaction (finish_sweep, close) is not
        r.run(attempt)  # made to wait again, and no second warning is printed
    assert len(calls) == tries + 1 and sum(clock.sleeps) == pytest.approx(3) and len(lines) == 1
    assert r.run(lambda: 7) == 7 and lines[-1].startswith("database back after")  # if it does come back


def test_a_locked_sqlite_file_is_retried_for_a_shorter_time() -> None:
    clock, lines = Clock(), []
    r = retrier(600, clock, lines)
    locked = OperationalError("INSERT", {}, sqlite3.OperationalError("database is locked"))
    with pytest.raises(DatabaseGone) as info:
        r.run(failing(10**6, locked)[0])
    assert sum(clock.sleeps) == pytest.approx(LOCKED_RETRY_S) and info.value.locked
    assert lines[0].startswith("warning: the database is locked (database is locked)")


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda: lost(), "lost"),
        (
            lambda: OperationalError(
                "SELECT 1",
                {},
                pytest.importorskip("psycopg").OperationalError(
                    'connection failed: connection to server at "127.0.0.1", port 5432 failed: Connection refused'
                ),
            ),
            "lost",
        ),
        (
            lambda: OperationalError(
                "INSERT",
                {},
                pytest.importorskip("psycopg").errors.AdminShutdown(
                    "terminating connection due to administrator command"
                ),
            ),
            "lost",
        ),
        (
            lambda: OperationalError(
                "SELECT 1",
                {},
                pytest.importorskip("psycopg").errors.CannotConnectNow("the database system is starting up"),
            ),
            "lost",
        ),
        (lambda: OperationalError("INSERT", {}, sqlite3.OperationalError("database is locked")), "locked"),
        # these must stop the sweep at once (tests/test_faults.py part 4 pins the messages)
        (
            lambda: OperationalError(
                "INSERT",
                {},
                pytest.importorskip("psycopg").errors.DiskFull("could not extend file: No space left on device"),
            ),
            None,
        ),
        (lambda: OperationalError("INSERT", {}, sqlite3.OperationalError("database or disk is full")), None),
        (
            lambda: OperationalError("INSERT", {}, sqlite3.OperationalError("attempt to write a readonly database")),
            None,
        ),
        (lambda: IntegrityError("INSERT", {}, sqlite3.IntegrityError("UNIQUE constraint failed")), None),
        (
            lambda: ProgrammingError("SELECT", {}, pytest.importorskip("psycopg").errors.UndefinedTable("no table")),
            None,
        ),
    ],
)
def test_which_errors_are_an_outage(make, expected) -> None:  # type: ignore[no-untyped-def]
    assert transient(make()) == expected


@pytest.mark.parametrize("text", ["soon", "-1", "inf", "nan"])
def test_a_bad_retry_limit_is_refused_naming_the_knob(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv(RETRY_ENV, text)
    with pytest.raises(StoreError, match=RETRY_ENV):
        retry_limit()
    monkeypatch.setenv(RETRY_ENV, "2.5")
    assert retry_limit() == 2.5


# ---- re-running a transaction whose commit landed: nothing twice ---------------------------------------------


def lose_commit_replies(store: Store, times: int) -> list[int]:
    """Raise the lost-connection error after each of the next `times` first tries' commits have landed (every other
    commit: the re-run's commit goes through), so the retrier re-runs transactions that the database already holds.
    Returns the list of commits seen (1 where the reply was lost)."""
    seen: list[int] = []

    def after_commit(_session) -> None:  # type: ignore[no-untyped-def]
        lose = sum(seen) < times and (not seen or seen[-1] == 0)
        seen.append(int(lose))
        if lose:
            raise lost()

    event.listen(store._sessions, "after_commit", after_commit)
    return seen


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    with Store.open(f"sqlite:///{tmp_path / 'r.sqlite'}") as s:
        s.retrier = Retrier(s.retrier.notify, limit_s=5, rng=random.Random(1))
        yield s


def count(store: Store, sql: str) -> int:
    with sqlite3.connect(store.url.removeprefix("sqlite:///")) as c:
        return int(c.execute(sql).fetchone()[0])


def test_record_run_again_after_a_lost_commit_reply_stores_each_pair_once(store: Store) -> None:
    lines: list[str] = []
    store.notify = lines.append
    rec = record_sample(store, finish=False)
    inst, q = instances()[0], gemm_point("fp64", "NN", 64, 64, 64, 10)
    store.mark_inflight(rec.sweep_id, rec.space_id, inst.id, q)
    seen = lose_commit_replies(store, 1)
    store.record(
        rec.sweep_id, rec.space_id, [Measurement(inst.id, q, Status.OK, median_ms=1.0, reps=1, times_ms=[1.0])]
    )
    assert seen == [1, 0]  # the first commit landed but "was lost"; the re-run inserted nothing more
    assert count(store, "select count(*) from measurements") == len(rec.measurements) + 1
    assert count(store, "select count(*) from inflight") == 0
    assert len(lines) == 2 and lines[0].startswith("warning: lost the database connection")
    assert lines[1].startswith("database back after")


def test_begin_sweep_run_again_after_lost_commit_replies_takes_the_lock_and_records_the_sweep_once(
    store: Store,
) -> None:
    store.notify = lambda line: None
    info = device_info()
    dev = store.upsert_device(info)
    sw = store.upsert_software(info, "0.1.0", "abc123")
    seen = lose_commit_replies(store, 2)  # the lock's commit and the sweep row's commit
    sweep = store.begin_sweep(SweepStart("s", "name: s\n", dev, sw, info, scalars={}, reps=5))
    assert seen == [1, 0, 1, 0]
    store.heartbeat()  # the lock is ours, not "another sweep's"
    assert count(store, "select count(*) from sweeps") == 1
    assert count(store, "select sweep_id from sweep_lock") == sweep
    store.finish_sweep(sweep, "done")
    assert count(store, "select count(*) from sweep_lock") == 0
