"""`autotune explore TARGET`: which report a target makes, and the page for it.

TARGET is a space (a space file or a built-in space name), a results database (a `.sqlite`, a packed `.sqlite.xz`, a `.sqlite.gz` or a
database URL), a dispatch table (`dispatch.json`), or a results folder (its database and its table, in one page).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from autotune.errors import UserError
from autotune.explore.page import Page, require_plotly

DB_SUFFIXES = (".sqlite", ".sqlite.xz", ".sqlite.gz", ".db", ".sqlite3")


@dataclass
class Built:
    page: Page
    what: str  # "space", "results", "table", "results and table"
    seconds: float


def _is_db(text: str) -> bool:
    """A database URL, a file named like a database, or a file that is an SQLite database whatever its name."""
    if "://" in text or text.endswith(DB_SUFFIXES):
        return True
    try:
        with open(text, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def build(
    target: str,
    *,
    device: str | None = None,
    precision: str | None = None,
    top: int = 3,
    no_soft: bool = False,
    soft_off: tuple[str, ...] = (),
    seed: int = 0,
) -> Built:
    require_plotly()
    start = time.perf_counter()
    path = Path(target)
    if _is_db(target):
        page = Page(f"autotune explore: {path.name}", target)
        _add_results(page, target, top, seed)
        return Built(page, "results", time.perf_counter() - start)
    if path.is_dir():
        from autotune.explore.tables import add_table, find_table

        dbs = sorted(p for p in path.iterdir() if p.name.endswith(DB_SUFFIXES))
        has_table = (path / "dispatch.json").is_file()
        if not dbs and not has_table:
            raise UserError(
                f"{target} holds no results database (*.sqlite, *.sqlite.xz, *.sqlite.gz) and no dispatch.json",
                hint="give a results folder, a database, a dispatch.json or a space",
            )
        page = Page(f"autotune explore: {path.name}", str(path))
        for db in dbs[:1]:
            _add_results(page, str(db), top, seed)
        if has_table:
            add_table(page, find_table(path))
        what = " and ".join(w for w, ok in (("results", dbs), ("table", has_table)) if ok)
        if len(dbs) > 1:  # one page holds one database's charts: the others are named, not dropped silently
            what += f"; results of {dbs[0].name} only, not of {', '.join(p.name for p in dbs[1:])}: explore each by its path"
        return Built(page, what, time.perf_counter() - start)
    from autotune.dispatch.table_file import is_table_file

    if is_table_file(path.name):
        from autotune.explore.tables import add_table, find_table

        page = Page(f"autotune explore: {path.parent.name}/{path.name}", str(path))
        if not path.is_file():
            raise UserError(f"no file {target}", hint="give a dispatch.json written by `autotune analyze`")
        add_table(page, find_table(path))
        return Built(page, "table", time.perf_counter() - start)
    from autotune.devices import get_device
    from autotune.explore.spaces import add_space, explore_space
    from autotune.space.spec import load_space

    space = load_space(target)
    e = explore_space(space, get_device(device), precision, soft_off=soft_off, no_soft=no_soft, seed=seed)
    page = Page(f"autotune explore: space {space.name}", target)
    add_space(page, e, seed)
    return Built(page, "space", time.perf_counter() - start)


def _add_results(page: Page, source: str, top: int, seed: int) -> None:
    from autotune.explore.data import load
    from autotune.explore.results import add_results

    add_results(page, load(source), top=top, seed=seed)
