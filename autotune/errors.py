"""User-facing errors: each says which file, which line, what went wrong and what to do.

The command line prints them without a traceback and exits with code 2.
"""

from __future__ import annotations

from pathlib import Path


class UserError(Exception):
    """A mistake in the user's input, reported as `file:line: message` plus a hint."""

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        expr: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.expr = expr
        self.hint = hint

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        text = f"{where}{self.message}"
        if self.expr is not None:
            text += f"\n    expression: {self.expr}"
        if self.hint:
            text += f"\n    what to do: {self.hint}"
        return text


class SpaceError(UserError):
    """A broken space file."""


class ConfigError(UserError):
    """A broken sweep config."""


class StoreError(UserError):
    """The database cannot be opened or written as asked (`autotune.store`)."""
