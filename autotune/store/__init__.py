"""autotune.store.store."""
