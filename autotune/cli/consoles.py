"""The consoles the commands print to, made per call: a rich `Console` reads the terminal width (COLUMNS) when it
is made, so one made at import time keeps the width of the process's first import (80 columns under pytest-xdist,
or whatever the shell had) and folds tables that would fit."""

from __future__ import annotations

from rich.console import Console


def stdout() -> Console:
    """A console on standard output, with the terminal's width now."""
    return Console()


def stderr() -> Console:
    """A console on standard error (progress, notes, warnings), with the terminal's width now."""
    return Console(stderr=True)
