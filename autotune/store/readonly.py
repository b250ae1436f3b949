"""A read-only guard for SQLite connections: an authorizer that lets a statement read and nothing else.

`mode=ro` and `PRAGMA query_only` stop writes to the main database, but not `ATTACH 'x.db'` (which
creates x.db), `VACUUM INTO 'y.db'` (creates y.db) or `PRAGMA writable_schema = 1`. SQLite asks the
authorizer about every action while it prepares a statement; anything not on the list below is
denied, so the statement fails before it runs ("not authorized") and no file is touched.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any, Iterator

# pragmas that only read; those taking an argument take a table or index name, never a new setting
READ_PRAGMAS_WITH_ARG = frozenset(
    {
        "table_info",
        "table_xinfo",
        "index_list",
        "index_info",
        "index_xinfo",
        "foreign_key_list",
        "foreign_key_check",
        "integrity_check",
        "quick_check",
        "table_list",
    }
)
READ_PRAGMAS = READ_PRAGMAS_WITH_ARG | frozenset(
    {
        "database_list",
        "collation_list",
        "compile_options",
        "function_list",
        "module_list",
        "pragma_list",
        "encoding",
        "page_count",
        "page_size",
        "freelist_count",
        "schema_version",
        "user_version",
        "application_id",
        "journal_mode",
        "foreign_keys",
        "query_only",
        "busy_timeout",
        "data_version",
    }
)

_ALLOWED = frozenset(
    getattr(sqlite3, name) for name in ("SQLITE_SELECT", "SQLITE_READ", "SQLITE_FUNCTION", "SQLITE_RECURSIVE")
)


def read_only_authorizer(action: int, arg1: Any, arg2: Any, _db: Any, _trigger: Any) -> int:
    """sqlite3 authorizer: SELECTs, reads, function calls, recursive CTEs and reading pragmas only."""
    if action in _ALLOWED:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA:
        name = (arg1 or "").lower()
        if name in READ_PRAGMAS and (arg2 is None or name in READ_PRAGMAS_WITH_ARG):
            return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


@contextlib.contextmanager
def guard_reads(conn: Any) -> Iterator[None]:
    """Within the block, statements on this SQLAlchemy connection (SQLite) may only read.
    Other databases are left alone (PostgreSQL gets read-only transactions from make_engine)."""
    if conn.dialect.name != "sqlite":
        yield
        return
    raw = conn.connection.driver_connection
    raw.set_authorizer(read_only_authorizer)
    try:
        yield
    finally:
        raw.set_authorizer(None)
