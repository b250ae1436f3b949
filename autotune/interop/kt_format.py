"""The Kernel Tuner cache's model: its records, statuses, keys and errors (the format: `autotune.interop.kerneltuner`).

Standard library only, like the reader (`kt_read`) and the writer (`kt_write`) beside it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeGuard

STATUSES = ("ok", "compile_error", "launch_error", "invalid", "wrong", "error")

STATUS_OF_KT = {
    "InvalidConfig": "invalid",
    "CompilationFailedConfig": "compile_error",
    "RuntimeFailedConfig": "launch_error",
    "ErrorConfig": "error",
}
KT_OF_STATUS = {
    "invalid": "InvalidConfig",
    "compile_error": "CompilationFailedConfig",
    "launch_error": "RuntimeFailedConfig",
    # Kernel Tuner <= 1.3 knows only the three above; anything else must be one of them or those readers
    # keep the string and later compare it with numbers.  Both are failures that happen when running.
    "wrong": "RuntimeFailedConfig",
    "error": "RuntimeFailedConfig",
}
T4_INVALIDITY = {
    "ok": "correct",
    "compile_error": "compile",
    "launch_error": "runtime",
    "invalid": "constraints",
    "wrong": "correctness",
    "error": "runtime",
}
#: Key written next to Kernel Tuner's failure marker when the marker alone loses the status ("wrong",
#: "error").  Kernel Tuner carries unknown keys along untouched.
STATUS_KEY = "__autotune_status__"
ERROR_KEY = "__error__"
HEADER_KEYS = ("device_name", "kernel_name", "problem_size", "tune_params_keys", "tune_params", "objective")
REQUIRED = ("device_name", "kernel_name", "tune_params_keys", "cache")
T4_TIMES = (  # T4 "times" field <- cache entry key, as kernel_tuner.file_utils.get_t4_results maps them
    ("compilation", "compile_time"),
    ("benchmark", "benchmark_time"),
    ("framework", "framework_time"),
    ("search_algorithm", "strategy_time"),
    ("validation", "verification_time"),
)
T4_SCHEMA_VERSION = "1.0.0"


class CacheFormatError(ValueError):
    """The file is not a Kernel Tuner cache file (or is damaged beyond a cut-short ending)."""

    def __init__(self, path: str | os.PathLike[str], message: str, *, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class CacheLimitError(CacheFormatError):
    """The file is larger than ``max_bytes`` (checked before it is read) or holds more than ``max_entries``
    entries (counted while parsing): ``what`` is "bytes" or "entries", ``count`` the number found (at least)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        what: Literal["bytes", "entries"],
        count: int,
        cap: int,
        *,
        line: int | None = None,
    ) -> None:
        self.what, self.count, self.cap = what, count, cap
        text = (
            f"the file holds {count:,} bytes, above the limit of {cap:,}"
            if what == "bytes"
            else f"the cache holds more than {cap:,} entries, the limit"
        )
        super().__init__(path, text, line=line)


class KTCacheWarning(UserWarning):
    """A cache file was read, but something in it was dropped or changed."""


@dataclass(frozen=True)
class KTRecord:
    """One configuration of a Kernel Tuner cache."""

    params: dict[str, int | float | str]
    """Tunable parameter values, in ``tune_params_keys`` order."""
    status: str
    """One of :data:`STATUSES`."""
    time_ms: float | None = None
    """Kernel Tuner's ``"time"`` (ms); None for failures and where absent."""
    times_ms: tuple[float, ...] = ()
    """Kernel Tuner's ``"times"`` (ms, one per repetition) if present."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Every other recorded field, verbatim (``compile_time``, ``timestamp``, ``GFLOP/s``, observers...)."""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"KTRecord status {self.status!r} is not one of {STATUSES}")


@dataclass(frozen=True)
class KTCache:
    """A Kernel Tuner cache file: header plus one record per configuration, in file order."""

    device_name: str
    kernel_name: str
    problem_size: tuple[Any, ...] | int | str | None
    """A tuple for a JSON list, an int, ``"callable"``, or None where the file has none."""
    tune_params_keys: tuple[str, ...]
    tune_params: dict[str, list[Any]]
    objective: str | tuple[str, ...]
    """``"time"`` where the file names none (old files); a tuple for a multi-objective run."""
    records: tuple[KTRecord, ...]
    header_extra: dict[str, Any] = field(default_factory=dict)
    """Other top-level keys (e.g. ``schema_version``), verbatim; written before ``"cache"``."""
    terminated: bool = field(default=True, compare=False)
    """False where the file was left open by a run that did not finish (read only)."""
    dropped_entries: int = field(default=0, compare=False)
    """How many cut-short trailing entries were dropped on reading (0 or 1)."""


def config_key(params: Mapping[str, Any], keys: Iterable[str] | None = None) -> str:
    """Kernel Tuner's cache key: ``",".join(str(value))`` over ``keys`` (default: ``params`` order)."""
    if keys is None:
        keys = params.keys()
    return ",".join([str(params[k]) for k in keys])


def is_number(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def as_float(v: Any) -> float | None:
    """A JSON number as a float; None for anything else, an integer too large for a float included (whether the
    value is a usable time is the importer's to judge: `autotune.interop.kt_store`)."""
    if not is_number(v):
        return None
    try:
        return float(v)
    except OverflowError:
        return None


def json_default(obj: Any) -> Any:
    """numpy scalars and arrays (duck-typed: this module does not import numpy), tuples are lists already."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"cannot write {type(obj).__name__} {obj!r} to JSON")


def dumps(obj: Any, **kw: Any) -> str:
    return json.dumps(obj, default=json_default, **kw)
