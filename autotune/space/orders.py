"""The orders the space generator works in: the parameters a constraint reads (through derived quantities), the greedy
order parameters are bound in, the order the funnel reports the hard constraints in, and file order of the rows."""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import numpy as np

from autotune.space.spec import Constraint, Space


def param_deps(space: Space, names: Iterable[str]) -> frozenset[str]:
    """Parameters an expression reads, directly or through derived quantities."""
    derived = dict(space.derived)
    params = set(space.param_names)
    out: set[str] = set()
    todo = list(names)
    while todo:
        n = todo.pop()
        if n in params:
            out.add(n)
        elif n in derived:
            todo.extend(derived[n].expr.names)
    return frozenset(out)


def binding_order(space: Space, constraints: tuple[Constraint, ...]) -> list[str]:
    """Greedy: bind next the parameter that completes the most constraints, then the smallest domain."""
    deps = [param_deps(space, c.expr.names) for c in constraints]
    sizes = {p.name: len(p.values) for p in space.parameters}
    file_pos = {n: i for i, n in enumerate(space.param_names)}
    bound: set[str] = set()
    order: list[str] = []
    while len(order) < len(sizes):

        def score(p: str) -> tuple:
            done = sum(1 for d in deps if d and not d <= bound and d <= bound | {p})
            involved = sum(1 for d in deps if p in d and not d <= bound)
            return (-done, -involved, sizes[p], file_pos[p])

        nxt = min((p for p in sizes if p not in bound), key=score)
        order.append(nxt)
        bound.add(nxt)
    return order


def funnel_order(space: Space) -> list[Constraint]:
    """The order the funnel reports the hard constraints in: as they become checkable while binding in
    `binding_order(space, space.hard)` (constants first), file order within one binding step."""
    order = binding_order(space, space.hard)
    pos = {p: i for i, p in enumerate(order)}
    at_step: list[list[Constraint]] = [[] for _ in order]
    for c in space.hard:
        at_step[max((pos[p] for p in param_deps(space, c.expr.names)), default=0)].append(c)
    return [c for cs in at_step for c in cs]


def file_order(space: Space, codes: dict[str, np.ndarray], sizes: Mapping[str, int]) -> dict[str, np.ndarray]:
    """Rows sorted by their parameter codes in file order (the first parameter varies slowest): one integer key per
    row, sorted, and the codes read back from it (sequential passes, no gather in random order)."""
    n = len(next(iter(codes.values())))
    if n < 2:
        return codes
    names = list(space.param_names)
    raw = math.prod(sizes.values())
    if raw >= 1 << 63:
        idx = np.lexsort([codes[q] for q in reversed(names)])
        return {q: codes[q][idx] for q in codes}
    kind: type[np.unsignedinteger[Any]] = np.uint32 if raw < 1 << 32 else np.uint64
    key: np.ndarray = np.zeros(n, dtype=kind)
    stride = 1
    for q in reversed(names):
        if stride == 1:
            key += codes[q]
        else:
            key += codes[q].astype(kind) * kind(stride)
        stride *= sizes[q]
    key.sort()
    out = {}
    for q in names:
        stride //= sizes[q]
        digit = key // kind(stride) if stride > 1 else key.copy()
        if q != names[0]:
            digit %= kind(sizes[q])
        out[q] = digit.astype(codes[q].dtype)
        del digit
    return out
