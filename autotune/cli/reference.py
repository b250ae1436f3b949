"""The command-line reference as Markdown, generated from the Typer app (docs/cli.md is built from it).

`commands()` walks every command of `autotune.cli.main.app`; `markdown()` writes one section per command with its
usage, its help and a table of its arguments and options (hidden aliases left out). The documentation build calls
it (docs/hooks/cli_reference.py), and tests walk the same commands to check the option vocabulary.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import typer

Command = Any  # typer's command classes (it carries its own copy of click): duck-typed here


def root_command() -> Command:
    """The click command behind `autotune` (the Typer app with every sub-app registered)."""
    from autotune.cli.main import app

    return typer.main.get_command(app)


def commands(
    command: Command | None = None, path: tuple[str, ...] = ("autotune",)
) -> Iterator[tuple[tuple[str, ...], Command]]:
    """Every command reachable from `command` (default: `autotune`), groups included, as (words, command), in
    the order `autotune --help` lists them."""
    command = command or root_command()
    yield path, command
    if hasattr(command, "list_commands"):
        ctx = typer.Context(command, info_name=path[-1])
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                yield from commands(sub, (*path, name))


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _param_row(param: Any) -> str:
    if param.param_type_name == "option":
        names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
        help_text = param.help or ""
        default = getattr(param.default, "value", param.default)  # an Enum's value, as typed on the line
        hide = callable(default) or default in (None, (), [], False) or param.is_flag and not default
        shown = "" if hide else f"`{default}`"
    else:
        names = f"`{(param.name or '').upper()}`"
        help_text = getattr(param, "help", None) or ""
        shown = ""
        if param.required:
            help_text = (help_text + " (required)").strip()
    return f"| {names} | {_cell(help_text)} | {_cell(shown)} |"


def section(words: tuple[str, ...], command: Command) -> str:
    """One command's section: heading, usage, help, and its parameters (hidden ones left out)."""
    ctx = typer.Context(command, info_name=" ".join(words))
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines = [f"## `{' '.join(words)}`", "", "```text", f"{' '.join(words)} {usage}".rstrip(), "```", ""]
    help_text = inspect.cleandoc(command.help or "")
    if help_text:
        lines += [help_text.replace("\b\n", ""), ""]
    params = [p for p in command.params if not getattr(p, "hidden", False) and p.name != "help"]
    if params:
        lines += ["| argument or option | meaning | default |", "|---|---|---|"]
        lines += [_param_row(p) for p in params]
        lines.append("")
    if hasattr(command, "list_commands"):
        subs = [w for w, _ in commands(command, words) if len(w) == len(words) + 1]
        if subs:
            lines += ["Commands: " + ", ".join(f"`{' '.join(w)}`" for w in subs) + ".", ""]
    return "\n".join(lines)


def markdown() -> str:
    """The whole reference: every command of `autotune`, in `--help` order."""
    return "\n".join(section(words, command) for words, command in commands())
