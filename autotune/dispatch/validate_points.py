"""The held-out problems of `autotune validate`, for any problem kind.

- `read_points`: a CSV file (the header of a workload CSV: precision, shape where the kind has variants, the
  kind's sizes, weight) or a YAML list of mappings with those keys, read by `autotune.sweep.workloads.problem_rows`; sizes
  the kind derives (`ProblemKind.derived_sizes`, GEMM: batch) may be left out;
- `random_points`: sizes drawn uniformly (integers) within a workload's bounds, or within the table's tuned
  points' range per (precision, shape), tuned points excluded;
- the derived sizes a problem leaves out follow a `DerivedRule` (`derived_rule`: a byte budget given by
  `--batch-bytes`, else the one the tuned points were made with, `kind.infer_budget`, else one value per
  derived size shared by every tuned point, else 500MB).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Protocol


from autotune.dispatch.validate_table import ValidatedTable
from autotune.errors import UserError
from autotune.problems.base import ProblemKind
from autotune.sweep.workloads.problem_rows import read_problems
from autotune.sweep.workloads.workload import DEFAULT_BUDGET_BYTES, SizeRule
from autotune.vocab import TestPoint

MAX_DRAWS = 1000  # redraws per wanted problem before --random gives up (a range with too few free problems)


class WorkloadBounds(Protocol):
    """What --random reads of a workload (autotune.sweep.workloads.workload.Workload)."""

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
    """`--batch-bytes 500MB` (any size a sweep config's `{bytes: ...}` takes: `autotune.sweep.limits.parse_bytes`).
    Raises UserError."""
    from autotune.sweep.limits import parse_bytes

    return parse_bytes(text, "--batch-bytes")


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
    return sorted(
        seen,
        key=lambda g: (
            kind.precisions.index(g[0]) if g[0] in kind.precisions else 99,
            kind.shapes.index(g[1]) if g[1] in kind.shapes else 99,
            g,
        ),
    )


def tuned_keys(table: ValidatedTable, kind: ProblemKind) -> set[tuple]:
    """(precision, shape, table sizes...) of every tuned point."""
    return {(p["precision"], p["shape"], *(int(p["sizes"][n]) for n in kind.table_sizes())) for p in table.points}


def _drawn(kind: ProblemKind) -> tuple[str, ...]:
    """The sizes a held-out problem must give (the derived ones follow the rule)."""
    return tuple(n for n in kind.size_names if n not in kind.derived_sizes)


# ------------------------------------------------------------------------------------------------ points files
def read_points(path: str | Path, kind: ProblemKind, rule: DerivedRule, limit: int | None = None) -> list[TestPoint]:
    """Held-out problems from a CSV file or a YAML list (`autotune.sweep.workloads.problem_rows`: the header of a workload
    CSV, a `weight` column allowed and ignored). Duplicates are kept once, in file order. More rows than `limit`
    (default: AUTOTUNE_MAX_PROBLEMS, else 200,000) are refused before the file is parsed; every mistake is a
    UserError naming the file and line."""
    return [point for point, _ in read_problems(path, kind, rule.rule, limit=limit)]


# ------------------------------------------------------------------------------------------------ random draws
def table_bounds(table: ValidatedTable, kind: ProblemKind, precision: str, shape: str) -> dict[str, tuple[int, int]]:
    """min..max of each size a problem gives, over the table's tuned points of one group (the fallback without a
    workload)."""
    pts = [p["sizes"] for p in table.points if (p["precision"], p["shape"]) == (precision, shape)]
    if not pts:
        return {}
    return {d: (min(int(p[d]) for p in pts), max(int(p[d]) for p in pts)) for d in _drawn(kind)}


def problem_count(count: int, option: str, limit: int | None = None, limit_option: str | None = None) -> int:
    """`count` problems to draw (`option`: --random, --heldout): at least 1 and at most `limit` (default:
    AUTOTUNE_MAX_PROBLEMS, else 200,000), the limit of a --points file. Raises UserError, whose hint names
    `limit_option` (the command's option that gives `limit`, if it has one) and the environment variable."""
    from autotune.sweep.workloads.workload_limits import PROBLEMS_ENV, max_problems

    if count < 1:
        raise UserError(f"{option} must be at least 1, got {count}")
    cap = max_problems(limit)
    if count > cap:
        raise UserError(
            f"{option} {count:,}: more held-out problems than the limit of {cap:,}",
            hint="ask for fewer, or raise the limit: "
            + (f"{limit_option} {count} or " if limit_option else "")
            + f"{PROBLEMS_ENV}={count}",
        )
    return count


def random_points(
    table: ValidatedTable,
    kind: ProblemKind,
    count: int,
    seed: int,
    rule: DerivedRule,
    workload: WorkloadBounds | None = None,
    rule_given: bool = False,
) -> list[TestPoint]:
    """`count` problems split evenly over the table's groups (the first groups take the remainder), each size drawn
    uniformly and independently (integers, in the kind's size order) within the workload's bounds, or without a
    workload within the tuned points' min..max; tuned points and repeats are drawn again. The derived sizes are
    the workload's (`workload.point`) unless a rule was given, else the rule's. Callers bound `count` first
    (`problem_count`)."""
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
            raise UserError(
                f"no ranges to draw {precision} {shape} problems from",
                hint="pass --workload FILE (its bounds), or use --points FILE",
            )
        seen: set[TestPoint] = set()
        draws = 0
        while len(seen) < want:
            draws += 1
            if draws > MAX_DRAWS * want:
                raise UserError(
                    f"cannot draw {want} {precision} {shape} problems that are not tuned points within "
                    + ", ".join(f"{d} {bounds[d][0]}..{bounds[d][1]}" for d in names),
                    hint="ask for fewer (--random N) or give wider ranges (--workload)",
                )
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
