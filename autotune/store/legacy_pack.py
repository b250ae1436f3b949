"""Reading databases packed by autotune before plain xz (packing formats 1 and 2, a table `autotune_packing`).

Those files left out what the rest of the database determines: the indexes; a measurement's (or baseline's) median,
p20, p80, min and max where they were the statistics of its own `times_ms`, which was then written as whole
nanoseconds (`ns:182144,181856,...`); and (format 2) a measurement's GFLOP/s, GB/s and roofline fraction, given back
by the work of its (sweep, device, point) kept once in a table `autotune_packing_work`. `restore` rebuilds the
database in place and checks it against the SHA-256 the packing recorded. Nothing writes this format any more
(`autotune db pack` writes xz of the plain database); it is read so that users' own older files still open.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np

from autotune.errors import UserError
from autotune.store.schema import figures  # GFLOP/s, GB/s and roofline fraction exactly as the store computes them
from autotune.untrusted import number
from autotune.vocab import TIME_STATS

READS = ("1", "2")  # format 1: without the work table (the figures kept in every row)
TABLE = "autotune_packing"
WORK = "autotune_packing_work"  # (sweep, device, point) -> flops, bytes, bandwidth of its measurements' figures
FIGURES = ("gflops", "gbs", "roofline_frac")
TIMED_MEDIAN = "CASE WHEN status = 'ok' THEN median_ms END"  # the store figures only an ok measurement's time
TIMED = ("measurements", "baselines", "cublas")  # tables with times_ms and the statistics of it (cublas: schema 1-2)
PREFIX = "ns:"


def summarize(times_ms: list[float]) -> tuple[float, float, float, float, float]:
    """median, p20, p80, min, max of the repetitions, exactly as the runner stores them
    (`autotune.sweep.timing.summarize`; a test keeps the two the same)."""
    t = np.asarray(times_ms, dtype=float)
    p20, med, p80 = np.percentile(t, [20, 50, 80])
    return float(med), float(p20), float(p80), float(t.min()), float(t.max())


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


def decode_times(encoded: str, name: str = "times_ms") -> str:
    """`ns:182144,...` (whole nanoseconds, each read by `autotune.untrusted.number`) as the runner's JSON text."""
    ns = encoded[len(PREFIX) :].split(",")
    return json.dumps([float(np.float32(number(n, name=name, integer=True, lo=0, hi=2**53) / 1e6)) for n in ns])


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


def is_packed(conn: sqlite3.Connection) -> bool:
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)).fetchone() is not None
    )


INDEX_SQL = re.compile(r"CREATE\s+(UNIQUE\s+)?INDEX\s", re.IGNORECASE)


def restore(path: Path, shown_as: Path | None = None) -> None:
    """Rebuild, in place, the original database from a decompressed packed file (a no-op on any other file).
    `shown_as`: the file messages name (the user's .sqlite.xz, not this copy). Raises UserError for a file it cannot
    rebuild (damaged, or a format this autotune does not read); the file is then left as it was."""
    name = shown_as or path
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        if not is_packed(conn):
            return
        meta = dict(conn.execute(f'SELECT key, value FROM "{TABLE}"').fetchall())
        if meta.get("format") not in READS:
            raise UserError(
                f"{name}: packed with format {meta.get('format')!r}; this autotune reads formats {', '.join(READS)}",
                hint="install a newer autotune",
            )
        conn.execute("BEGIN")
        try:
            _rebuild(conn, meta)
        except UserError as exc:  # a number of the file that is not one (autotune.untrusted)
            conn.execute("ROLLBACK")
            raise UserError(f"{name}: {exc.message}", hint=exc.hint) from None
        except (ValueError, TypeError, KeyError, sqlite3.Error) as exc:  # JSONDecodeError is a ValueError
            conn.execute("ROLLBACK")
            raise UserError(
                f"{name}: cannot rebuild the packed database ({type(exc).__name__}: {str(exc)[:120]})",
                hint="the file is damaged: copy it again from where it was made",
            ) from None
        if digest(conn) != meta.get("digest"):
            conn.execute("ROLLBACK")
            raise UserError(
                f"{name}: the database rebuilt from the packed file differs from the one packed",
                hint="the file is damaged, or this NumPy computes percentiles differently from the "
                "one that packed it; report it with `python -c 'import numpy; print(numpy.__version__)'`",
            )
        conn.execute("COMMIT")


def _rebuild(conn: sqlite3.Connection, meta: dict[str, str]) -> None:
    """What `restore` does inside its transaction: times and statistics, figures, indexes (only CREATE INDEX
    statements, one each: the file's text runs nothing else)."""
    for table in TIMED:
        columns = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}  # none where there is no such table
        if "times_ms" not in columns:
            continue
        rows = conn.execute(f'SELECT rowid, times_ms FROM "{table}" WHERE times_ms LIKE ?', (PREFIX + "%",)).fetchall()
        updates = []
        for rowid, encoded in rows:
            text = decode_times(encoded, f"{table} row {rowid}: times_ms")
            updates.append((text, *summarize(json.loads(text)), rowid))
        conn.executemany(
            f'UPDATE "{table}" SET times_ms = ?, {", ".join(f"{s} = ?" for s in TIME_STATS)} WHERE rowid = ?', updates
        )
    _restore_figures(conn)  # after the medians
    indexes = json.loads(meta["indexes"])
    if not isinstance(indexes, list):
        raise TypeError("the recorded indexes are not a list")
    for sql in indexes:
        if not isinstance(sql, str) or not INDEX_SQL.match(sql):
            raise ValueError(f"not an index definition: {str(sql)[:60]!r}")
        conn.execute(sql)  # one statement (sqlite3 refuses more)
    conn.execute(f'DROP TABLE "{TABLE}"')
