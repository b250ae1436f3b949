"""autotune.cli.main."""
