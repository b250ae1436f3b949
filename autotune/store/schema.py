"""The results database schema: SQLAlchemy 2.0 models, the schema version, engines.

SQLite (WAL mode, busy timeout) by default, PostgreSQL through a URL. `autotune.store.store` holds the
operations on it. The README's "Results database" section documents every table and column.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping
from urllib.parse import quote

from sqlalchemy import (JSON, BigInteger, CheckConstraint, DateTime, Float, ForeignKey, Index, Integer, String,
                        Text, UniqueConstraint, create_engine, event)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from autotune.errors import UserError
from autotune.vocab import DeviceInfo, Status, TestPoint

SCHEMA_VERSION = 2  # the schema_meta row; the Alembic revisions in autotune/store/alembic carry the history
STATUSES = tuple(s.value for s in Status)


class StoreError(UserError):
    """The database cannot be opened or written as asked."""


class SchemaVersionError(StoreError):
    """The database was written by another schema version."""


class SweepLockedError(StoreError):
    """Another live sweep holds the database."""


def now() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    pass


class SchemaMeta(Base):
    __tablename__ = "schema_meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(256))


class Device(Base):
    __tablename__ = "devices"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(128))
    sm_count: Mapped[int] = mapped_column(Integer)
    cc: Mapped[int] = mapped_column(Integer)
    sm_clock_mhz: Mapped[int | None] = mapped_column(Integer)  # as last seen; each sweep keeps its own
    mem_clock_mhz: Mapped[int | None] = mapped_column(Integer)
    l2_bytes: Mapped[int] = mapped_column(BigInteger)
    copy_bandwidth: Mapped[float] = mapped_column(Float)  # bytes/s, measured, last seen


class Software(Base):
    __tablename__ = "software"
    __table_args__ = (UniqueConstraint("driver", "cuda_runtime", "nvrtc", "cupy", "autotune_version", "git_commit"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    driver: Mapped[str] = mapped_column(String(64))
    cuda_runtime: Mapped[str] = mapped_column(String(64))
    nvrtc: Mapped[str] = mapped_column(String(64))
    cupy: Mapped[str] = mapped_column(String(64))
    autotune_version: Mapped[str] = mapped_column(String(64))
    git_commit: Mapped[str] = mapped_column(String(64))  # "" when unknown


class SpaceVersion(Base):
    __tablename__ = "spaces"
    __table_args__ = (UniqueConstraint("name", "yaml_hash", "source_hash"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), index=True)
    yaml_path: Mapped[str] = mapped_column(Text)
    yaml_hash: Mapped[str] = mapped_column(String(64))
    source_path: Mapped[str] = mapped_column(Text)
    source_hash: Mapped[str] = mapped_column(String(64))
    yaml_text: Mapped[str] = mapped_column(Text)
    # schema 2: what rebuilds the space's instances without the work tree
    kind: Mapped[str | None] = mapped_column(String(64))  # the problem kind its kernel solves
    source_text: Mapped[str | None] = mapped_column(Text)  # the kernel source as compiled
    headers: Mapped[dict | None] = mapped_column(JSON)  # {include name: text} of the local headers it includes
    problem: Mapped[dict | None] = mapped_column(JSON)  # the kind's definition (ProblemKind.describe())


class InstanceRow(Base):
    __tablename__ = "instances"
    id: Mapped[str] = mapped_column(String(16), primary_key=True)
    space: Mapped[str] = mapped_column(String(128), index=True)
    name: Mapped[str] = mapped_column(Text)
    params: Mapped[dict] = mapped_column(JSON)


class InstanceParam(Base):
    __tablename__ = "instance_params"
    __table_args__ = (Index("ix_instance_params_name_int", "name", "int_value"),)
    instance_id: Mapped[str] = mapped_column(ForeignKey("instances.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    int_value: Mapped[int | None] = mapped_column(BigInteger)  # integers (and booleans as 0/1)
    real_value: Mapped[float | None] = mapped_column(Float)  # every number, integers included
    text_value: Mapped[str | None] = mapped_column(Text)  # strings


class Point(Base):
    """A test point: its kind, precision, variant and sizes (canonical JSON, the kind's order). GEMM points
    also fill the indexed columns m, n, k, batch that the SQL recipes read."""
    __tablename__ = "test_points"
    __table_args__ = (UniqueConstraint("kind", "precision", "shape", "sizes", name="uq_test_points_kind_sizes"),
                      Index("ix_test_points_mnk", "m", "n", "k"))
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(64), default="gemm", server_default="gemm", index=True)
    precision: Mapped[str] = mapped_column(String(8))
    shape: Mapped[str] = mapped_column(String(16))
    sizes: Mapped[str] = mapped_column(Text)
    m: Mapped[int | None] = mapped_column(BigInteger)
    n: Mapped[int | None] = mapped_column(BigInteger)
    k: Mapped[int | None] = mapped_column(BigInteger)
    batch: Mapped[int | None] = mapped_column(BigInteger)

    def point(self) -> TestPoint:
        return TestPoint(self.kind, self.precision, self.shape,
                         tuple((name, int(v)) for name, v in json.loads(self.sizes).items()))

    @staticmethod
    def columns(point: TestPoint) -> dict:
        """The row's values for a test point."""
        dims = point.dims
        return dict(kind=point.kind, precision=point.precision, shape=point.shape, sizes=sizes_json(point),
                    **{c: dims.get(c) for c in GEMM_COLUMNS})


GEMM_COLUMNS = ("m", "n", "k", "batch")


def sizes_json(point: TestPoint) -> str:
    return json.dumps(dict(point.sizes), separators=(",", ":"))


class Sweep(Base):
    __tablename__ = "sweeps"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    config_name: Mapped[str] = mapped_column(String(128))
    config_text: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    status: Mapped[str] = mapped_column(String(16))  # running | done | interrupted | failed | died
    device_id: Mapped[int] = mapped_column(ForeignKey("devices.id"))
    software_id: Mapped[int] = mapped_column(ForeignKey("software.id"))
    alpha: Mapped[float] = mapped_column(Float)
    beta: Mapped[float] = mapped_column(Float)
    reps: Mapped[int] = mapped_column(Integer)
    sm_clock_mhz: Mapped[int | None] = mapped_column(Integer)
    mem_clock_mhz: Mapped[int | None] = mapped_column(Integer)
    copy_bandwidth: Mapped[float] = mapped_column(Float)
    host: Mapped[str] = mapped_column(String(256))
    pid: Mapped[int] = mapped_column(Integer)


class SweepLock(Base):
    __tablename__ = "sweep_lock"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)  # always 1: one writer per database
    token: Mapped[str] = mapped_column(String(32))
    sweep_id: Mapped[int | None] = mapped_column(Integer)
    host: Mapped[str] = mapped_column(String(256))
    pid: Mapped[int] = mapped_column(Integer)
    acquired_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class _Timed:
    """Columns of one timed result, shared by kernel measurements and cuBLAS times."""

    status: Mapped[str] = mapped_column(String(16))
    median_ms: Mapped[float | None] = mapped_column(Float)
    p20_ms: Mapped[float | None] = mapped_column(Float)
    p80_ms: Mapped[float | None] = mapped_column(Float)
    min_ms: Mapped[float | None] = mapped_column(Float)
    max_ms: Mapped[float | None] = mapped_column(Float)
    reps: Mapped[int] = mapped_column(Integer)
    times_ms: Mapped[list] = mapped_column(JSON)
    gflops: Mapped[float | None] = mapped_column(Float)
    gbs: Mapped[float | None] = mapped_column(Float)
    roofline_frac: Mapped[float | None] = mapped_column(Float)
    l2_protection: Mapped[str | None] = mapped_column(String(32))
    error: Mapped[str | None] = mapped_column(Text)
    measured_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class MeasurementRow(_Timed, Base):
    __tablename__ = "measurements"
    __table_args__ = (UniqueConstraint("instance_id", "point_id", "device_id", name="uq_measurement_pair"),
                      CheckConstraint(f"status IN {STATUSES!r}", name="ck_measurement_status"),
                      Index("ix_measurements_point_status", "point_id", "status", "median_ms"))
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"), index=True)
    instance_id: Mapped[str] = mapped_column(ForeignKey("instances.id"), index=True)
    point_id: Mapped[int] = mapped_column(ForeignKey("test_points.id"))
    device_id: Mapped[int] = mapped_column(ForeignKey("devices.id"))
    space_id: Mapped[int] = mapped_column(ForeignKey("spaces.id"))  # the space version (YAML + kernel source)
    max_rel_err: Mapped[float | None] = mapped_column(Float)
    registers: Mapped[int | None] = mapped_column(Integer)
    shared_bytes: Mapped[int | None] = mapped_column(Integer)
    local_bytes: Mapped[int | None] = mapped_column(Integer)
    compile_s: Mapped[float | None] = mapped_column(Float)
    log: Mapped[str | None] = mapped_column(Text)


class Inflight(Base):
    __tablename__ = "inflight"
    instance_id: Mapped[str] = mapped_column(ForeignKey("instances.id"), primary_key=True)
    point_id: Mapped[int] = mapped_column(ForeignKey("test_points.id"), primary_key=True)
    device_id: Mapped[int] = mapped_column(ForeignKey("devices.id"), primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"))
    space_id: Mapped[int] = mapped_column(ForeignKey("spaces.id"))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class CublasRow(_Timed, Base):
    __tablename__ = "cublas"
    __table_args__ = (UniqueConstraint("device_id", "point_id", name="uq_cublas_point"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    device_id: Mapped[int] = mapped_column(ForeignKey("devices.id"))
    point_id: Mapped[int] = mapped_column(ForeignKey("test_points.id"))
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"))


@dataclass(frozen=True)
class SpaceRecord:
    """What identifies the version of a space that produced a measurement."""

    name: str
    yaml_path: str
    yaml_text: str
    source_path: str
    source_text: str
    kind: str = "gemm"
    headers: dict | None = None  # {include name: text} of the local headers the source includes
    problem: dict | None = None  # the kind's definition (ProblemKind.describe())

    @property
    def yaml_hash(self) -> str:
        return hashlib.sha256(self.yaml_text.encode()).hexdigest()

    @property
    def source_hash(self) -> str:
        return hashlib.sha256(self.source_text.encode()).hexdigest()


@dataclass(frozen=True)
class SweepStart:
    """What `begin_sweep` records about a sweep (the device and software rows must exist)."""

    config_name: str
    config_text: str
    device_id: int
    software_id: int
    device: DeviceInfo
    alpha: float = 1.0
    beta: float = 0.0
    reps: int = 20
    scalars: Mapping[str, float] | None = None  # the run's scalars; when given, alpha/beta are read from them

    def __post_init__(self) -> None:
        if self.scalars is not None:
            object.__setattr__(self, "alpha", float(self.scalars.get("alpha", 1.0)))
            object.__setattr__(self, "beta", float(self.scalars.get("beta", 0.0)))


@dataclass(frozen=True)
class Figures:
    gflops: float | None
    gbs: float | None
    roofline_frac: float | None


def figures(flops: float | None, nbytes: int | None, median_ms: float | None, bandwidth: float) -> Figures:
    """GFLOP/s, GB/s and fraction of the bandwidth roofline of one time (MEASURING.md formulas), from the
    work its problem kind counts for the point (flops, fewest bytes moved)."""
    if median_ms is None or median_ms <= 0:
        return Figures(None, None, None)
    seconds = median_ms * 1e-3
    gflops = flops / seconds / 1e9 if flops else None
    if nbytes is None:
        return Figures(gflops, None, None)
    frac = (nbytes / bandwidth) / seconds if bandwidth > 0 else None
    return Figures(gflops, nbytes / seconds / 1e9, frac)


def sqlite_path(url: str) -> str | None:
    """The file of an SQLite URL (`sqlite:///file:PATH?uri=true` URLs included); None for other URLs and memory."""
    u = make_url(url)
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return u.database[5:] if u.database.startswith("file:") else u.database


GZ_READ_ONLY = "a gzipped database is read-only here: gunzip it first, or sweep into a new file"


def gz_path(text: str) -> Path | None:
    """The file when `text` (a path or an sqlite:/// URL) names a gzipped SQLite database (`*.gz`); else None."""
    if "://" not in text:
        path: str | None = text
    else:
        try:
            path = sqlite_path(text)
        except Exception:  # noqa: BLE001 - not a URL at all: database_url reports it
            return None
    if path is None or not path.endswith(".gz"):
        return None
    return Path(path).expanduser().resolve()


def refuse_gz(text: str) -> None:
    """Raise StoreError when `text` names a gzipped database: writes must never go to its decompressed copy."""
    path = gz_path(text)
    if path is not None:
        raise StoreError(f"{GZ_READ_ONLY} ({path})",
                         hint=f"gunzip -k {path} and name the .sqlite file, or give a new database file")


def gz_cache_dir() -> Path:
    import tempfile
    return Path(tempfile.gettempdir()) / "autotune-gz"


_GUNZIPPED: dict[tuple[str, int, int], Path] = {}
_GZ_ORIGIN: dict[str, Path] = {}  # decompressed copy -> the .gz it was read from (for messages)


def gz_origin(path: str | Path) -> Path | None:
    """The .gz file whose decompressed copy is `path` (in this process); None for any other file."""
    return _GZ_ORIGIN.get(str(Path(path).resolve()))


def gunzipped(path: Path) -> Path:
    """The decompressed copy of the gzipped database `path`: gz_cache_dir()/<sha256 of the .gz bytes>.sqlite,
    made once (temporary name + os.replace, so concurrent readers never see a partial file) and reused
    while the .gz bytes are the same. Raises StoreError when the file is missing or not gzip."""
    import gzip
    import os
    import shutil

    try:
        stat = path.stat()
    except OSError as exc:
        raise StoreError(f"no gzipped SQLite database at {path} ({exc.strerror})",
                         hint="give the results database of a sweep") from None
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    cached = _GUNZIPPED.get(key)
    if cached is not None and cached.is_file():
        return cached
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    folder = gz_cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{digest.hexdigest()}.sqlite"
    if not target.is_file():
        tmp = folder / f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        try:
            with gzip.open(path, "rb") as src, tmp.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.chmod(tmp, 0o444)  # the copy is only read: opening it for writing fails instead of diverging
            os.replace(tmp, target)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            tmp.unlink(missing_ok=True)
            raise StoreError(f"cannot decompress {path}: {exc}",
                             hint="check that the file is a complete gzip of an SQLite database") from None
    _GUNZIPPED[key] = target
    _GZ_ORIGIN[str(target.resolve())] = path
    return target


def database_url(text: str, *, write: bool = False) -> str:
    """A SQLAlchemy URL as given, or a bare file path as the URL of an SQLite file. A gzipped SQLite file
    (`*.sqlite.gz`, path or sqlite:/// URL) is read through its decompressed copy (see `gunzipped`);
    with `write` it is refused. Raises StoreError."""
    gz = gz_path(text)
    if gz is not None:
        if write:
            refuse_gz(text)
        return f"sqlite:///{gunzipped(gz)}"
    if "://" not in text:
        return f"sqlite:///{Path(text).expanduser().resolve()}"
    from sqlalchemy.exc import ArgumentError
    try:
        make_url(text)
    except ArgumentError:
        raise StoreError(f"not a database URL: {text!r}",
                         hint="write a file path, sqlite:///path.sqlite or postgresql+psycopg://user@host/db") from None
    return text


def make_engine(url: str, readonly: bool = False) -> Engine:
    """An engine for `url`: SQLite gets WAL + busy timeout (or a `mode=ro` connection when `readonly`),
    PostgreSQL gets read-only transactions by default when `readonly`."""
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        path = sqlite_path(url)
        if readonly:
            if path is None:
                raise StoreError(f"cannot open {url} read-only", hint="give the path of an SQLite file")
            uri = f"file:{quote(Path(path).resolve().as_posix())}?mode=ro"
            engine = create_engine("sqlite://", creator=lambda: sqlite3.connect(uri, uri=True, timeout=30,
                                                                             check_same_thread=False))
        else:
            engine = create_engine(u, connect_args={"timeout": 30})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA busy_timeout = 30000")
            cur.execute("PRAGMA foreign_keys = ON")
            if readonly:
                cur.execute("PRAGMA query_only = ON")
            elif path is not None:
                from autotune.store.create import retry_locked  # two processes may switch a new file at once
                retry_locked(lambda: cur.execute("PRAGMA journal_mode = WAL"))
                cur.execute("PRAGMA synchronous = NORMAL")
            cur.close()
        return engine
    connect_args = {"options": "-c default_transaction_read_only=on"} if readonly else {}
    try:
        return create_engine(u, pool_pre_ping=True, connect_args=connect_args)
    except ImportError as exc:  # the URL names a database driver that is not installed
        raise StoreError(f"no driver for {u.drivername}: {exc}",
                         hint="for PostgreSQL: pip install -e .[postgres] and a URL postgresql+psycopg://...") from None
