"""Schema migrations through Alembic (autotune/store/alembic): the committed result databases migrate, old and
new databases are refused with clear messages, and Alembic's bookkeeping stays in autotune's own table.

Real SQLite files; the tests taking `db_url` also run on PostgreSQL when AUTOTUNE_TEST_PG_URL is set (tests/pg.py).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa
from pg import db_url, fresh_pg_url, points, record_sample, sqlite_url
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.paths import ROOT
from autotune.store.migrate import VERSION_TABLE, alembic_config, head, revisions, upgrade
from autotune.store.schema import SCHEMA_VERSION, Base
from autotune.store.store import SchemaVersionError, Store, StoreError
from tests.support.committed import committed_databases, example_databases, gunzip_to, read_only
from tests.support.old_schema import older_copy

FIXTURES = (db_url, fresh_pg_url, sqlite_url)  # pytest finds these fixtures by name in this module
COMMITTED = sorted(committed_databases(), key=lambda p: p.stat().st_size)  # results/**/*.sqlite.xz, smallest first
EXAMPLES = example_databases()  # examples/*/results/*.sqlite.xz: kinds other than GEMM
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


def _columns(url: str, table: str) -> list[str]:
    engine = sa.create_engine(url)
    try:
        return [c["name"] for c in sa.inspect(engine).get_columns(table)]
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
            conn.execute(
                sa.text(
                    "INSERT INTO test_points (precision, shape, m, n, k, batch) VALUES ('fp64', 'NN', 32, 16, 8, 1000)"
                )
            )
            if pre_alembic:
                conn.execute(sa.text(f"DROP TABLE {VERSION_TABLE}"))
    finally:
        engine.dispose()


def _copy(src: Path, folder: Path) -> Path:
    """A consistent copy of an SQLite file (its WAL included), as `autotune db upgrade` users would back it up;
    of a packed or gzipped one (the committed databases are packed), a copy of its shared decompressed copy (made once
    for every test that reads the file: tests/support/committed.read_only) at folder/NAME.sqlite."""
    folder.mkdir(parents=True, exist_ok=True)
    if src.name.endswith((".gz", ".xz")):
        dst = folder / src.name.removesuffix(".gz").removesuffix(".xz")
        shutil.copyfile(read_only(src), dst)  # (the shared copy is read-only: this one is the user's file, writable)
        return dst
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
    assert list(revisions()) == ["0001", "0002", "0003"]
    assert revisions()[head()] == SCHEMA_VERSION


def test_revisions_read_without_alembic_are_alembics(tmp_path: Path) -> None:
    """`revisions()` reads the scripts' assignments (no Alembic import on a database open): the same revisions, in
    the same order, with the same schema versions, as Alembic's ScriptDirectory walks them; and opening a database
    imports no Alembic module (a fresh process)."""
    from autotune.store.migrate import _scripts

    walked = list(_scripts().walk_revisions())[::-1]
    assert revisions() == {r.revision: int(r.module.SCHEMA_VERSION) for r in walked}
    assert head() == _scripts().get_current_head()
    plain = gunzip_to(COMMITTED[0], tmp_path / "db.sqlite")
    probe = (
        "import sys; from autotune.store.store import Store\n"
        f"with Store.open({'sqlite:///' + str(plain)!r}, create=False, readonly=True) as s: pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", done.stdout


def _snapshot(url: str) -> dict:
    """What a migration must keep, read at any schema version: row counts, each point's kind, precision, shape and
    sizes, each sweep's scalars, each baseline's point and time."""
    columns = {t: set(_columns(url, t)) for t in ("test_points", "sweeps")}
    base = "baselines" if "baselines" in _tables(url) else "cublas"
    if "sizes" in columns["test_points"]:
        kinds = "kind" if "kind" in columns["test_points"] else "'gemm'"
        points = {
            i: (k, p, s, json.loads(z))
            for i, k, p, s, z in _rows(url, f"SELECT id, {kinds}, precision, shape, sizes FROM test_points")
        }
    else:  # schema 1: GEMM columns
        points = {
            i: ("gemm", p, s, dict(m=m, n=n, k=k, batch=b))
            for i, p, s, m, n, k, b in _rows(url, "SELECT id, precision, shape, m, n, k, batch FROM test_points")
        }
    if "scalars" in columns["sweeps"]:
        scalars = {
            i: json.loads(x) if isinstance(x, str) else x for i, x in _rows(url, "SELECT id, scalars FROM sweeps")
        }
    else:
        scalars = {i: {"alpha": a, "beta": b} for i, a, b in _rows(url, "SELECT id, alpha, beta FROM sweeps")}
    return dict(
        counts={t: _rows(url, f"SELECT COUNT(*) FROM {t}")[0][0] for t in ("measurements", "test_points")}
        | {"baselines": _rows(url, f"SELECT COUNT(*) FROM {base}")[0][0]},
        points=points,
        scalars=scalars,
        baselines=_rows(url, f"SELECT id, device_id, point_id, status, median_ms FROM {base} ORDER BY id"),
    )


def _check_kind_neutral(url: str, before: dict, src: Path) -> None:
    """At schema 3: sizes recoverable from point_sizes and through each kind's view, scalars and baselines kept."""
    assert _snapshot(url) == before, src
    sizes: dict[int, dict] = {}
    for point_id, name, value in _rows(url, "SELECT point_id, name, value FROM point_sizes ORDER BY point_id, name"):
        sizes.setdefault(point_id, {})[name] = value
    assert sizes == {i: z for i, (_, _, _, z) in before["points"].items()}, src
    kinds = {k: list(z) for k, _, _, z in before["points"].values()}
    if set(kinds) == {"gemm"}:  # GEMM's baseline is cuBLAS; another kind's is its own (complete_conv_h200: CuPy's)
        assert {lib for (lib,) in _rows(url, "SELECT DISTINCT library FROM baselines")} <= {"cublas"}, src
    views = {v: c for v, c in _views(url).items()}
    assert set(views) == {f"points_{k}" for k in kinds}, src
    for kind, names in kinds.items():
        assert views[f"points_{kind}"] == ["id", "precision", "shape", *names]
        rows = _rows(url, f"SELECT id, precision, shape, {', '.join(names)} FROM points_{kind} ORDER BY id")
        assert rows == [(i, p, s, *z.values()) for i, (k, p, s, z) in sorted(before["points"].items()) if k == kind]
    if "gemm" in kinds:  # a recipe's filter on a size, through the view and its index
        m = min(z["m"] for k, _, _, z in before["points"].values() if k == "gemm")
        n = _rows(url, f"SELECT COUNT(*) FROM measurements x JOIN points_gemm p ON p.id = x.point_id WHERE p.m = {m}")
        assert n[0][0] > 0, src


def _dict_rows(url: str, table: str) -> list[dict]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [dict(r) for r in conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY id")).mappings()]
    finally:
        engine.dispose()


def _views(url: str) -> dict[str, list[str]]:
    engine = sa.create_engine(url)
    try:
        insp = sa.inspect(engine)
        return {v: [c["name"] for c in insp.get_columns(v)] for v in insp.get_view_names()}
    finally:
        engine.dispose()


def _folder(src: Path) -> str:
    """A folder name of its own for the copy of a committed database (several are validation/validation.sqlite.xz)."""
    return src.parent.relative_to(ROOT).as_posix().replace("/", "_") if src.suffix == ".xz" else "older"


def test_committed_databases_migrate_and_report_the_same(tmp_path: Path) -> None:
    """Every committed results/**/*.sqlite.xz and examples/*/results/*.sqlite.xz is at head (an upgrade changes nothing:
    intact, same rows, sizes, scalars and baselines, views per kind, open for writing); copies of the smallest ones
    made older (schema 1 for GEMM, 2 for another kind: tests/support/old_schema.py) migrate back to the same rows; the
    three smallest of results/ report the summary.csv committed next to them."""
    assert len(COMMITTED) >= 3 and len(EXAMPLES) >= 3
    t0 = time.monotonic()
    older = [
        (older_copy(COMMITTED[0], tmp_path / "older" / "v1.sqlite", 1), COMMITTED[0], (1, None)),
        (older_copy(EXAMPLES[0], tmp_path / "older" / "v2.sqlite", 2), EXAMPLES[0], (2, "0002")),
    ]
    for src in [*COMMITTED, *EXAMPLES, *(old for old, _, _ in older)]:
        copy = _copy(src, tmp_path / _folder(src)) if src.suffix == ".xz" else src
        url = f"sqlite:///{copy}"
        before = _snapshot(url)
        done = upgrade(url)
        want = next((state for old, _, state in older if old == src), (SCHEMA_VERSION, head()))
        assert (done.before.schema_version, done.before.revision) == want, src
        assert (done.after.schema_version, done.after.revision) == (SCHEMA_VERSION, head()), src
        assert _rows(url, "PRAGMA integrity_check") == [("ok",)], src
        assert _rows(url, "PRAGMA foreign_key_check") == [], src
        assert _rows(url, f"SELECT version_num FROM {VERSION_TABLE}") == [(head(),)]
        assert _rows(url, "SELECT value FROM schema_meta") == [(str(SCHEMA_VERSION),)]
        assert "cublas" not in _tables(url)
        _check_kind_neutral(url, before, src)
        Store.open(url, create=False).close()  # current: opens for writing
    for old, committed, _ in older:  # migrated back: the committed database's rows
        again = _copy(committed, tmp_path / "again" / _folder(committed))
        assert _snapshot(f"sqlite:///{old}") == _snapshot(f"sqlite:///{again}"), committed
        for table in ("measurements", "baselines", "point_sizes", "instances"):
            sql = f"SELECT * FROM {table} ORDER BY 1, 2, 3"
            assert _rows(f"sqlite:///{old}", sql) == _rows(f"sqlite:///{again}", sql), (committed, table)
    migrate_s = time.monotonic() - t0
    for src in COMMITTED[:3]:
        out = tmp_path / f"report_{_folder(src)}"
        plain = tmp_path / _folder(src) / src.name.removesuffix(".gz").removesuffix(".xz")
        # summary.csv is what is compared: one TOL and a fixed structure (it reads neither; no leave-one-out search)
        fixed = ["--tols", "0.05", "--structure", "regions"]
        r = CliRunner().invoke(app, ["report", str(plain), *fixed, "--out", str(out)])
        assert r.exit_code == 0, r.output
        committed = src.parent / "summary.csv"
        if committed.is_file():
            assert (out / "summary.csv").read_text() == committed.read_text(), src
        else:  # no committed report: the same rows as reading the committed file itself
            ro = tmp_path / f"report_ro_{_folder(src)}"
            r = CliRunner().invoke(app, ["report", str(src), *fixed, "--out", str(ro)])
            assert r.exit_code == 0, r.output
            pd.testing.assert_frame_equal(pd.read_csv(out / "summary.csv"), pd.read_csv(ro / "summary.csv"))
    assert migrate_s < 90, f"migrating {len(COMMITTED) + len(EXAMPLES) + 2} databases took {migrate_s:.0f} s"


def test_downgrade_of_0003_restores_schema_2(tmp_path: Path) -> None:
    """0003 down to 0002 gives back GEMM's columns, alpha/beta and the cublas table with the same rows, for a GEMM
    database and a database of another kind; upgrading again gives the same schema-3 data."""
    from alembic import command

    gemm = next(p for p in COMMITTED if p.parent.name == "square_share_h100")  # committed at schema 2 before
    for src in (gemm, EXAMPLES[0]):
        url = f"sqlite:///{older_copy(src, tmp_path / src.parent.name / 'v2.sqlite', 2)}"
        v2 = _snapshot(url)
        tables = {t: _dict_rows(url, t) for t in ("test_points", "sweeps", "cublas")}
        upgrade(url)
        engine = sa.create_engine(url)
        try:
            with engine.begin() as conn:
                command.downgrade(alembic_config(connection=conn), "0002")
        finally:
            engine.dispose()
        assert _rows(url, "SELECT value FROM schema_meta") == [("2",)]
        assert _snapshot(url) == v2
        assert not {"point_sizes", "baselines"} & _tables(url) and _views(url) == {}
        assert {t: _dict_rows(url, t) for t in tables} == tables  # the same rows and values (column order aside)
        upgrade(url)
        _check_kind_neutral(url, v2, src)


def test_read_only_open_of_a_v1_file_reads_a_migrated_copy(tmp_path: Path) -> None:
    src = older_copy(COMMITTED[0], tmp_path / "v1.sqlite", 1)
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
    if made == "committed":  # a committed database as schema 1 wrote it
        path = older_copy(COMMITTED[0], tmp_path / "v1.sqlite", 1)
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
    _execute(
        db_url,
        "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)",
        f"INSERT INTO alembic_version VALUES ('{OPTUNA_REVISION}')",
    )
    done = upgrade(db_url)
    assert (done.before.revision, done.after.revision) == (None, head())
    assert _rows(db_url, "SELECT version_num FROM alembic_version") == [(OPTUNA_REVISION,)]
    assert _rows(db_url, f"SELECT version_num FROM {VERSION_TABLE}") == [(head(),)]
    assert _rows(db_url, "SELECT kind, sizes FROM test_points") == [("gemm", '{"m":32,"n":16,"k":8,"batch":1000}')]
    assert _rows(db_url, "SELECT precision, shape, m, n, k, batch FROM points_gemm") == [
        ("fp64", "NN", 32, 16, 8, 1000)
    ]
    assert _rows(db_url, "SELECT value FROM schema_meta") == [(str(SCHEMA_VERSION),)]
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


def test_direct_stamp_of_a_new_database_matches_alembics(tmp_path: Path) -> None:
    """stamp_head writes the version table without importing Alembic: the same table (DDL) and row as Alembic's
    own stamp, and head() is Alembic's head."""
    from alembic.runtime.migration import MigrationContext

    from autotune.store.migrate import _scripts, stamp_head

    assert head() == _scripts().get_current_head()
    ddl = {}
    for name, stamp in (
        ("ours", stamp_head),
        (
            "alembic",
            lambda conn: MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).stamp(
                _scripts(), "head"
            ),
        ),
    ):
        engine = sa.create_engine(f"sqlite:///{tmp_path / name}.sqlite")
        try:
            with engine.begin() as conn:
                stamp(conn)
            with engine.connect() as conn:
                ddl[name] = (
                    conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = ?", (VERSION_TABLE,)).scalar_one(),
                    conn.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}").all(),
                )
        finally:
            engine.dispose()
    assert ddl["ours"] == ddl["alembic"] and ddl["ours"][1] == [(head(),)]


def test_migrated_schema_equals_the_models(db_url: str) -> None:
    """Revisions 0001 to 0003 build what the models create (columns, types, nullability, indexes, constraints)."""
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


def test_pre_alembic_v2_database_is_older_and_gets_upgraded(sqlite_url: str) -> None:
    """Databases made by autotune at schema 2 before Alembic (the schema-2 tables, no version table)."""
    from alembic import command

    engine = sa.create_engine(sqlite_url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(connection=conn), "0002")
        conn.execute(sa.text(f"DROP TABLE {VERSION_TABLE}"))
        conn.exec_driver_sql(
            "INSERT INTO test_points (kind, precision, shape, sizes) "
            """VALUES ('convolution5x5', 'fp32', 'plain', '{"ny":40,"nx":31}')"""
        )
    engine.dispose()
    with pytest.raises(SchemaVersionError, match="schema version 2, revision 0002 is older"):
        Store.open(sqlite_url, create=False)
    done = upgrade(sqlite_url)
    assert (done.before.revision, done.after.revision) == (None, head())
    assert _rows(sqlite_url, "SELECT precision, shape, ny, nx FROM points_convolution5x5") == [
        ("fp32", "plain", 40, 31)
    ]


@pytest.mark.parametrize("table, value", [(VERSION_TABLE, "9999_from_the_future"), ("schema_meta", "4")])
def test_newer_database_is_refused(db_url: str, table: str, value: str) -> None:
    Store.open(db_url).close()
    column = "version_num" if table == VERSION_TABLE else "value"
    _execute(db_url, f"UPDATE {table} SET {column} = '{value}'")
    for attempt in (lambda: Store.open(db_url), lambda: upgrade(db_url)):
        with pytest.raises(SchemaVersionError) as err:
            attempt()
        assert "is newer than this autotune's (schema version 3, revision 0003)" in err.value.message
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
    assert (
        f"CREATE TABLE {VERSION_TABLE}" in r.output and "ALTER TABLE test_points_v2 RENAME TO test_points" in r.output
    )
    assert "UPDATE schema_meta SET value = '2'" in r.output and "UPDATE schema_meta SET value = '3'" in r.output
    assert "CREATE VIEW points_gemm AS" in r.output and "json_each(p.sizes)" in r.output
    assert _digest(path) == dump  # --sql changes nothing
    r = CliRunner().invoke(app, ["db", "upgrade", str(path)])
    assert r.exit_code == 0, r.output
    assert "schema version 1, revision 0001 -> schema version 3, revision 0003" in r.output
    r = CliRunner().invoke(app, ["db", "upgrade", str(path)])
    assert r.exit_code == 0 and "already at schema version 3, revision 0003" in r.output
    with Store.open(str(path), create=False) as store:
        assert store.upsert_points(points())


def test_downgrade_to_0002_and_upgrade_again(db_url: str) -> None:
    """On SQLite and PostgreSQL: a schema-3 database with a sweep goes down to schema 2 (GEMM columns, alpha/beta,
    the cublas table) and up again with the same data."""
    from alembic import command

    with Store.open(db_url) as store:
        record_sample(store)
    engine = sa.create_engine(db_url)
    try:
        with engine.begin() as conn:
            command.downgrade(alembic_config(connection=conn), "0002")
    finally:
        engine.dispose()
    assert _rows(db_url, "SELECT value FROM schema_meta") == [("2",)]
    assert _rows(db_url, "SELECT kind, m, n, k, batch FROM test_points ORDER BY id") == [
        ("gemm", 32, 32, 32, 1000),
        ("gemm", 16, 16, 16, 4000),
    ]
    assert _rows(db_url, "SELECT alpha, beta FROM sweeps") == [(1.0, 0.0)]
    assert _rows(db_url, "SELECT COUNT(*) FROM cublas") == [(2,)]
    assert not {"baselines", "point_sizes"} & _tables(db_url) and _views(db_url) == {}
    done = upgrade(db_url)
    assert (done.before.revision, done.after.revision) == ("0002", head())
    with Store.open(db_url, create=False) as store:
        assert len(store.measurements()) == 6 and set(store.baselines().library) == {"cublas"}
    assert _rows(db_url, "SELECT m, batch FROM points_gemm ORDER BY id") == [(32, 1000), (16, 4000)]
