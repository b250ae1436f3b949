"""One SQL view per problem kind in a database, so SQL reads a kind's sizes as columns.

`points_<kind>(id, precision, shape, <size>...)` has one row per test point of the kind and one column per size
name, in the kind's order (GEMM: `points_gemm(id, precision, shape, m, n, k, batch)`), pivoted from `point_sizes`
by one JOIN per size on its primary key, so SQLite and PostgreSQL flatten the view into the query, may start from
any of its tables, and a filter such as `WHERE p.m = 8` uses the (name, value) index. A recipe reads
`JOIN points_gemm p ON p.id = m.point_id WHERE p.m = 8`. A size that only some of a kind's points have (the kind's
definition changed between sweeps) is a LEFT JOIN, empty for the others, so the view keeps every point of its kind.

Names: the view is `points_` + `sql_name(kind)` and each column `sql_name(size)`, where `sql_name` lowercases the
name and replaces every character other than a-z, 0-9 and _ by _, prefixes `_` when it starts with a digit, and,
when that changed the name (or it is longer than 40 characters), appends _ and 8 hex digits of the name's SHA-256,
so two kinds never share a view. A size column named like a fixed column (id, precision, shape) becomes
`size_<name>`. The store makes a kind's view when it first records a point of the kind (and remakes it when a
later point brings a new size name); revision 0003 makes the views of the kinds already in a database.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Iterable, Sequence

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

PREFIX = "points_"
FIXED = ("id", "precision", "shape")
_SAFE = re.compile(r"[a-z_][a-z0-9_]*")
MAX_NAME = 40


def sql_name(name: str) -> str:
    """A safe SQL identifier for a kind or size name (see the module's docstring for the rule)."""
    safe = re.sub(r"[^a-z0-9_]", "_", name.lower())
    if not safe or safe[0].isdigit():
        safe = f"_{safe}"
    if safe != name or len(safe) > MAX_NAME:
        safe = f"{safe[:MAX_NAME]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    assert _SAFE.fullmatch(safe), safe
    return safe


def view_name(kind: str) -> str:
    """The view of a kind's test points, e.g. points_gemm."""
    return PREFIX + sql_name(kind)


def size_columns(sizes: Sequence[str]) -> dict[str, str]:
    """Size name -> the view's column name, in the kind's order."""
    out: dict[str, str] = {}
    for name in sizes:
        col = sql_name(name)
        out[name] = f"size_{col}" if col in FIXED else col
    return out


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def view_sql(kind: str, sizes: Sequence[str], optional: Iterable[str] = ()) -> str:
    """The CREATE VIEW statement of a kind with these size names (portable SQL: SQLite and PostgreSQL); the sizes in
    `optional` (that some points lack) are LEFT JOINs, after the others."""
    cols = size_columns(sizes)
    optional = set(optional)
    select = ", ".join(
        ["p.id", "p.precision", "p.shape", *(f"s{i}.value AS {col}" for i, col in enumerate(cols.values()))]
    )
    joins = [
        f"{'LEFT JOIN' if name in optional else 'JOIN'} point_sizes s{i} ON s{i}.point_id = p.id "
        f"AND s{i}.name = {_literal(name)}"
        for i, name in enumerate(cols)
    ]
    joins.sort(key=lambda j: j.startswith("LEFT"))  # stable: inner joins first, each group in the kind's order
    return (
        f"CREATE VIEW {view_name(kind)} AS\nSELECT {select}\nFROM test_points p\n"
        + "".join(j + "\n" for j in joins)
        + f"WHERE p.kind = {_literal(kind)}"
    )


def kind_layouts(conn: Connection) -> dict[str, tuple[tuple[str, ...], frozenset[str]]]:
    """Each kind with test points in the database: its size names (the kind's order, then names that only some of its
    points have) and those that some of its points lack."""
    names: dict[str, dict[str, None]] = {}
    common: dict[str, set[str]] = {}
    for kind, sizes in conn.execute(text("SELECT DISTINCT kind, sizes FROM test_points ORDER BY kind")):
        keys = list(json.loads(sizes))
        names.setdefault(kind, {}).update(dict.fromkeys(keys))
        common[kind] = common[kind] & set(keys) if kind in common else set(keys)
    return {kind: (tuple(n), frozenset(n) - common[kind]) for kind, n in names.items()}


def kind_sizes(conn: Connection) -> dict[str, tuple[str, ...]]:
    """Each kind with test points in the database and its size names: the kind's order, then names that only some of
    its points have (a kind whose definition gained a size)."""
    return {kind: sizes for kind, (sizes, _) in kind_layouts(conn).items()}


def view_columns(conn: Connection) -> dict[str, tuple[str, ...]]:
    """The point views in the database and their columns."""
    insp = inspect(conn)
    return {
        name: tuple(c["name"] for c in insp.get_columns(name))
        for name in insp.get_view_names()
        if name.startswith(PREFIX)
    }


def ensure_views(conn: Connection, kinds: Iterable[str] | None = None) -> list[str]:
    """Make (or remake, when its columns differ or it misses some of the kind's points) the view of each kind in
    `kinds` (None: every kind present) that has test points; returns the views made. Runs in the caller's
    transaction."""
    present = kind_layouts(conn)
    wanted = present if kinds is None else {k: present[k] for k in kinds if k in present}
    existing = view_columns(conn)
    made = []
    for kind, (sizes, optional) in wanted.items():
        name = view_name(kind)
        if existing.get(name) == (*FIXED, *size_columns(sizes).values()) and _complete(conn, name, kind):
            continue
        if name in existing:
            conn.exec_driver_sql(f"DROP VIEW {name}")
        conn.exec_driver_sql(view_sql(kind, sizes, optional))  # not text(): a ':' in a name is no bind parameter
        made.append(name)
    return made


def _complete(conn: Connection, view: str, kind: str) -> bool:
    """Whether the view has a row for every test point of its kind."""
    shown = conn.exec_driver_sql(f"SELECT COUNT(*) FROM {view}").scalar()
    return shown == conn.execute(text("SELECT COUNT(*) FROM test_points WHERE kind = :k"), {"k": kind}).scalar()
