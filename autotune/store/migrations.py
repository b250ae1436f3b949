"""Schema migrations, one function per step, each run in its own transaction by `schema.upgrade`.

1 -> 2 ("any kernel, any problem"): test points get a problem kind and their sizes as canonical JSON
(`kind`, `sizes`; unique per kind, precision, variant and sizes); m, n, k, batch stay as indexed columns that
GEMM points fill (so the SQL recipes keep working); spaces keep what rebuilds their instances without the work
tree (`kind`, `source_text`, `headers`, `problem`). Every existing point becomes a `gemm` point.
"""
from __future__ import annotations

from typing import Callable

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.schema import CreateIndex, CreateTable

SIZES_SQL = {"sqlite": "'{\"m\":' || m || ',\"n\":' || n || ',\"k\":' || k || ',\"batch\":' || batch || '}'",
             "postgresql": "'{\"m\":' || m || ',\"n\":' || n || ',\"k\":' || k || ',\"batch\":' || batch || '}'"}


def v1_to_v2(conn: Connection) -> None:
    from autotune.store.schema import Point

    dialect = conn.dialect.name
    sizes = SIZES_SQL.get(dialect, SIZES_SQL["sqlite"])
    if dialect == "sqlite":  # SQLite cannot alter a constraint: rebuild the table under the new definition
        table = Point.__table__
        ddl = str(CreateTable(table).compile(dialect=conn.dialect)).replace(
            "CREATE TABLE test_points", "CREATE TABLE test_points_v2", 1)
        conn.execute(text(ddl))
        conn.execute(text(f"INSERT INTO test_points_v2 (id, kind, precision, shape, sizes, m, n, k, batch) "
                          f"SELECT id, 'gemm', precision, shape, {sizes}, m, n, k, batch FROM test_points"))
        conn.execute(text("DROP TABLE test_points"))
        conn.execute(text("ALTER TABLE test_points_v2 RENAME TO test_points"))
        for index in table.indexes:
            conn.execute(CreateIndex(index))
    else:
        old = [u["name"] for u in inspect(conn).get_unique_constraints("test_points")]
        for name in old:
            conn.execute(text(f'ALTER TABLE test_points DROP CONSTRAINT "{name}"'))
        conn.execute(text("ALTER TABLE test_points ADD COLUMN kind VARCHAR(64) DEFAULT 'gemm' NOT NULL"))
        conn.execute(text("ALTER TABLE test_points ADD COLUMN sizes TEXT"))
        conn.execute(text(f"UPDATE test_points SET sizes = {sizes}"))
        conn.execute(text("ALTER TABLE test_points ALTER COLUMN sizes SET NOT NULL"))
        conn.execute(text("ALTER TABLE test_points ALTER COLUMN shape TYPE VARCHAR(16)"))
        for col in ("m", "n", "k", "batch"):
            conn.execute(text(f"ALTER TABLE test_points ALTER COLUMN {col} TYPE BIGINT"))
            conn.execute(text(f"ALTER TABLE test_points ALTER COLUMN {col} DROP NOT NULL"))
        conn.execute(text("ALTER TABLE test_points ADD CONSTRAINT uq_test_points_kind_sizes "
                          "UNIQUE (kind, precision, shape, sizes)"))
        conn.execute(text("CREATE INDEX ix_test_points_kind ON test_points (kind)"))
        conn.execute(text("CREATE INDEX ix_test_points_mnk ON test_points (m, n, k)"))
    for col, typ in (("kind", "VARCHAR(64)"), ("source_text", "TEXT"), ("headers", "JSON"), ("problem", "JSON")):
        conn.execute(text(f"ALTER TABLE spaces ADD COLUMN {col} {typ}"))
    conn.execute(text("UPDATE spaces SET kind = 'gemm'"))


# from-version -> the step to from-version + 1
MIGRATIONS: dict[int, Callable[[Connection], None]] = {1: v1_to_v2}
