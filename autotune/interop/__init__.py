"""Readers and writers for other autotuners' file formats (standard library only)."""
