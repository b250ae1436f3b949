"""Creating the schema of a new results database, safely when several processes do it at once.

Two sweeps started together on a new SQLite file both saw an empty database and both ran CREATE TABLE:
the second failed with "table schema_meta already exists". Here the check and the creation run in one
transaction under the database's write lock (SQLite: BEGIN IMMEDIATE, which waits up to the busy timeout;
PostgreSQL: a transaction-scoped advisory lock), so exactly one process creates the tables and the
others find them afterwards. DDL is transactional in both, so nobody ever sees half a schema. A new database is
created at the newest schema and stamped with the head Alembic revision in the same transaction.
"""

from __future__ import annotations

from sqlalchemy import inspect, insert
from sqlalchemy.engine import Engine

from autotune.store.migrate import PG_LOCK_KEY, stamp_head
from autotune.store.schema import SCHEMA_VERSION, Base, SchemaMeta


def create_schema(engine: Engine) -> bool:
    """Create every table, the schema_version row and the Alembic head stamp if the database has no schema_meta table.
    True when this call created them, False when another process had (the caller then checks the version)."""
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock, held until commit or rollback
        elif conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_LOCK_KEY})")
        if "schema_meta" in inspect(conn).get_table_names():
            conn.rollback()
            return False
        Base.metadata.create_all(conn)
        conn.execute(insert(SchemaMeta).values(key="schema_version", value=str(SCHEMA_VERSION)))
        stamp_head(conn)
        conn.commit()
        return True
