"""Limits an imported Kernel Tuner cache is checked against before the work: its file size (checked before the file
is read) and its number of entries (counted while parsing, before any is built or stored). Each is a command-line
knob of `autotune import kerneltuner` with an environment default, named in the error."""

from __future__ import annotations

from autotune.interop.kerneltuner import CacheLimitError
from autotune.sweep.workloads.workload_limits import limit

MAX_CACHE_MB = 256  # a file's size; a cache's entries take ~5x that in memory once parsed
MAX_CACHE_ENTRIES = 500_000  # configurations of one cache (a brute-force run of a large space holds ~10^5)
CACHE_MB_ENV, CACHE_ENTRIES_ENV = "AUTOTUNE_MAX_CACHE_MB", "AUTOTUNE_MAX_CACHE_ENTRIES"


def max_cache_bytes(given_mb: int | None = None) -> int:
    """The size limit in bytes: `given_mb` MB, else AUTOTUNE_MAX_CACHE_MB, else 256 MB."""
    return limit(given_mb, CACHE_MB_ENV, MAX_CACHE_MB) * 2**20


def max_cache_entries(given: int | None = None) -> int:
    """The entry limit: `given`, else AUTOTUNE_MAX_CACHE_ENTRIES, else 500,000."""
    return limit(given, CACHE_ENTRIES_ENV, MAX_CACHE_ENTRIES)


def limit_hint(exc: CacheLimitError) -> str:
    """What to do about a cache above a limit: the knob, with the value that admits it."""
    return size_hint(exc.count) if exc.what == "bytes" else entries_hint(exc.count)


def size_hint(size: int) -> str:
    mb = -(-size // 2**20)
    return (
        f"import a smaller cache, or raise the limit: --max-cache-mb {mb} (autotune import kerneltuner) or "
        f"{CACHE_MB_ENV}={mb}"
    )


def entries_hint(count: int) -> str:
    return (
        f"import a smaller cache, or raise the limit: --max-entries {count} (autotune import kerneltuner) or "
        f"{CACHE_ENTRIES_ENV}={count}"
    )
