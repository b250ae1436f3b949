"""The commands print through consoles made per call (autotune/cli/consoles.py): a rich Console made at import time
keeps the terminal width of the process's first import (80 columns under pytest-xdist) and folds what would fit."""

from __future__ import annotations

import importlib
import pkgutil

from rich.console import Console
from typer.testing import CliRunner

import autotune.cli
from autotune.cli.main import app


def test_no_cli_module_holds_a_console_made_at_import() -> None:
    held = []
    for info in pkgutil.iter_modules(autotune.cli.__path__):
        module = importlib.import_module(f"autotune.cli.{info.name}")
        held += [f"{info.name}.{k}" for k, v in vars(module).items() if isinstance(v, Console)]
    assert not held, f"module-level consoles (make them per call, autotune.cli.consoles): {held}"


def test_a_table_takes_the_width_of_the_terminal_when_the_command_runs() -> None:
    """`autotune space show` prints a wide funnel table: at 200 columns no row is folded, at 60 some are."""
    runner = CliRunner()
    narrow = runner.invoke(app, ["space", "show", "gemm_tiny_simt"], env={"COLUMNS": "60"})
    wide = runner.invoke(app, ["space", "show", "gemm_tiny_simt"], env={"COLUMNS": "200"})
    assert wide.exit_code == 0 and narrow.exit_code == 0, wide.output + narrow.output
    assert max(map(len, wide.output.splitlines())) > 60
    assert max(map(len, narrow.output.splitlines())) <= 60
    assert len(narrow.output.splitlines()) > len(wide.output.splitlines())
