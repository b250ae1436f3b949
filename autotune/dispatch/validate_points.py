"""The held-out problems of `autotune validate`, for any problem kind.

- `read_points`: a CSV file (header: precision, shape where the kind has variants, the kind's sizes) or a YAML
  list of mappings with those keys; sizes the kind derives (`ProblemKind.derived_sizes`, GEMM: batch) may be
  left out;
- `random_points`: sizes drawn uniformly (integers) within a workload's bounds, or within the table's tuned
  points' range per (precision, shape), tuned points excluded;
- the derived sizes a problem leaves out follow a `DerivedRule` (`derived_rule`: a byte budget given by
  `--batch-bytes`, else the one the tuned points were made with, `kind.infer_budget`, else one value per
  derived size shared by every tuned point, else 500MB).
"""
from __future__ import annotations

import csv
import io
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Protocol

import yaml

from autotune.dispatch.validate_table import ValidatedTable
from autotune.errors import UserError
from autotune.problems.base import ProblemKind
from autotune.sweep.workload import DEFAULT_BUDGET_BYTES, SizeRule
from autotune.vocab import TestPoint

MAX_DRAWS = 1000  # redraws per wanted problem before --random gives up (a range with too few free problems)


class WorkloadBounds(Protocol):
    """What --random reads of a workload (autotune.sweep.workload.Workload)."""

    def bounds(self, precision: str, shape: str) -> dict[str, tuple[int, int]]: ...

    def point(self, precision: str, shape: str, sizes: Mapping[str, int]) -> TestPoint: ...


@dataclass(frozen=True)
class DerivedRule:
    """How a held-out problem's derived sizes are filled (a SizeRule), and where the rule came from."""

    rule: SizeRule
    source: str = "given"  # given | inferred | default

    def point(self, kind: ProblemKind, precision: str, shape: str, sizes: Mapping[str, int]) -> TestPoint:
        return kind.point(precision, shape, self.rule.fill(kind, precision, shape, sizes))

    def describe(self, kind: ProblemKind) -> str:
        if not kind.derived_sizes:
            return "every size given"
        fixed = ", ".join(f"{n} {v:,}" for n, v in self.rule.fixed)
        return f"{fixed or f'{self.rule.budget_bytes:,} bytes per problem'} ({self.source})"

    def provenance(self) -> dict[str, Any]:
        return {"fixed": dict(self.rule.fixed), "budget_bytes": self.rule.budget_bytes, "source": self.source}


def parse_budget(text: str) -> int:
    """`--batch-bytes 500MB` (any size a sweep config's `{bytes: ...}` takes). Raises UserError."""
    from autotune.sweep.config import Reader, parse_bytes
    return parse_bytes(Reader(Path("--batch-bytes")), yaml.compose(yaml.safe_dump(text)))


def derived_rule(table: ValidatedTable, kind: ProblemKind, given: str | None) -> DerivedRule:
    """--batch-bytes when given, else the tuned points' byte budget, else their shared derived sizes, else
    500MB."""
    if given is not None:
        return DerivedRule(SizeRule(budget_bytes=parse_budget(given)), "given")
    tuned = table.tuned(kind)
    if kind.derived_sizes and tuned:
        budget = kind.infer_budget(tuned)
        if budget is not None:
            return DerivedRule(SizeRule(budget_bytes=budget), "inferred")
        shared = {n: {p.dims[n] for p in tuned} for n in kind.derived_sizes}
        if all(len(v) == 1 for v in shared.values()):
            return DerivedRule(SizeRule(tuple((n, v.pop()) for n, v in shared.items())), "inferred")
    return DerivedRule(SizeRule(budget_bytes=DEFAULT_BUDGET_BYTES), "default")


def groups(table: ValidatedTable, kind: ProblemKind) -> list[tuple[str, str]]:
    """The table's (precision, shape) groups, in the kind's precision and shape order."""
    seen = {(p["precision"], p["shape"]) for p in table.points}
    seen |= {(k["precision"], k["shape"]) for k in table.kernels if "precision" in k and "shape" in k}
    return sorted(seen, key=lambda g: (kind.precisions.index(g[0]) if g[0] in kind.precisions else 99,
                                      kind.shapes.index(g[1]) if g[1] in kind.shapes else 99, g))


def tuned_keys(table: ValidatedTable, kind: ProblemKind) -> set[tuple]:
    """(precision, shape, table sizes...) of every tuned point."""
    return {(p["precision"], p["shape"], *(int(p["sizes"][n]) for n in kind.table_sizes())) for p in table.points}


def _drawn(kind: ProblemKind) -> tuple[str, ...]:
    """The sizes a held-out problem must give (the derived ones follow the rule)."""
    return tuple(n for n in kind.size_names if n not in kind.derived_sizes)


# ------------------------------------------------------------------------------------------------ points files
def _columns(kind: ProblemKind) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(required, optional) columns of a points file: precision (optional for a kind of one precision), shape
    (for a kind with variants), the sizes (those the kind derives optional)."""
    one = len(kind.precisions) == 1
    head = ("precision",) * (not one) + (("shape",) if kind.shapes != ("",) else ())
    return head + _drawn(kind), ("precision",) * one + kind.derived_sizes


def _point(file: str, line: int, row: Mapping[str, Any], kind: ProblemKind, rule: DerivedRule) -> TestPoint:
    """One problem of a --points file; any mistake is a UserError at file:line."""
    required, optional = _columns(kind)
    missing = [f for f in required if row.get(f) in (None, "")]
    if missing:
        raise UserError(f"missing {', '.join(missing)}", file=file, line=line,
                        hint=f"each problem needs {', '.join(required)}"
                             + (f" ({', '.join(optional)} optional)" if optional else ""))
    precision = str(row.get("precision") or kind.precisions[0]).strip()
    shape = str(row.get("shape") or "").strip()
    if precision not in kind.precisions:
        raise UserError(f"unknown precision {precision!r}", file=file, line=line,
                        hint=f"use one of {', '.join(kind.precisions)}")
    if shape not in kind.shapes:
        raise UserError(f"unknown shape {shape!r}", file=file, line=line, hint=f"use one of {', '.join(kind.shapes)}")
    sizes = {}
    for name in kind.size_names:
        value = row.get(name)
        if value in (None, ""):
            continue
        try:
            number = int(str(value).strip())
        except ValueError:
            raise UserError(f"{name} must be an integer, got {value!r}", file=file, line=line,
                            hint="write whole numbers >= 1") from None
        if number < 1:
            raise UserError(f"{name} must be >= 1, got {number}", file=file, line=line, hint="write whole numbers >= 1")
        sizes[name] = number
    try:
        return rule.point(kind, precision, shape, sizes)
    except ValueError as exc:
        raise UserError(str(exc), file=file, line=line, hint="fix the sizes") from None


def read_points(path: str | Path, kind: ProblemKind, rule: DerivedRule) -> list[TestPoint]:
    """Held-out problems from a CSV file (header: `_columns(kind)`) or a YAML list of mappings with those keys.
    Duplicates are kept once, in file order. Errors name the file and line."""
    path = Path(path)
    required, optional = _columns(kind)
    header_text = ",".join(required) + "".join(f"[,{o}]" for o in optional)
    if not path.is_file():
        raise UserError(f"no points file {path}", hint=f"give a CSV ({header_text}) or a YAML list")
    text = path.read_text()
    out: list[TestPoint] = []
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise UserError(f"not valid YAML: {getattr(exc, 'problem', exc)}", file=str(path),
                            line=mark.line + 1 if mark else None, hint="fix the YAML syntax") from None
        example = "{" + ", ".join(f"{c}: ..." for c in required) + "}"
        if root is None or not isinstance(root, yaml.SequenceNode):
            raise UserError("a YAML points file is a list of problems", file=str(path), line=1,
                            hint=f"write `- {example}` lines")
        constructor = yaml.constructor.SafeConstructor()
        for node in root.value:
            line = node.start_mark.line + 1
            value = constructor.construct_object(node, deep=True)
            if not isinstance(value, dict):
                raise UserError(f"a problem is a mapping, got {value!r}", file=str(path), line=line,
                                hint=f"write {example}")
            unknown = sorted(set(map(str, value)) - set(required) - set(optional))
            if unknown:
                raise UserError(f"unknown key {unknown[0]!r}", file=str(path), line=line,
                                hint=f"keys: {', '.join(required + optional)}")
            out.append(_point(str(path), line, value, kind, rule))
    else:
        lines = text.splitlines()
        reader = csv.reader(io.StringIO(text))
        header = next(reader, None)
        if header is None:
            raise UserError("the points file is empty", file=str(path), line=1, hint=f"first line: {header_text}")
        header = [h.strip() for h in header]
        unknown = [h for h in header if h not in required + optional]
        if unknown or not set(required) <= set(header):
            raise UserError(f"header must name {header_text}, got {','.join(header)}", file=str(path), line=1,
                            hint=f"first line: {header_text}")
        for row in reader:
            line = reader.line_num
            if not row or not "".join(row).strip() or lines[line - 1].lstrip().startswith("#"):
                continue
            if len(row) != len(header):
                raise UserError(f"{len(row)} fields where the header has {len(header)}", file=str(path), line=line,
                                hint=f"write {','.join(header)}")
            out.append(_point(str(path), line, dict(zip(header, row)), kind, rule))
    if not out:
        raise UserError("no problems in the points file", file=str(path), hint="list at least one problem")
    return list(dict.fromkeys(out))


# ------------------------------------------------------------------------------------------------ random draws
def table_bounds(table: ValidatedTable, kind: ProblemKind, precision: str, shape: str) -> dict[str, tuple[int, int]]:
    """min..max of each size a problem gives, over the table's tuned points of one group (the fallback without a
    workload)."""
    pts = [p["sizes"] for p in table.points if (p["precision"], p["shape"]) == (precision, shape)]
    if not pts:
        return {}
    return {d: (min(int(p[d]) for p in pts), max(int(p[d]) for p in pts)) for d in _drawn(kind)}


def random_points(table: ValidatedTable, kind: ProblemKind, count: int, seed: int, rule: DerivedRule,
                  workload: WorkloadBounds | None = None, rule_given: bool = False) -> list[TestPoint]:
    """`count` problems split evenly over the table's groups (the first groups take the remainder), each size drawn
    uniformly and independently (integers, in the kind's size order) within the workload's bounds, or without a
    workload within the tuned points' min..max; tuned points and repeats are drawn again. The derived sizes are
    the workload's (`workload.point`) unless a rule was given, else the rule's."""
    if count < 1:
        raise UserError(f"--random must be at least 1, got {count}")
    gs = groups(table, kind)
    if not gs:
        raise UserError("the table has no (precision, shape) groups to draw problems for")
    rng = random.Random(seed)
    tuned = tuned_keys(table, kind)
    out: list[TestPoint] = []
    for i, (precision, shape) in enumerate(gs):
        want = count // len(gs) + (1 if i < count % len(gs) else 0)
        if want == 0:
            continue
        bounds = table_bounds(table, kind, precision, shape)
        if workload is not None:
            bounds.update(workload.bounds(precision, shape))
        names = [n for n in _drawn(kind) if n in bounds]
        if len(names) < len(_drawn(kind)):
            raise UserError(f"no ranges to draw {precision} {shape} problems from",
                            hint="pass --workload FILE (its bounds), or use --points FILE")
        seen: set[TestPoint] = set()
        draws = 0
        while len(seen) < want:
            draws += 1
            if draws > MAX_DRAWS * want:
                raise UserError(f"cannot draw {want} {precision} {shape} problems that are not tuned points within "
                                + ", ".join(f"{d} {bounds[d][0]}..{bounds[d][1]}" for d in names),
                                hint="ask for fewer (--random N) or give wider ranges (--workload)")
            sizes = {s: rng.randint(int(bounds[s][0]), int(bounds[s][1])) for s in names}
            if (precision, shape, *(sizes[n] for n in kind.table_sizes())) in tuned:
                continue
            if workload is not None and not rule_given:
                point = workload.point(precision, shape, sizes)
            else:
                point = rule.point(kind, precision, shape, sizes)
            if point in seen:
                continue
            seen.add(point)
            out.append(point)
    return out
