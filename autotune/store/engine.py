"""Where a results database lives: URLs, engines, and read-only copies of compressed SQLite files.

SQLite (WAL mode, busy timeout) by default, PostgreSQL through a URL. A compressed SQLite file (`*.sqlite.xz`, as the
committed results are: xz of the plain database, written by `autotune db pack`; or a gzipped `*.sqlite.gz`) is read
through a decompressed copy in a cache private to the user (bounded in size, least recently read copies deleted
first), verified before each reuse, and never written. The tables are in `autotune.store.schema`; this module
imports nothing else of the store at its top but `decompress` (`gunzipped` imports `legacy_pack` when it runs).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import re
import shutil
import sqlite3
import stat as st
import tempfile
import time
from pathlib import Path
from typing import Callable
from urllib.parse import quote

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError

from autotune.errors import StoreError
from autotune.store.decompress import GZIP_MAGIC, SQLITE_HEADER, XZ_MAGIC, decompress_database, max_unpacked_bytes


class SchemaVersionError(StoreError):
    """The database was written by another schema version."""


class SweepLockedError(StoreError):
    """Another live sweep holds the database."""


def first_line(exc: BaseException) -> str:
    """The first line of a database error's message (the driver's, where SQLAlchemy wraps one)."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def sqlite_path(url: str) -> str | None:
    """The file of an SQLite URL (`sqlite:///file:PATH?uri=true` URLs included); None for other URLs and memory."""
    u = make_url(url)
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return u.database[5:] if u.database.startswith("file:") else u.database


GZ_READ_ONLY = "a gzipped database is read-only here: gunzip it first, or sweep into a new file"
XZ_READ_ONLY = "a packed database is read-only here: `autotune db unpack` it first, or sweep into a new file"
COMPRESSED = (".gz", ".xz")


def gz_path(text: str) -> Path | None:
    """The file when `text` (a path or an sqlite:/// URL) names a compressed SQLite database (`*.gz`, or `*.xz` as
    `autotune db pack` writes); else None."""
    if "://" not in text:
        path: str | None = text
    else:
        try:
            path = sqlite_path(text)
        except Exception:  # noqa: BLE001 - not a URL at all: database_url reports it
            return None
    if path is None or not path.endswith(COMPRESSED):
        return None
    return Path(path).expanduser().resolve()


def refuse_gz(text: str) -> None:
    """Raise StoreError when `text` names a gzipped database: writes must never go to its decompressed copy."""
    path = gz_path(text)
    if path is not None and path.suffix == ".xz":
        raise StoreError(
            f"{XZ_READ_ONLY} ({path})",
            hint=f"autotune db unpack {path} --out {path.with_suffix('')} and name the .sqlite file, or give "
            "a new database file",
        )
    if path is not None:
        raise StoreError(
            f"{GZ_READ_ONLY} ({path})", hint=f"gunzip -k {path} and name the .sqlite file, or give a new database file"
        )


def gz_cache_dir() -> Path:
    """The folder of decompressed (and migrated) copies of gzipped databases: <tempdir>/autotune-gz-<uid>, private
    to this user (mode 0700, owned by them). A folder of that name that is a link or owned by someone else is refused;
    one of ours with a wider mode is narrowed to 0700. Raises StoreError."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    folder = Path(tempfile.gettempdir()) / f"autotune-gz-{uid}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError as exc:
        raise StoreError(
            f"cannot use the cache of decompressed databases {folder}: {exc.strerror}",
            hint="set TMPDIR to a folder of your own",
        ) from None
    if not st.S_ISDIR(info.st_mode) or (hasattr(os, "getuid") and info.st_uid != uid):
        raise StoreError(
            f"the cache of decompressed databases {folder} is not a folder of this user's own",
            hint=f"remove {folder}, or set TMPDIR to a folder of your own",
        )
    if st.S_IMODE(info.st_mode) & 0o077:
        os.chmod(folder, 0o700)
    return folder


_SCRATCH: dict[str, tuple[int, Path]] = {}  # prefix -> (the process that made it, its folder)


def scratch_folder(prefix: str) -> Path:
    """This process's temporary folder `<tempdir>/<prefix>*`, made on first use and removed when the process exits
    (by the process that made it, not by a forked child, which makes its own)."""
    made = _SCRATCH.get(prefix)
    if made is None or made[0] != os.getpid():
        made = _SCRATCH[prefix] = (os.getpid(), Path(tempfile.mkdtemp(prefix=prefix)))

        def remove(pid: int = made[0], folder: Path = made[1]) -> None:
            if os.getpid() == pid:
                shutil.rmtree(folder, ignore_errors=True)

        atexit.register(remove)
    return made[1]


def temporary_beside(beside: Path, what: str) -> Path:
    """A new name in the folder of `beside` (the same file system, so that a rename finishes the write)."""
    return beside.with_name(f".{beside.name}.{os.getpid()}.{os.urandom(4).hex()}.{what}")


def file_digest(path: Path) -> str:
    """The SHA-256 of a file's bytes, in hex."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _sidecar(copy: Path) -> Path:
    return copy.with_name(copy.name + ".sha256")


_VERIFIED: dict[str, tuple[int, int, int, int]] = {}  # copy -> its (inode, size, mtime, ctime) when last verified


def verified_copy(copy: Path) -> bool:
    """Whether the cached copy `copy` is the file that was written: its SHA-256 is the one in its sidecar
    (`<copy>.sha256`, written with it). A copy edited, truncated or replaced since is not (and is remade)."""
    try:
        info = copy.stat()
        expected = _sidecar(copy).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return False
    stamp = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    if _VERIFIED.get(str(copy)) == stamp:
        return True
    try:
        ok = file_digest(copy) == expected
    except OSError:
        return False
    if ok:
        _VERIFIED[str(copy)] = stamp
    return ok


def publish_copy(tmp: Path, copy: Path) -> None:
    """Make the finished temporary file `tmp` the cached copy `copy`, read-only, with its SHA-256 in a sidecar
    (both renamed into place, so a reader sees whole files; a reader that sees a pair from two writers finds a
    mismatch and remakes the copy)."""
    os.chmod(tmp, 0o444)  # the copy is only read: opening it for writing fails instead of diverging
    side_tmp = tmp.with_name(tmp.name + ".sha256")
    side_tmp.write_text(file_digest(tmp) + "\n", encoding="ascii")
    os.replace(side_tmp, _sidecar(copy))
    os.replace(tmp, copy)
    _VERIFIED.pop(str(copy), None)


_GUNZIPPED: dict[tuple[str, int, int], Path] = {}
_GZ_ORIGIN: dict[str, Path] = {}  # decompressed copy -> the .gz it was read from (for messages)


def gz_origin(path: str | Path) -> Path | None:
    """The .gz file whose decompressed copy is `path` (in this process); None for any other file."""
    return _GZ_ORIGIN.get(str(Path(path).resolve()))


def remember_gz_copy(copy: Path, gz: Path) -> None:
    """Record that `copy` (a decompressed or migrated copy in `gz_cache_dir()`) stands for the user's `gz`."""
    _GZ_ORIGIN[str(copy)] = gz
    _GZ_ORIGIN[str(copy.resolve())] = gz


def shown(text: str) -> str:
    """`text` (a message) with every private copy of a gzipped database read in this process, as a path or an
    sqlite:/// URL, replaced by the .gz path the user gave: messages name the user's file, never the copy."""
    for copy, gz in sorted(_GZ_ORIGIN.items(), key=lambda item: -len(item[0])):
        if copy in text:
            text = text.replace(f"sqlite:///{copy}", str(gz)).replace(copy, str(gz))
    return text


def gunzipped(path: Path) -> Path:
    """The decompressed copy of the compressed database `path` (`.sqlite.xz` or `.sqlite.gz`; a file packed by an
    older autotune is rebuilt by `legacy_pack.restore`): gz_cache_dir()/<sha256 of the file's bytes>.sqlite, made
    under a temporary name and renamed (so concurrent readers never see a partial file), and reused while the file's
    bytes are the same and the copy is still the one written (`verified_copy`; else it is made again). Decompressing
    is bounded (`autotune.store.decompress`: size limit, SQLite header first); the cache is pruned to its bound
    (`prune_cache`) after each new copy. Raises StoreError (UserError for a damaged older packed file) when the file
    is missing or not what its name says; a failure leaves nothing in the cache."""
    from autotune.store.legacy_pack import restore  # (NumPy: only for a compressed file)

    try:
        stat = path.stat()
    except OSError as exc:
        raise StoreError(
            f"no compressed SQLite database at {path} ({exc.strerror})", hint="give the results database of a sweep"
        ) from None
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    cached = _GUNZIPPED.get(key)
    if cached is not None and verified_copy(cached):
        return cached
    folder = gz_cache_dir()
    target = folder / f"{file_digest(path)}.sqlite"
    if verified_copy(target):
        _touch(target)
    else:
        tmp = temporary_beside(target, "tmp")
        try:
            decompress_database(path, tmp)
            restore(tmp, shown_as=path)
            publish_copy(tmp, target)
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"cannot read the database compressed in {path}: {exc}", hint="copy or download the file again"
            ) from None
        finally:
            tmp.unlink(missing_ok=True)
        prune_cache(folder, keep=target)
    _GUNZIPPED[key] = target
    remember_gz_copy(target, path)
    return target


CACHE_ENTRY = re.compile(r"^\.?([0-9a-f]{64})\.")  # <sha256>.sqlite, its migrated copies, sidecars, temporary files
STALE_TMP_S = 24 * 3600  # a temporary file this old was left by a process that died while writing it


def cache_bound() -> int:
    """The most bytes the cache of decompressed copies keeps: twice the size limit of one copy
    (AUTOTUNE_MAX_UNPACKED_MB; 1 GB by default, 1 GB too when that limit is off)."""
    limit = max_unpacked_bytes()
    return 2 * limit if limit is not None else 2**30


def _touch(copy: Path) -> None:
    """Mark `copy` as read now (its sidecar's time), for `prune_cache`'s least-recently-read order."""
    with contextlib.suppress(OSError):
        os.utime(_sidecar(copy))


def prune_cache(folder: Path, keep: Path) -> None:
    """Delete the least recently read copies in `folder` (each database's decompressed copy with its migrated copies
    and sidecars, as one) until the folder holds at most `cache_bound()` bytes; never `keep`'s. Temporary files of
    writers that died long ago go too. A copy another process is reading stays readable to it (its file is open)."""
    groups: dict[str, list[tuple[Path, os.stat_result]]] = {}
    now = time.time()
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        m = CACHE_ENTRY.match(entry.name)
        if m is None:
            continue
        try:
            info = entry.lstat()
        except OSError:
            continue
        if entry.name.endswith(".tmp"):
            if now - info.st_mtime > STALE_TMP_S:
                entry.unlink(missing_ok=True)
            continue
        groups.setdefault(m.group(1), []).append((entry, info))
    kept = CACHE_ENTRY.match(keep.name)
    sized = sorted(
        (max(info.st_mtime for _, info in group), sum(info.st_size for _, info in group), digest, group)
        for digest, group in groups.items()
    )
    total = sum(size for _, size, _, _ in sized)
    bound = cache_bound()
    for _, size, digest, group in sized:  # the least recently read first
        if total <= bound:
            break
        if kept is not None and digest == kept.group(1):
            continue
        for f, _ in group:
            f.unlink(missing_ok=True)
            _VERIFIED.pop(str(f), None)
        total -= size


def database_url(text: str, *, write: bool = False) -> str:
    """A SQLAlchemy URL as given, or a bare file path as the URL of an SQLite file. A compressed SQLite file
    (`*.sqlite.xz` or `*.sqlite.gz`, path or sqlite:/// URL) is read through its decompressed copy (see `gunzipped`);
    with `write` it is refused. Raises StoreError."""
    gz = gz_path(text)
    if gz is not None:
        if write:
            refuse_gz(text)
        return f"sqlite:///{gunzipped(gz)}"
    if "://" not in text:
        return f"sqlite:///{Path(text).expanduser().resolve()}"
    try:
        make_url(text)
    except ArgumentError:
        raise StoreError(
            f"not a database URL: {text!r}",
            hint="write a file path, sqlite:///path.sqlite or postgresql+psycopg://user@host/db",
        ) from None
    return text


def readonly_uri(path: str | Path) -> str:
    """The `file:` URI that opens the SQLite file `path` read-only without leaving files beside it. A database in
    WAL mode opened `mode=ro` makes `-wal` and `-shm` files that only a writer removes; when no `-wal` file exists
    (no writer has it open and nothing is left to checkpoint) it is opened `immutable=1`, which makes none. With a
    `-wal` file present (a live sweep) it is opened `mode=ro`, reading the sweep's latest commits."""
    resolved = Path(path).resolve()
    uri = f"file:{quote(resolved.as_posix())}?mode=ro"
    try:
        with resolved.open("rb") as f:
            header = f.read(20)
    except OSError:
        return uri  # sqlite3 reports it
    wal_mode = header[:16] == b"SQLite format 3\x00" and header[18:20] == b"\x02\x02"
    if wal_mode and not resolved.with_name(resolved.name + "-wal").exists():
        uri += "&immutable=1"
    return uri


def check_sqlite_file(path: str | Path) -> None:
    """StoreError when the file at `path` holds something other than an SQLite database (by its first bytes: a
    compressed database under a plain name, a text or binary file of another kind). A missing or empty file passes
    (SQLite makes an empty file a database), as does one that cannot be read (SQLite says why)."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError:
        return
    if not head or head == SQLITE_HEADER:
        return
    if head.startswith((XZ_MAGIC, GZIP_MAGIC)):
        kind, suffix = ("xz", ".xz") if head.startswith(XZ_MAGIC) else ("gzip", ".gz")
        raise StoreError(
            f"{path} is not an SQLite database: it is {kind}-compressed",
            hint=f"name it {Path(path).name}{suffix} (read as it is), or `autotune db unpack` it to a plain file",
        )
    raise StoreError(
        f"{path} is not an SQLite database (its first bytes are {head[:8]!r})",
        hint="give the .sqlite (or .sqlite.xz) file a sweep wrote, or a new file name to create one",
    )


def refuse_empty_file(path: str | Path) -> None:
    """StoreError where the file at `path` is empty (0 bytes) and is read, not swept into: SQLite takes it for an
    empty database, where a reader would find no results and `db upgrade` would write into it (an interrupted copy,
    `xz -dc` of a missing file or `touch` leave such a file). A sweep into it still makes its database there."""
    try:
        empty = Path(path).is_file() and Path(path).stat().st_size == 0
    except OSError:
        return
    if empty:
        raise StoreError(
            f"{path} is an empty file (0 bytes), not a results database",
            hint="give the .sqlite (or .sqlite.xz) file a sweep wrote; to start a database there, sweep into it",
        )


def make_engine(url: str, readonly: bool = False) -> Engine:
    """An engine for `url`: SQLite gets WAL + busy timeout (or a read-only connection that leaves no files, see `readonly_uri`, when `readonly`),
    PostgreSQL gets read-only transactions by default when `readonly`. Raises StoreError for an SQLite file that is
    not a database (`check_sqlite_file`)."""
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        path = sqlite_path(url)
        if path is not None:
            check_sqlite_file(path)
        if readonly:
            if path is None:
                raise StoreError(f"cannot open {url} read-only", hint="give the path of an SQLite file")
            uri = readonly_uri(path)  # leaves no -wal/-shm files beside the database
            engine = create_engine(
                "sqlite://", creator=lambda: sqlite3.connect(uri, uri=True, timeout=30, check_same_thread=False)
            )
        else:
            engine = create_engine(u, connect_args={"timeout": 30})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA busy_timeout = 30000")
            cur.execute("PRAGMA foreign_keys = ON")
            if readonly:
                cur.execute("PRAGMA query_only = ON")
            elif path is not None:
                retry_locked(lambda: cur.execute("PRAGMA journal_mode = WAL"))
                cur.execute("PRAGMA synchronous = NORMAL")
            cur.close()

        return engine
    connect_args = {"options": "-c default_transaction_read_only=on"} if readonly else {}
    try:
        return create_engine(u, pool_pre_ping=True, connect_args=connect_args)
    except ImportError as exc:  # the URL names a database driver that is not installed
        raise StoreError(
            f"no driver for {u.drivername}: {exc}",
            hint="for PostgreSQL: pip install -e .[postgres] and a URL postgresql+psycopg://...",
        ) from None


def retry_locked(run: Callable[[], object], seconds: float = 30.0) -> None:
    """Run `run` (a SQLite statement), retrying while it fails with "database is locked". Switching a new
    file to WAL mode returns SQLITE_BUSY at once, without SQLite's busy timeout, while another
    connection is switching it too."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            run()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
