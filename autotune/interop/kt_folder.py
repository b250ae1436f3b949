"""Where a `tune_kernel` call writes its space folder: a new temporary folder named after the kernel (its name reduced
to letters, digits and _: never a path), or `space_dir=` / AUTOTUNE_KEEP_SPACE, claimed for this call.

A kept folder is this call's alone: an empty or new folder is marked as tune_kernel's (`MARK`); one an earlier call
marked has that call's files removed first (`GENERATED`: its answers `expected.npz`, `verify.pkl`, its check module
and its compiled `__pycache__`, its arrays, its results database): nothing of an earlier call is checked against or
returned. A folder holding anything else is refused (nothing of the user's is removed). Light: imported by
`import autotune.kernel_tuner`."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from autotune.errors import UserError

MARK = ".autotune-tune_kernel"
GENERATED = (
    "kernel.cu",
    "args",
    "expected.npz",
    "verify.pkl",
    "kt_check.py",
    "__pycache__",
    "space.yaml",
    "sweep.yaml",
    "nvcc",  # the folder of a retry with nvcc (autotune.interop.kt_failure)
)
DATABASE = ("results.sqlite", "results.sqlite-wal", "results.sqlite-shm", "results.sqlite-journal")


def safe_name(kernel_name: str) -> str:
    """The kernel's name as a file-name part: letters, digits and _ only, at most 40 characters."""
    return re.sub(r"\W", "_", kernel_name)[:40] or "kernel"


def claim(folder: Path, own_database: bool) -> Path:
    """`folder` ready for this call (see the module docstring); `own_database`: the results database is the
    folder's (no `database=`), so an earlier call's is removed too."""
    folder = folder.resolve()
    if folder.exists() and not folder.is_dir():
        raise UserError(f"tune_kernel: space_dir {folder} is a file", hint="give a folder name (new or empty)")
    if folder.is_dir() and not (folder / MARK).is_file() and any(folder.iterdir()):
        raise UserError(
            f"tune_kernel: space_dir {folder} holds files that are not an earlier tune_kernel call's",
            hint="give a new or empty folder (a folder an earlier call kept is reused: its files are replaced)",
        )
    for name in GENERATED + (DATABASE if own_database else ()):
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARK).write_text("a space folder written by autotune.kernel_tuner.tune_kernel (space_dir=)\n")
    return folder
