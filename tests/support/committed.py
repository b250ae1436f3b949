"""The committed results databases are xz of plain SQLite files at the current schema (results/NAME/NAME.sqlite.xz,
`autotune db pack`). Commands read them as they are (autotune.store.engine.database_url decompresses once into a shared
read-only cache); tests that open them with sqlite3 or need a file to write use these helpers."""

from __future__ import annotations

import gzip
import tempfile
from pathlib import Path

from autotune.paths import ROOT
from autotune.store.engine import gunzipped
from autotune.store.packing import unpack

RESULTS = ROOT / "results"
SUFFIX = ".sqlite.xz"


def committed(name: str) -> Path:
    """results/NAME/NAME.sqlite.xz (the database of the committed sweep NAME)."""
    return RESULTS / name / f"{name}{SUFFIX}"


def committed_databases() -> list[Path]:
    """Every committed results/**/*.sqlite.xz."""
    return sorted(RESULTS.rglob(f"*{SUFFIX}"))


def example_databases() -> list[Path]:
    """The committed databases of the examples (examples/*/results/*.sqlite.xz: kinds other than GEMM)."""
    return sorted((ROOT / "examples").glob(f"*/results/*{SUFFIX}"))


def read_only(packed: Path) -> Path:
    """The shared decompressed copy of `packed` (read-only: open it for reading only, never copy it to write)."""
    return gunzipped(packed)


def gunzip_to(packed: Path, dest: Path) -> Path:
    """A plain, writable copy of the compressed (.xz or .gz) database `packed` at `dest` (its folder is created)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if packed.suffix == ".xz":
        unpack(packed, dest)
    else:
        with gzip.open(packed, "rb") as src:
            dest.write_bytes(src.read())
    return dest


def plain_bytes(packed: Path) -> bytes:
    """The bytes of the plain SQLite database that `packed` (.xz or .gz) stands for."""
    with tempfile.TemporaryDirectory() as folder:
        return gunzip_to(packed, Path(folder) / "plain.sqlite").read_bytes()
