"""Reading Kernel Tuner cache files (the format: `autotune.interop.kerneltuner`), standard library only: the closed
form, the unterminated form and a cut-short last entry (dropped with a warning), within byte and entry limits.
"""

from __future__ import annotations

import json
import os
import re
from json.decoder import scanstring  # type: ignore[attr-defined]  # typeshed omits it; CPython defines it
from pathlib import Path
from typing import Any

from autotune.interop.kt_records import build_cache, not_a_cache, short_key
from autotune.interop.kt_format import CacheFormatError, CacheLimitError, KTCache

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
    return build_cache(header, entries, terminated, dropped, path)


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
                f"the header value of {short_key(key)} is not a Kernel Tuner value: {_why(e)}",
                line=_line_of(text, start),
            ) from None
        _shallow(value, path, f"the header value of {short_key(key)}", text, start, i)
        header[key] = value
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
                path, f"cache entry {short_key(key)} is not a Kernel Tuner entry: {_why(e)}", line=_line_of(text, start)
            ) from None
        _shallow(value, path, f"cache entry {short_key(key)}", text, start, i)
        entries.append((key, value))


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
