"""A kind's problems in a file, read the same way by `autotune workload` (a workload CSV, `workload_files`) and
`autotune validate --points` (a CSV or a YAML list, `autotune.dispatch.validate_points`).

CSV: a header naming `precision` (optional for a kind of one precision), `shape` (kinds with variants,
optional: the first variant), the kind's sizes (those it derives optional: GEMM's batch) and `weight` (optional,
default 1), in any order; then one problem per row. Blank lines and lines whose first cell starts with `#` are
skipped, cells are stripped, a blank optional cell means its default. UTF-8 with or without a BOM, LF or CRLF,
quoted cells. YAML: a list of mappings with the same keys.

Every size is a whole number from 1 to 2^31 - 1 and every point passes its kind's `check_limits`; every mistake
is one `UserError` (or the caller's subclass) naming the file, the first bad line and what to do. A file of more
lines (CSV) or entries (YAML) than the problem limit (`workload_limits.max_problems`) is refused before it is
parsed. The checks run per column over the whole file (C-level string work), so a million rows take seconds.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import yaml

from autotune.errors import UserError
from autotune.problems.base import INT32_MAX, ProblemKind
from autotune.sweep.limits import point_limit_error
from autotune.sweep.workloads.workload import SizeRule
from autotune.sweep.workloads.workload_limits import csv_rows, max_problems, problems_error
from autotune.vocab import TestPoint
from autotune.yamlfile import compose, read_text

DIGITS = re.compile(r"[0-9]+(?:\n[0-9]+)*")  # a column of whole numbers, joined by newlines
Error = type[UserError]


@dataclass(frozen=True)
class Columns:
    """The columns (or YAML keys) of a kind's problems file."""

    kind: ProblemKind
    allowed: tuple[str, ...]
    required: tuple[str, ...]

    @classmethod
    def of(cls, kind: ProblemKind) -> Columns:
        shaped = ("shape",) if kind.shapes != ("",) else ()
        given = tuple(n for n in kind.size_names if n not in kind.derived_sizes)
        return cls(
            kind,
            ("precision", *shaped, *kind.size_names, "weight"),
            ("precision",) * (len(kind.precisions) > 1) + given,
        )

    @property
    def header_hint(self) -> str:
        optional = ", ".join(c for c in self.allowed if c not in self.required)
        return f"write the header {','.join(self.allowed)} ({optional} optional)"


@dataclass(frozen=True)
class Rows:
    """Raw rows of a problems file: its column names, each row's line and its cells (stripped strings; "" for
    a blank cell or a key the YAML entry leaves out)."""

    file: Path
    header: tuple[str, ...]
    lines: list[int]
    cells: dict[str, list[str]]  # column -> one cell per row
    head_line: int = 1  # the header's line


def read_problems(
    path: str | Path, kind: ProblemKind, rule: SizeRule, *, limit: int | None = None, error: Error = UserError
) -> list[tuple[TestPoint, float]]:
    """The distinct problems of a CSV file (or, for .yaml/.yml, a YAML list), in file order, each with the sum of
    its rows' weights; derived sizes a row leaves out follow `rule`. `limit` (default: `max_problems()`) caps
    the rows, checked before the file is parsed."""
    p = Path(path)
    cols = Columns.of(kind)
    if not p.is_file():
        raise error(f"no problems file {p}", file=p, hint=f"give a CSV file ({cols.header_hint}) or a YAML list")
    cap = max_problems(limit)
    if p.suffix.lower() in (".yaml", ".yml"):
        rows = _yaml_rows(p, cols, cap, error)
    else:
        if (count := csv_rows(p)) > cap:
            raise _as(error, problems_error(count, cap, p, cap + 2, "the lines of the CSV give up to"))
        rows = _csv_rows(p, read_text(p, error), cols, error)
    if not rows.lines:
        raise error(
            "the file lists no problems",
            file=p,
            line=rows.head_line,
            hint="add problems: one row each under the header (or one `- {...}` entry each in YAML)",
        )
    return _points(rows, cols, rule, error)


def _as(error: Error, exc: UserError) -> UserError:
    return exc if isinstance(exc, error) else error(exc.message, file=exc.file, line=exc.line, hint=exc.hint)


# ------------------------------------------------------------------------------------------------ raw rows
def _csv_rows(p: Path, text: str, cols: Columns, error: Error) -> Rows:
    header, head_line, lines, cells = _plain_records(text) or _quoted_records(p, text, error)
    if header is None:
        raise error("the file has no header line", file=p, line=1, hint=cols.header_hint)
    unknown = [h for h in header if h not in cols.allowed]
    missing = [c for c in cols.required if c not in header]
    twice = sorted({h for h in header if header.count(h) > 1})
    if unknown or missing or twice:
        what = (
            [f"unknown columns {', '.join(unknown)}"] * bool(unknown)
            + [f"missing {', '.join(missing)}"] * bool(missing)
            + [f"a column appears twice ({', '.join(twice)})"] * bool(twice)
        )
        raise error(
            f"CSV header {_show(','.join(header), 200)}: {_show('; '.join(what), 200)}",
            file=p,
            line=head_line,
            hint=cols.header_hint,
        )
    width = len(header)
    if isinstance(cells, list):  # rows as lists of cells (quoted CSV)
        if (i := next((i for i, r in enumerate(cells) if len(r) != width), -1)) >= 0:
            raise _width(p, header, len(cells[i]), lines[i], error)
        columns = [list(c) for c in zip(*cells, strict=True)] if cells else [[] for _ in header]
    else:  # rows as lines of text with no quotes: cells are what lies between commas
        counts = [t.count(",") for t in cells.rows]
        if (i := next((i for i, c in enumerate(counts) if c != width - 1), -1)) >= 0:
            raise _width(p, header, counts[i] + 1, lines[i], error)
        flat = ",".join(cells.rows).split(",") if cells.rows else []
        columns = [flat[j::width] for j in range(width)]
    return Rows(
        p, tuple(header), lines, {h: list(map(str.strip, c)) for h, c in zip(header, columns, strict=True)}, head_line
    )


def _width(p: Path, header: list[str], count: int, line: int, error: Error) -> UserError:
    return error(
        f"{count} cells, the header has {len(header)}",
        file=p,
        line=line,
        hint=f"write {','.join(header)} (a blank cell is an optional value left out)",
    )


@dataclass(frozen=True)
class _Lines:
    rows: list[str]  # the lines of the data rows, as written


Records = tuple[list[str] | None, int, list[int], "list[list[str]] | _Lines"]


def _plain_records(text: str) -> Records | None:
    """(header, its line, each data row's line, the rows' lines) of a CSV text without quotes or bare CRs, where
    each line is one row; None for any other text (csv.reader reads it). Blank and comment lines are left out."""
    if '"' in text or text.count("\r") != text.count("\r\n"):
        return None
    raw = text.replace("\r\n", "\n").split("\n")
    lines = [n for n, t in enumerate(raw, 1) if _record(t)]
    if not lines:
        return None, 1, [], []
    header = [h.strip() for h in raw[lines[0] - 1].split(",")]
    return header, lines[0], lines[1:], _Lines([raw[n - 1] for n in lines[1:]])


def _record(line: str) -> bool:
    """Whether a line holds a row: not blank (commas and spaces only) and not a comment (`#` first)."""
    t = line.lstrip()
    return bool(t) and t[0] != "#" and (t[0] != "," or bool(t.replace(",", "").strip()))


def _quoted_records(p: Path, text: str, error: Error) -> Records:
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    head_line = 1
    rows: list[list[str]] = []
    lines: list[int] = []
    try:
        for row in reader:
            if not row or (row[0].lstrip()[:1] == "#") or not "".join(row).strip():
                continue  # blank lines and comments
            if header is None:
                header, head_line = [h.strip() for h in row], reader.line_num
                continue
            rows.append(row)
            lines.append(reader.line_num)
    except csv.Error as exc:
        raise error(
            f"not a CSV row: {exc}", file=p, line=reader.line_num, hint="fix the quoting of that line"
        ) from None
    return header, head_line, lines, rows


def _yaml_rows(p: Path, cols: Columns, cap: int, error: Error) -> Rows:
    root = compose(read_text(p, error), p, error)
    example = "{" + ", ".join(f"{c}: ..." for c in cols.required) + "}"
    if not isinstance(root, yaml.SequenceNode):
        raise error("a YAML problems file is a list of problems", file=p, line=1, hint=f"write `- {example}` lines")
    if len(root.value) > cap:
        raise _as(error, problems_error(len(root.value), cap, p, root.value[cap].start_mark.line + 1, "the list holds"))
    constructor = yaml.constructor.SafeConstructor()
    lines: list[int] = []
    cells: dict[str, list[str]] = {c: [] for c in cols.allowed}
    for node in root.value:
        line = node.start_mark.line + 1
        if not isinstance(node, yaml.MappingNode):
            raise error("a problem is a mapping", file=p, line=line, hint=f"write {example}")
        row: dict[str, str] = {}
        for key_node, value_node in node.value:
            key, line = _scalar(key_node), key_node.start_mark.line + 1
            if key not in cols.allowed:
                raise error(f"unknown key {key!r}", file=p, line=line, hint=f"keys: {', '.join(cols.allowed)}")
            if key in row:
                raise error(f"{key!r} appears twice", file=p, line=line, hint="keep one of them")
            if not isinstance(value_node, yaml.ScalarNode):
                raise error(f"{key} must be a number or a word", file=p, line=line, hint=f"write {example}")
            try:
                value = constructor.construct_object(value_node)
            except yaml.YAMLError as exc:
                raise error(
                    f"cannot read {key}: {getattr(exc, 'problem', None) or exc}",
                    file=p,
                    line=line,
                    hint="write a number or a word",
                ) from None
            row[key] = "" if value is None else str(value).strip()
        lines.append(node.start_mark.line + 1)
        for c in cols.allowed:
            cells[c].append(row.get(c, ""))
    return Rows(p, cols.allowed, lines, cells)


def _scalar(node: yaml.Node) -> str:
    """A key as written (a scalar's text; any other node is shown by its kind)."""
    return str(node.value) if isinstance(node, yaml.ScalarNode) else f"<{getattr(node, 'id', 'node')}>"


# ------------------------------------------------------------------------------------------------ checks
Bad = tuple[int, str, str]  # (row index, message, what to do)


def _first_blank(col: Sequence[str]) -> int | None:
    return col.index("") if "" in col else None


def _bad_choice(name: str, col: list[str], allowed: Sequence[str], default: str | None) -> Bad | None:
    """A row whose `name` is not one of `allowed` (blank: `default`, or missing when there is none)."""
    ok = set(allowed) | ({""} if default is not None else set())
    if set(col) <= ok:
        return None
    i = next(i for i, v in enumerate(col) if v not in ok)
    if col[i] == "":
        return i, f"the row misses {name}", f"give a {name}: {', '.join(allowed)}"
    return i, f"unknown {name} {_show(col[i])!r}", f"use one of {', '.join(map(repr, allowed))}"


def _sizes(name: str, col: list[str], required: bool) -> tuple[list[int | None], Bad | None]:
    """The column as integers (None for a blank optional cell), or the first row that is not 1..2^31-1."""
    blank = _first_blank(col)
    if blank is not None and required:
        return [], (blank, f"the row misses {name}", "fill every size cell")
    filled = [v for v in col if v] if blank is not None else col
    joined = "\n".join(filled)
    if filled and not (DIGITS.fullmatch(joined) and joined.count("\n") == len(filled) - 1):
        i = next(i for i, v in enumerate(col) if v and not re.fullmatch(r"[0-9]+", v))
        return [], (i, f"size {name} = {_show(col[i])!r} is not an integer >= 1", "write whole numbers >= 1")
    as_int = int if max(map(len, filled), default=0) < 19 else _int  # long digit strings: no int() of 10^6 digits
    values: list[int | None]
    if blank is not None:
        values = [as_int(v) if v else None for v in col]
        numbers = [v for v in values if v is not None]
    else:
        numbers = list(map(as_int, col))
        values = list(numbers)
    if numbers and (min(numbers) < 1 or max(numbers) > INT32_MAX):
        i = next(i for i, v in enumerate(values) if v is not None and not 1 <= v <= INT32_MAX)
        if not values[i]:
            return [], (i, f"size {name} = {col[i]!r} is not an integer >= 1", "write whole numbers >= 1")
        shown = f"{values[i]:,}" if len(col[i]) < 19 else _show(col[i])
        return [], (
            i,
            f"size {name} = {shown} is above 2^31 - 1, the largest size a kernel takes (int)",
            "use sizes below 2,147,483,648",
        )
    return values, None


def _int(digits: str) -> int:
    """A whole number's value, any above 2^63 read as 2^63 (above every limit)."""
    s = digits.lstrip("0")
    return int(s) if len(s) < 19 else 2**63 if s else 0


def _show(value: str, width: int = 40) -> str:
    return value if len(value) <= width else value[:width] + "..."


def _weights(col: list[str]) -> tuple[list[float], Bad | None]:
    out: list[float] = []
    for i, v in enumerate(col):
        try:
            w = float(v) if v else 1.0
        except ValueError:
            return [], (i, f"weight {_show(v)!r} is not a number", "write e.g. 1 or 2.5")
        if not (math.isfinite(w) and w > 0):
            return [], (i, f"weight {_show(v)} is not above 0", "give a positive weight (or drop the row)")
        out.append(w)
    return out, None


def _points(rows: Rows, cols: Columns, rule: SizeRule, error: Error) -> list[tuple[TestPoint, float]]:
    kind, n = cols.kind, len(rows.lines)
    cells = rows.cells
    bad: list[Bad] = []
    precs = cells.get("precision", [""] * n)
    shapes = cells.get("shape", [""] * n)
    for name, col, allowed, default in (
        ("precision", precs, kind.precisions, kind.precisions[0] if "precision" not in cols.required else None),
        ("shape", shapes, kind.shapes, kind.shapes[0]),
    ):
        if (b := _bad_choice(name, col, allowed, default)) is not None:
            bad.append(b)
    sizes: dict[str, list[int | None]] = {}
    for name in kind.size_names:
        sizes[name], b = _sizes(name, cells.get(name, [""] * n), name in cols.required)
        bad += [b] if b else []
    weights, b = _weights(cells["weight"]) if "weight" in cells else ([1.0] * n, None)
    bad += [b] if b else []
    if bad:
        i, msg, hint = min(bad, key=lambda b: b[0])
        raise error(msg, file=rows.file, line=rows.lines[i], hint=hint)
    # distinct rows first (logs repeat problems), then points (a derived size given or derived may coincide)
    first_prec, first_shape = kind.precisions[0], kind.shapes[0]
    distinct: dict[tuple, list] = {}
    for i, key in enumerate(zip(precs, shapes, *sizes.values(), strict=True)):
        if (seen := distinct.get(key)) is None:
            distinct[key] = [i, weights[i]]
        else:
            seen[1] += weights[i]
    names = kind.size_names
    out: dict[TestPoint, list] = {}  # point -> [first row, weight]
    for key, (i, weight) in distinct.items():
        prec, shape = key[0] or first_prec, key[1] or first_shape
        try:
            if None in key:  # a derived size left out: the rule fills it, the kind checks the result
                point = kind.point(
                    prec,
                    shape,
                    rule.fill(kind, prec, shape, {n: v for n, v in zip(names, key[2:], strict=True) if v is not None}),
                )
            else:  # names, precision, shape and sizes checked above: no need for kind.point's checks
                point = TestPoint(kind.name, prec, shape, tuple(zip(names, key[2:], strict=True)))
        except ValueError as exc:
            raise error(str(exc), file=rows.file, line=rows.lines[i], hint="fix the sizes") from None
        if (seen := out.get(point)) is None:
            out[point] = [i, weight]
        else:
            seen[1] += weight
    for point, (i, _) in out.items():
        if (limit := point_limit_error(point, kind)) is not None:
            raise error(limit[1], file=rows.file, line=rows.lines[i], hint=limit[2])
    return [(point, weight) for point, (_, weight) in out.items()]
