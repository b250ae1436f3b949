"""Committed results databases stored small and read back exactly: `pack` and `unpack` (format `.sqlite.xz`).

`pack` takes a plain SQLite results file and writes an xz-compressed copy from which `unpack` rebuilds the same
database: every table, row and value (floats bit for bit), the same tables, views and indexes. What it leaves out
is only what the rest determines, and it checks that before leaving it out:
- the indexes (their CREATE statements are kept; `unpack` builds them again);
- a measurement's (or baseline's) median, p20, p80, min and max where they are the statistics of its own
  `times_ms` (`summarize` below, the runner's `autotune.sweep.timing.summarize`), and `times_ms` itself is
  written as whole nanoseconds (`ns:182144,181856,...`) where every time is the float32 a CUDA event gave for
  that many nanoseconds and the JSON text comes back character for character. Any other row is kept as it is;
- (format 2) a measurement's GFLOP/s, GB/s and roofline fraction where they are `figures` (below, the store's
  `autotune.store.schema.figures`) of its median and of the work of its (sweep, device, point): the flops, the
  fewest bytes and the copy bandwidth, kept once per (sweep, device, point) in a table `autotune_packing_work`,
  and only where they give back every measurement of that (sweep, device, point) bit for bit.
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

FORMAT = "2"
READS = ("1", "2")  # format 1: without the work table (the figures kept in every row)
TABLE = "autotune_packing"
WORK = "autotune_packing_work"  # (sweep, device, point) -> flops, bytes, bandwidth of its measurements' figures
FIGURES = ("gflops", "gbs", "roofline_frac")
TIMED_MEDIAN = "CASE WHEN status = 'ok' THEN median_ms END"  # the store figures only an ok measurement's time
STATS = ("median_ms", "p20_ms", "p80_ms", "min_ms", "max_ms")
TIMED = ("measurements", "baselines", "cublas")  # tables with times_ms and the statistics of it (cublas: schema 1-2)
PREFIX = "ns:"
XZ_PRESET = 9 | lzma.PRESET_EXTREME
# xz -9e with 4 literal context bits and no position bits: 1-2% smaller on SQLite pages (whose records are not
# aligned to 4 bytes); any xz reader decodes it (the filter settings are in the file)
XZ_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": XZ_PRESET, "lc": 4, "lp": 0, "pb": 0}]


def summarize(times_ms: list[float]) -> tuple[float, float, float, float, float]:
    """median, p20, p80, min, max of the repetitions, exactly as the runner stores them
    (`autotune.sweep.timing.summarize`; a test keeps the two the same)."""
    t = np.asarray(times_ms, dtype=float)
    p20, med, p80 = np.percentile(t, [20, 50, 80])
    return float(med), float(p20), float(p80), float(t.min()), float(t.max())


def figures(
    flops: float | None, nbytes: float | None, median_ms: float | None, bandwidth: float
) -> tuple[float | None, float | None, float | None]:
    """GFLOP/s, GB/s and roofline fraction exactly as the store computes them (`autotune.store.schema.figures`;
    a test keeps the two the same)."""
    if median_ms is None or median_ms <= 0:
        return None, None, None
    seconds = median_ms * 1e-3
    gflops = flops / seconds / 1e9 if flops else None
    if nbytes is None:
        return gflops, None, None
    frac = (nbytes / bandwidth) / seconds if bandwidth > 0 else None
    return gflops, nbytes / seconds / 1e9, frac


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Equal values of the same types (an integer 1 stored is not the float 1.0 computed)."""
    return all(type(x) is type(y) and x == y for x, y in zip(a, b, strict=True))


def _work_of(
    rows: list[tuple[float, float | None, float | None, float | None]], bandwidths: list[float]
) -> tuple[float | None, float | None, float] | None:
    """(flops, bytes, bandwidth) whose `figures` give back every (median, gflops, gbs, frac) of `rows`, or None."""
    timed = [r for r in rows if r[0] is not None and r[0] > 0]
    if not timed:
        return None
    median, gflops, gbs, frac = timed[0]
    seconds = median * 1e-3

    def whole(x: float | None) -> list[float | None]:  # the work as counted: usually whole numbers
        return [None] if x is None else [float(round(x * seconds * 1e9)), x * seconds * 1e9]

    for flops in [0.0] if gflops is None else whole(gflops):
        for nbytes in whole(gbs):
            guesses = list(bandwidths)
            if nbytes is not None and frac is not None and frac > 0:
                bw = nbytes / (frac * seconds)
                guesses += [bw, *(float(np.nextafter(bw, s * np.inf)) for s in (1, -1))]
            for bandwidth in [*guesses, 0.0]:
                if all(_same(figures(flops, nbytes, m, bandwidth), (g, b, f)) for m, g, b, f in rows):
                    return flops, nbytes, bandwidth
    return None


def _pack_figures(conn: sqlite3.Connection) -> int:
    """Leave out the figures of the measurements whose (sweep, device, point) work gives them all back."""
    need = {"sweep_id", "device_id", "point_id", "status", "median_ms", *FIGURES}
    if "measurements" not in _tables(conn) or not need <= _columns(conn, "measurements"):
        return 0
    tables = _tables(conn)
    sweeps = dict(conn.execute("SELECT id, copy_bandwidth FROM sweeps")) if "sweeps" in tables else {}
    devices = dict(conn.execute("SELECT id, copy_bandwidth FROM devices")) if "devices" in tables else {}
    groups: dict[tuple[int, int, int], list[tuple[Any, ...]]] = {}
    for sweep, device, point, *row in conn.execute(
        f"SELECT sweep_id, device_id, point_id, {TIMED_MEDIAN}, gflops, gbs, roofline_frac FROM measurements "
        "WHERE sweep_id IS NOT NULL AND device_id IS NOT NULL AND point_id IS NOT NULL"
    ):
        groups.setdefault((sweep, device, point), []).append(tuple(row))
    conn.execute(f'CREATE TABLE "{WORK}" (sweep_id, device_id, point_id, flops, nbytes, bandwidth)')
    work = []
    for (sweep, device, point), rows in groups.items():
        known = [b for b in (sweeps.get(sweep), devices.get(device)) if isinstance(b, float)]
        found = _work_of(rows, known)
        if found is not None:
            work.append((sweep, device, point, *found))
    conn.executemany(f'INSERT INTO "{WORK}" VALUES (?, ?, ?, ?, ?, ?)', work)
    done = conn.execute(
        f'UPDATE measurements SET {", ".join(f"{c} = NULL" for c in FIGURES)} WHERE EXISTS (SELECT 1 FROM "{WORK}" w '
        "WHERE w.sweep_id = measurements.sweep_id AND w.device_id = measurements.device_id "
        "AND w.point_id = measurements.point_id)"
    )
    return done.rowcount


def _restore_figures(conn: sqlite3.Connection) -> None:
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (WORK,)).fetchone() is None:
        return  # format 1, or a database without measurements
    rows = conn.execute(
        f'SELECT m.rowid, {TIMED_MEDIAN}, w.flops, w.nbytes, w.bandwidth FROM measurements m JOIN "{WORK}" w '
        "ON w.sweep_id = m.sweep_id AND w.device_id = m.device_id AND w.point_id = m.point_id"
    ).fetchall()
    conn.executemany(
        f"UPDATE measurements SET {', '.join(f'{c} = ?' for c in FIGURES)} WHERE rowid = ?",
        [(*figures(flops, nbytes, median, bw), rowid) for rowid, median, flops, nbytes, bw in rows],
    )
    conn.execute(f'DROP TABLE "{WORK}"')


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
            "'sqlite_%' AND name NOT IN (?, ?) ORDER BY name",
            (TABLE, WORK),
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
        figures_left_out = _pack_figures(conn)  # first: it reads the medians that _pack_rows leaves out
        packed = {t: _pack_rows(conn, t) for t in TIMED if t in _tables(conn)}
        conn.execute("COMMIT")
        conn.execute("VACUUM")
        conn.close()
        tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
        with work.open("rb") as f_in, lzma.open(tmp, "wb", format=lzma.FORMAT_XZ, filters=XZ_FILTERS) as f_out:
            shutil.copyfileobj(f_in, f_out, 1 << 20)
        check = dst.with_name(f".{dst.name}.{os.getpid()}.check")
        try:
            unpack(tmp, check)  # raises when the digest differs
        finally:
            check.unlink(missing_ok=True)
        os.replace(tmp, dst)
    finally:
        work.unlink(missing_ok=True)
    return {
        "packed_rows": packed,
        "figures_left_out": figures_left_out,
        "bytes_in": src.stat().st_size,
        "bytes_out": dst.stat().st_size,
    }


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
        if meta.get("format") not in READS:
            raise UserError(
                f"{path}: packed with format {meta.get('format')!r}; this autotune reads formats {', '.join(READS)}",
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
        _restore_figures(conn)  # after the medians
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
