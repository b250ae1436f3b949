"""The Kernel Tuner cache's model (its records, statuses, keys and errors) and its writers: cache files exactly as
Kernel Tuner's ``close_cache`` leaves them, and T4 results files (``kernel_tuner/file_utils.py``). The format:
`autotune.interop.kerneltuner`; standard library only, like the reader beside it (`kt_read`).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
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


# ------------------------------------------------------------------------------------------------ writing


def _entry(record: KTRecord, cache: KTCache, error_style: str) -> dict[str, Any]:
    if set(record.params) != set(cache.tune_params_keys):
        raise ValueError(
            f"record parameters {sorted(record.params)} are not the cache's tune_params_keys "
            f"{list(cache.tune_params_keys)}"
        )
    out: dict[str, Any] = {k: record.params[k] for k in cache.tune_params_keys}
    if record.status == "ok":
        if record.time_ms is not None:
            out["time"] = record.time_ms
    else:
        kt = KT_OF_STATUS[record.status]
        if error_style in ("both", "objective"):
            objectives = (cache.objective,) if isinstance(cache.objective, str) else cache.objective
            for o in objectives:
                out[o] = kt
        if error_style in ("both", "__error__"):
            out[ERROR_KEY] = kt
        if record.status in ("wrong", "error"):
            out[STATUS_KEY] = record.status
    if record.times_ms:
        out["times"] = list(record.times_ms)
    out.update({k: v for k, v in record.extra.items() if k not in out})
    return out


def _header(cache: KTCache) -> dict[str, Any]:
    h: dict[str, Any] = {"device_name": cache.device_name, "kernel_name": cache.kernel_name}
    if cache.problem_size is not None:
        ps = cache.problem_size
        h["problem_size"] = list(ps) if isinstance(ps, (tuple, list)) else ps
    h["tune_params_keys"] = list(cache.tune_params_keys)
    h["tune_params"] = {k: list(v) for k, v in cache.tune_params.items()}
    h["objective"] = cache.objective if isinstance(cache.objective, str) else list(cache.objective)
    h.update({k: v for k, v in cache.header_extra.items() if k not in h and k != "cache"})
    return h


def cache_text(
    cache: KTCache, *, error_style: Literal["both", "objective", "__error__"] = "both", terminated: bool = True
) -> str:
    """The text :func:`write_cache` writes."""
    if error_style not in ("both", "objective", "__error__"):
        raise ValueError(f"error_style must be 'both', 'objective' or '__error__', not {error_style!r}")
    head = dumps({**_header(cache), "cache": {}}, indent="")
    assert head.endswith("{}\n}")
    parts = [head[:-3]]  # up to and including '"cache": {', as Kernel Tuner's process_cache writes it
    seen: set[str] = set()
    for record in cache.records:
        entry = _entry(record, cache, error_style)
        key = config_key(record.params, cache.tune_params_keys)
        if key in seen:
            raise ValueError(f"two records have the cache key {key!r}")
        seen.add(key)
        line = dumps({key: entry})
        parts.append("\n" + line[1:-1] + ",")
    text = "".join(parts)
    if terminated and cache.records:
        text = text[:-1] + "}\n}"  # what Kernel Tuner's close_cache does
    return text


def write_cache(
    cache: KTCache,
    path: str | os.PathLike[str],
    *,
    error_style: Literal["both", "objective", "__error__"] = "both",
    terminated: bool = True,
) -> None:
    """Write ``cache`` as a Kernel Tuner cache file.

    The layout is the one Kernel Tuner produces: ``process_cache``'s header, one ``store_cache`` line per
    record, closed as ``close_cache`` closes it (``...}}\\n}``), so Kernel Tuner both reads the file and can
    reopen it for appending.  A cache without records is left as Kernel Tuner's own fresh file (header
    ending in ``"cache": {``): Kernel Tuner's reader accepts that, but would corrupt a closed empty
    ``{}`` when reopening it to append.  ``terminated=False`` writes the form a stopped run leaves.

    Failed records carry the Kernel Tuner failure string under ``"__error__"`` (1.4+) and under the
    objective key (<= 1.3), or only one of them with ``error_style``.  Statuses "wrong" and "error" are
    written as ``"RuntimeFailedConfig"`` plus ``"__autotune_status__"`` so :func:`read_cache` restores them.
    """
    text = cache_text(cache, error_style=error_style, terminated=terminated)
    _atomic_write(Path(path), text)


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it, renamed into place, with the user's usual
    mode (not mkstemp's 0600); on failure the temporary file is removed and the OSError names ``path``.
    (The behaviour of ``autotune.outfiles``, which the command line uses; this module stays standard-library only.)"""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if isinstance(exc, OSError) and exc.errno is not None:
            raise type(exc)(exc.errno, exc.strerror, str(path)) from None
        raise


def _finite(v: Any) -> bool:
    f = as_float(v)
    return f is not None and math.isfinite(f)


def _measurement_value(v: Any) -> bool:
    """Whether the T4 schema accepts ``v`` as a measurement value (number, string or array)."""
    return _finite(v) if is_number(v) else isinstance(v, (str, list))


def t4_results(cache: KTCache, *, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The T4 results document (``kernel_tuner.file_utils.get_t4_results``'s layout) for ``cache``.

    Per record: ``timestamp`` (where recorded), ``configuration``, ``times`` (``compilation``, ``benchmark``,
    ``framework``, ``search_algorithm``, ``validation`` where recorded; ``runtimes`` always),
    ``invalidity`` (correct / compile / runtime / constraints / correctness), ``correctness`` (0 for
    "wrong", else 1, as Kernel Tuner writes), ``measurements`` (``time`` in ms and every other numeric,
    string or list field; booleans, nulls, objects and non-finite floats are left out because the schema
    does not allow them) and ``objectives``.  ``metadata`` is merged into the document's ``"metadata"``
    (Kernel Tuner writes ``{"timeunit": "milliseconds"}`` there).
    """
    objectives = [cache.objective] if isinstance(cache.objective, str) else list(cache.objective)
    skipped = {src for _, src in T4_TIMES} | {"timestamp"}
    results = []
    for r in cache.records:
        ts = r.extra.get("timestamp")
        measurements = [{"name": "time", "value": r.time_ms, "unit": "ms"}] if _finite(r.time_ms) else []
        measurements += [
            {"name": k, "value": v, "unit": "ms" if k.startswith("time") else ""}
            for k, v in r.extra.items()
            if k not in skipped and _measurement_value(v)
        ]
        times = {t4: r.extra[src] for t4, src in T4_TIMES if _finite(r.extra.get(src))}
        results.append(
            {
                **({"timestamp": ts} if isinstance(ts, str) else {}),
                "configuration": {k: r.params[k] for k in cache.tune_params_keys},
                "times": {**times, "runtimes": list(r.times_ms)},
                "invalidity": T4_INVALIDITY[r.status],
                "correctness": 0 if r.status == "wrong" else 1,
                "measurements": measurements,
                "objectives": list(objectives),
            }
        )
    meta = {"timeunit": "milliseconds", **(metadata or {})}
    return {"results": results, "schema_version": T4_SCHEMA_VERSION, "metadata": meta}


def write_t4(cache: KTCache, path: str | os.PathLike[str], *, metadata: Mapping[str, Any] | None = None) -> None:
    """Write the T4 results JSON of :func:`t4_results` to ``path``."""
    _atomic_write(Path(path), t4_text(cache, metadata=metadata))


def t4_text(cache: KTCache, *, metadata: Mapping[str, Any] | None = None) -> str:
    """The text :func:`write_t4` writes."""
    return dumps(t4_results(cache, metadata=metadata), indent=1, allow_nan=False) + "\n"
