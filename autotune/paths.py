"""Where the project's data folders are.

A sweep's default database is results/<name>.sqlite under the current directory, always (sweep.config).
In a checkout (the package next to `kernels_src/` and `spaces/`): those folders, `results/` (the committed results)
and `configs/` beside the package, and the compile cache in `.cache/`. Installed (`pip install .`): the built-in spaces and kernels
shipped inside the package (`autotune/_builtin/`, see setup.py), results under the current directory's
`results/`, and the compile cache in $XDG_CACHE_HOME/autotune (default ~/.cache/autotune).
"""

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
_CHECKOUT = PACKAGE.parent
IN_CHECKOUT = (_CHECKOUT / "kernels_src").is_dir() and (_CHECKOUT / "spaces").is_dir()

if IN_CHECKOUT:
    ROOT = _CHECKOUT
    KERNELS_DIR = ROOT / "kernels_src"
    SPACES_DIR = ROOT / "spaces"
    RESULTS_DIR = ROOT / "results"
    CONFIGS_DIR = ROOT / "configs"
    CACHE_DIR = ROOT / ".cache"
else:  # installed: built-ins are package data; what a user makes goes where they work
    ROOT = PACKAGE
    KERNELS_DIR = PACKAGE / "_builtin" / "kernels_src"
    SPACES_DIR = PACKAGE / "_builtin" / "spaces"
    RESULTS_DIR = Path.cwd() / "results"
    CONFIGS_DIR = Path.cwd() / "configs"
    CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "autotune"


def sqlite_files(path: "str | Path") -> list[Path]:
    """A SQLite database file, then the files SQLite may keep beside it (write-ahead log, its shared memory, the
    rollback journal): what removing or claiming a database means."""
    return [Path(f"{path}{end}") for end in ("", "-wal", "-shm", "-journal")]
