"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""
from alembic import op
import sqlalchemy as sa
${imports if imports else ""}

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}
SCHEMA_VERSION = None  # the schema_meta.schema_version this revision leaves behind (set it, and update the row)


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}
