"""Which files a space file may name: its kernel `source:`, a declared kind's `reference:`/`baseline:` file.py and a
`problem: file.py:Class` kind (the Python ones are executed; the source is copied into the results database).

A space file may name files in its own folder tree (symbolic links resolved, so a link cannot lead out), and the
built-in kernels (`kernels_src/`). Anything else is refused unless the user allows its folder: on the command line
`autotune --allow-path DIR COMMAND ...` (repeatable), or the environment variable AUTOTUNE_ALLOW_PATHS (folders
separated by the path separator, `:` on Linux), which the command line's option extends and which the GPU worker
and Python callers read. The space file cannot allow anything itself: it is the input being checked. `#include`s
inside a kernel are resolved by the compiler and are not restricted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from autotune import paths
from autotune.errors import SpaceError

ALLOW_ENV = "AUTOTUNE_ALLOW_PATHS"
_BESIDE: dict[Path, Path] = {}  # a recorded space's folder (a temporary copy) -> the original space file's folder


def allow(folders: Iterable[str | Path]) -> None:
    """Allow files under `folders` for every space loaded from now on, in this process and the ones it starts
    (they are added to AUTOTUNE_ALLOW_PATHS)."""
    given = [str(Path(f).expanduser().resolve()) for f in folders]
    if given:
        old = [p for p in os.environ.get(ALLOW_ENV, "").split(os.pathsep) if p]
        os.environ[ALLOW_ENV] = os.pathsep.join(old + [g for g in given if g not in old])


def recorded_beside(space_folder: Path, original_folder: Path) -> None:
    """A space recorded in a results database and written to `space_folder` may also name files in the folder
    its original space file was in (`autotune.store.spaces`)."""
    _BESIDE[space_folder.resolve()] = original_folder.resolve()


def roots(space_file: Path) -> list[Path]:
    """The folders whose trees `space_file` may name files in."""
    folder = space_file.parent.resolve()
    out = [folder, paths.KERNELS_DIR.resolve()]
    if folder in _BESIDE:
        out.append(_BESIDE[folder])
    out += [Path(p).expanduser().resolve() for p in os.environ.get(ALLOW_ENV, "").split(os.pathsep) if p]
    return out


def checked(file: Path, space_file: Path, key: str, given: str, line: int | None) -> Path:
    """`file` (named by `space_file` under `key` as `given`) resolved, when it lies in an allowed folder tree;
    else SpaceError naming the space file, the key and the path, and how to allow it."""
    resolved = file.resolve()
    if any(resolved.is_relative_to(root) for root in roots(space_file)):
        return resolved
    folder = space_file.parent.resolve()
    raise SpaceError(
        f"`{key}` {given!r} resolves to {resolved}, outside the space file's folder {folder}",
        file=space_file,
        line=line,
        hint=f"move the file under {folder}, or allow its folder: autotune --allow-path "
        f"{resolved.parent} COMMAND ... (or {ALLOW_ENV}={resolved.parent})",
    )
