"""The format of a file named by `-o/--out`, from its extension: `.json`, `.py`, `.cuh`/`.h`/`.hpp` (a C++ header),
`.csv`, where the command writes that format. An explicit `--format` wins, with one warning when the extension
names another format; a file whose extension names no format the command writes needs `--format` (one error
line otherwise). Without `-o` (standard output) the format is `--format`, else the command's default."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Sequence

from autotune.errors import UserError

EXTENSIONS = {".json": "json", ".py": "python", ".cuh": "cpp", ".h": "cpp", ".hpp": "cpp", ".csv": "csv"}


def output_format(output: Path | None, given: str | None, supported: Sequence[str], default: str) -> str:
    """The format to write `output` in (`given`: --format, None when not given; `supported`: the command's
    formats). UserError for an extension that names none of them with no --format."""
    if output is None:
        return given or default
    implied = EXTENSIONS.get(output.suffix.lower())
    implied = implied if implied in supported else None
    if given is None:
        if implied is None:
            known = ", ".join(e for e, f in EXTENSIONS.items() if f in supported)
            raise UserError(
                f"--out {output}: the extension {output.suffix or '(none)'!s} names no format this command writes",
                hint=f"name the file {known}, or give --format {'|'.join(supported)}",
            )
        return implied
    if implied is not None and implied != given:
        warnings.warn(
            f"--format {given} but --out {output} names a {implied} file: writing {given} as asked", stacklevel=2
        )
    return given
