"""autotune.space.spec."""
