"""Committed results databases stored small and read back exactly: `pack` and `unpack` (format `.sqlite.xz`).

`pack` takes a plain SQLite results file and writes an xz-compressed copy from which `unpack` rebuilds the same
database: every table, row and value (floats bit for bit), the same tables, views and indexes. What it leaves out
is only what the rest determines, and it checks that before leaving it out:
- the indexes (their CREATE statements are kept; `unpack` builds them again);
- a measurement's (or baseline's) median, p20, p80, min and max where they are the statistics of its own
  `times_ms` (`summarize` below, the runner's `autotune.sweep.timing.summarize`), and `times_ms` itself is
  written as whole nanoseconds (`ns:182144,181856,...`) where every time is the float32 a CUDA event gave for
  that many nanoseconds and the JSON text comes back character for character. Any other row is kept as it is.
The packed file holds a table `autotune_packing` (format version, the dropped indexes, and the SHA-256 of the
original database's schema and content); `unpack` recomputes that digest on what it rebuilt and refuses a file
whose digest differs (a different NumPy that computes percentiles otherwise would be caught here, never read).
Measured on the committed databases: see docs/results.md.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from autotune.errors import UserError

FORMAT = "1"
TABLE = "autotune_packing"
STATS = ("median_ms", "p20_ms", "p80_ms", "min_ms", "max_ms")
TIMED = ("measurements", "baselines", "cublas")  # tables with times_ms and the statistics of it (cublas: schema 1-2)
PREFIX = "ns:"
XZ_PRESET = 9 | lzma.PRESET_EXTREME


def summarize(times_ms: list[float]) -> tuple[float, float, float, float, float]:
    """median, p20, p80, min, max of the repetitions, exactly as the runner stores them
    (`autotune.sweep.timing.summarize`; a test keeps the two the same)."""
    t = np.asarray(times_ms, dtype=float)
    p20, med, p80 = np.percentile(t, [20, 50, 80])
    return float(med), float(p20), float(p80), float(t.min()), float(t.max())


def encode_times(text: str) -> str | None:
    """`times_ms` JSON as whole nanoseconds, or None when that would not give the same text back."""
    try:
        values = json.loads(text)
    except (TypeError, ValueError):
        return None
    if not isinstance(values, list) or not values or not all(isinstance(v, float) for v in values):
        return None
    ns = [round(v * 1e6) for v in values]
    encoded = PREFIX + ",".join(map(str, ns))
    return encoded if decode_times(encoded) == text else None


def decode_times(encoded: str) -> str:
    ns = encoded[len(PREFIX) :].split(",")
    return json.dumps([float(np.float32(int(n) / 1e6)) for n in ns])


def _tables(conn: sqlite3.Connection) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
            "'sqlite_%' AND name != ? ORDER BY name",
            (TABLE,),
        )
    ]


def digest(conn: sqlite3.Connection) -> str:
    """SHA-256 of the schema (tables, views, indexes) and of the rows of every table (as a set: VACUUM may renumber
    the rowids a table has no column for), floats bit for bit."""
    h = hashlib.sha256()
    for row in conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name != ? AND sql IS NOT NULL ORDER BY type, name",
        (TABLE,),
    ):
        h.update(repr(row).encode())
    for table in _tables(conn):
        h.update(f"\0table {table}\0".encode())
        rows = sorted(
            repr([v.hex() if isinstance(v, float) else v for v in row])
            for row in conn.execute(f'SELECT * FROM "{table}"')
        )  # VACUUM may renumber hidden rowids
        for row in rows:
            h.update(row.encode())
    return h.hexdigest()


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}


def _pack_rows(conn: sqlite3.Connection, table: str) -> int:
    if not {"times_ms", "reps", *STATS} <= _columns(conn, table):
        return 0
    rows = conn.execute(
        f'SELECT rowid, times_ms, reps, {", ".join(STATS)} FROM "{table}" WHERE times_ms IS NOT NULL'
    ).fetchall()
    packed = []
    for rowid, text, reps, *stats in rows:
        encoded = encode_times(text) if isinstance(text, str) else None
        if encoded is None:
            continue
        values = json.loads(text)
        if reps != len(values) or tuple(stats) != summarize(values):
            continue
        packed.append((encoded, rowid))
    conn.executemany(
        f'UPDATE "{table}" SET times_ms = ?, {", ".join(f"{s} = NULL" for s in STATS)} WHERE rowid = ?', packed
    )
    return len(packed)


def pack(src: Path, dst: Path) -> dict[str, Any]:
    """Write the plain SQLite database `src` as a packed, xz-compressed `dst` (`*.sqlite.xz`); returns what it did
    (rows packed per table, sizes). `src` is not changed. Checks the result by unpacking it."""
    work = dst.with_name(f".{dst.name}.{os.getpid()}.pack")
    shutil.copyfile(src, work)
    try:
        conn = sqlite3.connect(work, isolation_level=None)
        conn.execute("PRAGMA journal_mode = DELETE")
        before = digest(conn)
        indexes = [
            r[0]
            for r in conn.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name"
            )
        ]
        conn.execute("BEGIN")
        conn.execute(f'CREATE TABLE "{TABLE}" (key TEXT PRIMARY KEY, value TEXT NOT NULL)')
        conn.executemany(
            f'INSERT INTO "{TABLE}" VALUES (?, ?)',
            [("format", FORMAT), ("digest", before), ("indexes", json.dumps(indexes))],
        )
        for name in [
            r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
        ]:
            conn.execute(f'DROP INDEX "{name}"')
        packed = {t: _pack_rows(conn, t) for t in TIMED if t in _tables(conn)}
        conn.execute("COMMIT")
        conn.execute("VACUUM")
        conn.close()
        tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
        with work.open("rb") as f_in, lzma.open(tmp, "wb", preset=XZ_PRESET) as f_out:
            shutil.copyfileobj(f_in, f_out, 1 << 20)
        check = dst.with_name(f".{dst.name}.{os.getpid()}.check")
        try:
            unpack(tmp, check)  # raises when the digest differs
        finally:
            check.unlink(missing_ok=True)
        os.replace(tmp, dst)
    finally:
        work.unlink(missing_ok=True)
    return {"packed_rows": packed, "bytes_in": src.stat().st_size, "bytes_out": dst.stat().st_size}


def is_packed(conn: sqlite3.Connection) -> bool:
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)).fetchone() is not None
    )


def restore(path: Path) -> None:
    """Rebuild, in place, the original database from a decompressed packed file (a no-op on any other file)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        if not is_packed(conn):
            return
        meta = dict(conn.execute(f'SELECT key, value FROM "{TABLE}"').fetchall())
        if meta.get("format") != FORMAT:
            raise UserError(
                f"{path}: packed with format {meta.get('format')!r}; this autotune reads format {FORMAT}",
                hint="install a newer autotune",
            )
        conn.execute("BEGIN")
        for table in TIMED:
            if table not in _tables(conn) or "times_ms" not in _columns(conn, table):
                continue
            rows = conn.execute(
                f'SELECT rowid, times_ms FROM "{table}" WHERE times_ms LIKE ?', (PREFIX + "%",)
            ).fetchall()
            updates = []
            for rowid, encoded in rows:
                text = decode_times(encoded)
                updates.append((text, *summarize(json.loads(text)), rowid))
            conn.executemany(
                f'UPDATE "{table}" SET times_ms = ?, {", ".join(f"{s} = ?" for s in STATS)} WHERE rowid = ?', updates
            )
        for sql in json.loads(meta["indexes"]):
            conn.execute(sql)
        conn.execute(f'DROP TABLE "{TABLE}"')
        if digest(conn) != meta["digest"]:
            conn.execute("ROLLBACK")
            raise UserError(
                f"{path}: the database rebuilt from the packed file differs from the one packed",
                hint="the file is damaged, or this NumPy computes percentiles differently from the "
                "one that packed it; report it with `python -c 'import numpy; print(numpy.__version__)'`",
            )
        conn.execute("COMMIT")
    finally:
        conn.close()


def unpack(src: Path, dst: Path) -> None:
    """Decompress the `.sqlite.xz` file `src` into the plain SQLite file `dst` and rebuild what packing left out."""
    with lzma.open(src, "rb") as f_in, dst.open("wb") as f_out:
        shutil.copyfileobj(f_in, f_out, 1 << 20)
    restore(dst)
