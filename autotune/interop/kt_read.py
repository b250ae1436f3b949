"""Reading Kernel Tuner cache files (the format: `autotune.interop.kerneltuner`), standard library only: the closed
form, the unterminated form and a cut-short last entry (dropped with a warning), within byte and entry limits; then
the parsed header and entries -> `KTCache` (`build_cache`): the header's checks, each entry's parameters, status and
times, and the warnings for what is dropped.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Mapping
from json.decoder import scanstring  # type: ignore[attr-defined]  # typeshed omits it; CPython defines it
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
    CacheLimitError,
    KTCache,
    KTCacheWarning,
    KTRecord,
    as_float,
    config_key,
    dumps,
)

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
    if raw[:2] == b"\x1f\x8b" or raw[:6] == b"\xfd7zXZ\x00":
        raw = _unpack(raw, path, max_bytes)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise CacheFormatError(path, f"not UTF-8 text (byte {e.start}); not a Kernel Tuner cache file") from e
    header, entries, terminated, dropped = _parse(text.rstrip(), path, max_entries)
    return build_cache(header, entries, terminated, dropped, path)


def _unpack(raw: bytes, path: Path, max_bytes: int | None) -> bytes:
    """A gzipped cache (.json.gz) or an xz-compressed one (.json.xz, as results/bench/hub keeps them) unpacked: the
    byte limit holds for what it unpacks to."""
    import gzip
    import io
    import lzma
    import zlib

    gz = raw[:2] == b"\x1f\x8b"
    xz = lzma.LZMADecompressor()
    try:
        if gz:
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as f:
                out = f.read(-1 if max_bytes is None else max_bytes + 1)
        else:
            out = xz.decompress(raw, -1 if max_bytes is None else max_bytes + 1)
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as e:
        raise CacheFormatError(path, f"a damaged {'gzip' if gz else 'xz'} file: {e}") from e
    if max_bytes is not None and len(out) > max_bytes:
        raise CacheLimitError(path, "bytes", len(out), max_bytes)
    if not gz and not xz.eof:
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
        i, closed = _member(text, i, path, first, "between top-level keys", trailing_comma=False)
        if closed is not None:  # the root object closed, or left open
            terminated = closed and saw_cache
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
        try:
            header[key], i = _value(text, i, i, path, f"the header value of {short_key(key)}", "value")
        except json.JSONDecodeError as e:
            raise CacheFormatError(
                path, f"invalid or cut-short JSON in the header value of {key!r}: {e.msg}", line=e.lineno
            ) from e
    if i < n:
        rest = _skip_ws(text, i)
        if rest < n:
            raise CacheFormatError(path, "text after the end of the JSON object", line=_line_of(text, rest))
    if not saw_cache:
        if "tune_params_keys" in header:
            raise CacheFormatError(path, 'the file ends before its "cache" object (or has none)')
        not_a_cache(header, path, 'it has no "cache" object')
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
    first = True
    while True:
        i, closed = _member(text, i, path, first, "after a cache entry", trailing_comma=True)
        if closed is not None:
            return i, closed, 0
        first = False
        if len(entries) == max_entries:
            raise CacheLimitError(path, "entries", max_entries + 1, max_entries, line=_line_of(text, i))
        start = i
        try:
            key, i = _string(text, i, path)
            i = _colon(text, i, n, path)
            if i >= n:
                raise _Truncated
            value, i = _value(text, i, start, path, f"cache entry {short_key(key)}", "entry")
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
        entries.append((key, value))


def _member(text: str, i: int, path: Path, first: bool, where: str, trailing_comma: bool) -> tuple[int, bool | None]:
    """Past the separator before an object's next member: (its position, None); or (the position after the object,
    True) where a '}' closes it, (the end, False) where the text ends first. `trailing_comma`: ",}" closes it too
    (not JSON, but it means the same thing)."""
    n = len(text)
    i = _skip_ws(text, i)
    if i >= n:
        return i, False
    if text[i] == "}":
        return i + 1, True
    if not first:
        if text[i] != ",":
            raise CacheFormatError(path, f"expected ',' or '}}' {where}, found {text[i]!r}", line=_line_of(text, i))
        i = _skip_ws(text, i + 1)
        if i >= n:
            return i, False  # the trailing comma of an open object
        if trailing_comma and text[i] == "}":
            return i + 1, True
    return i, None


def _value(text: str, i: int, start: int, path: Path, what: str, noun: str) -> tuple[Any, int]:
    """The JSON value at `i` and the position after it (a JSONDecodeError is the caller's to judge); `what` (starting
    at `start`) is not a Kernel Tuner `noun` where it is nested too deep or holds an integer of 4,300+ digits."""
    try:
        value, end = _DECODER.raw_decode(text, i)
    except json.JSONDecodeError:
        raise
    except (RecursionError, ValueError) as e:  # nested past the decoder's depth, or an integer of 4,300+ digits
        raise CacheFormatError(
            path, f"{what} is not a Kernel Tuner {noun}: {_why(e)}", line=_line_of(text, start)
        ) from None
    _shallow(value, path, what, text, start, end)
    return value, end


MAX_DEPTH = 16  # lists and objects inside one header value or cache entry: Kernel Tuner writes 2 at most


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


# ------------------------------------------------------------------------------------------------ building


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
    marker, err = entry.get(STATUS_KEY), entry.get(ERROR_KEY)
    # Kernel Tuner's failure word: under `time` or an objective first, else under any key but a parameter
    values = [entry.get(k) for k in ("time", *objective_keys)] + [v for k, v in entry.items() if k not in keys]
    words = [v for v in values if isinstance(v, str) and v in STATUS_OF_KT]
    if isinstance(marker, str) and marker in STATUSES:
        status = marker
    elif err is not None:
        status = STATUS_OF_KT.get(err, "error") if isinstance(err, str) else "error"
    else:
        status = STATUS_OF_KT[words[0]] if words else "ok"
    # None: not a number a float holds (a 400-digit integer): kept as written, below
    time_ms = as_float(entry.get("time")) if status == "ok" else None
    ts = entry.get("times")
    floats = [as_float(x) for x in ts] if isinstance(ts, list) else [None]
    times_ok = None not in floats
    times_ms = tuple(x for x in floats if x is not None) if times_ok else ()
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
