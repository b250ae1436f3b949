"""Schema versions and upgrades through Alembic, with the migration scripts shipped in the package.

The scripts live in `autotune/store/alembic/` (env.py, versions/NNNN_*.py), configured here without an
alembic.ini. Alembic records a database's revision in its own table, `autotune_alembic_version`, never in
`alembic_version`: Optuna's RDB storage uses that name, and studies may share the database.

A database's version is its Alembic revision; databases made before Alembic have no version table and
are known by their schema_meta row instead (schema version N = the revision whose SCHEMA_VERSION is N).
schema_meta.schema_version stays in step (each revision updates it), so an autotune that predates
Alembic still says "newer" instead of misreading a migrated database. The check on open (`check`)
compares the revision with the package's head, like Optuna's `_VersionManager.check_table_schema_compatibility`:
equal is current, a revision the package knows is older (run `autotune db upgrade`), anything else newer.

A new database is created at the head schema and stamped with the head revision in one transaction (`create_schema`),
safely when several processes do it at once.
"""

from __future__ import annotations

import ast
import hashlib
import io
import logging
import os
import sqlite3
import warnings
from contextlib import closing
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table, event, inspect, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import SQLAlchemyError

from autotune.store.engine import (
    SchemaVersionError,
    StoreError,
    gz_origin,
    make_engine,
    prune_cache,
    publish_copy,
    readonly_uri,
    refuse_empty_file,
    remember_gz_copy,
    scratch_folder,
    sqlite_path,
    temporary_beside,
    verified_copy,
)
from autotune.store.version import SCHEMA_VERSION

VERSION_TABLE = "autotune_alembic_version"
SCRIPTS = Path(__file__).with_name("alembic")
PG_LOCK_KEY = 0x6175746F  # "auto": the advisory lock taken while the schema is created or migrated

logging.getLogger("alembic").setLevel(logging.WARNING)


def alembic_config(connection: Connection | None = None, url: str | None = None, output: io.StringIO | None = None):  # type: ignore[no-untyped-def]
    """Alembic's Config for the packaged scripts: online with `connection`, offline (SQL to `output`) with `url`."""
    from alembic.config import Config

    cfg = Config(output_buffer=output)
    cfg.set_main_option("script_location", str(SCRIPTS).replace("%", "%%"))
    cfg.attributes.update(connection=connection, url=url)
    return cfg


@lru_cache(maxsize=1)
def _scripts():  # type: ignore[no-untyped-def]
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def head() -> str:
    """The package's newest revision."""
    return next(reversed(revisions()))


@lru_cache(maxsize=1)
def revisions() -> dict[str, int]:
    """Every revision the package knows, oldest first, with the schema version it leaves behind: read from the
    scripts' module-level assignments (`revision`, `down_revision`, `SCHEMA_VERSION`) without importing Alembic, which
    every database open would otherwise load (~0.2-0.5 s a process); tests/test_migrations.py checks it against
    Alembic's own ScriptDirectory."""
    found: dict[str | None, tuple[str, int]] = {}  # down_revision -> (revision, schema version)
    for script in sorted((SCRIPTS / "versions").glob("*.py")):
        names = {
            t.id: ast.literal_eval(node.value)
            for node in ast.parse(script.read_text()).body
            if isinstance(node, ast.Assign)
            for t in node.targets
            if isinstance(t, ast.Name) and t.id in ("revision", "down_revision", "SCHEMA_VERSION")
        }
        found[names["down_revision"]] = (names["revision"], int(names["SCHEMA_VERSION"]))
    chain: dict[str, int] = {}
    down: str | None = None
    while down in found:  # from the baseline (down_revision None) along the one branch
        down, version = found[down]
        chain[down] = version
    return chain


def revision_of(schema_version: int) -> str | None:
    """The revision of a schema version (None for versions older than the baseline or newer than the package)."""
    return next((rev for rev, v in revisions().items() if v == schema_version), None)


@dataclass(frozen=True)
class DatabaseVersion:
    revision: str | None  # in autotune_alembic_version; None for a database made before Alembic
    schema_version: int  # schema_meta.schema_version

    @property
    def effective(self) -> str | None:
        """The revision the database is at: its own, or that of its schema version."""
        return self.revision if self.revision is not None else revision_of(self.schema_version)

    @property
    def state(self) -> Literal["current", "older", "newer"]:
        if self.schema_version > SCHEMA_VERSION:
            return "newer"
        rev = self.effective
        if rev == head():
            return "current"
        if rev is None or rev in revisions():  # None: older than the baseline (no path; upgrade says so)
            return "older"
        return "newer"

    def describe(self) -> str:
        rev = self.effective
        return f"schema version {self.schema_version}" + (f", revision {rev}" if rev else "")


def database_version(conn: Connection) -> DatabaseVersion | None:
    """The version of the database on `conn`; None when it has no schema_meta table (empty or not autotune's)."""
    tables = set(inspect(conn).get_table_names())
    if "schema_meta" not in tables:
        return None
    value = conn.execute(text("SELECT value FROM schema_meta WHERE key = 'schema_version'")).scalar_one()
    revision = None
    if VERSION_TABLE in tables:  # Alembic's one row (read as its MigrationContext would, without importing it)
        rows = list(conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars())
        if len(rows) > 1:
            raise SchemaVersionError(
                f"the database records {len(rows)} revisions ({', '.join(map(str, rows[:3]))}): one is expected",
                hint="restore it from a copy; autotune's migrations are one branch",
            )
        revision = rows[0] if rows else None
    return DatabaseVersion(revision, int(value))


def check(version: DatabaseVersion, url: str) -> None:
    """Raise SchemaVersionError unless the database is at the package's head revision."""
    ours = f"schema version {SCHEMA_VERSION}, revision {head()}"
    if version.state == "newer":
        raise SchemaVersionError(
            f"database {version.describe()} is newer than this autotune's ({ours})",
            hint="upgrade autotune (pip install -U autotune) or use another database",
        )
    if version.state == "older":
        raise SchemaVersionError(
            f"database {version.describe()} is older than this autotune's ({ours})",
            hint=f"run `autotune db upgrade {make_url(url).render_as_string()}` to migrate it in place "
            "(back the file up first)",
        )


def stamp_head(conn: Connection) -> None:
    """Record the head revision in a database just created at head (inside the caller's transaction): Alembic's
    version table (its `version_table_impl`: version_num VARCHAR(32) NOT NULL, primary key `<table>_pkc`) and
    the head's row, written directly: importing Alembic's runtime took 0.5-0.7 s of a new tune_kernel database's
    0.8-0.9 s (2-core host); tests/test_migrations.py checks it matches Alembic's own stamp."""
    table = Table(
        VERSION_TABLE,
        MetaData(),
        Column("version_num", String(32), nullable=False),
        PrimaryKeyConstraint("version_num", name=f"{VERSION_TABLE}_pkc"),
    )
    table.create(conn, checkfirst=True)
    conn.execute(table.delete())
    conn.execute(table.insert().values(version_num=head()))


def create_schema(engine: Engine) -> bool:
    """Create every table, the schema_version row and the Alembic head stamp if the database has no schema_meta table.
    True when this call created them, False when another process had (the caller then checks the version).

    Two sweeps started together on a new SQLite file both saw an empty database and both ran CREATE TABLE: the second
    failed with "table schema_meta already exists". Here the check and the creation run in one transaction under the
    database's write lock (SQLite: BEGIN IMMEDIATE, which waits up to the busy timeout; PostgreSQL: a
    transaction-scoped advisory lock), so exactly one process creates the tables and the others find them afterwards.
    DDL is transactional in both, so nobody ever sees half a schema."""
    from autotune.store.schema import Base, SchemaMeta  # the ORM: not loaded where a database is only read

    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock, held until commit or rollback
        elif conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_LOCK_KEY})")
        if "schema_meta" in inspect(conn).get_table_names():
            conn.rollback()
            return False
        Base.metadata.create_all(conn)
        conn.execute(SchemaMeta.__table__.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
        stamp_head(conn)
        conn.commit()
        return True


@dataclass(frozen=True)
class Upgrade:
    before: DatabaseVersion
    after: DatabaseVersion | None  # None for --sql (nothing was changed)
    sql: str | None = None  # the SQL, in offline mode


def upgrade(url: str, sql: bool = False) -> Upgrade:
    """Migrate the database at `url` to the head revision in place, in one transaction (all or nothing).

    A database made before Alembic is first stamped with the revision of its schema_meta version. With `sql`,
    nothing is written: the SQL that the upgrade would run is returned (Alembic's offline mode).
    Raises StoreError (not an autotune database) or SchemaVersionError (newer, or no path)."""
    from alembic import command

    path = sqlite_path(url)
    if path is not None and not Path(path).is_file():  # SQLite would make a new file there (or fail: a folder)
        raise StoreError(
            f"no SQLite database at {path}", hint="give the results database of a sweep: there is nothing to upgrade"
        )
    if path is not None:
        refuse_empty_file(path)
    engine = make_engine(url, readonly=sql and make_url(url).get_backend_name() == "sqlite")
    if engine.dialect.name == "sqlite" and not sql:

        @event.listens_for(engine, "connect")
        def _migrating(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
            dbapi_conn.execute("PRAGMA foreign_keys = OFF")  # rebuilding a table must not cascade
            dbapi_conn.isolation_level = None  # transactional DDL: SQLAlchemy's BEGIN below, not pysqlite's

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock for the whole upgrade

    try:
        with engine.connect() as conn:
            with conn.begin():
                if conn.dialect.name == "postgresql" and not sql:
                    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_LOCK_KEY})")
                before = database_version(conn)
                if before is None:
                    raise StoreError(
                        f"{make_url(url).render_as_string()} is not an autotune results database "
                        "(no schema_meta table)",
                        hint="give the URL of a sweep's database",
                    )
                if before.state == "newer":
                    check(before, url)
                if before.effective is None:
                    raise SchemaVersionError(
                        f"no migration from schema version {before.schema_version}",
                        hint="export what you need with `autotune query` and start a new database",
                    )
                if sql:
                    out = io.StringIO()
                    cfg = alembic_config(url=url, output=out)
                    if before.revision is None:  # made before Alembic: the version table and its stamp first
                        command.stamp(cfg, before.effective, sql=True)
                    command.upgrade(cfg, f"{before.effective}:head", sql=True)
                    return Upgrade(before, None, out.getvalue())
                if before.revision is None:
                    from alembic.runtime.migration import MigrationContext

                    MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).stamp(
                        _scripts(), before.effective
                    )
                command.upgrade(alembic_config(connection=conn), "head")
                after = database_version(conn)
            if conn.dialect.name == "sqlite":
                problems = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if problems:  # cannot happen unless the file was inconsistent before; say so rather than hide it
                    raise StoreError(f"after the upgrade, {len(problems)} rows break foreign keys: {problems[:3]}")
        return Upgrade(before, after)
    finally:
        engine.dispose()


_MIGRATED: dict[tuple[str, float, int], str] = {}


@lru_cache(maxsize=1)
def _scripts_digest() -> str:
    """A digest of the packaged revisions: a migrated copy made by other scripts is never reused."""
    digest = hashlib.sha256()
    for script in sorted((SCRIPTS / "versions").glob("*.py")):
        digest.update(script.name.encode() + b"\0" + script.read_bytes())
    return digest.hexdigest()[:16]


def _shown(path: Path) -> str:
    """`path` as a message names it: relative to the current folder when it is under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def migration_note(path: Path, schema_version: int) -> str:
    """The one line said when the user's database `path` (a plain file, or a compressed one read through a copy) of an
    older schema is read through a migrated copy: what it reads, and the one command that migrates the file."""
    name = _shown(path)
    if path.name.endswith((".xz", ".gz")):
        plain = name.removesuffix(".xz").removesuffix(".gz")
        plain = plain if plain.endswith((".sqlite", ".db")) else plain + ".sqlite"
        first = f"autotune db unpack {name} --out {plain}" if path.suffix == ".xz" else f"gunzip -k {name}"
        command = f"{first} && autotune db upgrade {plain}"
    else:
        command = f"autotune db upgrade {name}"
    return (
        f"{name}: schema version {schema_version}, read through a migrated copy (unchanged); to migrate it: {command}"
    )


def readable_copy(url: str, path: str) -> str:
    """Reading an SQLite file of an older schema: the URL of a copy upgraded to the head revision (the file itself is
    never written; `autotune db upgrade` migrates it in place), with one warning (`migration_note`). The copy of a
    plain file lives in this process's scratch folder, removed at exit (`scratch_folder`); that of a compressed file's
    decompressed copy (content-addressed, see `engine.gunzipped`) is kept beside it in the user's private cache
    (verified before reuse like it, pruned with it) under a name with this schema version and a digest of the
    revisions, so later processes read it at once, without loading Alembic. Other files: `url` unchanged (Store.open
    then reports what is wrong, newer schemas included)."""
    stat = Path(path).stat()
    key = (str(Path(path).resolve()), stat.st_mtime, stat.st_size)
    if key in _MIGRATED and (gz_origin(path) is None or verified_copy(Path(_MIGRATED[key][len("sqlite:///") :]))):
        return _MIGRATED[key]
    meta = _meta_version(path)
    if meta is None or meta >= SCHEMA_VERSION:  # current, newer or not autotune's: read as it is
        return url
    origin = gz_origin(path)
    if origin is not None:
        copy = Path(path).with_name(f"{Path(path).stem}.s{SCHEMA_VERSION}-{_scripts_digest()}.sqlite")
        remember_gz_copy(copy, origin)  # messages about the migrated copy name the user's .gz
    else:
        copy = scratch_folder("autotune-migrated-") / f"{len(_MIGRATED)}-{Path(path).name}"
    if not (verified_copy(copy) if origin is not None else copy.is_file()):
        engine = make_engine(url, readonly=True)
        try:
            with engine.connect() as conn:
                version = database_version(conn)
        except SQLAlchemyError:
            return url  # unreadable: Store.open reports it
        finally:
            engine.dispose()
        if version is None or version.state != "older" or version.effective is None:
            return url
        _migrated_copy(path, copy, shared=origin is not None)
    _MIGRATED[key] = f"sqlite:///{copy}"
    warnings.warn(migration_note(origin or Path(path), meta), stacklevel=3)
    return _MIGRATED[key]


def _meta_version(path: str) -> int | None:
    """schema_meta's schema_version of an SQLite file, read without SQLAlchemy or Alembic; None when it has none."""
    try:
        with closing(sqlite3.connect(readonly_uri(path), uri=True)) as conn:
            row = conn.execute("SELECT value FROM schema_meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else None
    except (sqlite3.Error, ValueError):
        return None


def _migrated_copy(path: str, copy: Path, shared: bool) -> None:
    """Copy the SQLite file `path` to `copy` and upgrade it to head; `shared`: a read-only file in one piece (no WAL),
    made under a temporary name and renamed, so concurrent readers never see a half-migrated file."""
    tmp = temporary_beside(copy, "tmp")
    with closing(sqlite3.connect(readonly_uri(path), uri=True)) as src, closing(sqlite3.connect(tmp)) as dst:
        src.backup(dst)  # a consistent copy, WAL included
    try:
        upgrade(f"sqlite:///{tmp}")
        if shared:
            with closing(sqlite3.connect(tmp)) as done:
                done.execute("PRAGMA journal_mode = DELETE")
            publish_copy(tmp, copy)  # read-only, with the SHA-256 that `verified_copy` checks before reuse
            prune_cache(copy.parent, keep=copy)
        else:
            os.replace(tmp, copy)
    finally:
        tmp.unlink(missing_ok=True)
