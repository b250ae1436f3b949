"""YAML loading that remembers line numbers, so every error can name the file and the line.

Every YAML file autotune reads (space files, sweep configs, workloads) is read by `read_text` (a binary file, a
packed database or bytes that are not UTF-8 are one error at the line of the first bad byte) and composed with its
nesting bounded (`MAX_DEPTH`: PyYAML's composer recurses once per level, and 20,000 levels overflow Python's
stack), so a hostile file is one error with its file and line, never a traceback.
"""

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


MAX_DEPTH = 100  # nested mappings and lists of one YAML file: space files and configs use fewer than 10
UTF8_HINT = "save the file as UTF-8 (for example `iconv -f latin1 -t utf-8 FILE > NEW`)"
BINARY_HINT = (
    "give a YAML or CSV text file here (a space file, sweep config or workload); a results database goes to "
    "analyze, report, query or explore"
)
BINARY = (  # the start of files people give where a text file goes, and what they are
    (b"\xfd7zXZ\x00", "an xz-compressed file (a packed results database is one: .sqlite.xz)"),
    (b"SQLite format 3\x00", "an SQLite database (a results database)"),
    (b"\x1f\x8b", "a gzip-compressed file"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\x7fELF", "a program (ELF)"),
)


HEAD = 8192  # bytes looked at to tell a binary file


def binary_kind(head: bytes) -> str | None:
    """What a file that starts with `head` is when it is not text (a known format, else "a binary file": NUL bytes or
    more than 1% control bytes, which no text in any encoding has); None when it may be text."""
    for magic, what in BINARY:
        if head.startswith(magic):
            return what
    if b"\x00" in head:
        return "a binary file (it holds NUL bytes)"
    if sum(b < 0x20 and b not in b"\t\n\r\f\x1b" for b in head) > len(head) // 100:
        return "a binary file"
    return None


def check_text_file(path: str | Path, error: type[UserError] = UserError, *, hint: str | None = None) -> None:
    """An `error` naming the file when its first bytes say it is not text (a database, an archive, a binary file);
    for readers that parse the file themselves (pandas' CSV reader). A file that cannot be opened passes: its
    reader says why."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEAD)
    except OSError:
        return
    kind = binary_kind(head)
    if kind is not None:
        raise error(f"not a text file: this is {kind}", file=path, line=1, hint=hint or BINARY_HINT)


def read_text(path: Path, error: type[UserError] = UserError, *, hint: str | None = None) -> str:
    """The file as text: UTF-8 with or without a BOM (dropped). A file that cannot be read, a binary file (a
    database, an archive, NUL bytes) or bytes that are not UTF-8 are one `error` naming the file and the line of the
    first bad byte; `hint` says what belongs here (default: a text file, or save the file as UTF-8)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(
            f"cannot read the file: {exc.strerror}", file=path, hint="check the path and its permissions"
        ) from None
    kind = binary_kind(data[:HEAD])
    if kind is not None:
        line = data.count(b"\n", 0, max(0, data.find(b"\x00"))) + 1  # the first NUL's line (else 1)
        raise error(f"not a text file: this is {kind}", file=path, line=line, hint=hint or BINARY_HINT)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x}", file=path, line=line, hint=hint or UTF8_HINT
        ) from None
    nul = text.find("\x00")
    if nul >= 0:
        raise error(
            "not a text file: it holds NUL bytes",
            file=path,
            line=text.count("\n", 0, nul) + 1,
            hint=hint or BINARY_HINT,
        )
    return text


class DepthBounded:
    """A PyYAML composer mixin: a node nested deeper than `MAX_DEPTH` is a UserError at its line (PyYAML's composer
    recurses once per level: 20,000 levels were a RecursionError)."""

    _depth = 0

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[attr-defined]
                raise UserError(
                    f"the YAML nests deeper than {MAX_DEPTH} levels",
                    line=mark.line + 1,
                    hint="write the lists and mappings flatter (autotune's files nest a few levels)",
                )
            return super().compose_node(parent, index)  # type: ignore[misc]
        finally:
            self._depth -= 1


class _NodeLoader(DepthBounded, yaml.SafeLoader):
    pass


def compose(text: str, path: Path | str, error: type[UserError] = UserError) -> yaml.Node | None:
    """The YAML node tree of `text` (read from `path`; None when it holds no document), its nesting bounded; a
    syntax error or too deep a nesting is one `error` with the file and line."""
    try:
        return yaml.compose(text, Loader=_NodeLoader)
    except UserError as exc:
        raise error(exc.message, file=path, line=exc.line, hint=exc.hint) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise error(
            f"not valid YAML: {getattr(exc, 'problem', None) or exc}",
            file=path,
            line=mark.line + 1 if mark else None,
            hint="fix the YAML syntax (indentation, colons)",
        ) from None


class TooDeep(yaml.YAMLError):
    """YAML nested deeper than `MAX_DEPTH`."""


def safe_load(text: str) -> Any:
    """`yaml.safe_load` with the nesting bounded (`MAX_DEPTH`): for YAML text read from a database or a file that is
    not a space or config (no line numbers kept); too deep a nesting is a `yaml.YAMLError`, as a syntax error is."""
    try:
        return yaml.load(text, Loader=_NodeLoader)  # noqa: S506 - safe loader subclass
    except UserError as exc:
        raise TooDeep(f"{exc.message} (line {exc.line})") from None


class _Loader(DepthBounded, yaml.SafeLoader):
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


def load_yaml(path: Path, error: type[UserError] = UserError, hint: str | None = None) -> LineDict:
    """Parse a YAML file whose top level is a mapping; errors carry the file and line (`hint`: what a file that is
    not text should be instead)."""
    text = read_text(path, error, hint=hint)
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
    try:
        return container.lines[key]
    except (AttributeError, KeyError, IndexError, TypeError):
        return getattr(container, "line", None)
