"""Schema version 3, "every problem kind first-class": sizes, scalars and baselines that name no kind.

- test_points lose GEMM's m, n, k, batch columns (and their index; `kind` loses its 'gemm' default): a point's sizes
  are its `sizes` JSON plus one `point_sizes(point_id, name, value)` row per size, primary key (point_id, name),
  indexed on (name, value). One view per kind present, `points_<kind>(id, precision, shape, <sizes>...)` (GEMM:
  `points_gemm(id, precision, shape, m, n, k, batch)`), pivots them for SQL (`autotune.store.views`).
- sweeps lose alpha and beta for `scalars` JSON: existing sweeps get {"alpha": alpha, "beta": beta}.
- the `cublas` table becomes `baselines`, with a `library` column (the kind's baseline_name); existing rows are
  'cublas'. Its unique constraint is `uq_baselines_point` (device, point).
- schema_meta says 3.

SQLite cannot drop a constraint's or index's columns in place, so test_points, sweeps and baselines are rebuilt
under the new definitions (foreign keys are off while Alembic runs, see autotune.store.migrate; ids are kept);
PostgreSQL alters them in place. Offline (`autotune db upgrade --sql`) the kinds present are unknown: the SQL makes
the GEMM view (schema 1 and 2 databases from before kinds hold only GEMM points); the store makes any other kind's
view when it next opens the database for writing. The downgrade to 0002 restores m, n, k, batch of GEMM points,
alpha and beta (1 and 0 where a sweep's scalars lack them) and the `cublas` table (dropping `library`).

The definitions (tables and the view SQL) are frozen copies: later revisions change them, never this file.

Revision ID: 0003
Revises: 0002
"""

import hashlib
import json
import re

import sqlalchemy as sa
from alembic import context, op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None
SCHEMA_VERSION = 3

GEMM_SIZES = ("m", "n", "k", "batch")  # the only kind before this revision had these columns
PG_SIZES = (
    "INSERT INTO point_sizes (point_id, name, value) "
    "SELECT p.id, j.key, CAST(j.value AS BIGINT) FROM test_points p, json_each_text(CAST(p.sizes AS json)) j"
)
SQLITE_SIZES = (
    "INSERT INTO point_sizes (point_id, name, value) "
    "SELECT p.id, j.key, j.value FROM test_points p, json_each(p.sizes) j"
)


def _timed() -> list[sa.Column]:
    """The columns of one timed result (kernel measurements and baseline times)."""
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


TIMED = (
    "status",
    "median_ms",
    "p20_ms",
    "p80_ms",
    "min_ms",
    "max_ms",
    "reps",
    "times_ms",
    "gflops",
    "gbs",
    "roofline_frac",
    "l2_protection",
    "error",
    "measured_at",
)
SWEEP_KEEP = (
    "id",
    "config_name",
    "config_text",
    "started_at",
    "finished_at",
    "status",
    "device_id",
    "software_id",
    "reps",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "copy_bandwidth",
    "host",
    "pid",
)


def _sweep_columns(*scalars: sa.Column) -> list[sa.Column]:
    return [
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("config_name", sa.String(128), nullable=False),
        sa.Column("config_text", sa.Text, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("device_id", sa.Integer, sa.ForeignKey("devices.id"), nullable=False),
        sa.Column("software_id", sa.Integer, sa.ForeignKey("software.id"), nullable=False),
        *scalars,
        sa.Column("reps", sa.Integer, nullable=False),
        sa.Column("sm_clock_mhz", sa.Integer),
        sa.Column("mem_clock_mhz", sa.Integer),
        sa.Column("copy_bandwidth", sa.Float, nullable=False),
        sa.Column("host", sa.String(256), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
    ]


# ---- the point views, as autotune.store.views made them at this revision (frozen copy) ----


def _sql_name(name: str) -> str:
    safe = re.sub(r"[^a-z0-9_]", "_", name.lower())
    if not safe or safe[0].isdigit():
        safe = f"_{safe}"
    if safe != name or len(safe) > 40:
        safe = f"{safe[:40]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return safe


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _view_sql(kind: str, sizes: tuple, optional: frozenset) -> str:
    cols = {
        name: (f"size_{_sql_name(name)}" if _sql_name(name) in ("id", "precision", "shape") else _sql_name(name))
        for name in sizes
    }
    select = ", ".join(["p.id", "p.precision", "p.shape", *(f"s{i}.value AS {c}" for i, c in enumerate(cols.values()))])
    joins = [
        f"{'LEFT JOIN' if name in optional else 'JOIN'} point_sizes s{i} ON s{i}.point_id = p.id "
        f"AND s{i}.name = {_literal(name)}"
        for i, name in enumerate(cols)
    ]
    joins.sort(key=lambda j: j.startswith("LEFT"))
    return (
        f"CREATE VIEW points_{_sql_name(kind)} AS\nSELECT {select}\nFROM test_points p\n"
        + "".join(j + "\n" for j in joins)
        + f"WHERE p.kind = {_literal(kind)}"
    )


def _kinds() -> dict[str, tuple]:
    """Each kind with points: its size names and those some of its points lack (offline: GEMM, schema 1's kind)."""
    if context.is_offline_mode():
        return {"gemm": (GEMM_SIZES, frozenset())}
    names: dict[str, dict] = {}
    common: dict[str, set] = {}
    for kind, sizes in op.get_bind().execute(sa.text("SELECT DISTINCT kind, sizes FROM test_points ORDER BY kind")):
        keys = list(json.loads(sizes))
        names.setdefault(kind, {}).update(dict.fromkeys(keys))
        common[kind] = common[kind] & set(keys) if kind in common else set(keys)
    return {kind: (tuple(n), frozenset(n) - common[kind]) for kind, n in names.items()}


def _drop_views() -> None:
    if context.is_offline_mode():
        op.execute("DROP VIEW IF EXISTS points_gemm")
        return
    for name in sa.inspect(op.get_bind()).get_view_names():
        if name.startswith("points_"):
            op.execute(f"DROP VIEW {name}")


# ---- upgrade ----


def upgrade() -> None:
    sqlite = op.get_context().dialect.name == "sqlite"
    op.create_table(
        "point_sizes",
        sa.Column("point_id", sa.Integer, sa.ForeignKey("test_points.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.BigInteger, nullable=False),
    )
    op.execute(SQLITE_SIZES if sqlite else PG_SIZES)
    op.create_index("ix_point_sizes_name_value", "point_sizes", ["name", "value"])
    if sqlite:
        _sqlite_upgrade()
    else:
        _pg_upgrade()
    for kind, (sizes, optional) in _kinds().items():
        op.execute(sa.text(_view_sql(kind, sizes, optional).replace(":", "\\:")))  # a ':' in a name binds nothing
    op.execute(f"UPDATE schema_meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema_version'")


def _sqlite_upgrade() -> None:
    op.drop_index("ix_test_points_mnk", "test_points")
    op.drop_index("ix_test_points_kind", "test_points")
    op.create_table(
        "test_points_v3",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("precision", sa.String(8), nullable=False),
        sa.Column("shape", sa.String(16), nullable=False),
        sa.Column("sizes", sa.Text, nullable=False),
        sa.UniqueConstraint("kind", "precision", "shape", "sizes", name="uq_test_points_kind_sizes"),
    )
    op.execute(
        "INSERT INTO test_points_v3 (id, kind, precision, shape, sizes) "
        "SELECT id, kind, precision, shape, sizes FROM test_points"
    )
    op.drop_table("test_points")
    op.rename_table("test_points_v3", "test_points")
    op.create_index("ix_test_points_kind", "test_points", ["kind"])

    op.create_table("sweeps_v3", *_sweep_columns(sa.Column("scalars", sa.JSON, nullable=False)))
    keep = ", ".join(SWEEP_KEEP)
    op.execute(
        f"INSERT INTO sweeps_v3 ({keep}, scalars) SELECT {keep}, json_object('alpha', alpha, 'beta', beta) FROM sweeps"
    )
    op.drop_table("sweeps")
    op.rename_table("sweeps_v3", "sweeps")

    _create_baselines("baselines")
    timed = ", ".join(TIMED)
    op.execute(
        f"INSERT INTO baselines (id, device_id, point_id, sweep_id, library, {timed}) "
        f"SELECT id, device_id, point_id, sweep_id, 'cublas', {timed} FROM cublas"
    )
    op.drop_table("cublas")


def _create_baselines(name: str) -> None:
    op.create_table(
        name,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("device_id", sa.Integer, sa.ForeignKey("devices.id"), nullable=False),
        sa.Column("point_id", sa.Integer, sa.ForeignKey("test_points.id"), nullable=False),
        sa.Column("sweep_id", sa.Integer, sa.ForeignKey("sweeps.id"), nullable=False),
        sa.Column("library", sa.String(64), nullable=False),
        *_timed(),
        sa.UniqueConstraint("device_id", "point_id", name="uq_baselines_point"),
    )


def _pg_upgrade() -> None:
    op.drop_index("ix_test_points_mnk", "test_points")
    for col in GEMM_SIZES:
        op.drop_column("test_points", col)
    op.alter_column("test_points", "kind", existing_type=sa.String(64), server_default=None, existing_nullable=False)

    op.add_column("sweeps", sa.Column("scalars", sa.JSON))
    op.execute("UPDATE sweeps SET scalars = json_build_object('alpha', alpha, 'beta', beta)")
    op.alter_column("sweeps", "scalars", existing_type=sa.JSON, nullable=False)
    op.drop_column("sweeps", "alpha")
    op.drop_column("sweeps", "beta")

    op.rename_table("cublas", "baselines")
    op.execute("ALTER TABLE baselines RENAME CONSTRAINT uq_cublas_point TO uq_baselines_point")
    op.execute("ALTER INDEX cublas_pkey RENAME TO baselines_pkey")
    op.execute("ALTER SEQUENCE cublas_id_seq RENAME TO baselines_id_seq")
    op.add_column("baselines", sa.Column("library", sa.String(64), nullable=False, server_default="cublas"))
    op.alter_column("baselines", "library", existing_type=sa.String(64), server_default=None, existing_nullable=False)


# ---- downgrade (to 0002) ----


def downgrade() -> None:
    sqlite = op.get_context().dialect.name == "sqlite"
    _drop_views()
    if sqlite:
        _sqlite_downgrade()
    else:
        _pg_downgrade()
    op.drop_index("ix_point_sizes_name_value", "point_sizes")
    op.drop_table("point_sizes")
    op.create_index("ix_test_points_mnk", "test_points", ["m", "n", "k"])
    op.execute("UPDATE schema_meta SET value = '2' WHERE key = 'schema_version'")


def _gemm_size(col: str) -> str:
    return (
        f"(SELECT s.value FROM point_sizes s WHERE s.point_id = test_points.id AND s.name = '{col}' "
        "AND test_points.kind = 'gemm')"
    )


def _sqlite_downgrade() -> None:
    op.drop_index("ix_test_points_kind", "test_points")
    op.create_table(
        "test_points_v2",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("kind", sa.String(64), nullable=False, server_default="gemm"),
        sa.Column("precision", sa.String(8), nullable=False),
        sa.Column("shape", sa.String(16), nullable=False),
        sa.Column("sizes", sa.Text, nullable=False),
        *(sa.Column(c, sa.BigInteger) for c in GEMM_SIZES),
        sa.UniqueConstraint("kind", "precision", "shape", "sizes", name="uq_test_points_kind_sizes"),
    )
    sizes = ", ".join(_gemm_size(c) for c in GEMM_SIZES)
    op.execute(
        f"INSERT INTO test_points_v2 (id, kind, precision, shape, sizes, {', '.join(GEMM_SIZES)}) "
        f"SELECT id, kind, precision, shape, sizes, {sizes} FROM test_points"
    )
    op.drop_table("test_points")
    op.rename_table("test_points_v2", "test_points")
    op.create_index("ix_test_points_kind", "test_points", ["kind"])

    op.create_table(
        "sweeps_v2",
        *_sweep_columns(sa.Column("alpha", sa.Float, nullable=False), sa.Column("beta", sa.Float, nullable=False)),
    )
    keep = ", ".join(SWEEP_KEEP)
    op.execute(
        f"INSERT INTO sweeps_v2 ({keep}, alpha, beta) SELECT {keep}, "
        "COALESCE(json_extract(scalars, '$.alpha'), 1.0), COALESCE(json_extract(scalars, '$.beta'), 0.0) "
        "FROM sweeps"
    )
    op.drop_table("sweeps")
    op.rename_table("sweeps_v2", "sweeps")

    op.create_table(
        "cublas",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("device_id", sa.Integer, sa.ForeignKey("devices.id"), nullable=False),
        sa.Column("point_id", sa.Integer, sa.ForeignKey("test_points.id"), nullable=False),
        sa.Column("sweep_id", sa.Integer, sa.ForeignKey("sweeps.id"), nullable=False),
        *_timed(),
        sa.UniqueConstraint("device_id", "point_id", name="uq_cublas_point"),
    )
    timed = ", ".join(TIMED)
    op.execute(
        f"INSERT INTO cublas (id, device_id, point_id, sweep_id, {timed}) "
        f"SELECT id, device_id, point_id, sweep_id, {timed} FROM baselines"
    )
    op.drop_table("baselines")


def _pg_downgrade() -> None:
    for col in GEMM_SIZES:
        op.add_column("test_points", sa.Column(col, sa.BigInteger))
    op.execute("UPDATE test_points SET " + ", ".join(f"{c} = {_gemm_size(c)}" for c in GEMM_SIZES))
    op.alter_column("test_points", "kind", existing_type=sa.String(64), server_default="gemm", existing_nullable=False)

    op.add_column("sweeps", sa.Column("alpha", sa.Float))
    op.add_column("sweeps", sa.Column("beta", sa.Float))
    op.execute(
        "UPDATE sweeps SET alpha = COALESCE(CAST(scalars ->> 'alpha' AS double precision), 1.0), "
        "beta = COALESCE(CAST(scalars ->> 'beta' AS double precision), 0.0)"
    )
    op.alter_column("sweeps", "alpha", existing_type=sa.Float, nullable=False)
    op.alter_column("sweeps", "beta", existing_type=sa.Float, nullable=False)
    op.drop_column("sweeps", "scalars")

    op.drop_column("baselines", "library")
    op.execute("ALTER SEQUENCE baselines_id_seq RENAME TO cublas_id_seq")
    op.execute("ALTER INDEX baselines_pkey RENAME TO cublas_pkey")
    op.execute("ALTER TABLE baselines RENAME CONSTRAINT uq_baselines_point TO uq_cublas_point")
    op.rename_table("baselines", "cublas")
