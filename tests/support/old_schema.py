"""Databases of older schema versions, made from the committed ones (which are at the current schema), for the tests of
reading, migrating and warning about a user's older file.

Schema 2 is Alembic's own downgrade of revision 0003 (the packaged script). Schema 1 is the tables revision 0001 makes,
filled with schema 2's rows (its columns; 0002 has no downgrade), without Alembic's version table: as autotune wrote
databases before Alembic. Only GEMM databases have a schema 1 (kinds came with schema 2)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlalchemy as sa

from autotune.store.migrate import VERSION_TABLE, alembic_config
from tests.support.committed import gunzip_to


def _alembic(url: str, downgrade_to: str | None = None, upgrade_to: str | None = None) -> None:
    from alembic import command

    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            if downgrade_to is not None:
                command.downgrade(alembic_config(connection=conn), downgrade_to)
            if upgrade_to is not None:
                command.upgrade(alembic_config(connection=conn), upgrade_to)
    finally:
        engine.dispose()


def older_copy(src: Path, dest: Path, version: int) -> Path:
    """A plain copy at `dest` of the committed database `src` (a .sqlite.xz at the current schema) at schema
    `version` (2 or 1), its rows the same."""
    assert version in (1, 2)
    dest.parent.mkdir(parents=True, exist_ok=True)
    v2 = dest if version == 2 else dest.with_name(dest.stem + ".schema2.sqlite")
    gunzip_to(src, v2)
    _alembic(f"sqlite:///{v2}", downgrade_to="0002")
    if version == 2:
        return dest
    _alembic(f"sqlite:///{dest}", upgrade_to="0001")
    conn = sqlite3.connect(dest, isolation_level=None)
    try:
        conn.execute("ATTACH DATABASE ? AS v2", (str(v2),))
        conn.execute("BEGIN")
        tables = [r[0] for r in conn.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")]
        for table in tables:
            if table in ("schema_meta", VERSION_TABLE):
                continue
            ours = [r[1] for r in conn.execute(f'PRAGMA main.table_info("{table}")')]
            theirs = {r[1] for r in conn.execute(f'PRAGMA v2.table_info("{table}")')}
            cols = ", ".join(f'"{c}"' for c in ours if c in theirs)
            conn.execute(f'INSERT INTO main."{table}" ({cols}) SELECT {cols} FROM v2."{table}"')
        conn.execute(f'DROP TABLE main."{VERSION_TABLE}"')
        conn.execute("COMMIT")
        conn.execute("DETACH DATABASE v2")
        conn.execute("VACUUM")
    finally:
        conn.close()
    v2.unlink()
    return dest
