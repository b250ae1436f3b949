"""Decompressing a `.sqlite.xz` or `.sqlite.gz` file that may be hostile, into a file of the caller's choosing.

What comes out is bounded before it is written: the size an xz file declares in its index is checked before one byte
is written (a 267 KB file declaring 1 GB is refused at once), and every file is counted while it is written and
stopped at the limit (`AUTOTUNE_MAX_UNPACKED_MB`, default 512 MB; `off` for none), whatever it declared. The first
bytes decompressed must be SQLite's header, else nothing is written. A file that is not xz (or gzip) at all, damaged or
cut off is one `StoreError` naming it; the partial output is removed on every failure.
"""

from __future__ import annotations

import gzip
import lzma
import os
import struct
import zlib
from pathlib import Path
from typing import BinaryIO

from autotune.errors import StoreError
from autotune.untrusted import env_number

SQLITE_HEADER = b"SQLite format 3\x00"
XZ_MAGIC = b"\xfd7zXZ\x00"
GZIP_MAGIC = b"\x1f\x8b"
MAX_ENV = "AUTOTUNE_MAX_UNPACKED_MB"
MAX_UNPACKED_MB = 512  # the largest committed database is 12 MB plain; a sweep's rarely passes 100 MB
CHUNK = 1 << 20


def max_unpacked_bytes() -> int | None:
    """The most bytes a compressed database may decompress to (None: no limit), from AUTOTUNE_MAX_UNPACKED_MB."""
    mb = env_number(MAX_ENV, MAX_UNPACKED_MB, lo=1, hi=2**30, off=("0", "off", "none", "no"), example="2048")
    return None if mb is None else int(mb * 2**20)


def _too_big(src: Path, size: int | None, limit: int) -> StoreError:
    mb = limit / 2**20
    said = f" ({size:,} bytes, its index says)" if size is not None else ""
    need = f"{-(-size // 2**20)}" if size is not None else f"{int(mb) * 4}"
    return StoreError(
        f"{src} decompresses to more than {mb:g} MB{said}, the limit {MAX_ENV} sets",
        hint=f"if the file is one you trust, raise the limit: {MAX_ENV}={need} (or off)",
    )


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """xz's multibyte integer at `pos`: (value, position after it). Raises ValueError."""
    value = 0
    for i in range(9):
        byte = data[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value, pos + i + 1
    raise ValueError("integer too long")


def declared_size(path: Path) -> int | None:
    """The uncompressed size an xz file declares: the sum over its streams (xz files may be concatenated) of the sizes
    in each stream's index, read from the file's end backwards and CRC-checked; None where it declares none that can
    be read (not xz, damaged). liblzma checks each index against the data while decompressing, and the writer counts
    anyway: this only refuses a file that says it is too large before anything is written."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            end, total = f.tell(), 0
            for _ in range(1 << 16):  # streams, at most
                if end == 0:
                    return total
                stream = _stream_before(f, end)
                if stream is None:
                    return None
                end, size = stream
                total += size
    except OSError:
        return None
    return None


def _stream_before(f: BinaryIO, end: int) -> tuple[int, int] | None:
    """(where it starts, its uncompressed size) of the xz stream ending at `end` (stream padding before `end`
    skipped), or None."""
    while end >= 4:  # stream padding: zero bytes, a multiple of 4
        f.seek(end - 4)
        if f.read(4) != b"\0\0\0\0":
            break
        end -= 4
    if end < 32:
        return None
    f.seek(end - 12)
    footer = f.read(12)
    if footer[10:] != b"YZ" or zlib.crc32(footer[4:10]) != struct.unpack("<I", footer[:4])[0]:
        return None
    index_size = (struct.unpack("<I", footer[4:8])[0] + 1) * 4
    if index_size > min(end - 24, 1 << 24):
        return None
    f.seek(end - 12 - index_size)
    index = f.read(index_size)
    if index[:1] != b"\x00" or zlib.crc32(index[:-4]) != struct.unpack("<I", index[-4:])[0]:
        return None
    try:
        records, pos = _varint(index, 1)
        blocks = size = 0
        for _ in range(min(records, index_size)):
            unpadded, pos = _varint(index, pos)
            uncompressed, pos = _varint(index, pos)
            blocks += -(-unpadded // 4) * 4
            size += uncompressed
    except (ValueError, IndexError):
        return None
    start = end - 12 - index_size - blocks - 12
    if start < 0:
        return None
    f.seek(start)
    if f.read(len(XZ_MAGIC)) != XZ_MAGIC:
        return None
    return start, size


def _head(path: Path, hint: str) -> bytes:
    """The first bytes of `path` (as many as SQLite's header). Raises StoreError (with `hint`) when it cannot be read."""
    try:
        with path.open("rb") as f:
            return f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}", hint=hint) from None


def file_kind(path: Path, hint: str) -> str:
    """What `path` holds by its first bytes: "sqlite", "xz", "gzip" or "other". Raises StoreError (with `hint`)
    when it cannot be read."""
    head = _head(path, hint)
    if head.startswith(XZ_MAGIC):
        return "xz"
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    return "sqlite" if head == SQLITE_HEADER else "other"


def _opened(src: Path) -> BinaryIO:
    """The decompressing reader of `src` by its first bytes (xz or gzip). Raises StoreError."""
    magic = _head(src, hint="give a .sqlite.xz (or .sqlite.gz) results database")[: len(XZ_MAGIC)]
    if magic.startswith(XZ_MAGIC):
        return lzma.open(src, "rb")  # type: ignore[return-value]
    if magic.startswith(GZIP_MAGIC):
        return gzip.open(src, "rb")  # type: ignore[return-value]
    what = "an SQLite database, not compressed" if magic == SQLITE_HEADER[:6] else "neither xz nor gzip"
    raise StoreError(
        f"{src} is not a compressed database: its first bytes {magic!r} are {what}",
        hint="name a plain SQLite file without .xz/.gz, or give a file `autotune db pack` or `xz` wrote",
    )


def decompress_database(src: Path, dst: Path) -> int:
    """Write the SQLite database compressed in `src` (xz or gzip, told by its first bytes) to the new file `dst`
    (refused if it exists), within the size limit (`max_unpacked_bytes`); returns the bytes written. Raises
    StoreError; `dst` is removed on every failure after it was created."""
    limit = max_unpacked_bytes()
    declared = declared_size(src)
    if limit is not None and declared is not None and declared > limit:
        raise _too_big(src, declared, limit)
    with _opened(src) as reader:
        head = _read(reader, src, len(SQLITE_HEADER))
        if head != SQLITE_HEADER:
            raise StoreError(
                f"{src} does not hold an SQLite database (its content starts with {head[:16]!r})",
                hint="give a results database compressed by `autotune db pack`, `xz` or `gzip`",
            )
        try:
            out = dst.open("xb")
        except OSError as exc:
            raise StoreError(
                f"cannot create {dst}: {exc.strerror}", hint="give a new file in a writable folder"
            ) from None
        written = 0
        try:
            with out:
                block = head
                while block:
                    written += len(block)
                    if limit is not None and written > limit:
                        raise _too_big(src, declared, limit)
                    out.write(block)
                    block = _read(reader, src, CHUNK)
        except OSError as exc:
            dst.unlink(missing_ok=True)
            raise StoreError(
                f"cannot write the decompressed copy of {src} (at {written:,} bytes): {exc.strerror or exc}",
                hint="free space where it is written (the temporary folder: set TMPDIR to one with room)",
            ) from None
        except BaseException:
            dst.unlink(missing_ok=True)
            raise
    return written


def _read(reader: BinaryIO, src: Path, size: int) -> bytes:
    """Up to `size` decompressed bytes. Raises StoreError for a damaged or cut-off file."""
    try:
        return reader.read(size)
    except (EOFError, lzma.LZMAError, gzip.BadGzipFile, zlib.error) as exc:
        raise StoreError(
            f"cannot decompress {src}: {exc or type(exc).__name__} (the file is damaged or cut off)",
            hint="copy or download the file again",
        ) from None
    except OSError as exc:
        raise StoreError(f"cannot read {src}: {exc.strerror or exc}", hint="check the file and its disk") from None
