"""Reading workload files (`load_workload`): YAML or CSV, any problem kind, every mistake a ConfigError naming
the file, the line and what to do.

YAML: `kind:` (a built-in kind) or `space:` (the space file whose `problem:` defines the kind; default: the
first built-in kind), `problems:` and/or `ranges:`, and, for each size the kind may derive (GEMM: `batch:`), a
default: an integer, or `{bytes: SIZE}` (the kind's `derive_sizes` from that byte budget; default 500MB).
A problem lists `precision`, `shape` (kinds with variants), its sizes (derived ones optional, as above) and
`weight`; a range lists `precisions`, `shapes`, `sizes: {NAME: S, ...}` (every combination), the derived
sizes' rule and `weight`.

CSV: the header `precision,shape,<size names>,weight` (shape, derived sizes and weight optional; `space`
names the space file of a kind that is not built in), read by `autotune.sweep.workloads.problem_rows` (the reader of
`validate --points` too): UTF-8 with or without a BOM, sizes 1..2^31-1, rows counted before they are read.
"""

from __future__ import annotations

import functools
import itertools
import math
from pathlib import Path
from typing import Callable, Sequence

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from autotune.errors import ConfigError
from autotune.problems.base import ProblemKind
from autotune.problems.registry import BUILT_IN, default_kind  # a workload that names no kind: a space file's
from autotune.sweep.config import space_path
from autotune.sweep.config_reader import Reader, size_list, size_rule
from autotune.sweep.limits import point_limit_error
from autotune.sweep.workloads.workload import DEFAULT_BUDGET_BYTES, Group, SizeRule, Workload
from autotune.sweep.workloads.problem_rows import Columns, read_problems
from autotune.sweep.workloads.workload_limits import max_problems, problems_error, range_count
from autotune.vocab import TestPoint
from autotune.yamlfile import compose, read_text

TOP_KEYS = ("kind", "space", "problems", "ranges")  # and the kind's derived sizes
RANGE_KEYS = ("precisions", "shapes", "sizes", "weight")  # and the kind's derived sizes
Fail = Callable[[str, str], ConfigError]


def load_workload(path: str | Path, *, space: str | Path | None = None, limit: int | None = None) -> Workload:
    """Read a workload file (YAML, or CSV: `space` names the space file of a kind that is not built in).
    A workload of more than `limit` problems (default: `workload_limits.max_problems()`) is refused before
    its problems are built: ranges are counted from their bounds, a CSV by its lines."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(
            f"no workload file {p}",
            file=p,
            hint="give the path of a workload YAML or CSV file (examples: configs/workloads/)",
        )
    cap = max_problems(limit)
    if p.suffix.lower() == ".csv":
        return _load_csv(p, space, cap)
    return _load_yaml(p, cap)


class _Collect:
    """Problems as they are read: duplicates add their weights; each point checked against kernel limits."""

    def __init__(self, kind: ProblemKind, rule: SizeRule) -> None:
        self.kind, self.rule = kind, rule
        self.weights: dict[TestPoint, float] = {}

    def add(
        self, prec: str, shape: str, sizes: dict[str, int], rule: SizeRule | None, weight: float, fail: Fail
    ) -> None:
        try:
            point = self.kind.point(prec, shape, (rule or self.rule).fill(self.kind, prec, shape, sizes))
        except ValueError as exc:
            raise fail(str(exc), "fix the sizes") from None
        bad = point_limit_error(point)
        if bad:
            raise fail(bad[1], bad[2])
        self.weights[point] = self.weights.get(point, 0.0) + weight

    def workload(self, path: Path, space: Path | None, fail: Fail) -> Workload:
        if not self.weights:
            raise fail("the workload has no problems", "list problems (`problems:`, `ranges:` or CSV rows)")
        sizes: dict[Group, list[tuple[tuple[str, int], ...]]] = {}
        for p in self.weights:
            sizes.setdefault((p.precision, p.shape), []).append(p.sizes)
        at = [(n, self.kind.size_names.index(n)) for n in self.kind.table_sizes()]
        ranges = {
            g: {n: (min(s[i][1] for s in ss), max(s[i][1] for s in ss)) for n, i in at} for g, ss in sizes.items()
        }
        return Workload(path, self.kind.name, self.kind, tuple(self.weights.items()), ranges, self.rule, space)


# ---------------------------------------------------------------------------------------------- YAML
def _load_yaml(p: Path, cap: int) -> Workload:
    r = Reader(p.resolve())
    root = compose(read_text(p, ConfigError), p, ConfigError)
    if not isinstance(root, MappingNode):
        raise ConfigError(
            "a workload is a mapping with `problems:` and/or `ranges:`",
            file=p,
            line=root.start_mark.line + 1 if root is not None else None,
            hint="start from configs/workloads/fp16_h100.yaml",
        )
    heads = {str(r.value(k)): v for k, v in root.value if isinstance(k, ScalarNode)}
    kind, space = _yaml_kind(r, heads)
    top = r.mapping(root, TOP_KEYS + kind.derived_sizes, f"{kind.name} workload")
    if "problems" not in top and "ranges" not in top:
        raise r.error(root, "a workload needs `problems:` and/or `ranges:`", "see configs/workloads/fp16_h100.yaml")
    c = _Collect(kind, size_rule(r, top, kind, SizeRule()))
    shaped = kind.shapes != ("",)
    given = tuple(n for n in kind.size_names if n not in kind.derived_sizes)  # the sizes every problem gives
    allowed = Columns.of(kind).allowed
    for node in r.sequence(top["problems"], "problems") if "problems" in top else []:
        m = r.mapping(node, allowed, "problem")
        need = [n for n in given if n not in m] + (
            [] if "precision" in m or len(kind.precisions) == 1 else ["precision"]
        )
        if need:
            optional = ", ".join(
                ["shape", "weight", *kind.derived_sizes] if shaped else ["weight", *kind.derived_sizes]
            )
            raise r.error(
                node, f"the problem misses {', '.join(need)}", f"write {{{', '.join(allowed)}}} ({optional} optional)"
            )
        prec = _choice(r, m["precision"], kind.precisions, "precision") if "precision" in m else kind.precisions[0]
        shape = _choice(r, m["shape"], kind.shapes, "shape") if "shape" in m else kind.shapes[0]
        sizes = {n: r.integer(m[n], 1) for n in given}
        rule = size_rule(r, m, kind, c.rule) if any(n in m for n in kind.derived_sizes) else None
        c.add(prec, shape, sizes, rule, _weight(r, m), functools.partial(r.error, node))
    for node in r.sequence(top["ranges"], "ranges") if "ranges" in top else []:
        m = r.mapping(node, RANGE_KEYS + kind.derived_sizes, "range")
        if "sizes" not in m or ("precisions" not in m and len(kind.precisions) > 1):
            raise r.error(
                node,
                "a range needs `precisions:` and `sizes:`",
                "write {precisions: [...], shapes: "
                f"[...], sizes: {{{', '.join(f'{n}: S' for n in given)}}}, weight: 1}}",
            )
        precs = r.choices(m["precisions"], kind.precisions, "precisions") if "precisions" in m else kind.precisions
        shapes = r.choices(m["shapes"], kind.shapes, "shapes") if "shapes" in m else kind.shapes[:1]
        sizes_node = r.mapping(m["sizes"], given, "sizes")
        if missing := [n for n in given if n not in sizes_node]:
            raise r.error(
                m["sizes"], f"the range's sizes miss {', '.join(missing)}", f"give every size: {', '.join(given)}"
            )
        count = len(precs) * len(shapes) * math.prod(_size_count(r, sizes_node[n]) for n in given)
        if len(c.weights) + count > cap:
            raise problems_error(
                len(c.weights) + count, cap, p, node.start_mark.line + 1, "with this range the workload has"
            )
        lists = [size_list(r, sizes_node[n]) for n in given]
        rule = size_rule(r, m, kind, c.rule) if any(n in m for n in kind.derived_sizes) else None
        weight = _weight(r, m)
        fail: Fail = functools.partial(r.error, node)
        for prec, shape, combo in itertools.product(precs, shapes, itertools.product(*lists)):
            c.add(prec, shape, dict(zip(given, combo, strict=True)), rule, weight, fail)
    return c.workload(p, space, lambda msg, hint: r.error(root, msg, hint))


def _yaml_kind(r: Reader, top: dict[str, Node]) -> tuple[ProblemKind, Path | None]:
    name = r.string(top["kind"]) if "kind" in top else None
    if "space" in top:
        from autotune.space.spec import load_space

        path = space_path(r, top["space"], r.string(top["space"]))
        kind = load_space(path).kind
        if name is not None and name != kind.name:
            raise r.error(
                top["kind"],
                f"the space {path.name} solves {kind.name!r}, not {name!r}",
                f"write kind: {kind.name}, or name the space that defines {name!r}",
            )
        return kind, path
    if name is None:
        return default_kind(), None
    if name in BUILT_IN:
        return BUILT_IN[name], None
    raise r.error(
        top["kind"],
        f"the kind {name!r} is not built in",
        "name the space file whose `problem:` section defines it: `space: path/to/space.yaml`",
    )


def _size_count(r: Reader, node: Node) -> int:
    """How many sizes `size_list` would list for `node`, without listing a range (its other forms are small)."""
    if isinstance(node, ScalarNode):
        return 1
    if isinstance(node, SequenceNode):
        return len(node.value)
    m = r.mapping(node, ("start", "stop", "step", "from", "to", "pow2"), "size range")
    for first, last in (("start", "stop"), ("from", "to")):
        if set(m) in ({first, last}, {first, last, "step"}):
            a, b = r.integer(m[first], 1), r.integer(m[last], 1)
            if b >= a:
                return range_count([(a, b, r.integer(m["step"], 1) if "step" in m else 1)])
    return len(size_list(r, node))  # pow2 (a few dozen at most) or a mistake size_list reports


def _choice(r: Reader, node: Node, allowed: Sequence[str], what: str) -> str:
    v = r.value(node)
    if v not in allowed:
        raise r.error(node, f"unknown {what} {v!r}", f"use one of {', '.join(map(repr, allowed))}")
    return v


def _weight(r: Reader, m: dict[str, Node]) -> float:
    w = r.number(m["weight"]) if "weight" in m else 1.0
    if w <= 0:
        raise r.error(m["weight"], f"weight {w:g} is not above 0", "give a positive weight (or leave the problem out)")
    return w


# ---------------------------------------------------------------------------------------------- CSV
def _load_csv(p: Path, space: str | Path | None, cap: int) -> Workload:
    kind, space_file = default_kind(), None
    if space is not None:
        from autotune.space.spec import find_space, load_space

        space_file = find_space(space)
        kind = load_space(space_file).kind
    c = _Collect(kind, SizeRule(budget_bytes=DEFAULT_BUDGET_BYTES))
    c.weights = dict(read_problems(p, kind, c.rule, limit=cap, error=ConfigError))
    return c.workload(p, space_file, lambda msg, hint: ConfigError(msg, file=p, line=1, hint=hint))
