"""Kernel Tuner cache files and T4 results files, read and written with the standard library only.

This module and the two it gathers (`kt_format`: the records, errors and writers; `kt_read`: the reader) import
nothing from the rest of ``autotune``.

The cache format (Kernel Tuner 1.x, ``kernel_tuner/util.py``: ``process_cache``, ``store_cache``,
``read_cache``, ``correct_open_cache``, ``close_cache``) is one JSON object::

    {
    "device_name": "NVIDIA A100-PCIE-40GB",
    "kernel_name": "vector_add",
    "problem_size": [10000000],
    "tune_params_keys": ["block_size_x", "tile"],
    "tune_params": {"block_size_x": [64, 128], "tile": [1, 2]},
    "objective": "time",
    "cache": {
    "64,1": {"block_size_x": 64, "tile": 1, "time": 0.21, "times": [...], "compile_time": 440.9, ...},
    "64,2": {"block_size_x": 64, "tile": 2, "__error__": "CompilationFailedConfig", "compile_time": 12.1, ...}}
    }

* The header is ``json.dumps(header, indent="")`` cut just after ``"cache": {``; it is written when a run
  starts.  ``problem_size`` is a list, an int or the string ``"callable"``; ``objective`` is absent in old
  files.
* Each configuration is appended as its own line: ``"\\n" + '"key": {...}' + ","``.  The key is
  ``",".join(str(v) for v in values)`` in ``tune_params_keys`` order.
* A failed configuration holds the string ``"InvalidConfig"``, ``"CompilationFailedConfig"`` or
  ``"RuntimeFailedConfig"`` (``"ErrorConfig"`` in Kernel Tuner >= 1.4 only): under the key ``"__error__"``
  in Kernel Tuner >= 1.4, under the objective key (normally ``"time"``) in Kernel Tuner <= 1.3.  The
  readers of both treat any value equal to one of those strings as the failure marker.  Kernel Tuner
  never writes a verification failure to the cache (it raises and stops tuning).
* A run that ends normally closes the file by replacing the last ``","`` with ``"}\\n}"``.  A run that is
  killed leaves it *unterminated*: ending in ``"},"`` (or in ``"cache": {`` when nothing was measured).
  Kernel Tuner's reader strips the text; when it does not end in ``"}\\n}"`` or ``"}}}"`` it drops one
  trailing ``","`` and appends ``"}\\n}"``.  It cannot read a file whose last entry was cut short.

:func:`read_cache` accepts the closed form, the unterminated form and a cut-short last entry (dropped,
with a :class:`KTCacheWarning` and a count in :attr:`KTCache.dropped_entries`).  :func:`write_cache`
writes the closed form exactly as Kernel Tuner's ``close_cache`` leaves it, so Kernel Tuner can also reopen
it to append.  :func:`write_t4` writes the T4 results JSON of ``kernel_tuner/file_utils.py``
(``get_t4_results``/``store_output_file``, schema ``kernel_tuner/schema/T4/1.0.0/results-schema.json``).
"""

from __future__ import annotations

from autotune.interop.kt_format import (
    ERROR_KEY,
    STATUS_KEY,
    STATUSES,
    T4_SCHEMA_VERSION,
    CacheFormatError,
    CacheLimitError,
    KTCache,
    KTCacheWarning,
    KTRecord,
    cache_text,
    config_key,
    t4_results,
    t4_text,
    write_cache,
    write_t4,
)
from autotune.interop.kt_read import read_cache

__all__ = [
    "ERROR_KEY",
    "STATUS_KEY",
    "STATUSES",
    "T4_SCHEMA_VERSION",
    "CacheFormatError",
    "CacheLimitError",
    "KTCache",
    "KTCacheWarning",
    "KTRecord",
    "cache_text",
    "config_key",
    "read_cache",
    "t4_results",
    "t4_text",
    "write_cache",
    "write_t4",
]
