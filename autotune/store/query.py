"""Read-only SQL over a results database, and the recipes of docs/queries.md as a small DataFrame API.

`run_query` opens its own read-only connection for every call: SQLite with `mode=ro`,
`PRAGMA query_only` and an authorizer that allows only reads (no ATTACH, VACUUM, PRAGMA assignments,
transactions or writes: `autotune.store.readonly`), PostgreSQL with `default_transaction_read_only` plus `SET TRANSACTION READ ONLY`,
and one statement per call (a second statement after `;` is refused), so DELETE, DROP or UPDATE fail.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import pandas as pd
from sqlalchemy import text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import SQLAlchemyError

from autotune.errors import UserError
from autotune.store.readonly import guard_reads
from autotune.store.engine import database_url, first_line, make_engine, refuse_empty_file, sqlite_path
from autotune.store.migrate import readable_copy
from autotune.store.views import PREFIX, kind_sizes, size_columns, view_columns, view_name
from autotune.vocab import Status


class QueryError(UserError):
    """The query failed: bad SQL, a write attempt, or an unreachable database."""


TIMEOUT_S = 60.0  # `autotune query --timeout`: a statement running longer is cancelled
TIMEOUT_KNOB = "--timeout SECONDS (autotune query)"


@dataclass(frozen=True)
class Recipe:
    """A recipe of docs/queries.md: a SELECT over the results schema plus its ORDER BY (kept apart so filters can wrap it).

    Recipes that show a test point's sizes read them through the kind's view (`autotune.store.views`): in the text,
    `{points}` is the view, `{p_sizes}` its size columns as `p.<size>, ...` and `{sizes}` the bare names. `sql(kind,
    sizes)` fills them in; docs/queries.md prints the GEMM instance (points_gemm; m, n, k, batch)."""

    name: str
    description: str
    select: str
    order_by: str

    @property
    def per_kind(self) -> bool:
        return "{points}" in self.select

    def fill(self, text: str, kind: str, sizes: Sequence[str]) -> str:
        cols = list(size_columns(sizes).values())
        return (
            text.replace("{points}", view_name(kind))
            .replace("{p_sizes}", ", ".join(f"p.{c}" for c in cols))
            .replace("{sizes}", ", ".join(cols))
        )

    def sql(self, kind: str, sizes: Sequence[str]) -> str:
        """The recipe for the test points of `kind` (size names in the kind's order)."""
        return self.fill(f"{self.select}\nORDER BY {self.order_by}", kind, sizes)


_RANKED = """WITH ranked AS (
SELECT m.device_id, m.point_id, i.space, m.instance_id, i.name AS instance, m.median_ms, m.gflops, m.gbs,
       m.roofline_frac,
       ROW_NUMBER() OVER (PARTITION BY m.device_id, i.space, m.point_id
                          ORDER BY m.median_ms, m.instance_id) AS place
FROM measurements m
JOIN instances i ON i.id = m.instance_id
WHERE m.status = 'ok')"""

_POINT = "device, space, precision, shape, {sizes}"

# what the failures recipe counts: a measurement that did not give a verified time. `skipped` is not among them (an
# instance stopped early, provably slower than the best by more than TOL: its few times are kept).
FAILED = (Status.COMPILE_ERROR, Status.LAUNCH_ERROR, Status.WRONG, Status.TIMEOUT, Status.CRASHED)

RECIPES = {
    r.name: r
    for r in (
        Recipe(
            "best_per_point",
            "The fastest correct instance of each space at each test point, on each device.",
            f"""{_RANKED}
SELECT d.name AS device, r.space, p.precision, p.shape, {{p_sizes}}, r.instance_id, r.instance, r.median_ms,
       r.gflops, r.gbs, r.roofline_frac
FROM ranked r
JOIN {{points}} p ON p.id = r.point_id
JOIN devices d ON d.id = r.device_id
WHERE r.place = 1""",
            _POINT,
        ),
        Recipe(
            "distance_from_best",
            "How far each instance is from the best of its space at each point "
            "(slowdown = time / best time; loss = 1 - best / time, the figure TOL bounds). "
            "For one instance, add `WHERE ok.instance_id = '...'` before ORDER BY.",
            """WITH ok AS (
SELECT m.device_id, m.point_id, i.space, m.instance_id, i.name AS instance, m.median_ms,
       MIN(m.median_ms) OVER (PARTITION BY m.device_id, i.space, m.point_id) AS best_ms,
       RANK() OVER (PARTITION BY m.device_id, i.space, m.point_id ORDER BY m.median_ms) AS place
FROM measurements m JOIN instances i ON i.id = m.instance_id
WHERE m.status = 'ok')
SELECT d.name AS device, ok.space, p.precision, p.shape, {p_sizes}, ok.instance_id, ok.instance,
       ok.median_ms, ok.best_ms, ok.median_ms / ok.best_ms AS slowdown, 1 - ok.best_ms / ok.median_ms AS loss,
       ok.place
FROM ok
JOIN {points} p ON p.id = ok.point_id
JOIN devices d ON d.id = ok.device_id""",
            f"{_POINT}, place, instance_id",
        ),
        Recipe(
            "failures_by_kind",
            "How many measurements failed, by space and kind of failure, with one example message "
            "(early stops, `skipped`, are not failures).",
            f"""SELECT d.name AS device, i.space, m.status, COUNT(*) AS count, MIN(m.error) AS example_error
FROM measurements m
JOIN instances i ON i.id = m.instance_id
JOIN devices d ON d.id = m.device_id
WHERE m.status IN ({", ".join(f"'{s.value}'" for s in FAILED)})
GROUP BY d.name, i.space, m.status""",
            "device, space, count DESC, status",
        ),
        Recipe(
            "baseline_speedup",
            "The best instance of each space against the kind's baseline library on the same "
            "GPU (GEMM: cuBLAS; speedup = baseline time / best time).",
            f"""{_RANKED}
SELECT d.name AS device, r.space, p.precision, p.shape, {{p_sizes}}, r.instance, r.median_ms AS best_ms, b.library,
       b.median_ms AS baseline_ms, b.median_ms / r.median_ms AS speedup, r.roofline_frac,
       b.roofline_frac AS baseline_roofline_frac
FROM ranked r
JOIN baselines b ON b.device_id = r.device_id AND b.point_id = r.point_id AND b.status = 'ok'
JOIN {{points}} p ON p.id = r.point_id
JOIN devices d ON d.id = r.device_id
WHERE r.place = 1""",
            _POINT,
        ),
        Recipe(
            "best_by_parameter",
            "The best time at each point for each value of one parameter (here DIM_X), "
            "through the instance_params table.",
            """SELECT i.space, p.precision, p.shape, {p_sizes}, ip.int_value AS dim_x,
       MIN(m.median_ms) AS best_ms, COUNT(*) AS instances
FROM measurements m
JOIN instances i ON i.id = m.instance_id
JOIN instance_params ip ON ip.instance_id = m.instance_id AND ip.name = 'DIM_X'
JOIN {points} p ON p.id = m.point_id
WHERE m.status = 'ok'
GROUP BY i.space, p.precision, p.shape, {p_sizes}, ip.int_value""",
            "space, precision, shape, {sizes}, dim_x",
        ),
    )
}


def run_query(url: str, sql: str, *, timeout: float = TIMEOUT_S, max_rows: int | None = None) -> pd.DataFrame:
    """Run ONE SQL statement on a read-only connection and return its rows (no rows: an empty frame).

    A statement still running after `timeout` seconds is cancelled (SQLite: a progress handler; PostgreSQL:
    `statement_timeout`) with a QueryError naming the knob. With `max_rows`, at most that many rows are fetched;
    `frame.attrs["truncated"]` says whether more were left.

    An SQLite file of an older schema is read through its migrated copy (`migrate.readable_copy`), so the recipes of docs/queries.md
    recipes work on every database. Raises QueryError with the database's message, e.g. for a write ("attempt to
    write a readonly database", "cannot execute DELETE in a read-only transaction") or a second statement."""
    return _read(url, lambda conn: _driver_query(conn, sql, max_rows), timeout)


def best_per_point(url: str, device: str | None = None, space: str | None = None) -> pd.DataFrame:
    """One row per (device, space, test point): the fastest correct instance, its time and figures (every kind in
    the database: a `kind` column after `space`, then one column per size name of the kinds present)."""
    return _recipe(url, "best_per_point", device=device, space=space)


def distance_from_best(url: str, instance_id: str, device: str | None = None) -> pd.DataFrame:
    """One row per (device, point) where `instance_id` was measured correct: its time, the best time of
    its space, slowdown, loss and place (1 = fastest)."""
    return _recipe(url, "distance_from_best", device=device, instance_id=instance_id)


def failures_by_kind(url: str, device: str | None = None, space: str | None = None) -> pd.DataFrame:
    """Failure counts by (device, space, status), with one example error message each: compile_error,
    launch_error, wrong, timeout and crashed (`FAILED`), not `skipped` (stopped early)."""
    return _recipe(url, "failures_by_kind", device=device, space=space)


def baseline_speedup(url: str, device: str | None = None, space: str | None = None) -> pd.DataFrame:
    """Per (device, space, point) with a baseline time: best time, the library and its time, speedup and roofline
    fractions."""
    return _recipe(url, "baseline_speedup", device=device, space=space)


def _recipe(url: str, name: str, **filters: str | None) -> pd.DataFrame:
    """A recipe with equality filters on its output columns (fixed column names, bound values); a per-kind recipe
    runs once per kind in the database, its rows concatenated (`kind` column after `space`)."""
    recipe = RECIPES[name]
    used = {k: v for k, v in filters.items() if v is not None}
    where = " AND ".join(f"r.{k} = :{k}" for k in used) or "1 = 1"

    def one(conn: Connection, kind: str, sizes: Sequence[str]) -> pd.DataFrame:
        order = ", ".join(f"r.{part.strip()}" for part in recipe.fill(recipe.order_by, kind, sizes).split(","))
        sql = recipe.fill(f"SELECT * FROM (\n{recipe.select}\n) r WHERE {where} ORDER BY {order}", kind, sizes)
        result = conn.execute(text(sql), used)
        frame = pd.DataFrame(result.fetchall(), columns=list(result.keys()))
        if recipe.per_kind:
            frame.insert(frame.columns.get_loc("space") + 1, "kind", kind)
        return frame

    def run(conn: Connection) -> pd.DataFrame:
        if not recipe.per_kind:
            return one(conn, "", ())
        frames = [one(conn, kind, sizes) for kind, sizes in kind_sizes(conn).items()]
        frames = [f for f in frames if len(f)] or frames[:1]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    return _read(url, run)


def _driver_query(conn: Connection, sql: str, max_rows: int | None = None) -> pd.DataFrame:
    """Through the DB-API cursor, so `:name` in string literals is left alone and one statement runs."""
    raw = conn.connection.driver_connection
    cur = raw.cursor()  # type: ignore[union-attr]
    try:
        if conn.dialect.name == "postgresql":
            cur.execute(sql, prepare=True)  # a prepared statement cannot hold a second command
        else:
            cur.execute(sql)  # sqlite3 refuses a second statement
        if cur.description is None:
            return pd.DataFrame()
        rows = cur.fetchall() if max_rows is None else cur.fetchmany(max_rows + 1)
        frame = pd.DataFrame(rows[:max_rows], columns=[c[0] for c in cur.description])
        frame.attrs["truncated"] = max_rows is not None and len(rows) > max_rows
        return frame
    finally:
        cur.close()


def _db_errors() -> tuple[type[Exception], ...]:
    errors: list[type[Exception]] = [SQLAlchemyError, sqlite3.Error]
    with contextlib.suppress(ImportError):  # (PostgreSQL support may not be installed)
        import psycopg

        errors.append(psycopg.Error)
    return tuple(errors)


def _views(url: str) -> str:
    engine = make_engine(url, readonly=True)
    try:
        with engine.connect() as conn:
            return ", ".join(f"{name}({', '.join(cols)})" for name, cols in sorted(view_columns(conn).items()))
    except _db_errors():
        return ""
    finally:
        engine.dispose()


def _time_limit(conn: Connection, timeout: float) -> None:
    """Cancel a statement of this connection that runs longer than `timeout` seconds."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SET statement_timeout = {max(1, round(timeout * 1000))}")
        return
    deadline = time.monotonic() + timeout
    conn.connection.driver_connection.set_progress_handler(  # type: ignore[union-attr]
        lambda: int(time.monotonic() > deadline), 10_000
    )


def _read(url: str, work: Callable[[Connection], pd.DataFrame], timeout: float | None = None) -> pd.DataFrame:
    """Run `work` on a fresh read-only connection (cancelled after `timeout` seconds when given); database
    errors become QueryError."""
    url = database_url(url)
    shown = make_url(url).render_as_string()
    path = sqlite_path(url)
    if make_url(url).get_backend_name() == "sqlite" and not os.path.isfile(path or ""):
        raise QueryError(
            f"no SQLite database at {shown}",
            hint="give the database URL of a sweep "
            "(configs say it under `database:`; the default is results/<config name>.sqlite)",
        )
    if path is not None:
        refuse_empty_file(path)
        url = readable_copy(url, path)  # an older schema: its migrated copy (the file is never written)
    engine = make_engine(url, readonly=True)
    try:
        with engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql("SET TRANSACTION READ ONLY")
            if timeout is not None:
                _time_limit(conn, timeout)
            with guard_reads(conn):
                frame = work(conn)
            conn.rollback()
            return frame
    except _db_errors() as exc:
        reason = first_line(exc)
        if timeout is not None and (reason.strip() == "interrupted" or "statement timeout" in reason):
            raise QueryError(
                f"query on {shown} stopped after the time limit of {timeout:g} s",
                hint=f"add a LIMIT or a narrower WHERE, or raise the limit: {TIMEOUT_KNOB}",
            ) from None
        hint = (
            "`autotune query` is read-only: open the database with a SQL client to change it"
            if ("read" in reason.lower() and "only" in reason.lower()) or "authoriz" in reason.lower()
            else "run one SELECT statement; docs/schema.md lists the tables and columns"
        )
        if PREFIX in reason and ("no such table" in reason or "does not exist" in reason):
            hint = (
                f"a database has one {PREFIX}<kind> view per problem kind it holds; this one has: "
                f"{_views(url) or 'none (no test points yet)'}"
            )
        raise QueryError(f"query failed on {shown}: {reason}", hint=hint) from exc
    finally:
        engine.dispose()
