"""The schema version this autotune writes: `schema_meta.schema_version` of its databases, and the SCHEMA_VERSION of
the head Alembic revision (autotune/store/alembic/versions). Its own module, free of SQLAlchemy's ORM and of Alembic,
so that telling whether a file needs migrating costs one SQLite read (`autotune query` starts at once)."""

SCHEMA_VERSION = 3
