"""A large results database for the explorer's performance tests: recorded measurements replayed onto more points.

`replicate(src, dst, copies)` copies a recorded database and adds `copies` shifted copies of each test point (the
same sizes with `batch` + j, so each copy is a distinct point of the same kind) holding the same measurements and
baselines as the original point: a database of real measured values, `copies + 1` times as many rows, with every
table and index of the schema. It is what `autotune sweep` with the replay backend would record over those points
(each pair answered from the recording), without running the runner 10^6 times. The result says what it is in its
schema_meta (`replicated_from`, `copies`). Not for results/: for tests and benchmarks only.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from autotune.store.engine import database_url, sqlite_path

OFFSET = 10_000_000  # id offset between copies of a point


def replicate(source: str, target: Path, copies: int, size: str = "batch", keep_times: bool = False) -> int:
    """Write `target`; returns its measurement count. `times_ms` lists are emptied unless `keep_times` (the
    explorer never reads them; they would make the file ~20x larger)."""
    url = database_url(source)  # a .gz is read through its decompressed copy
    path = sqlite_path(url)
    if path is None:
        raise ValueError(f"{source} is not an SQLite database")
    from autotune.store.migrate import readable_copy

    src = sqlite_path(readable_copy(url, path))  # an older schema: its migrated copy
    if src is None:  # readable_copy returns an SQLite URL of a file (the original or its copy); never expected
        raise ValueError(f"{source}: no SQLite file to copy")
    target = Path(target)
    target.unlink(missing_ok=True)
    shutil.copyfile(src, target)
    con = sqlite3.connect(target)
    try:
        con.execute("PRAGMA journal_mode = OFF")
        con.execute("PRAGMA synchronous = OFF")
        if not keep_times:
            con.execute("UPDATE measurements SET times_ms = '[]', log = NULL")
            con.execute("UPDATE baselines SET times_ms = '[]'")
        copy_rows = []  # measurements and baselines: each row again, a new id, its point shifted by :o
        for table in ("measurements", "baselines"):
            cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
            shifted = ", ".join("point_id + :o" if c == "point_id" else "NULL" if c == "id" else c for c in cols)
            copy_rows.append(
                f"INSERT INTO {table} ({', '.join(cols)}) SELECT {shifted} FROM {table} WHERE point_id < {OFFSET}"
            )
        path = f"$.{size}"
        for j in range(1, copies + 1):
            o = j * OFFSET
            con.execute(
                f"INSERT INTO test_points (id, kind, precision, shape, sizes) SELECT id + :o, kind, precision, "
                f"shape, json_set(sizes, '{path}', json_extract(sizes, '{path}') + :j) FROM test_points "
                f"WHERE id < {OFFSET}",
                {"o": o, "j": j},
            )
            con.execute(
                "INSERT INTO point_sizes (point_id, name, value) SELECT point_id + :o, name, "
                "CASE WHEN name = :s THEN value + :j ELSE value END FROM point_sizes "
                f"WHERE point_id < {OFFSET}",
                {"o": o, "j": j, "s": size},
            )
            for sql in copy_rows:
                con.execute(sql, {"o": o})
        con.execute(
            "INSERT OR REPLACE INTO schema_meta (key, value) VALUES ('replicated_from', :s), ('copies', :c)",
            {"s": Path(source).name, "c": str(copies)},
        )
        con.commit()
        con.execute("VACUUM")
        return int(con.execute("SELECT COUNT(*) FROM measurements").fetchone()[0])
    finally:
        con.close()
