"""The `points:` section of a sweep config -> TestPoints: each group's kind, precisions, shapes, every combination of
its sizes, and the sizes the kind derives (GEMM's `batch:`). Every mistake is a ConfigError at its line."""

from __future__ import annotations

import itertools
from pathlib import Path

from yaml.nodes import Node, SequenceNode

from autotune.problems.base import ProblemKind
from autotune.sweep.config_reader import Reader, size_list, size_rule
from autotune.sweep.workloads.workload import SizeRule
from autotune.vocab import TestPoint

POINT_KEYS = ("kind", "precisions", "shapes", "sizes")


class SpaceKinds:
    """The problem kinds of the config's spaces, read from the space files when a point group needs them."""

    def __init__(self, paths: tuple[Path, ...]) -> None:
        self.paths = paths
        self._kinds: dict[str, ProblemKind] | None = None

    def all(self) -> dict[str, ProblemKind]:
        if self._kinds is None:
            from autotune.space.spec import load_space

            self._kinds = {}
            for path in self.paths:
                kind = load_space(path).kind
                self._kinds.setdefault(kind.name, kind)
        return self._kinds


def read_points(r: Reader, node: Node, kinds: SpaceKinds) -> list[TestPoint]:
    """A group of test points of any problem kind: `kind:` (default: the spaces' only kind), `precisions:`,
    `shapes:` (the kind's variants, if it has any), `sizes:` (the kind's size names and its shorthands, e.g.
    GEMM's `square:`; every combination), and for each size the kind may derive (GEMM: `batch:`) `NAME: N` or
    `NAME: {bytes: SIZE}` (the kind's rule: GEMM's smallest batch whose A, B and C take SIZE)."""
    available = kinds.all()
    derivable = tuple(dict.fromkeys(n for k in available.values() for n in k.derived_sizes))
    m = r.mapping(node, POINT_KEYS + tuple(n for n in derivable if n not in POINT_KEYS), "test points")
    kind = _group_kind(r, node, m, available)
    for key in m:
        if key not in POINT_KEYS and key not in kind.derived_sizes:
            raise r.error(
                m[key],
                f"the {kind.name} kind has no size {key} to derive",
                f"give its sizes under `sizes:`: {', '.join(kind.size_names)}",
            )
    if "sizes" not in m:
        raise r.error(
            node, "test points need `sizes:`", f"write sizes: {{{', '.join(f'{s}: ...' for s in kind.size_names)}}}"
        )
    precisions = r.choices(m["precisions"], kind.precisions, "precisions") if "precisions" in m else kind.precisions[:1]
    shapes = r.choices(m["shapes"], kind.shapes, "shapes") if "shapes" in m else kind.shapes[:1]
    combos, given = _size_combos(r, m["sizes"], kind)
    missing = [s for s in kind.size_names if s not in given and s not in m]
    if missing:
        derive = [s for s in missing if s in kind.derived_sizes]
        if derive and len(derive) == len(missing):
            raise r.error(
                node,
                f"test points need `{derive[0]}:`",
                f"write {derive[0]}: 1000 or {derive[0]}: {{bytes: 100MB}} (see docs/sweep-configs.md)",
            )
        raise r.error(
            m["sizes"],
            f"sizes of {kind.name} miss {', '.join(missing)}",
            kind.size_forms_help or f"give every size: {', '.join(kind.size_names)}",
        )
    rule = size_rule(r, m, kind, SizeRule())  # `NAME: N` or `NAME: {bytes: SIZE}` of each derived size
    out = []
    for prec in precisions:
        for shape in shapes:
            for combo in combos:
                filled = rule.fill(kind, prec, shape, combo)  # the derived sizes the group gives
                sizes = {n: filled[n] for n in kind.size_names if n in filled}
                try:
                    point = kind.point(prec, shape, sizes)
                except ValueError as exc:
                    raise r.error(m["sizes"], str(exc), "fix the sizes") from None
                bad = kind.check_limits(point)  # sizes a kernel cannot take
                if bad is not None:
                    raise r.error(given.get(bad[0], m.get(bad[0], m["sizes"])), bad[1], bad[2])
                out.append(point)
    return out


def _group_kind(r: Reader, node: Node, m: dict[str, Node], available: dict[str, ProblemKind]) -> ProblemKind:
    """The group's `kind:`, else the only kind of the config's spaces."""
    if "kind" in m:
        name = r.string(m["kind"])
        if name not in available:
            raise r.error(
                m["kind"],
                f"no space of this config solves the problem kind {name!r}",
                f"kinds of its spaces: {', '.join(available) or 'none'}",
            )
        return available[name]
    if len(available) == 1:
        return next(iter(available.values()))
    raise r.error(
        node,
        "say which problem kind these points are (`kind:`)",
        f"kinds of this config's spaces: {', '.join(available)}",
    )


def _size_combos(r: Reader, node: Node, kind: ProblemKind) -> tuple[list[dict[str, int]], dict[str, Node]]:
    """Every combination of the `sizes:` entries (size names, tied and tuple shorthands), and the node that gave
    each size."""
    keys = (*kind.size_names, *kind.tied_sizes, *kind.tuple_sizes)
    m = r.mapping(node, keys, f"sizes of {kind.name}")
    given: dict[str, Node] = {}
    lists: list[list[dict[str, int]]] = []
    for key, value in m.items():
        names = kind.tied_sizes.get(key) or kind.tuple_sizes.get(key) or (key,)
        twice = [n for n in names if n in given]
        if twice:
            raise r.error(
                node,
                f"cannot read sizes: {', '.join(twice)} given twice",
                kind.size_forms_help or f"give each size once: {', '.join(kind.size_names)}",
            )
        given.update((n, value) for n in names)
        if key in kind.tuple_sizes:
            rows = []
            for item in r.sequence(value, key):
                if not (isinstance(item, SequenceNode) and len(item.value) == len(names)):
                    raise r.error(
                        item,
                        f"an element of {key} is [{', '.join(names)}]",
                        f"write e.g. [{', '.join('8' for _ in names)}]",
                    )
                rows.append(dict(zip(names, (r.integer(x, 1) for x in item.value), strict=True)))
            lists.append(rows)
        else:
            lists.append([{n: v for n in names} for v in size_list(r, value)])
    combos = [{k: v for part in combo for k, v in part.items()} for combo in itertools.product(*lists)]
    return combos, given
