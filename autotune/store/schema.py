"""The results database schema: SQLAlchemy 2.0 models, the schema version, and the records they are written from.

Kind-neutral: a test point's sizes are rows of `point_sizes` (one per size name, indexed by name and value) beside
its canonical `sizes` JSON, a sweep's run-wide scalars are JSON (`sweeps.scalars`), and a point's baseline time
names its library (`baselines.library`). Per-kind SQL views (`points_<kind>`) are in `autotune.store.views`;
engines, URLs and gzipped files in `autotune.store.engine`; the operations in `autotune.store.store`. docs/schema.md's
"Results database" section documents every table and column.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import ClassVar, Mapping, NamedTuple

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from autotune.problems.registry import default_kind
from autotune.store.version import SCHEMA_VERSION  # noqa: F401 - re-exported: the version these models are
from autotune.vocab import DeviceInfo, Status, TestPoint

STATUSES = tuple(s.value for s in Status)


def now() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    # every model maps one Table: typed so (DeclarativeBase types it as FromClause, which has no insert/delete),
    # as SQLAlchemy's maintainers suggest (sqlalchemy/sqlalchemy#9130); an annotation only, nothing changes at run time
    __table__: ClassVar[Table]


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
    """A test point: its kind, precision, variant and sizes (canonical JSON, the kind's order), unique together.
    Each size is also a `point_sizes` row, so SQL filters on sizes by name (or through the kind's view)."""

    __tablename__ = "test_points"
    __table_args__ = (UniqueConstraint("kind", "precision", "shape", "sizes", name="uq_test_points_kind_sizes"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(64), index=True)
    precision: Mapped[str] = mapped_column(String(8))
    shape: Mapped[str] = mapped_column(String(16))
    sizes: Mapped[str] = mapped_column(Text)

    def point(self) -> TestPoint:
        return TestPoint(
            self.kind, self.precision, self.shape, tuple((name, int(v)) for name, v in json.loads(self.sizes).items())
        )

    @staticmethod
    def columns(point: TestPoint) -> dict:
        """The row's values for a test point."""
        return dict(kind=point.kind, precision=point.precision, shape=point.shape, sizes=sizes_json(point))


class PointSize(Base):
    """One size of a test point, by name (GEMM: m, n, k, batch; a stencil: nx, ny)."""

    __tablename__ = "point_sizes"
    __table_args__ = (Index("ix_point_sizes_name_value", "name", "value"),)
    point_id: Mapped[int] = mapped_column(ForeignKey("test_points.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[int] = mapped_column(BigInteger)


def fields(model: type[Base]) -> tuple[str, ...]:
    """The model's column names but its integer key `id`, in the table's order (what a record of it gives)."""
    return tuple(c.key for c in model.__table__.columns if c.key != "id")


STACK = ("driver", "cuda_runtime", "nvrtc", "cupy")  # the software of a DeviceInfo (its other fields: a Device's)


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
    scalars: Mapped[dict] = mapped_column(JSON)  # the run-wide scalars of its kinds (GEMM: alpha, beta)
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
    """Columns of one timed result, shared by kernel measurements and baseline (library) times."""

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
    __table_args__ = (
        UniqueConstraint("instance_id", "point_id", "device_id", name="uq_measurement_pair"),
        CheckConstraint(f"status IN {STATUSES!r}", name="ck_measurement_status"),
        Index("ix_measurements_point_status", "point_id", "status", "median_ms"),
    )
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


class BaselineRow(_Timed, Base):
    """A point's baseline time on a device: the kind's library (its `baseline_name`, e.g. cublas), one per point."""

    __tablename__ = "baselines"
    __table_args__ = (UniqueConstraint("device_id", "point_id", name="uq_baselines_point"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    device_id: Mapped[int] = mapped_column(ForeignKey("devices.id"))
    point_id: Mapped[int] = mapped_column(ForeignKey("test_points.id"))
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"))
    library: Mapped[str] = mapped_column(String(64))


@dataclass(frozen=True)
class SpaceRecord:
    """What identifies the version of a space that produced a measurement."""

    name: str
    yaml_path: str
    yaml_text: str
    source_path: str
    source_text: str
    kind: str = field(default_factory=lambda: default_kind().name)  # a space file without `problem:` solves it
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
    scalars: Mapping[str, float]  # the config's run-wide scalars ({} when its kinds have none; GEMM: alpha, beta)
    reps: int


class Figures(NamedTuple):
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
