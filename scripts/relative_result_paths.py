#!/usr/bin/env python3
"""Rewrite the machine paths recorded inside committed results databases as paths relative to the repository.

For each compressed database named (default: every committed one, `results/**/*.sqlite.xz` and
`examples/*/results/**/*.sqlite.xz`, each xz of a plain SQLite file): unpack it (`autotune.store.packing.unpack`), rewrite
in SQL the text columns that recorded where the sweep ran -- `spaces.yaml_path` (the space file), the `reference:`
and `baseline:` files in `spaces.problem`, and the `database:` URL in `sweeps.config_text`; and in the recorded
text of the examples' space files (`spaces.yaml_text`, with its `yaml_hash`) the comment that named a note outside
the repository, as the work tree has said since (NOTE) -- then pack it again
(`pack`, which checks its own round trip by a SHA-256). Before packing, every table is compared row by row with the
original, the rewritten columns left out: a measurement that would change stops the script and nothing is written.

  python scripts/relative_result_paths.py            # every committed database
  python scripts/relative_result_paths.py --check    # only report what would change
  python scripts/relative_result_paths.py --repack   # also pack again those without machine paths, where
                                                     # that is smaller

A checkout path (`/work/main/`, `/work/wt/NAME/`) becomes the repository root, so a built-in
space reads `spaces/NAME.yaml`; a sweep's `database:` URL (a scratch folder of the GPU machine) becomes the
database's committed place, `sqlite:///results/.../NAME.sqlite`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

from autotune.paths import ROOT
from autotune.store.packing import pack, unpack

CHECKOUT = re.compile(r"(?<![\w.$])/(?:work/main|work/wt/[\w-]+)/")
# tune_kernel's generated space folder (tempfile.mkdtemp(prefix=f"kt_{kernel_name}_"), removed after the call) becomes
# its name without the random part: the space itself is recorded in the database (spaces.yaml_text)
KT_SCRATCH = re.compile(r"(?<![\w.$])/tmp/(kt_\w+?)_[a-z0-9_]{8}/")
URL = re.compile(r"^(database:\s*)sqlite:///(/[^\s#]+\.sqlite)\s*$", re.M)
MACHINE = re.compile(r"(?<![\w.$])/(?:work|root|tmp|home)/")
REWRITTEN = {"spaces": ("yaml_path", "problem", "yaml_text", "yaml_hash"), "sweeps": ("config_text",)}
# a comment of the examples' space files named a note outside the repository; the work tree says this since 237a2c0
NOTE = ("Format: /work/notes/problem_spec.md (issue 14).", "Format: docs/kinds.md.")


def relative(text: str) -> str:
    return KT_SCRATCH.sub(r"\1/", CHECKOUT.sub("", text))


def config_text(text: str, committed: str) -> str:
    """The sweep config with its `database:` URL naming the database where it is committed."""
    return relative(URL.sub(lambda m: f"{m[1]}sqlite:///{committed}", text))


def rows(conn: sqlite3.Connection, table: str, leave_out: tuple[str, ...]) -> list[str]:
    cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")') if r[1] not in leave_out]
    quoted = ", ".join(f'"{c}"' for c in cols)
    query = f'SELECT {quoted} FROM "{table}"'
    return sorted(repr([v.hex() if isinstance(v, float) else v for v in r]) for r in conn.execute(query))


def tables(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]


def rewrite(db: Path, committed: str) -> int:
    """Rewrite the plain database `db` in place; returns the number of values changed."""
    conn = sqlite3.connect(db, isolation_level=None)
    changed = 0
    conn.execute("BEGIN")
    for table, columns in REWRITTEN.items():
        if table not in tables(conn):
            continue
        for col in columns:
            if col in ("yaml_text", "yaml_hash"):
                continue  # below
            for rowid, value in conn.execute(f'SELECT rowid, "{col}" FROM "{table}"').fetchall():
                if not isinstance(value, str):
                    continue
                new = config_text(value, committed) if col == "config_text" else relative(value)
                if new != value:
                    if col == "problem":
                        json.loads(new)  # still JSON
                    conn.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE rowid = ?', (new, rowid))
                    changed += 1
    if "spaces" in tables(conn):
        for rowid, text, digest in conn.execute("SELECT rowid, yaml_text, yaml_hash FROM spaces").fetchall():
            new = text.replace(*NOTE)
            if new != text:  # the recorded space file as the work tree has it since, and its hash (SpaceRecord)
                same = digest == hashlib.sha256(text.encode()).hexdigest()
                new_hash = hashlib.sha256(new.encode()).hexdigest() if same else digest
                conn.execute("UPDATE spaces SET yaml_text = ?, yaml_hash = ? WHERE rowid = ?", (new, new_hash, rowid))
                changed += 1
    conn.execute("COMMIT")
    conn.close()
    return changed


def left(conn: sqlite3.Connection) -> list[str]:
    """Machine paths still in any text value: table.column: value (shortened)."""
    out = []
    for table in tables(conn):
        for col in [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]:
            for (value,) in conn.execute(f'SELECT "{col}" FROM "{table}"'):
                m = MACHINE.search(value) if isinstance(value, str) else None
                if m is not None:
                    out.append(f"{table}.{col}: ...{value[max(0, m.start() - 40) : m.start() + 80]!r}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, help=".sqlite.xz databases (default: every committed one)")
    ap.add_argument("--check", action="store_true", help="report only; write nothing")
    ap.add_argument("--repack", action="store_true", help="pack every file again where that is smaller")
    args = ap.parse_args()
    files = args.files or sorted(
        [*(ROOT / "results").rglob("*.sqlite.xz"), *(ROOT / "examples").glob("*/results/**/*.sqlite.xz")]
    )
    status = 0
    with tempfile.TemporaryDirectory(prefix="autotune-relative-") as tmp:
        for packed in files:
            packed = packed.resolve()
            committed = packed.relative_to(ROOT).as_posix().removesuffix(".xz")
            before, after = Path(tmp) / "before.sqlite", Path(tmp) / "after.sqlite"
            unpack(packed, before)
            unpack(packed, after)
            changed = rewrite(after, committed)
            a, b = sqlite3.connect(before), sqlite3.connect(after)
            for table in tables(a):
                leave_out = REWRITTEN.get(table, ())
                if rows(a, table, leave_out) != rows(b, table, leave_out):
                    sys.exit(f"{committed}: table {table} changed outside {leave_out}; nothing written")
            still = left(b)
            a.close()
            b.close()
            if still:
                status = 1
                print(f"{committed}: machine paths left:\n  " + "\n  ".join(still[:10]))
            if (changed or args.repack) and not args.check:
                size = packed.stat().st_size
                again = Path(tmp) / "again.sqlite.xz"
                pack(after, again)  # checks that it decompresses to the database
                if changed or again.stat().st_size < size:
                    shutil.copyfile(again, packed)
                print(f"{committed}: {changed} values rewritten; {size:,} -> {packed.stat().st_size:,} bytes")
                again.unlink(missing_ok=True)
            else:
                print(f"{committed}: {changed} values {'to rewrite' if changed else 'rewritten: none needed'}")
            before.unlink()
            after.unlink()
    return status


if __name__ == "__main__":
    raise SystemExit(main())
