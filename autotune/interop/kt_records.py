"""A Kernel Tuner cache's parsed header and entries -> `KTCache` (`kt_read.read_cache` parses the text): the header's
checks, each entry's parameters, status and times, and the warnings for what is dropped."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autotune.interop.kt_format import (
    ERROR_KEY,
    HEADER_KEYS,
    REQUIRED,
    STATUS_KEY,
    STATUS_OF_KT,
    STATUSES,
    CacheFormatError,
    KTCache,
    KTCacheWarning,
    KTRecord,
    as_float,
    config_key,
    dumps,
)


def short_key(key: str) -> str:
    return repr(key) if len(key) <= 60 else f"{key[:40]!r}... ({len(key)} characters)"


def not_a_cache(header: Mapping[str, Any], path: Path, why: str) -> None:
    if "results" in header and "schema_version" in header:
        raise CacheFormatError(path, f"this is a T4 results file, not a Kernel Tuner cache file ({why})")
    if "KernelSpecification" in header or "ConfigurationSpace" in header:
        raise CacheFormatError(path, f"this is a T1 input file, not a Kernel Tuner cache file ({why})")
    raise CacheFormatError(path, f"not a Kernel Tuner cache file: {why}")


def build_cache(
    header: dict[str, Any], entries: list[tuple[str, Any]], terminated: bool, dropped: int, path: Path
) -> KTCache:
    missing = [k for k in REQUIRED if k != "cache" and k not in header]
    if missing:
        not_a_cache(header, path, "missing header key(s) " + ", ".join(repr(k) for k in missing))
    for name in ("device_name", "kernel_name"):
        if not isinstance(header[name], str):
            raise CacheFormatError(path, f'"{name}" is not a string: {dumps(header[name])[:60]}')
    keys = header["tune_params_keys"]
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise CacheFormatError(path, '"tune_params_keys" is not a list of strings')
    keys_t = tuple(keys)
    tune_params = header.get("tune_params", {})
    if not isinstance(tune_params, dict):
        raise CacheFormatError(path, '"tune_params" is not a JSON object')
    for name, values in tune_params.items():
        if not isinstance(values, list):
            raise CacheFormatError(
                path, f'"tune_params" {short_key(name)} is not a list of values: {dumps(values)[:60]}'
            )
    objective_raw = header.get("objective", "time")
    if isinstance(objective_raw, list):
        objective: str | tuple[str, ...] = tuple(str(o) for o in objective_raw)
    elif isinstance(objective_raw, str):
        objective = objective_raw
    else:
        raise CacheFormatError(path, f'"objective" is neither a string nor a list: {objective_raw!r}')
    objective_keys = (objective,) if isinstance(objective, str) else objective
    problem_size = header.get("problem_size")
    if isinstance(problem_size, list):
        problem_size = tuple(problem_size)

    by_key: dict[str, KTRecord] = {}
    renamed = 0
    for key, entry in entries:
        if not isinstance(entry, dict):
            raise CacheFormatError(path, f"cache entry {key!r} is not a JSON object")
        record = _record(key, entry, keys_t, tune_params, objective_keys, path)
        if config_key(record.params, keys_t) != key:
            renamed += 1
        by_key[key] = record  # json.loads semantics: a repeated key keeps its first place, last value
    if renamed:
        warnings.warn(
            f"{path}: {renamed} cache key(s) differ from ','.join(str(value)) of their parameters; "
            "write_cache will write the recomputed keys",
            KTCacheWarning,
            stacklevel=3,
        )
    if dropped:
        warnings.warn(
            f"{path}: the last cache entry was cut short (the run was stopped while writing it); "
            f"dropped {dropped} entry, kept {len(by_key)}",
            KTCacheWarning,
            stacklevel=3,
        )
    header_extra = {k: v for k, v in header.items() if k not in HEADER_KEYS}
    return KTCache(
        device_name=str(header["device_name"]),
        kernel_name=str(header["kernel_name"]),
        problem_size=problem_size,
        tune_params_keys=keys_t,
        tune_params=tune_params,
        objective=objective,
        records=tuple(by_key.values()),
        header_extra=header_extra,
        terminated=terminated,
        dropped_entries=dropped,
    )


def _record(
    key: str,
    entry: dict[str, Any],
    keys: tuple[str, ...],
    tune_params: Mapping[str, Any],
    objective_keys: tuple[str, ...],
    path: Path,
) -> KTRecord:
    try:
        params = {k: entry[k] for k in keys}
    except KeyError:
        params = _params_from_key(key, entry, keys, tune_params, path)
    status = "ok"
    marker = entry.get(STATUS_KEY)
    err = entry.get(ERROR_KEY)
    if isinstance(marker, str) and marker in STATUSES:
        status = marker
    elif err is not None:
        status = STATUS_OF_KT.get(err, "error") if isinstance(err, str) else "error"
    else:
        for k in ("time", *objective_keys):
            v = entry.get(k)
            if isinstance(v, str) and v in STATUS_OF_KT:
                status = STATUS_OF_KT[v]
                break
        else:
            for k, v in entry.items():
                if isinstance(v, str) and v in STATUS_OF_KT and k not in keys:
                    status = STATUS_OF_KT[v]
                    break
    time_ms: float | None = None
    t = entry.get("time")
    if status == "ok":
        time_ms = as_float(t)  # None: not a number a float holds (a 400-digit integer): kept as written, below
    times_ms: tuple[float, ...] = ()
    ts = entry.get("times")
    floats = [as_float(x) for x in ts] if isinstance(ts, list) else None
    times_ok = floats is not None and all(x is not None for x in floats)
    if floats is not None and times_ok:
        times_ms = tuple(x for x in floats if x is not None)
    extra = {}
    for k, v in entry.items():
        if k in params or k in (STATUS_KEY, ERROR_KEY):
            continue
        if k == "time" and (time_ms is not None or (isinstance(v, str) and v in STATUS_OF_KT)):
            continue  # any other string (not Kernel Tuner's failure word) is kept, for the importer to judge
        if k == "times" and times_ok:
            continue
        if status != "ok" and isinstance(v, str) and v in STATUS_OF_KT:
            continue  # the failure marker, under the objective (Kernel Tuner <= 1.3)
        extra[k] = v
    return KTRecord(params=params, status=status, time_ms=time_ms, times_ms=times_ms, extra=extra)


def _params_from_key(
    key: str, entry: Mapping[str, Any], keys: tuple[str, ...], tune_params: Mapping[str, Any], path: Path
) -> dict[str, Any]:
    parts = key.split(",")
    if len(parts) != len(keys):
        raise CacheFormatError(
            path,
            f"cache entry {key!r} lacks parameter values and its key does not have {len(keys)} comma-separated values",
        )
    params = {}
    for k, part in zip(keys, parts, strict=True):
        if k in entry:
            params[k] = entry[k]
            continue
        for v in tune_params.get(k, ()):
            if str(v) == part:
                params[k] = v
                break
        else:
            raise CacheFormatError(
                path, f"cache entry {key!r} lacks {k!r} and {part!r} is not among its tune_params values"
            )
    return params
