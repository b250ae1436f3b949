"""Schema version 2, "any kernel, any problem": test points get a problem kind and their sizes as JSON.

test_points gain `kind` (every existing point is a `gemm` point) and `sizes` (canonical JSON, the kind's order),
unique per (kind, precision, shape, sizes); m, n, k, batch become nullable BIGINT columns that GEMM points fill
(the SQL recipes keep reading them), indexed together; shape widens to 16 characters. spaces gain what rebuilds
their instances without the work tree: `kind`, `source_text`, `headers`, `problem`. schema_meta says 2.

SQLite cannot alter a constraint, so test_points is rebuilt under the new definition (foreign keys are off
while Alembic runs, see autotune.store.migrate); PostgreSQL alters it in place.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import context, op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None
SCHEMA_VERSION = 2

SIZES = "'{\"m\":' || m || ',\"n\":' || n || ',\"k\":' || k || ',\"batch\":' || batch || '}'"
PG_OLD_UNIQUE = "test_points_precision_shape_m_n_k_batch_key"  # PostgreSQL's name for version 1's constraint


def upgrade() -> None:
    if op.get_context().dialect.name == "sqlite":
        _rebuild_test_points()
    else:
        _alter_test_points()
    op.create_index("ix_test_points_kind", "test_points", ["kind"])
    op.create_index("ix_test_points_mnk", "test_points", ["m", "n", "k"])
    op.add_column("spaces", sa.Column("kind", sa.String(64)))
    op.add_column("spaces", sa.Column("source_text", sa.Text))
    op.add_column("spaces", sa.Column("headers", sa.JSON))
    op.add_column("spaces", sa.Column("problem", sa.JSON))
    op.execute("UPDATE spaces SET kind = 'gemm'")
    op.execute(f"UPDATE schema_meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema_version'")


def _rebuild_test_points() -> None:
    op.create_table(
        "test_points_v2",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("kind", sa.String(64), nullable=False, server_default="gemm"),
        sa.Column("precision", sa.String(8), nullable=False),
        sa.Column("shape", sa.String(16), nullable=False),
        sa.Column("sizes", sa.Text, nullable=False),
        *(sa.Column(c, sa.BigInteger) for c in ("m", "n", "k", "batch")),
        sa.UniqueConstraint("kind", "precision", "shape", "sizes", name="uq_test_points_kind_sizes"),
    )
    op.execute(
        "INSERT INTO test_points_v2 (id, kind, precision, shape, sizes, m, n, k, batch) "
        f"SELECT id, 'gemm', precision, shape, {SIZES}, m, n, k, batch FROM test_points"
    )
    op.drop_table("test_points")
    op.rename_table("test_points_v2", "test_points")


def _alter_test_points() -> None:
    if context.is_offline_mode():
        old = [PG_OLD_UNIQUE]
    else:
        found = sa.inspect(op.get_bind()).get_unique_constraints("test_points")
        old = [u["name"] for u in found if u["name"] is not None]  # (PostgreSQL names every constraint)
    for name in old:
        op.drop_constraint(name, "test_points", type_="unique")
    op.add_column("test_points", sa.Column("kind", sa.String(64), nullable=False, server_default="gemm"))
    op.add_column("test_points", sa.Column("sizes", sa.Text))
    op.execute(f"UPDATE test_points SET sizes = {SIZES}")
    op.alter_column("test_points", "sizes", existing_type=sa.Text, nullable=False)
    op.alter_column("test_points", "shape", existing_type=sa.String(2), type_=sa.String(16), existing_nullable=False)
    for col in ("m", "n", "k", "batch"):
        op.alter_column("test_points", col, existing_type=sa.Integer, type_=sa.BigInteger, nullable=True)
    op.create_unique_constraint("uq_test_points_kind_sizes", "test_points", ["kind", "precision", "shape", "sizes"])
