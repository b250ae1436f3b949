"""autotune.sweep."""
