"""Reading YAML node trees with every mistake a ConfigError at its line: what sweep configs (`autotune.sweep.config`)
and workload files (`autotune.sweep.workloads.workload_files`) share, with the size lists and size rules both take.
"""

from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from autotune.errors import ConfigError, UserError
from autotune.problems.base import ProblemKind
from autotune.sweep import limits
from autotune.sweep.workloads.workload import SizeRule


class Reader:
    """Typed access to YAML nodes; every failure becomes a ConfigError at the node's line."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self.constructor = yaml.constructor.SafeConstructor()

    def error(self, node: Node, message: str, hint: str) -> ConfigError:
        return ConfigError(message, file=self.file, line=node.start_mark.line + 1, hint=hint)

    def value(self, node: Node) -> Any:
        return self.constructor.construct_object(node, deep=True)

    def mapping(self, node: Node, allowed: Iterable[str], what: str) -> dict[str, Node]:
        if not isinstance(node, MappingNode):
            raise self.error(node, f"{what} must be a mapping", f"write `key: value` lines; keys: {', '.join(allowed)}")
        out: dict[str, Node] = {}
        for key_node, value_node in node.value:
            key = str(self.value(key_node))
            if key not in allowed:
                close = (
                    difflib.get_close_matches(key, list(allowed), n=1)
                    or [a for a in allowed if key.startswith(a) or a.startswith(key)][:1]
                )
                raise self.error(
                    key_node,
                    f"unknown key `{key}` in {what}",
                    f"did you mean `{close[0]}`?" if close else f"allowed keys: {', '.join(allowed)}",
                )
            if key in out:
                raise self.error(key_node, f"`{key}` appears twice in {what}", "keep one of them")
            out[key] = value_node
        return out

    def sequence(self, node: Node, what: str) -> list[Node]:
        if isinstance(node, SequenceNode):
            if not node.value:
                raise self.error(node, f"`{what}` is empty", f"list at least one entry under `{what}`")
            return list(node.value)
        return [node]

    def typed(self, node: Node, check: Callable[[Any], bool], what: str, hint: str) -> Any:
        v = self.value(node)
        if isinstance(node, ScalarNode) and check(v):
            return v
        raise self.error(node, f"expected {what}, got {v!r}", hint)

    def string(self, node: Node) -> str:
        return str(self.typed(node, lambda v: isinstance(v, (str, int, float)), "a string", "write a plain word"))

    def number(self, node: Node) -> float:
        return float(
            self.typed(
                node,
                lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
                "a number",
                "write a finite number such as 1.0",
            )
        )

    def integer(self, node: Node, minimum: int, maximum: int | None = None) -> int:
        want = f"from {minimum} to {maximum}" if maximum is not None else f">= {minimum}"
        return int(
            self.typed(
                node,
                lambda v: (
                    isinstance(v, int)
                    and not isinstance(v, bool)
                    and v >= minimum
                    and (maximum is None or v <= maximum)
                ),
                f"an integer {want}",
                f"write a whole number {want}",
            )
        )

    def choices(self, node: Node, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
        out = []
        for item in self.sequence(node, what):
            v = self.value(item)
            if v not in allowed:
                raise self.error(item, f"unknown {what} entry {v!r}", f"use some of {', '.join(allowed)}")
            out.append(v)
        return tuple(dict.fromkeys(out))


def size_rule(r: Reader, m: dict[str, Node], kind: ProblemKind, base: SizeRule) -> SizeRule:
    """The derived sizes' rule of a mapping (the workload, a problem, a range): per derived size, an integer or
    {bytes: SIZE}; sizes it does not name keep `base`'s rule."""
    fixed, budget = dict(base.fixed), base.budget_bytes
    for name in kind.derived_sizes:
        if name not in m:
            continue
        node = m[name]
        if isinstance(node, ScalarNode):
            fixed[name] = r.integer(node, 1)
            continue
        spec = r.mapping(node, ("bytes",), name)
        if "bytes" not in spec:
            raise r.error(node, f"{name} needs `bytes:`", f"write {name}: 1000 or {name}: {{bytes: 100MB}}")
        fixed.pop(name, None)
        budget = _bytes(r, spec["bytes"])
    return SizeRule(tuple(fixed.items()), budget)


def size_list(r: Reader, node: Node) -> list[int]:
    """S: an integer, a list, {start, stop, step} or {from, to, step} (inclusive), or {pow2: [lo, hi]}."""
    if isinstance(node, ScalarNode):
        return [r.integer(node, 1)]
    if isinstance(node, SequenceNode):
        return [r.integer(n, 1) for n in r.sequence(node, "sizes")]
    m = r.mapping(node, ("start", "stop", "step", "from", "to", "pow2"), "size range")
    if set(m) == {"pow2"}:
        bounds = r.sequence(m["pow2"], "pow2")
        if len(bounds) != 2:
            raise r.error(m["pow2"], "pow2 takes [lowest, highest]", "write pow2: [2, 128]")
        lo, hi = (r.integer(b, 1) for b in bounds)
        return [2**e for e in range(lo.bit_length() - 1, hi.bit_length()) if lo <= 2**e <= hi]
    for first, last in (("start", "stop"), ("from", "to")):
        if set(m) in ({first, last}, {first, last, "step"}):
            a, b = r.integer(m[first], 1), r.integer(m[last], 1)
            step = r.integer(m["step"], 1) if "step" in m else 1
            if b < a:
                raise r.error(node, f"empty range {a}..{b}", f"`{last}` must be >= `{first}`")
            return list(range(a, b + 1, step))
    raise r.error(
        node,
        f"cannot read a size range from keys {', '.join(m)}",
        "write {start: 8, stop: 64, step: 8}, {from: 2, to: 32, step: 2} or {pow2: [2, 128]} (inclusive)",
    )


def _bytes(r: Reader, node: Node) -> int:
    """A `bytes:` value (`limits.parse_bytes`), its mistakes located at the node."""
    try:
        return limits.parse_bytes(r.value(node), "batch bytes")
    except UserError as exc:
        raise r.error(node, exc.message, exc.hint or "") from None
