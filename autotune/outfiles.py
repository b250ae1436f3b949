"""Writing the files a command produces: all of them or none, and errors that name the user's path.

Every output a command writes goes through `write_files`: each target's folder is checked first (it exists, or is
made with `make_folders`, is a folder and may be written), then every file is written to a temporary file beside
its target, and only when all are written are they renamed into place. When anything fails, the temporary files
are removed and a UserError names the target as the user gave it (never the temporary name). A written file gets
the user's usual mode (0666 less the umask), not the 0600 of a temporary file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, Mapping, Union

from autotune.errors import UserError

Content = Union[str, bytes]
HINT = "give a path whose folder exists and that you may write, and run the command again"


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def check_writable(paths: list[Path], *, make_folders: bool = False) -> None:
    """Raise UserError naming the first of `paths` that cannot be written: the path is a folder, its folder is
    missing (with `make_folders`: its nearest existing parent) or is not a folder, or may not be written.
    Writes nothing."""
    for path in paths:
        folder = path.parent if str(path.parent) else Path(".")
        if path.is_dir():
            raise UserError(f"cannot write {path}: it is a folder", hint="give a file name")
        blocker = _blocked(folder)
        if blocker is not None:
            what = "is not a folder" if blocker == folder else f"is not a folder ({blocker} is a file)"
            raise UserError(f"cannot write {path}: its folder {folder} {what}", hint=HINT)
        existing = next((p for p in (folder, *folder.parents) if p.is_dir()), Path("."))
        if existing != folder and not make_folders:
            raise UserError(f"cannot write {path}: its folder {folder} does not exist", hint=HINT)
        if not os.access(existing, os.W_OK | os.X_OK):
            raise UserError(f"cannot write {path}: the folder {existing} may not be written", hint=HINT)


def _blocked(folder: Path) -> Path | None:
    """The nearest part of `folder` (itself or a parent) that exists as something other than a folder."""
    for part in (folder, *folder.parents):
        if part.exists() or part.is_symlink():
            return None if part.is_dir() else part
    return None


def _mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_files(files: Mapping[Path, Content], *, make_folders: bool = False) -> None:
    """Write every `files[path]` (text as UTF-8 with `\\n` line ends, or bytes), all or none (see the module
    docstring). Raises UserError naming the target that failed."""
    targets = [Path(p) for p in files]
    check_writable(targets, make_folders=make_folders)
    temps: dict[Path, str] = {}
    try:
        for path, content in zip(targets, files.values(), strict=True):
            folder = path.parent if str(path.parent) else Path(".")
            try:
                if make_folders:
                    folder.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
                temps[path] = tmp
                with os.fdopen(fd, "wb") as f:
                    f.write(content.encode("utf-8") if isinstance(content, str) else content)
                os.chmod(tmp, _mode())
            except OSError as exc:
                raise UserError(f"cannot write {path}: {_reason(exc)}", hint=HINT) from None
        for path, tmp in list(temps.items()):
            try:
                os.replace(tmp, path)
            except OSError as exc:
                raise UserError(f"cannot write {path}: {_reason(exc)}", hint=HINT) from None
            del temps[path]
    finally:
        for tmp in temps.values():
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def write_file(path: Path, content: Content, *, make_folders: bool = False) -> None:
    """`write_files` of one file."""
    write_files({Path(path): content}, make_folders=make_folders)


@contextlib.contextmanager
def staged_folder(out_dir: Path) -> Iterator[Path]:
    """A private folder beside `out_dir` to write a command's many files into (plots, tables); when the block ends
    without an error its files move into `out_dir` (made if missing), replacing files of the same name; when
    it raises, the folder is removed and `out_dir` is left as it was. A folder that cannot be made is one
    UserError naming `out_dir`."""
    out_dir = Path(out_dir)
    if (out_dir.exists() or out_dir.is_symlink()) and not out_dir.is_dir():
        raise UserError(f"cannot write {out_dir}: it is a file, not a folder", hint="give a folder for the files")
    blocker = _blocked(out_dir.parent if str(out_dir.parent) else Path("."))
    if blocker is not None:
        raise UserError(f"cannot write {out_dir}: {blocker} is not a folder", hint=HINT)
    existing = next((p for p in (out_dir, *out_dir.parents) if p.is_dir()), Path("."))
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"cannot write {out_dir}: the folder {existing} may not be written", hint=HINT)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    except OSError as exc:
        raise UserError(f"cannot write {out_dir}: {_reason(exc)}", hint=HINT) from None
    try:
        yield stage
        files = sorted(p for p in stage.rglob("*") if p.is_file())
        try:
            for path in files:
                target = out_dir / path.relative_to(stage)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.chmod(path, _mode())
                os.replace(path, target)
        except OSError as exc:
            raise UserError(f"cannot write {out_dir}: {_reason(exc)}", hint=HINT) from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
