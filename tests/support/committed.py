"""The committed results databases are gzipped (results/NAME/NAME.sqlite.gz, `gzip -9 -n`). Commands read them
as they are (autotune.store.engine.database_url decompresses once into a shared read-only cache); tests that
open them with sqlite3 or need a file to write use these helpers."""
from __future__ import annotations

import gzip
from pathlib import Path

from autotune.paths import ROOT
from autotune.store.engine import gunzipped

RESULTS = ROOT / "results"


def committed(name: str) -> Path:
    """results/NAME/NAME.sqlite.gz (the gzipped database of the committed sweep NAME)."""
    return RESULTS / name / f"{name}.sqlite.gz"


def committed_databases() -> list[Path]:
    """Every committed results/**/*.sqlite.gz."""
    return sorted(RESULTS.rglob("*.sqlite.gz"))


def example_databases() -> list[Path]:
    """The committed databases of the examples (examples/*/results/*.sqlite.gz: kinds other than GEMM)."""
    return sorted((ROOT / "examples").glob("*/results/*.sqlite.gz"))


def read_only(gz: Path) -> Path:
    """The shared decompressed copy of `gz` (read-only: open it for reading only, never copy it to write)."""
    return gunzipped(gz)


def gunzip_to(gz: Path, dest: Path) -> Path:
    """A plain, writable copy of the gzipped database `gz` at `dest` (its folder is created)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(gz, "rb") as src:
        dest.write_bytes(src.read())
    return dest
