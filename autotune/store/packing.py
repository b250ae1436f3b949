"""Results databases stored small enough to commit: `pack` writes xz of the plain SQLite database, `unpack` writes it back.

A `.sqlite.xz` written here is nothing but the database (after VACUUM, in rollback-journal mode) compressed by xz:
`xz -dc FILE.sqlite.xz > FILE.sqlite` gives the same file `autotune db unpack` does, every table, index and value as
the runner wrote it, readable by any SQLite tool. The xz filter is LZMA2 at preset 9e with 4 literal context bits and
no position bits (1-2% smaller on SQLite pages than plain -9e; any xz reader decodes it: the settings are in the file).

`unpack` also reads the denser files autotune wrote before (a table `autotune_packing`, `autotune.store.legacy_pack`)
and rebuilds them. It decompresses through `autotune.store.decompress` (bounded size, SQLite header checked first)
into a temporary file beside the output, and gives it the output's name only when it is complete and checked: a
failure leaves no output, and an existing file is never replaced.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from autotune.store.decompress import decompress_database, file_kind
from autotune.store.engine import StoreError, file_digest, readonly_uri, temporary_beside
from autotune.store.legacy_pack import TABLE as LEGACY_TABLE, restore

XZ_PRESET = 9 | lzma.PRESET_EXTREME
XZ_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": XZ_PRESET, "lc": 4, "lp": 0, "pb": 0}]
CHUNK = 1 << 20
# Optuna's tables of the per-point studies a model-based search keeps in the results database (children first): only a
# resumed sweep and `autotune dashboard` read them; `pack(..., studies=False)` empties them
STUDY_TABLES = (
    "trial_heartbeats",
    "trial_intermediate_values",
    "trial_values",
    "trial_params",
    "trial_system_attributes",
    "trial_user_attributes",
    "trials",
    "study_system_attributes",
    "study_user_attributes",
    "study_directions",
    "studies",
)


def _check_plain(src: Path) -> None:
    """Raise StoreError unless `src` is a plain SQLite results file (autotune's: a schema_meta table) that is not
    packed already."""
    kind = file_kind(src, hint="give the .sqlite file a sweep wrote")
    if kind in ("xz", "gzip"):
        raise StoreError(
            f"{src} is compressed already ({kind}): there is nothing to pack",
            hint="commit it as it is, or `autotune db unpack` it to get the plain file",
        )
    if kind != "sqlite":
        raise StoreError(f"{src} is not an SQLite database", hint="give the .sqlite file a sweep wrote")
    try:
        with closing(sqlite3.connect(readonly_uri(src), uri=True)) as conn:
            legacy = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (LEGACY_TABLE,)).fetchone()
            ours = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_meta'").fetchone()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"cannot read {src}: {exc}", hint="give the .sqlite file a sweep wrote") from None
    if legacy is not None:
        raise StoreError(
            f"{src} is a packed database of an older autotune (table {LEGACY_TABLE}), decompressed without rebuilding",
            hint="run `autotune db unpack` on the .sqlite.xz it came from, then pack the file that writes",
        )
    if ours is None:  # (as `db upgrade` and every reader refuse it)
        raise StoreError(
            f"{src} is not an autotune results database (no schema_meta table)",
            hint="give the .sqlite file a sweep wrote",
        )


def pack(src: Path, dst: Path, *, studies: bool = True) -> dict[str, Any]:
    """Write the plain SQLite database `src` (not changed) as `dst`: xz of a VACUUMed copy, checked by decompressing
    it again before it takes the name `dst`; without `studies`, the copy's Optuna studies (STUDY_TABLES) are emptied
    first (a finished model-based sweep's: often most of the file). Returns the sizes: bytes_in (src), bytes_plain
    (what `dst` decompresses to), bytes_out. Raises StoreError (a compressed or packed `src` included)."""
    _check_plain(src)
    plain = temporary_beside(dst, "sqlite")
    packed = temporary_beside(dst, "part")
    try:
        with (
            closing(sqlite3.connect(readonly_uri(src), uri=True)) as source,
            closing(sqlite3.connect(plain, isolation_level=None)) as copy,
        ):
            source.backup(copy)  # a consistent copy, a live sweep's WAL included
            copy.execute("PRAGMA journal_mode = DELETE")  # one file: no -wal beside it when opened
            if not studies:
                present = {r[0] for r in copy.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                for table in (t for t in STUDY_TABLES if t in present):
                    copy.execute(f"DELETE FROM {table}")
            copy.execute("VACUUM")
        with plain.open("rb") as f_in, lzma.open(packed, "wb", format=lzma.FORMAT_XZ, filters=XZ_FILTERS) as f_out:
            shutil.copyfileobj(f_in, f_out, CHUNK)
        with lzma.open(packed, "rb") as back:
            digest = hashlib.file_digest(back, "sha256").hexdigest()
        if digest != file_digest(plain):
            raise StoreError(f"{dst}: the compressed file does not decompress to the database", hint="try again")
        size = plain.stat().st_size
        os.replace(packed, dst)
    except OSError as exc:
        raise StoreError(
            f"cannot write {dst}: {exc.strerror or exc}", hint="check the folder and its free space"
        ) from None
    except sqlite3.Error as exc:
        raise StoreError(f"cannot copy {src}: {exc}", hint="give the .sqlite file a sweep wrote") from None
    finally:
        plain.unlink(missing_ok=True)
        packed.unlink(missing_ok=True)
    return {"bytes_in": src.stat().st_size, "bytes_plain": size, "bytes_out": dst.stat().st_size}


def unpack(src: Path, dst: Path, replace: bool = False) -> None:
    """Write the SQLite database the compressed file `src` holds (a `.sqlite.xz` or `.sqlite.gz`; an older
    autotune's packed file is rebuilt) to `dst`. Nothing is written at `dst` unless the whole database is, and checked
    (SQLite's quick_check): a failure leaves `dst` as it was. An existing `dst` is refused unless `replace`, and then
    replaced in one rename. Raises StoreError (UserError for a damaged older packed file)."""
    if dst.exists() and not replace:
        raise StoreError(f"{dst} exists", hint="give a new file name, or --force to replace it")
    if not src.is_file():
        raise StoreError(f"no file at {src}", hint="give a .sqlite.xz results database")
    tmp = temporary_beside(dst, "part")
    try:
        decompress_database(src, tmp)
        restore(tmp, shown_as=src)
        try:
            with closing(sqlite3.connect(readonly_uri(tmp), uri=True)) as conn:
                problems = [r[0] for r in conn.execute("PRAGMA quick_check").fetchall()]
        except sqlite3.DatabaseError as exc:
            problems = [str(exc)]
        if problems != ["ok"]:
            raise StoreError(
                f"{src} holds a damaged SQLite database: {'; '.join(problems[:3])[:200]}",
                hint="copy or download the file again",
            )
        if replace:
            os.replace(tmp, dst)
            return
        try:
            os.link(tmp, dst)  # fails if dst appeared meanwhile: never replaces a file
        except FileExistsError:
            raise StoreError(f"{dst} exists", hint="give a new file name, or --force to replace it") from None
        except OSError:  # a file system without hard links
            if dst.exists():
                raise StoreError(f"{dst} exists", hint="give a new file name") from None
            os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)
