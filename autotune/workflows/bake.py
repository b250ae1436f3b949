"""Baking: a tuning database with committed validations and other results databases replayed into it, the database
a table is then built from.

A table's points are its database's measured problems. A spent validation (`autotune validate --out FOLDER`: its
validate_sweep.yaml and validation.sqlite, either may be .xz) holds every table kernel and the library measured at
its problems; replaying its sweep into a copy of the tuning database adds those problems (nothing is measured: the
answers are the recorded ones). A results database of the same GPU model given in place of a folder has each of its
sweeps replayed (the config each recorded), library times included: one database a table is built from, where
another sweep measured more instances at the same points. `autotune db bake`, scripts/tables7_h100.sh,
scripts/tables6_eval.py, scripts/tables7_study.py and tests bake here; the tables are then built as always
(`autotune emit OUT.sqlite`, or `Baked.table`).
"""

from __future__ import annotations

import lzma
import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from autotune.errors import UserError
from autotune.paths import sqlite_files
from autotune.store.decompress import file_kind
from autotune.store.engine import StoreError

if TYPE_CHECKING:
    from autotune.dispatch.table import DispatchTable
    from autotune.sweep.config import SweepConfig
    from autotune.workflows.results import Loaded
    from autotune.workflows.tables import TableOptions


@dataclass
class Baked:
    """The baked database, the validation folders and results databases replayed into it and the measurements each
    added."""

    database: Path
    sources: tuple[Path, ...]
    added: tuple[int, ...]
    _loaded: Loaded | None = field(default=None, repr=False)

    def table(self, opts: TableOptions) -> DispatchTable:
        """The dispatch table built from the baked database as `opts` say (workflows.tables.build_table; the
        measurements are loaded once)."""
        from autotune.workflows.results import load_results
        from autotune.workflows.tables import build_table

        if self._loaded is None:
            self._loaded = load_results(str(self.database), None, None)
        return build_table(self._loaded, opts).table


def validation_sweep(folder: Path) -> SweepConfig:
    """The sweep config a validation folder holds (validate_sweep.yaml, or .yaml.xz), its space paths read as if
    the plain file were there. Raises UserError when neither is."""
    from autotune.sweep.config import load_config, parse_config

    plain = folder / "validate_sweep.yaml"
    if plain.is_file():
        return load_config(plain)
    packed = folder / "validate_sweep.yaml.xz"
    if not packed.is_file():
        raise UserError(
            f"{folder} holds no validate_sweep.yaml (or .yaml.xz)", hint="give folders `autotune validate --out` wrote"
        )
    return parse_config(lzma.decompress(packed.read_bytes()).decode(), file=plain.resolve())


def validation_database(folder: Path) -> Path:
    """A validation folder's database: validation.sqlite, else validation.sqlite.xz. Raises UserError."""
    for name in ("validation.sqlite", "validation.sqlite.xz"):
        if (folder / name).is_file():
            return folder / name
    raise UserError(
        f"{folder} holds no validation.sqlite (or .sqlite.xz)", hint="give folders `autotune validate --out` wrote"
    )


def recorded_sweeps(database: Path) -> list[SweepConfig]:
    """The sweep configs a results database recorded (each sweep's config text), in the order they ran; space
    paths resolve against the working directory. Raises StoreError for a file that is not a results database."""
    from autotune.store.query import run_query
    from autotune.sweep.config import parse_config
    from autotune.workflows.results import source_url

    _plain(database)  # a clear error for a file that is no database
    rows = run_query(source_url(str(database)), "SELECT config_name, config_text FROM sweeps ORDER BY id")
    names, texts = rows["config_name"], rows["config_text"]
    return [parse_config(text, file=Path.cwd() / f"{name}.yaml") for name, text in zip(names, texts, strict=True)]


def _replays(source: Path) -> list[tuple[SweepConfig, Path]]:
    """(sweep config, recording) pairs to replay for a validation folder or a results database."""
    if source.is_dir():
        return [(validation_sweep(source), validation_database(source))]
    if not source.is_file():
        raise StoreError(
            f"no validation folder or results database at {source}",
            hint="give folders `autotune validate --out` wrote, or .sqlite/.sqlite.xz results databases",
        )
    return [(cfg, source) for cfg in recorded_sweeps(source)]


def bake(tuning: Path, sources: Sequence[Path], out: Path, *, replace: bool = False) -> Baked:
    """Write `out`: the tuning database (plain SQLite, or .sqlite.xz/.gz) with the sweep of every validation folder
    and every sweep of every results database in `sources` replayed into it, in order. Nothing is written at `out`
    unless every step succeeded; an existing `out` is refused unless `replace`. Raises StoreError for a missing or
    non-database tuning file or source file, UserError for a folder that is not a validation's."""
    import dataclasses

    from autotune.space.spec import reusing_spaces
    from autotune.store.engine import database_url, temporary_beside
    from autotune.store.packing import unpack
    from autotune.workflows.sweeps import Launch, launch_sweep

    if out.exists() and not replace:
        raise StoreError(f"{out} exists", hint="give a new file name, or --force to replace it")
    if not tuning.is_file():
        raise StoreError(f"no tuning database at {tuning}", hint="give a .sqlite or .sqlite.xz results database")
    sweeps = [(i, cfg, rec) for i, s in enumerate(sources) for cfg, rec in _replays(s)]  # every source checked first
    tmp = temporary_beside(out, "part.sqlite")
    try:
        if _plain(tuning):
            _copy(tuning, tmp)
        else:
            unpack(tuning, tmp)
        added = [0] * len(sources)  # per source, in order (one given twice counts twice)
        with reusing_spaces():
            for i, cfg, replay in sweeps:
                cfg = dataclasses.replace(cfg, database=database_url(str(tmp), write=True))
                summary = launch_sweep(cfg, Launch(replay=str(replay))).summary
                if summary.status != "done":
                    raise UserError(f"the replay of {replay} into {out} stopped: {summary.status}")
                added[i] += summary.measured
        _one_file(tmp)
        _drop_sidecars(out)  # a replaced database's old WAL must not be read into the new one
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
        _drop_sidecars(tmp)
    return Baked(out, tuple(sources), tuple(added))


def _plain(path: Path) -> bool:
    """True for a plain SQLite file, False for an xz or gzip one. Raises StoreError for anything else."""
    kind = file_kind(path, hint="give a readable results database")
    if kind == "other":
        raise StoreError(
            f"{path} is not a results database (neither SQLite nor xz/gzip)",
            hint="give a .sqlite file a sweep wrote, or its .sqlite.xz (`autotune db pack`)",
        )
    return kind == "sqlite"


def _drop_sidecars(path: Path) -> None:
    for extra in sqlite_files(path)[1:]:
        extra.unlink(missing_ok=True)


def _one_file(path: Path) -> None:
    """Checkpoint the database's WAL into it and leave rollback-journal mode: one file, safe to rename."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode = DELETE")
    finally:
        conn.close()


def _copy(src: Path, dst: Path) -> None:
    """A consistent copy of the plain SQLite database `src` (a live WAL included)."""
    from autotune.store.engine import readonly_uri

    try:
        source = sqlite3.connect(readonly_uri(src), uri=True)
        copy = sqlite3.connect(dst)
        try:
            source.backup(copy)
        finally:
            source.close()
            copy.close()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot copy {src}: {exc}", hint="give a results database a sweep wrote") from None
