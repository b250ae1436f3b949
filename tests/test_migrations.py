"""Schema migrations through Alembic (autotune/store/alembic): the committed result databases migrate, old and
new databases are refused with clear messages, and Alembic's bookkeeping stays in autotune's own table.

Real SQLite files; the tests taking `db_url` also run on PostgreSQL when AUTOTUNE_TEST_PG_URL is set (tests/pg.py).
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa
from pg import db_url, fresh_pg_url, points, record_sample, sqlite_url
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.store.migrate import VERSION_TABLE, alembic_config, head, revisions, upgrade
from autotune.store.schema import SCHEMA_VERSION, Base
from autotune.store.store import SchemaVersionError, Store, StoreError
from tests.support.committed import committed_databases, gunzip_to

FIXTURES = (db_url, fresh_pg_url, sqlite_url)  # pytest finds these fixtures by name in this module
COMMITTED = sorted(committed_databases(), key=lambda p: p.stat().st_size)  # results/**/*.sqlite.gz, smallest (schema 1) first
OPTUNA_REVISION = "v3.2.0.a"  # what Optuna's RDB storage keeps in its own alembic_version table


def _rows(url: str, sql: str) -> list[tuple]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql))]
    finally:
        engine.dispose()


def _execute(url: str, *sql: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            for statement in sql:
                conn.execute(sa.text(statement))
    finally:
        engine.dispose()


def _tables(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _make_v1(url: str, pre_alembic: bool = True) -> None:
    """A version-1 database through the baseline revision, with one point; without the Alembic table when
    `pre_alembic` (as autotune made them before Alembic)."""
    from alembic import command

    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(connection=conn), "0001")
            conn.execute(sa.text("INSERT INTO test_points (precision, shape, m, n, k, batch) "
                                 "VALUES ('fp64', 'NN', 32, 16, 8, 1000)"))
            if pre_alembic:
                conn.execute(sa.text(f"DROP TABLE {VERSION_TABLE}"))
    finally:
        engine.dispose()


def _copy(src: Path, folder: Path) -> Path:
    """A consistent copy of an SQLite file (its WAL included), as `autotune db upgrade` users would back it up;
    a gzipped one (the committed databases) is decompressed into folder/NAME.sqlite."""
    folder.mkdir(parents=True, exist_ok=True)
    if src.name.endswith(".gz"):
        return gunzip_to(src, folder / src.name.removesuffix(".gz"))
    dst = folder / src.name
    with sqlite3.connect(f"file:{src.as_posix()}?mode=ro", uri=True) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()
    return dst


def _digest(path: Path) -> str:
    with sqlite3.connect(f"file:{path.as_posix()}?mode=ro", uri=True) as conn:
        dump = "\n".join(conn.iterdump())
    conn.close()
    return hashlib.sha256(dump.encode()).hexdigest()


def test_revisions_match_schema_versions() -> None:
    assert list(revisions()) == ["0001", "0002"]
    assert revisions()[head()] == SCHEMA_VERSION


def test_committed_databases_migrate_and_report_the_same(tmp_path: Path) -> None:
    """Every committed results/**/*.sqlite.gz migrates on a (decompressed) copy (intact, at head, same rows, open for writing);
    the three smallest then report the summary.csv committed next to them."""
    assert len(COMMITTED) >= 3
    t0 = time.monotonic()
    for src in COMMITTED:
        copy = _copy(src, tmp_path / src.parent.name)
        url = f"sqlite:///{copy}"
        counts = {t: _rows(url, f"SELECT COUNT(*) FROM {t}")[0][0] for t in ("measurements", "test_points", "cublas")}
        points_before = _rows(url, "SELECT id, precision, shape, m, n, k, batch FROM test_points ORDER BY id")
        done = upgrade(url)
        # the sweeps committed before Alembic are schema 1; newer ones (results/fp16_tables_h100) are at head already
        assert (done.before.schema_version, done.before.revision) in {(1, None), (SCHEMA_VERSION, head())}, src
        assert (done.after.schema_version, done.after.revision) == (SCHEMA_VERSION, head()), src
        assert _rows(url, "PRAGMA integrity_check") == [("ok",)], src
        assert _rows(url, "PRAGMA foreign_key_check") == [], src
        assert _rows(url, f"SELECT version_num FROM {VERSION_TABLE}") == [(head(),)]
        assert _rows(url, "SELECT value FROM schema_meta") == [(str(SCHEMA_VERSION),)]
        assert {t: _rows(url, f"SELECT COUNT(*) FROM {t}")[0][0] for t in counts} == counts, src
        after = _rows(url, "SELECT id, kind, precision, shape, m, n, k, batch, sizes FROM test_points ORDER BY id")
        assert [(i, p, s, m, n, k, b) for i, _, p, s, m, n, k, b, _ in after] == points_before
        assert all(kind == "gemm" and json.loads(sizes) == dict(m=m, n=n, k=k, batch=b)
                   for _, kind, _, _, m, n, k, b, sizes in after)
        Store.open(url, create=False).close()  # current: opens for writing
    migrate_s = time.monotonic() - t0
    for src in COMMITTED[:3]:
        out = tmp_path / f"report_{src.parent.name}"
        plain = tmp_path / src.parent.name / src.name.removesuffix(".gz")
        r = CliRunner().invoke(app, ["report", str(plain), "--out", str(out)])
        assert r.exit_code == 0, r.output
        committed = src.parent / "summary.csv"
        if committed.is_file():
            assert (out / "summary.csv").read_text() == committed.read_text(), src
        else:  # no committed report: the same rows as reading the original through the migrated temporary copy
            ro = tmp_path / f"report_ro_{src.parent.name}"
            with pytest.warns(UserWarning, match="migrated copy"):
                r = CliRunner().invoke(app, ["report", str(src), "--out", str(ro)])
            assert r.exit_code == 0, r.output
            pd.testing.assert_frame_equal(pd.read_csv(out / "summary.csv"), pd.read_csv(ro / "summary.csv"))
    assert migrate_s < 60, f"migrating {len(COMMITTED)} databases took {migrate_s:.0f} s"


def test_read_only_open_of_a_v1_file_reads_a_migrated_copy(tmp_path: Path) -> None:
    src = _copy(COMMITTED[0], tmp_path)
    before = _digest(src)
    with pytest.warns(UserWarning, match="autotune db upgrade"):
        store = Store.open(str(src), readonly=True)
    try:
        assert not store.measurements().empty
        assert store.url != f"sqlite:///{src}"
    finally:
        store.close()
    assert _digest(src) == before
    assert VERSION_TABLE not in _tables(f"sqlite:///{src}")


@pytest.mark.parametrize("made", ["committed", "pre_alembic", "alembic_0001"])
def test_v1_database_opened_for_writing_says_upgrade_and_is_untouched(tmp_path: Path, made: str) -> None:
    if made == "committed":
        path = _copy(COMMITTED[0], tmp_path)
    else:
        path = tmp_path / "v1.sqlite"
        _make_v1(f"sqlite:///{path}", pre_alembic=made == "pre_alembic")
    # in WAL mode, as sweeps leave their files (Store.open switches a file to WAL before it reads the version)
    sqlite3.connect(path).execute("PRAGMA journal_mode = WAL").connection.close()
    raw, dump = hashlib.sha256(path.read_bytes()).hexdigest(), _digest(path)
    with pytest.raises(SchemaVersionError) as err:
        Store.open(str(path))
    assert "schema version 1, revision 0001 is older" in err.value.message
    assert f"autotune db upgrade sqlite:///{path}" in (err.value.hint or "")
    assert _digest(path) == dump and hashlib.sha256(path.read_bytes()).hexdigest() == raw


def test_other_tools_alembic_version_is_left_alone(db_url: str) -> None:
    """Optuna keeps its revision in alembic_version; autotune creates, stamps and upgrades only its own table."""
    _make_v1(db_url)
    _execute(db_url, "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)",
             f"INSERT INTO alembic_version VALUES ('{OPTUNA_REVISION}')")
    done = upgrade(db_url)
    assert (done.before.revision, done.after.revision) == (None, head())
    assert _rows(db_url, "SELECT version_num FROM alembic_version") == [(OPTUNA_REVISION,)]
    assert _rows(db_url, f"SELECT version_num FROM {VERSION_TABLE}") == [(head(),)]
    assert _rows(db_url, "SELECT kind, sizes, m, batch FROM test_points") == [
        ("gemm", '{"m":32,"n":16,"k":8,"batch":1000}', 32, 1000)]
    assert _rows(db_url, "SELECT value FROM schema_meta") == [("2",)]
    with Store.open(db_url, create=False) as store:  # current, and writable at the new schema
        record_sample(store)
        assert len(store.measurements()) == 6
    assert _rows(db_url, "SELECT version_num FROM alembic_version") == [(OPTUNA_REVISION,)]


def test_new_database_is_created_at_head(db_url: str) -> None:
    Store.open(db_url).close()
    tables = _tables(db_url)
    assert VERSION_TABLE in tables and "alembic_version" not in tables
    assert _rows(db_url, f"SELECT version_num FROM {VERSION_TABLE}") == [(head(),)]
    done = upgrade(db_url)  # nothing to do
    assert done.before == done.after and done.after.revision == head()


def test_migrated_schema_equals_the_models(db_url: str) -> None:
    """Revisions 0001 + 0002 build what the models create (columns, types, nullability, indexes, constraints)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    _make_v1(db_url, pre_alembic=False)
    upgrade(db_url)
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True, "version_table": VERSION_TABLE})
            diff = compare_metadata(ctx, Base.metadata)
    finally:
        engine.dispose()
    assert diff == []


def test_pre_alembic_v2_database_is_current_and_gets_stamped(sqlite_url: str) -> None:
    """Databases made by autotune at schema 2 before Alembic (create_all, no version table)."""
    engine = sa.create_engine(sqlite_url)
    with engine.begin() as conn:
        Base.metadata.create_all(conn)
        conn.execute(sa.text("INSERT INTO schema_meta VALUES ('schema_version', '2')"))
    engine.dispose()
    Store.open(sqlite_url, create=False).close()
    done = upgrade(sqlite_url)
    assert (done.before.revision, done.after.revision) == (None, head())


@pytest.mark.parametrize("table, value", [(VERSION_TABLE, "9999_from_the_future"), ("schema_meta", "3")])
def test_newer_database_is_refused(db_url: str, table: str, value: str) -> None:
    Store.open(db_url).close()
    column = "version_num" if table == VERSION_TABLE else "value"
    _execute(db_url, f"UPDATE {table} SET {column} = '{value}'")
    for attempt in (lambda: Store.open(db_url), lambda: upgrade(db_url)):
        with pytest.raises(SchemaVersionError) as err:
            attempt()
        assert "is newer than this autotune's (schema version 2, revision 0002)" in err.value.message
        assert "upgrade autotune" in (err.value.hint or "")
    assert _rows(db_url, f"SELECT {column} FROM {table}") == [(value,)]


def test_upgrade_refuses_other_databases(sqlite_url: str) -> None:
    _execute(sqlite_url, "CREATE TABLE payroll (id INTEGER PRIMARY KEY)")
    with pytest.raises(StoreError, match="not an autotune results database"):
        upgrade(sqlite_url)


def test_cli_upgrade_and_sql(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    _make_v1(f"sqlite:///{path}")
    dump = _digest(path)
    r = CliRunner().invoke(app, ["db", "upgrade", str(path), "--sql"])
    assert r.exit_code == 0, r.output
    assert f"CREATE TABLE {VERSION_TABLE}" in r.output and "ALTER TABLE test_points_v2 RENAME TO test_points" in r.output
    assert "UPDATE schema_meta SET value = '2'" in r.output
    assert _digest(path) == dump  # --sql changes nothing
    r = CliRunner().invoke(app, ["db", "upgrade", str(path)])
    assert r.exit_code == 0, r.output
    assert "schema version 1, revision 0001 -> schema version 2, revision 0002" in r.output
    r = CliRunner().invoke(app, ["db", "upgrade", str(path)])
    assert r.exit_code == 0 and "already at schema version 2, revision 0002" in r.output
    with Store.open(str(path), create=False) as store:
        assert store.upsert_points(points())


