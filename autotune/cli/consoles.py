"""The consoles the commands print to, made per call: a rich `Console` reads the terminal width (COLUMNS) when it
is made, so one made at import time keeps the width of the process's first import (80 columns under pytest-xdist,
or whatever the shell had) and folds tables that would fit."""

from __future__ import annotations

from collections.abc import Container, Iterable

from rich.console import Console
from rich.table import Table


def stdout() -> Console:
    """A console on standard output, with the terminal's width now."""
    return Console()


def stderr() -> Console:
    """A console on standard error (progress, notes, warnings), with the terminal's width now."""
    return Console(stderr=True)


def table(title: str, columns: Iterable[str], left: Container[str] | None = None) -> Table:
    """A rich Table with these columns, left-justified; given `left`, only those in it, the others right-justified."""
    made = Table(title=title)
    for col in columns:
        made.add_column(col, justify="left" if left is None or col in left else "right")
    return made
