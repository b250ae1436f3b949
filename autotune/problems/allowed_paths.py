"""Which files a space file may name: its kernel `source:`, a declared kind's `reference:`/`baseline:`/`check:` file.py,
an `init: {function: file.py:make}` or `{file: data.npy}`, and a `problem: file.py:Class` kind (the Python ones are
executed; the source is copied into the results database).

A space file may name files in its own folder tree (symbolic links resolved, so a link cannot lead out), and the
built-in kernels (`kernels_src/`). Anything else is refused unless the user allows its folder: on the command line
`autotune --allow-path DIR COMMAND ...` (repeatable), or the environment variable AUTOTUNE_ALLOW_PATHS (folders
separated by the path separator, `:` on Linux), which the command line's option extends and which the GPU worker
and Python callers read. The space file cannot allow anything itself: it is the input being checked. `#include`s
inside a kernel are resolved by the compiler and are not restricted.

A space recorded in a results database and written out by `autotune.store.spaces` (`recorded`) is data: its folder
(a temporary one, holding what the database recorded) may hold its kernel source and headers, never Python. Its
Python files (`.py`) come only from the folder of the work tree's own copy of that space, when the checkout in use
holds one, or from a folder the user allowed; never from a folder the database names.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, NoReturn

from autotune import paths
from autotune.errors import SpaceError

ALLOW_ENV = "AUTOTUNE_ALLOW_PATHS"
# a recorded space's folder (written by autotune.store.spaces) -> the folders its Python files may come from
_RECORDED: dict[Path, tuple[Path, ...]] = {}
NOT_RUN = "autotune.problems.allowed_paths:not_run"  # what a recorded space's Python function is replaced by


def allow(folders: Iterable[str | Path]) -> None:
    """Allow files under `folders` for every space loaded from now on, in this process and the ones it starts
    (they are added to AUTOTUNE_ALLOW_PATHS)."""
    given = [str(Path(f).expanduser().resolve()) for f in folders]
    if given:
        old = [p for p in os.environ.get(ALLOW_ENV, "").split(os.pathsep) if p]
        os.environ[ALLOW_ENV] = os.pathsep.join(old + [g for g in given if g not in old])


def user_allowed() -> list[Path]:
    """The folders the user allowed (AUTOTUNE_ALLOW_PATHS, which `--allow-path` extends)."""
    return [Path(p).expanduser().resolve() for p in os.environ.get(ALLOW_ENV, "").split(os.pathsep) if p]


def recorded(space_folder: Path, code_folders: Iterable[Path]) -> None:
    """`space_folder` holds a space recorded in a results database (`autotune.store.spaces`): it may name its kernel
    source and headers there, and Python files only under `code_folders` (the work tree's copy's folder, if any) or
    a folder the user allowed."""
    _RECORDED[space_folder.resolve()] = tuple(f.resolve() for f in code_folders)


def code_allowed(file: Path, code_folders: Iterable[Path]) -> bool:
    """Whether the Python file `file` of a recorded space may run: it lies (links resolved) under `code_folders` or a
    folder the user allowed."""
    resolved = file.resolve()
    return any(resolved.is_relative_to(root) for root in [*(f.resolve() for f in code_folders), *user_allowed()])


def roots(space_file: Path, code: bool = False) -> list[Path]:
    """The folders whose trees `space_file` may name files in (`code`: Python files)."""
    folder = space_file.parent.resolve()
    if folder in _RECORDED:
        out = list(_RECORDED[folder]) if code else [folder, paths.KERNELS_DIR.resolve(), *_RECORDED[folder]]
    else:
        out = [folder, paths.KERNELS_DIR.resolve()]
    return out + user_allowed()


def checked(file: Path, space_file: Path, key: str, given: str, line: int | None) -> Path:
    """`file` (named by `space_file` under `key` as `given`) resolved, when it lies in an allowed folder tree;
    else SpaceError naming the space file, the key and the path, and how to allow it. A `.py` file is code: a
    space recorded in a results database may not name one in its own (temporary) folder."""
    resolved = file.resolve()
    code = resolved.suffix == ".py" or Path(given).suffix == ".py"
    if any(resolved.is_relative_to(root) for root in roots(space_file, code)):
        return resolved
    folder = space_file.parent.resolve()
    allow_it = f"autotune --allow-path {resolved.parent} COMMAND ... (or {ALLOW_ENV}={resolved.parent})"
    if folder in _RECORDED:
        raise SpaceError(
            f"`{key}` {given!r} resolves to {resolved}, in neither the work tree's copy of this space (recorded "
            "in a results database) nor a folder you allowed",
            file=space_file,
            line=line,
            hint=f"if you trust it, allow its folder: {allow_it}",
        )
    raise SpaceError(
        f"`{key}` {given!r} resolves to {resolved}, outside the space file's folder {folder}",
        file=space_file,
        line=line,
        hint=f"move the file under {folder}, or allow its folder: {allow_it}",
    )


def not_run(*args: object, **kwargs: object) -> NoReturn:
    """Stands for a Python function that a space recorded in a results database names outside the folders allowed
    (`autotune.store.spaces`): analyzing the database never runs it; anything that calls it stops here."""
    raise SpaceError(
        "this space was read from a results database: its Python function is not run (it lies neither in the "
        "work tree's copy of the space nor in a folder you allowed)",
        hint=f"sweep the space from its space file, or allow the function's folder: autotune --allow-path DIR "
        f"COMMAND ... (or {ALLOW_ENV}=DIR)",
    )
