"""Alembic's environment for the results database, configured by `autotune.store.migrate` (no alembic.ini).

Online: the caller hands over an open connection in `config.attributes["connection"]` (SQLite: foreign keys off,
transactional DDL). Offline (`autotune db upgrade --sql`): the SQL for `config.attributes["url"]`'s dialect is
written to the config's output buffer. Each revision runs in its own transaction; the revision is recorded in
`autotune_alembic_version`, never in `alembic_version` (Optuna's table, in databases that studies share).
"""

from alembic import context

from autotune.store.migrate import VERSION_TABLE

config = context.config
connection = config.attributes.get("connection")
if connection is None:
    context.configure(
        url=config.attributes["url"], version_table=VERSION_TABLE, literal_binds=True, transaction_per_migration=True
    )
else:
    context.configure(connection=connection, version_table=VERSION_TABLE, transaction_per_migration=True)
with context.begin_transaction():
    context.run_migrations()
