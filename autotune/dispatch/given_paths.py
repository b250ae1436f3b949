"""How a provenance record names a file or database the user gave (`autotune validate` writes them into
validation_summary.json): the user's own file, never a temporary copy made from it (a `.sqlite.xz` or `.gz`
database is read from a decompressed copy in the temporary folder), relative to the repository where it lies inside
it (as committed results name theirs), else absolute; a database server's URL without its password."""

from __future__ import annotations

from pathlib import Path

from autotune import paths


def recorded_name(given: str | Path | None) -> str | None:
    """`given` (a path or a database URL, as the user wrote it or as resolved) as provenance names it."""
    if given is None:
        return None
    text = str(given)
    if "://" not in text:
        return _path(Path(text))
    from sqlalchemy.engine import make_url

    try:
        url = make_url(text)
    except Exception:  # noqa: BLE001 - not a URL after all: a path with "://" in it
        return _path(Path(text))
    if url.drivername.startswith("sqlite") and url.database and url.database != ":memory:":
        return f"sqlite:///{_path(Path(url.database))}"
    return url.render_as_string(hide_password=True)


def _path(path: Path) -> str:
    from autotune.store.engine import gz_origin

    resolved = (gz_origin(path) or path).resolve()
    if paths.IN_CHECKOUT and resolved.is_relative_to(paths.ROOT.resolve()):
        return resolved.relative_to(paths.ROOT.resolve()).as_posix()
    return str(resolved)
