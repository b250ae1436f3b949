"""The files of a space recorded in a results database (its YAML, kernel source and headers), written where the
space loader reads them: only under this process's own temporary folder, each name checked first.

A database is data: its names never decide where a file lands. A recorded name must be relative, without `..`, a
control character or a backslash, of at most MAX_PARTS parts; a space writes at most MAX_FILES files of at most
MAX_FILE_BYTES each (its YAML at most MAX_YAML_BYTES), and one database at most MAX_BYTES in all. Files are
created new (never through an existing file or link). A space whose files break a rule is refused whole (`Refused`,
one line saying why) and nothing of it is left on disk.

The folder (`autotune-spaces-*` in the temporary directory, one per process, made on first use) is removed when
the process exits, after an error or Ctrl-C too.
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path, PurePosixPath
from typing import Mapping

from autotune.store.engine import scratch_folder

MAX_FILES = 1000  # files of one recorded space (its kernel source, headers and YAML)
MAX_FILE_BYTES = 16 << 20  # one recorded file
MAX_YAML_BYTES = 1 << 20  # a recorded space file (the space files of this project are under 20 KB)
MAX_BYTES = 64 << 20  # every recorded file one database has written
MAX_PARTS = 32  # folders in a recorded name
MAX_NAME_CHARS = 1024

_COUNT = itertools.count()


class Refused(Exception):
    """A recorded space that is not written: one line saying why."""


class Budget:
    """The bytes one database may still write."""

    def __init__(self) -> None:
        self.left = MAX_BYTES

    def take(self, size: int, what: str) -> None:
        if size > self.left:
            raise Refused(f"{what} would take the files written for this database past {MAX_BYTES >> 20} MiB")
        self.left -= size


def checked_name(name: object, what: str) -> PurePosixPath:
    """A recorded file's name as a relative path inside its folder, or Refused."""
    if not isinstance(name, str) or not name:
        raise Refused(f"{what} without a name")
    if len(name) > MAX_NAME_CHARS:
        raise Refused(f"{what} named with {len(name):,} characters (at most {MAX_NAME_CHARS:,})")
    shown = name if len(name) <= 80 else name[:77] + "..."
    if any(ord(c) < 32 or c in "\\\x7f" for c in name):
        raise Refused(f"{what} {shown!r}: a control character or a backslash in its name")
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise Refused(f"{what} {shown!r}: a recorded file's name must be relative and stay in its folder (no `..`)")
    if len(path.parts) > MAX_PARTS or any(len(part.encode()) > 255 for part in path.parts):
        raise Refused(f"{what} {shown!r}: more than {MAX_PARTS} folders or a part over 255 bytes")
    return path


def checked_text(text: object, what: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """A recorded file's text as bytes (at most `limit`), or Refused."""
    if not isinstance(text, str):
        raise Refused(f"{what} is not text")
    data = text.encode("utf-8", "surrogateescape")
    if len(data) > limit:
        raise Refused(f"{what} is {len(data):,} bytes (at most {limit:,})")
    return data


def folder() -> Path:
    """This process's folder for recorded spaces (made on first use, removed at exit)."""
    return scratch_folder("autotune-spaces-")


def write_space(files: Mapping[PurePosixPath, bytes], budget: Budget) -> Path:
    """Write `files` ({checked name: bytes}) into a new folder under `folder()`; returns it. Refused, leaving
    nothing, when they are too many or too large, or a name collides with another (a file where a folder goes)."""
    if len(files) > MAX_FILES:
        raise Refused(f"{len(files):,} recorded files (at most {MAX_FILES:,})")
    budget.take(sum(len(data) for data in files.values()), f"{len(files):,} recorded files")
    target = folder() / f"{next(_COUNT)}"
    target.mkdir(mode=0o700)
    try:
        for name, data in files.items():
            path = target.joinpath(*name.parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.parent.resolve().is_relative_to(target.resolve()):  # nothing under target is a link
                raise Refused(f"recorded file {str(name)!r} would land outside its folder")
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(path, flags, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
    except OSError as exc:
        shutil.rmtree(target, ignore_errors=True)
        raise Refused(f"recorded files cannot be written as named ({exc.strerror}: two names collide?)") from None
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return target
