"""The `autotune` command line. Printing, environment and exit codes live here, nowhere else."""

from __future__ import annotations

import importlib
import sys
import warnings
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from autotune.cli.consoles import stdout, stderr, table as tabled
from autotune.cli import analyze as analyze_cli
from autotune.cli import explore as explore_cli
from autotune.cli import model as model_cli
from autotune.cli import space as space_cli
from autotune.cli import sweep as sweep_cli
from autotune.cli import database as database_cli
from autotune.cli import workload as workload_cli
from autotune.cli import validate as validate_cli
from autotune.cli import interop
from autotune.errors import UserError
from autotune import stopping


# click's exceptions module as the installed typer uses it: typer >= 0.2x carries its own copy of click, older typer
# (pyproject allows >= 0.12) imports click itself
_CLICK = importlib.import_module("typer._click.exceptions" if find_spec("typer._click") else "click.exceptions")
UsageError = _CLICK.UsageError
NoArgsIsHelpError = getattr(_CLICK, "NoArgsIsHelpError", ())  # click < 8.2: none (help by another path)


FILE_ERRORS = (FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError, NotADirectoryError)


def _one_line_warning(message, category, filename, lineno, file=None, line=None):  # type: ignore[no-untyped-def]
    """Warnings as `warning: message` on standard error: no category, source file or source line."""
    text = _shown(" ".join(str(message).split()))
    (file or sys.stderr).write(f"warning: {text}\n")


def _shown(text: str) -> str:
    """A message naming the user's .gz database where it named the private decompressed copy read for it."""
    engine = sys.modules.get("autotune.store.engine")  # not imported: no database was opened, no copy to hide
    return engine.shown(text) if engine is not None else text


def _usage_error(exc: Any) -> None:  # click's UsageError (of the copy typer uses)
    """A command line typer cannot parse (an unknown option, `--bk abc`, a value outside an option's range, a missing
    option) as the project's `error: ...` line plus what to do, exit code 2 (typer drew a box); a command given
    without arguments still shows its help."""
    if isinstance(exc, NoArgsIsHelpError):
        raise exc
    where = exc.ctx.command_path if exc.ctx is not None else "autotune"
    sys.stderr.write(f"error: {' '.join(exc.format_message().split())}\n    what to do: run `{where} --help`\n")
    sys.exit(exc.exit_code)


class _Commands(TyperGroup):
    """Reports a UserError as `error: ...` plus what to do, and a file that cannot be read or written as `error:
    cannot ... FILE: reason`, exit code 2, no traceback (under typer's CliRunner too, since it happens inside the
    command group); a command line that does not parse (typer's usage errors, every command's) the same way; a stop
    by Ctrl-C or SIGTERM (`autotune.stopping`) as `interrupted`, exit code 130; warnings print as one `warning: ...`
    line."""

    def make_context(self, info_name, args, parent=None, **extra):  # type: ignore[no-untyped-def]
        try:  # (the options before the command: a command's own are parsed within `invoke`)
            return super().make_context(info_name, args, parent, **extra)
        except UsageError as exc:
            _usage_error(exc)

    def invoke(self, ctx):  # type: ignore[no-untyped-def]
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning
            try:
                done = super().invoke(ctx)
                stopping.check()  # a command that let a stop end it quietly (optuna-dashboard's server does)
                return done
            except UserError as exc:
                sys.stderr.write(f"error: {_shown(str(exc))}\n")
                sys.exit(2)
            except UsageError as exc:
                _usage_error(exc)
            except FILE_ERRORS as exc:
                if exc.filename is None:
                    raise
                where = _shown(f"{exc.filename}" + (f" -> {exc.filename2}" if exc.filename2 else ""))
                sys.stderr.write(
                    f"error: cannot use {where}: {exc.strerror or exc}\n"
                    "    what to do: give a path whose folder exists and that you may write "
                    "(or read), and run the command again\n"
                )
                sys.exit(2)
            except KeyboardInterrupt:  # (typer would exit 130 without a word)
                stderr().print("interrupted")
                sys.exit(130)


app = typer.Typer(
    cls=_Commands,
    help="Autotune GPU kernels: explore tuning spaces, sweep them on a GPU into SQLite, "
    "analyze the results into dispatch tables.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(space_cli.app, name="space")
app.add_typer(model_cli.app, name="model")
app.add_typer(interop.import_app, name="import")
app.add_typer(interop.export_app, name="export")
app.add_typer(workload_cli.app, name="workload")


def _version(value: bool) -> None:
    """--version: print autotune's version (autotune.__version__) and stop."""
    if value:
        from autotune import __version__

        typer.echo(f"autotune {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_version, help="Print autotune's version and exit."
    ),
    allow_path: list[Path] = typer.Option(
        [],
        "--allow-path",
        metavar="DIR",
        help="Let space files name kernel sources and Python files (reference:, "
        "file.py:Class) under DIR, outside their own folder (repeatable; or AUTOTUNE_ALLOW_PATHS=DIR:DIR).",
    ),
) -> None:
    """Autotune GPU kernels: explore tuning spaces, sweep them on a GPU into SQLite, analyze the results into
    dispatch tables."""
    # every command starts from the work tree's spaces: an earlier command in this process (the CLI called in-process,
    # the explorer) may have pointed the loader at a database's recorded versions (autotune.store.spaces); a loader
    # not imported yet holds none (and help need not import it: numpy, YAML)
    spec = sys.modules.get("autotune.space.spec")
    if spec is not None:
        spec.STORED.clear()
    if allow_path:
        from autotune.problems.allowed_paths import allow

        allow(allow_path)


@app.command()
def devices() -> None:
    """List the device profiles usable with --device (and the GPU of this machine, if any)."""
    from autotune.devices import PROFILES, detect_gpu

    columns = ("profile", "name", "cc", "SMs", "smem/block (opt-in)", "smem/SM", "L2", "bandwidth")
    table = tabled("device profiles", columns)
    gpu = detect_gpu()
    rows = list(PROFILES.items()) + ([("(this GPU)", gpu)] if gpu else [])
    for key, d in rows:
        table.add_row(
            key,
            d.name,
            str(d.cc),
            str(d.sm_count),
            f"{d.max_smem_per_block // 1024} KB",
            f"{d.max_smem_per_sm // 1024} KB",
            f"{d.l2_bytes / 2**20:g} MB",
            f"{d.mem_bandwidth / 1e12:.2f} TB/s",
        )
    stdout().print(table)


analyze_cli.register(app)
sweep_cli.register(app)
database_cli.register(app)
validate_cli.register(app)
explore_cli.register(app)


def main() -> None:
    stopping.install(process=True)  # SIGINT and SIGTERM stop every command alike, a second signal never cuts the stop
    try:
        app()
    except KeyboardInterrupt:
        stderr().print("interrupted")
        sys.exit(130)
