"""Run the autotune command line with a fault injected into its results database (tests/test_faults.py).

    python -m tests.support.db_faults full|readonly AFTER DB_PATH -- sweep CONFIG ...

Once AFTER measurements have been written to the SQLite file DB_PATH, the connection writing them
- `full`: may not grow the file (PRAGMA max_page_count = its page count), so SQLite answers "database or
  disk is full" exactly as on a full disk;
- `readonly`: may not write at all (PRAGMA query_only), so SQLite answers "attempt to write a readonly
  database", as after a read-only remount. (A chmod of the file does not stop a connection that is
  already open, and root ignores it.)
Everything else is the real command: `autotune.cli.main.main` with the arguments after `--`.
"""

from __future__ import annotations

import os
import sys

from sqlalchemy import event
from sqlalchemy.engine import Engine


def inject(fault: str, after: int, db_path: str) -> None:
    target = os.path.realpath(db_path)
    written = 0

    @event.listens_for(Engine, "before_cursor_execute")
    def _fault(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        nonlocal written
        if conn.dialect.name != "sqlite" or not statement.lstrip().upper().startswith("INSERT INTO MEASUREMENTS"):
            return
        raw = conn.connection.driver_connection
        files = [row[2] for row in raw.execute("PRAGMA database_list").fetchall() if row[1] == "main"]
        if not files or os.path.realpath(files[0]) != target:
            return
        written += 1
        if written <= after:
            return
        if fault == "full":
            pages = raw.execute("PRAGMA page_count").fetchone()[0]
            raw.execute(f"PRAGMA max_page_count = {pages}")
        elif fault == "readonly":
            raw.execute("PRAGMA query_only = ON")
        else:
            raise SystemExit(f"unknown fault {fault!r}")


def main() -> None:
    fault, after, db_path, sep, *args = sys.argv[1:]
    assert sep == "--", "usage: python -m tests.support.db_faults FAULT AFTER DB_PATH -- ARGS..."
    inject(fault, int(after), db_path)
    from autotune.cli.main import main as autotune_main

    sys.argv = ["autotune", *args]
    autotune_main()


if __name__ == "__main__":
    main()
