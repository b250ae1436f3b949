"""autotune.dispatch.table."""
