"""Conformance suites a third party runs in its own tests: `autotune.testing.kinds` for problem kinds."""
