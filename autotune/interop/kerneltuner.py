"""Kernel Tuner cache files and T4 results files, read and written with the standard library only.

This module imports nothing from the rest of ``autotune``.

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

import json
import math
import os
import re
import tempfile
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]  # typeshed omits it; CPython defines it
from pathlib import Path
from typing import Any, Literal, TypeGuard

__all__ = [
    "STATUSES",
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

#: Record statuses.  "wrong" (verification failed) and "error" (Kernel Tuner's generic ``ErrorConfig``)
#: have no Kernel Tuner <= 1.3 representation; see :func:`write_cache`.
STATUSES = ("ok", "compile_error", "launch_error", "invalid", "wrong", "error")

_STATUS_OF_KT = {
    "InvalidConfig": "invalid",
    "CompilationFailedConfig": "compile_error",
    "RuntimeFailedConfig": "launch_error",
    "ErrorConfig": "error",
}
_KT_OF_STATUS = {
    "invalid": "InvalidConfig",
    "compile_error": "CompilationFailedConfig",
    "launch_error": "RuntimeFailedConfig",
    # Kernel Tuner <= 1.3 knows only the three above; anything else must be one of them or those readers
    # keep the string and later compare it with numbers.  Both are failures that happen when running.
    "wrong": "RuntimeFailedConfig",
    "error": "RuntimeFailedConfig",
}
_T4_INVALIDITY = {
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
_HEADER_KEYS = ("device_name", "kernel_name", "problem_size", "tune_params_keys", "tune_params", "objective")
_REQUIRED = ("device_name", "kernel_name", "tune_params_keys", "cache")
_T4_TIMES = (  # T4 "times" field <- cache entry key, as kernel_tuner.file_utils.get_t4_results maps them
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


# ------------------------------------------------------------------------------------------------ reading

_WS = re.compile(r"[ \t\n\r]*")


def _skip_ws(text: str, i: int) -> int:
    """The position of the first non-whitespace character at or after i (len(text) when none is left)."""
    m = _WS.match(text, i)
    return m.end() if m else i  # the pattern matches the empty string: m is never None


_DECODER = json.JSONDecoder()


class _Truncated(Exception):
    """The text ended inside a value."""


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def read_cache(
    path: str | os.PathLike[str], *, max_bytes: int | None = None, max_entries: int | None = None
) -> KTCache:
    """Read a Kernel Tuner cache file, closed or left open by a stopped run.

    A last entry cut short (a run killed while writing) is dropped with a :class:`KTCacheWarning`;
    :attr:`KTCache.dropped_entries` counts it.  Anything else that is not a cache raises
    :class:`CacheFormatError` naming the file and the problem; a file above ``max_bytes`` (checked before it is
    read) or of more than ``max_entries`` entries raises :class:`CacheLimitError` (None: no limit).
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if max_bytes is not None and size > max_bytes:
            raise CacheLimitError(path, "bytes", size, max_bytes)
        raw = path.read_bytes()
    except OSError as e:
        raise CacheFormatError(path, f"cannot read the file: {e.strerror or e}") from e
    if raw[:2] == b"\x1f\x8b":  # a gzipped cache (.json.gz): the byte limit holds for what it unpacks to
        raw = _gunzip(raw, path, max_bytes)
    elif raw[:6] == b"\xfd7zXZ\x00":  # an xz-compressed cache (.json.xz, as results/bench/hub keeps them): likewise
        raw = _unxz(raw, path, max_bytes)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise CacheFormatError(path, f"not UTF-8 text (byte {e.start}); not a Kernel Tuner cache file") from e
    header, entries, terminated, dropped = _parse(text.rstrip(), path, max_entries)
    return _build(header, entries, terminated, dropped, path)


def _gunzip(raw: bytes, path: Path, max_bytes: int | None) -> bytes:
    import gzip
    import io
    import zlib

    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as f:
            out = f.read(-1 if max_bytes is None else max_bytes + 1)
    except (OSError, EOFError, zlib.error) as e:
        raise CacheFormatError(path, f"a damaged gzip file: {e}") from e
    if max_bytes is not None and len(out) > max_bytes:
        raise CacheLimitError(path, "bytes", len(out), max_bytes)
    return out


def _unxz(raw: bytes, path: Path, max_bytes: int | None) -> bytes:
    import lzma

    decompressor = lzma.LZMADecompressor()
    try:
        out = decompressor.decompress(raw, -1 if max_bytes is None else max_bytes + 1)
    except lzma.LZMAError as e:
        raise CacheFormatError(path, f"a damaged xz file: {e}") from e
    if max_bytes is not None and len(out) > max_bytes:
        raise CacheLimitError(path, "bytes", len(out), max_bytes)
    if not decompressor.eof:
        raise CacheFormatError(path, "a damaged xz file: it ends before its end marker")
    return out


def _parse(text: str, path: Path, max_entries: int | None) -> tuple[dict[str, Any], list[tuple[str, Any]], bool, int]:
    """Split the (right-stripped) text into header members and (key, entry) pairs, tolerating an open end."""
    n = len(text)
    i = _skip_ws(text, 0)
    if i >= n:
        raise CacheFormatError(path, "the file is empty; not a Kernel Tuner cache file")
    if text[i] != "{":
        raise CacheFormatError(
            path, "does not start with a JSON object ('{'); not a Kernel Tuner cache file", line=_line_of(text, i)
        )
    i += 1
    header: dict[str, Any] = {}
    entries: list[tuple[str, Any]] = []
    saw_cache = False
    terminated = False
    dropped = 0
    first = True
    while True:
        i = _skip_ws(text, i)
        if i >= n:
            break  # root object left open
        if text[i] == "}":
            terminated = saw_cache
            i += 1
            break
        if not first:
            if text[i] != ",":
                raise CacheFormatError(
                    path, f"expected ',' or '}}' between top-level keys, found {text[i]!r}", line=_line_of(text, i)
                )
            i = _skip_ws(text, i + 1)
            if i >= n:
                break
        first = False
        try:
            key, i = _string(text, i, path)
            i = _colon(text, i, n, path)
        except _Truncated:
            break
        if key == "cache":
            if saw_cache:
                raise CacheFormatError(path, 'two "cache" keys', line=_line_of(text, i))
            saw_cache = True
            if i >= n:
                break
            if text[i] != "{":
                raise CacheFormatError(path, '"cache" is not a JSON object', line=_line_of(text, i))
            i, closed, dropped = _parse_entries(text, i + 1, n, path, entries, max_entries)
            if not closed:
                break
            continue
        start = i
        try:
            value, i = _DECODER.raw_decode(text, i)
        except json.JSONDecodeError as e:
            raise CacheFormatError(
                path, f"invalid or cut-short JSON in the header value of {key!r}: {e.msg}", line=e.lineno
            ) from e
        except (RecursionError, ValueError) as e:  # nested past the decoder's depth, or an integer of 4,300+ digits
            raise CacheFormatError(
                path,
                f"the header value of {_short(key)} is not a Kernel Tuner value: {_why(e)}",
                line=_line_of(text, start),
            ) from None
        _shallow(value, path, f"the header value of {_short(key)}", text, start, i)
        header[key] = value
    if i < n:
        rest = _skip_ws(text, i)
        if rest < n:
            raise CacheFormatError(path, "text after the end of the JSON object", line=_line_of(text, rest))
    if not saw_cache:
        if "tune_params_keys" in header:
            raise CacheFormatError(path, 'the file ends before its "cache" object (or has none)')
        _not_a_cache(header, path, 'it has no "cache" object')
    return header, entries, terminated, dropped


def _string(text: str, i: int, path: Path) -> tuple[str, int]:
    if text[i] != '"':
        raise CacheFormatError(path, f"expected a quoted key, found {text[i]!r}", line=_line_of(text, i))
    try:
        return scanstring(text, i + 1, True)
    except json.JSONDecodeError as e:
        if "Unterminated" in e.msg:  # runs to the end: a strict JSON string cannot hold a newline
            raise _Truncated from None
        raise CacheFormatError(path, f"invalid JSON string: {e.msg}", line=_line_of(text, i)) from e


def _colon(text: str, i: int, n: int, path: Path) -> int:
    i = _skip_ws(text, i)
    if i >= n:
        raise _Truncated
    if text[i] != ":":
        raise CacheFormatError(path, f"expected ':' after a key, found {text[i]!r}", line=_line_of(text, i))
    return _skip_ws(text, i + 1)


def _parse_entries(
    text: str, i: int, n: int, path: Path, entries: list[tuple[str, Any]], max_entries: int | None
) -> tuple[int, bool, int]:
    """Parse ``"key": {...}`` members of the cache object from ``i``; return (pos, closed, dropped)."""
    skip_ws = _skip_ws
    raw_decode = _DECODER.raw_decode
    first = True
    while True:
        i = skip_ws(text, i)
        if i >= n:
            return i, False, 0
        c = text[i]
        if c == "}":
            return i + 1, True, 0
        if not first:
            if c != ",":
                raise CacheFormatError(
                    path, f"expected ',' or '}}' after a cache entry, found {c!r}", line=_line_of(text, i)
                )
            i = skip_ws(text, i + 1)
            if i >= n:
                return i, False, 0  # the trailing comma of an open cache
            if text[i] == "}":  # ",}" is not JSON, but it means the same thing
                return i + 1, True, 0
        first = False
        if len(entries) == max_entries:
            raise CacheLimitError(path, "entries", max_entries + 1, max_entries, line=_line_of(text, i))
        start = i
        try:
            key, i = _string(text, i, path)
            i = _colon(text, i, n, path)
            if i >= n:
                raise _Truncated
            value, i = raw_decode(text, i)
        except _Truncated:
            return n, False, 1
        except json.JSONDecodeError as e:
            # Cut short: the decoder stopped on the last line, at text that more text could complete.
            tail = text[e.pos :]
            if "\n" not in tail and ("Unterminated" in e.msg or _could_continue(tail)):
                return n, False, 1
            raise CacheFormatError(
                path,
                f"invalid JSON in the cache entry starting on line {_line_of(text, start)}: {e.msg}",
                line=e.lineno,
            ) from e
        except (RecursionError, ValueError) as e:  # nested past the decoder's depth, or an integer of 4,300+ digits
            raise CacheFormatError(
                path, f"cache entry {_short(key)} is not a Kernel Tuner entry: {_why(e)}", line=_line_of(text, start)
            ) from None
        _shallow(value, path, f"cache entry {_short(key)}", text, start, i)
        entries.append((key, value))


MAX_DEPTH = 16  # lists and objects inside one header value or cache entry: Kernel Tuner writes 2 at most


def _short(key: str) -> str:
    return repr(key) if len(key) <= 60 else f"{key[:40]!r}... ({len(key)} characters)"


def _why(e: BaseException) -> str:
    if isinstance(e, RecursionError):
        return f"it is nested more than {MAX_DEPTH} lists or objects deep"
    return str(e).split(";")[0]  # "Exceeds the limit (4300 digits) for integer string conversion: ..."


def _shallow(value: Any, path: Path, what: str, text: str, start: int, end: int) -> None:
    """Refuse a value (read from text[start:end]) nested more than MAX_DEPTH deep, checked without recursion: nothing
    later walks it deeper. A value of at most MAX_DEPTH opening brackets is not walked (a usual entry has 2)."""
    if text.count("[", start, end) + text.count("{", start, end) <= MAX_DEPTH:
        return
    level: list[Any] = [value]
    for _ in range(MAX_DEPTH + 1):
        level = [
            v
            for x in level
            if isinstance(x, (list, dict))
            for v in (x.values() if isinstance(x, dict) else x)
            if isinstance(v, (list, dict))
        ]
        if not level:
            return
    raise CacheFormatError(
        path,
        f"{what} is not a Kernel Tuner value: it is nested more than {MAX_DEPTH} lists or objects deep",
        line=_line_of(text, start),
    )


def _could_continue(tail: str) -> bool:
    """Whether ``tail`` (where the decoder stopped, to the end) is a prefix of a JSON literal or number."""
    tail = tail.strip()
    if not tail:
        return True
    for lit in ("true", "false", "null", "NaN", "Infinity", "-Infinity"):
        if lit.startswith(tail):
            return True
    return bool(re.fullmatch(r"-?[0-9]*\.?[0-9]*([eE][-+]?[0-9]*)?", tail))


def _not_a_cache(header: Mapping[str, Any], path: Path, why: str) -> None:
    if "results" in header and "schema_version" in header:
        raise CacheFormatError(path, f"this is a T4 results file, not a Kernel Tuner cache file ({why})")
    if "KernelSpecification" in header or "ConfigurationSpace" in header:
        raise CacheFormatError(path, f"this is a T1 input file, not a Kernel Tuner cache file ({why})")
    raise CacheFormatError(path, f"not a Kernel Tuner cache file: {why}")


def _build(
    header: dict[str, Any], entries: list[tuple[str, Any]], terminated: bool, dropped: int, path: Path
) -> KTCache:
    missing = [k for k in _REQUIRED if k != "cache" and k not in header]
    if missing:
        _not_a_cache(header, path, "missing header key(s) " + ", ".join(repr(k) for k in missing))
    for name in ("device_name", "kernel_name"):
        if not isinstance(header[name], str):
            raise CacheFormatError(path, f'"{name}" is not a string: {_dumps(header[name])[:60]}')
    keys = header["tune_params_keys"]
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise CacheFormatError(path, '"tune_params_keys" is not a list of strings')
    keys_t = tuple(keys)
    tune_params = header.get("tune_params", {})
    if not isinstance(tune_params, dict):
        raise CacheFormatError(path, '"tune_params" is not a JSON object')
    for name, values in tune_params.items():
        if not isinstance(values, list):
            raise CacheFormatError(path, f'"tune_params" {_short(name)} is not a list of values: {_dumps(values)[:60]}')
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
    header_extra = {k: v for k, v in header.items() if k not in _HEADER_KEYS}
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


def _is_number(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _as_float(v: Any) -> float | None:
    """A JSON number as a float; None for anything else, an integer too large for a float included (whether the
    value is a usable time is the importer's to judge: `autotune.interop.kt_store`)."""
    if not _is_number(v):
        return None
    try:
        return float(v)
    except OverflowError:
        return None


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
        status = _STATUS_OF_KT.get(err, "error") if isinstance(err, str) else "error"
    else:
        for k in ("time", *objective_keys):
            v = entry.get(k)
            if isinstance(v, str) and v in _STATUS_OF_KT:
                status = _STATUS_OF_KT[v]
                break
        else:
            for k, v in entry.items():
                if isinstance(v, str) and v in _STATUS_OF_KT and k not in keys:
                    status = _STATUS_OF_KT[v]
                    break
    time_ms: float | None = None
    t = entry.get("time")
    if status == "ok":
        time_ms = _as_float(t)  # None: not a number a float holds (a 400-digit integer): kept as written, below
    times_ms: tuple[float, ...] = ()
    ts = entry.get("times")
    floats = [_as_float(x) for x in ts] if isinstance(ts, list) else None
    times_ok = floats is not None and all(x is not None for x in floats)
    if floats is not None and times_ok:
        times_ms = tuple(x for x in floats if x is not None)
    extra = {}
    for k, v in entry.items():
        if k in params or k in (STATUS_KEY, ERROR_KEY):
            continue
        if k == "time" and (time_ms is not None or (isinstance(v, str) and v in _STATUS_OF_KT)):
            continue  # any other string (not Kernel Tuner's failure word) is kept, for the importer to judge
        if k == "times" and times_ok:
            continue
        if status != "ok" and isinstance(v, str) and v in _STATUS_OF_KT:
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


# ------------------------------------------------------------------------------------------------ writing


def _json_default(obj: Any) -> Any:
    """numpy scalars and arrays (duck-typed: this module does not import numpy), tuples are lists already."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"cannot write {type(obj).__name__} {obj!r} to JSON")


def _dumps(obj: Any, **kw: Any) -> str:
    return json.dumps(obj, default=_json_default, **kw)


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
        kt = _KT_OF_STATUS[record.status]
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
    head = _dumps({**_header(cache), "cache": {}}, indent="")
    assert head.endswith("{}\n}")
    parts = [head[:-3]]  # up to and including '"cache": {', as Kernel Tuner's process_cache writes it
    seen: set[str] = set()
    for record in cache.records:
        entry = _entry(record, cache, error_style)
        key = config_key(record.params, cache.tune_params_keys)
        if key in seen:
            raise ValueError(f"two records have the cache key {key!r}")
        seen.add(key)
        line = _dumps({key: entry})
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
        f = _as_float(v)
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
    timing_keys = {src for _, src in _T4_TIMES}
    results = []
    for r in cache.records:
        out: dict[str, Any] = {}
        ts = r.extra.get("timestamp")
        if isinstance(ts, str):
            out["timestamp"] = ts
        out["configuration"] = {k: r.params[k] for k in cache.tune_params_keys}
        times: dict[str, Any] = {}
        for t4, src in _T4_TIMES:
            v = r.extra.get(src)
            f = _as_float(v)
            if f is not None and math.isfinite(f):
                times[t4] = v
        times["runtimes"] = list(r.times_ms)
        out["times"] = times
        out["invalidity"] = _T4_INVALIDITY[r.status]
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
    return _dumps(t4_results(cache, metadata=metadata), indent=1, allow_nan=False) + "\n"
