"""Schema version 1, the baseline: the tables as autotune wrote them before problem kinds (commit b1c696e).

Databases made before Alembic have these tables, a schema_meta row schema_version = 1 and no
autotune_alembic_version table: `autotune.store.migrate.upgrade` stamps them with this revision, then upgrades.
Upgrading an empty database from here builds the version-1 tables (the tests make version-1 databases so).
The definitions are frozen copies: later revisions change them, never this file.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None
SCHEMA_VERSION = 1

STATUSES = ("ok", "compile_error", "launch_error", "wrong", "timeout", "crashed", "skipped")


def _timed() -> list[sa.Column]:
    """The columns of one timed result (kernel measurements and cuBLAS times)."""
    return [
        sa.Column("status", sa.String(16), nullable=False),
        *(sa.Column(c, sa.Float) for c in ("median_ms", "p20_ms", "p80_ms", "min_ms", "max_ms")),
        sa.Column("reps", sa.Integer, nullable=False),
        sa.Column("times_ms", sa.JSON, nullable=False),
        *(sa.Column(c, sa.Float) for c in ("gflops", "gbs", "roofline_frac")),
        sa.Column("l2_protection", sa.String(32)),
        sa.Column("error", sa.Text),
        sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False),
    ]


def upgrade() -> None:
    schema_meta = op.create_table(
        "schema_meta",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(256), nullable=False),
    )
    op.create_table(
        "devices",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("uuid", sa.String(64), nullable=False, unique=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("sm_count", sa.Integer, nullable=False),
        sa.Column("cc", sa.Integer, nullable=False),
        sa.Column("sm_clock_mhz", sa.Integer),
        sa.Column("mem_clock_mhz", sa.Integer),
        sa.Column("l2_bytes", sa.BigInteger, nullable=False),
        sa.Column("copy_bandwidth", sa.Float, nullable=False),
    )
    op.create_table(
        "software",
        sa.Column("id", sa.Integer, primary_key=True),
        *(
            sa.Column(c, sa.String(64), nullable=False)
            for c in ("driver", "cuda_runtime", "nvrtc", "cupy", "autotune_version", "git_commit")
        ),
        sa.UniqueConstraint("driver", "cuda_runtime", "nvrtc", "cupy", "autotune_version", "git_commit"),
    )
    op.create_table(
        "spaces",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("yaml_path", sa.Text, nullable=False),
        sa.Column("yaml_hash", sa.String(64), nullable=False),
        sa.Column("source_path", sa.Text, nullable=False),
        sa.Column("source_hash", sa.String(64), nullable=False),
        sa.Column("yaml_text", sa.Text, nullable=False),
        sa.UniqueConstraint("name", "yaml_hash", "source_hash"),
    )
    op.create_index("ix_spaces_name", "spaces", ["name"])
    op.create_table(
        "instances",
        sa.Column("id", sa.String(16), primary_key=True),
        sa.Column("space", sa.String(128), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("params", sa.JSON, nullable=False),
    )
    op.create_index("ix_instances_space", "instances", ["space"])
    op.create_table(
        "instance_params",
        sa.Column("instance_id", sa.String(16), sa.ForeignKey("instances.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("int_value", sa.BigInteger),
        sa.Column("real_value", sa.Float),
        sa.Column("text_value", sa.Text),
    )
    op.create_index("ix_instance_params_name_int", "instance_params", ["name", "int_value"])
    op.create_table(
        "test_points",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("precision", sa.String(8), nullable=False),
        sa.Column("shape", sa.String(2), nullable=False),
        *(sa.Column(c, sa.Integer, nullable=False) for c in ("m", "n", "k", "batch")),
        sa.UniqueConstraint("precision", "shape", "m", "n", "k", "batch"),
    )
    op.create_table(
        "sweeps",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("config_name", sa.String(128), nullable=False),
        sa.Column("config_text", sa.Text, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("device_id", sa.Integer, sa.ForeignKey("devices.id"), nullable=False),
        sa.Column("software_id", sa.Integer, sa.ForeignKey("software.id"), nullable=False),
        sa.Column("alpha", sa.Float, nullable=False),
        sa.Column("beta", sa.Float, nullable=False),
        sa.Column("reps", sa.Integer, nullable=False),
        sa.Column("sm_clock_mhz", sa.Integer),
        sa.Column("mem_clock_mhz", sa.Integer),
        sa.Column("copy_bandwidth", sa.Float, nullable=False),
        sa.Column("host", sa.String(256), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
    )
    op.create_table(
        "sweep_lock",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("token", sa.String(32), nullable=False),
        sa.Column("sweep_id", sa.Integer),
        sa.Column("host", sa.String(256), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "measurements",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("sweep_id", sa.Integer, sa.ForeignKey("sweeps.id"), nullable=False),
        sa.Column("instance_id", sa.String(16), sa.ForeignKey("instances.id"), nullable=False),
        sa.Column("point_id", sa.Integer, sa.ForeignKey("test_points.id"), nullable=False),
        sa.Column("device_id", sa.Integer, sa.ForeignKey("devices.id"), nullable=False),
        sa.Column("space_id", sa.Integer, sa.ForeignKey("spaces.id"), nullable=False),
        sa.Column("max_rel_err", sa.Float),
        *(sa.Column(c, sa.Integer) for c in ("registers", "shared_bytes", "local_bytes")),
        sa.Column("compile_s", sa.Float),
        sa.Column("log", sa.Text),
        *_timed(),
        sa.UniqueConstraint("instance_id", "point_id", "device_id", name="uq_measurement_pair"),
        sa.CheckConstraint(f"status IN {STATUSES!r}", name="ck_measurement_status"),
    )
    op.create_index("ix_measurements_sweep_id", "measurements", ["sweep_id"])
    op.create_index("ix_measurements_instance_id", "measurements", ["instance_id"])
    op.create_index("ix_measurements_point_status", "measurements", ["point_id", "status", "median_ms"])
    op.create_table(
        "inflight",
        sa.Column("instance_id", sa.String(16), sa.ForeignKey("instances.id"), primary_key=True),
        sa.Column("point_id", sa.Integer, sa.ForeignKey("test_points.id"), primary_key=True),
        sa.Column("device_id", sa.Integer, sa.ForeignKey("devices.id"), primary_key=True),
        sa.Column("sweep_id", sa.Integer, sa.ForeignKey("sweeps.id"), nullable=False),
        sa.Column("space_id", sa.Integer, sa.ForeignKey("spaces.id"), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "cublas",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("device_id", sa.Integer, sa.ForeignKey("devices.id"), nullable=False),
        sa.Column("point_id", sa.Integer, sa.ForeignKey("test_points.id"), nullable=False),
        sa.Column("sweep_id", sa.Integer, sa.ForeignKey("sweeps.id"), nullable=False),
        *_timed(),
        sa.UniqueConstraint("device_id", "point_id", name="uq_cublas_point"),
    )
    op.bulk_insert(schema_meta, [{"key": "schema_version", "value": str(SCHEMA_VERSION)}])
