"""YAML loading that remembers line numbers, so every error can name the file and the line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from autotune.errors import UserError


class LineDict(dict):
    """A mapping that knows the line (1-based) of itself and of each of its values."""

    line: int = 0
    lines: dict[Any, int]


class LineList(list):
    line: int = 0
    lines: list[int]


class _Loader(yaml.SafeLoader):
    pass


def _mapping(loader: _Loader, node: yaml.MappingNode) -> LineDict:
    out = LineDict()
    out.line = node.start_mark.line + 1
    out.lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in out:
            raise UserError(
                f"duplicate key {key!r}",
                line=key_node.start_mark.line + 1,
                hint="each key may appear once in a mapping",
            )
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = value_node.start_mark.line + 1
    return out


def _sequence(loader: _Loader, node: yaml.SequenceNode) -> LineList:
    out = LineList(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.lines = [child.start_mark.line + 1 for child in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence)


def load_yaml(path: Path, error: type[UserError] = UserError) -> LineDict:
    """Parse a YAML file whose top level is a mapping; errors carry the file and line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise error(f"cannot read file: {exc.strerror}", file=path, hint="check the path") from None
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - safe loader subclass
    except UserError as exc:
        raise error(exc.message, file=path, line=exc.line, hint=exc.hint) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        context, cmark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if context and cmark is not None:
            problem += f" ({context} started at line {cmark.line + 1})"
        raise error(
            f"invalid YAML: {problem}",
            file=path,
            line=mark.line + 1 if mark else None,
            hint="fix the indentation or quoting at that line",
        ) from None
    if not isinstance(data, LineDict):  # the loader makes every mapping a LineDict
        raise error(
            "the file must be a YAML mapping (key: value lines)",
            file=path,
            line=1,
            hint="see the format in docs/space-files.md and docs/sweep-configs.md",
        )
    return data


def line_of(container: Any, key: Any) -> int | None:
    """The line of `container[key]` if known."""
    lines = getattr(container, "lines", None)
    if lines is None:
        return getattr(container, "line", None)
    try:
        return lines[key]
    except (KeyError, IndexError, TypeError):
        return getattr(container, "line", None)
