"""Writing Kernel Tuner cache files exactly as Kernel Tuner's ``close_cache`` leaves them, and T4 results files
(``kernel_tuner/file_utils.py``), standard library only (the format: `autotune.interop.kerneltuner`).
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from autotune.interop.kt_format import (
    ERROR_KEY,
    KT_OF_STATUS,
    STATUS_KEY,
    T4_INVALIDITY,
    T4_SCHEMA_VERSION,
    T4_TIMES,
    KTCache,
    KTRecord,
    as_float,
    config_key,
    dumps,
)

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
    for k, v in record.extra.items():
        if k not in out:
            out[k] = v
    return out


def _header(cache: KTCache) -> dict[str, Any]:
    h: dict[str, Any] = {"device_name": cache.device_name, "kernel_name": cache.kernel_name}
    if cache.problem_size is not None:
        ps = cache.problem_size
        h["problem_size"] = list(ps) if isinstance(ps, (tuple, list)) else ps
    h["tune_params_keys"] = list(cache.tune_params_keys)
    h["tune_params"] = {k: list(v) for k, v in cache.tune_params.items()}
    h["objective"] = cache.objective if isinstance(cache.objective, str) else list(cache.objective)
    for k, v in cache.header_extra.items():
        if k not in h and k != "cache":
            h[k] = v
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


def _measurement_value(v: Any) -> bool:
    """Whether the T4 schema accepts ``v`` as a measurement value (number, string or array)."""
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        f = as_float(v)
        return f is not None and math.isfinite(f)
    return isinstance(v, (str, list))


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
    timing_keys = {src for _, src in T4_TIMES}
    results = []
    for r in cache.records:
        out: dict[str, Any] = {}
        ts = r.extra.get("timestamp")
        if isinstance(ts, str):
            out["timestamp"] = ts
        out["configuration"] = {k: r.params[k] for k in cache.tune_params_keys}
        times: dict[str, Any] = {}
        for t4, src in T4_TIMES:
            v = r.extra.get(src)
            f = as_float(v)
            if f is not None and math.isfinite(f):
                times[t4] = v
        times["runtimes"] = list(r.times_ms)
        out["times"] = times
        out["invalidity"] = T4_INVALIDITY[r.status]
        out["correctness"] = 0 if r.status == "wrong" else 1
        measurements = []
        if r.time_ms is not None and math.isfinite(r.time_ms):
            measurements.append({"name": "time", "value": r.time_ms, "unit": "ms"})
        for k, v in r.extra.items():
            if k in timing_keys or k == "timestamp" or not _measurement_value(v):
                continue
            measurements.append({"name": k, "value": v, "unit": "ms" if k.startswith("time") else ""})
        out["measurements"] = measurements
        out["objectives"] = list(objectives)
        results.append(out)
    meta: dict[str, Any] = {"timeunit": "milliseconds"}
    if metadata:
        meta.update(metadata)
    return {"results": results, "schema_version": T4_SCHEMA_VERSION, "metadata": meta}


def write_t4(cache: KTCache, path: str | os.PathLike[str], *, metadata: Mapping[str, Any] | None = None) -> None:
    """Write the T4 results JSON of :func:`t4_results` to ``path``."""
    _atomic_write(Path(path), t4_text(cache, metadata=metadata))


def t4_text(cache: KTCache, *, metadata: Mapping[str, Any] | None = None) -> str:
    """The text :func:`write_t4` writes."""
    return dumps(t4_results(cache, metadata=metadata), indent=1, allow_nan=False) + "\n"
