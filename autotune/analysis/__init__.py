"""autotune.analysis."""
