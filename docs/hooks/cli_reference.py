"""MkDocs hook: the page cli.md gets the command-line reference generated from the Typer app
(`autotune.cli.reference.markdown`) in place of its marker, so the reference never drifts from the program."""

from __future__ import annotations

from typing import Any

MARKER = "<!-- cli-reference -->"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if MARKER not in markdown:
        return markdown
    from autotune.cli.reference import markdown as cli_markdown

    return markdown.replace(MARKER, cli_markdown())
