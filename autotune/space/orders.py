"""The orders the space generator works in: the parameters a constraint reads (through derived quantities), the greedy
order parameters are bound in, the order the funnel reports the hard constraints in, and file order of the rows."""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

import numpy as np

from autotune.space.spec import Constraint, Space

T = TypeVar("T")


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


def greedy_order(
    deps: Sequence[frozenset[str]],
    sizes: Mapping[str, int],
    file_pos: Mapping[str, int],
    params: Sequence[str] | None = None,
    bound: frozenset[str] = frozenset(),
) -> list[str]:
    """Greedy: bind next the parameter that decides the most constraints (`deps`: the parameters each reads), then
    the one read by the most undecided constraints, then the smallest domain, then file order."""
    todo = list(params if params is not None else sizes)
    done_set = set(bound)
    out: list[str] = []
    while todo:

        def score(p: str) -> tuple:
            grown = done_set | {p}
            done = sum(1 for d in deps if not d <= done_set and d <= grown)
            involved = sum(1 for d in deps if p in d and not d <= done_set)
            return (-done, -involved, sizes[p], file_pos[p])

        nxt = min(todo, key=score)
        out.append(nxt)
        todo.remove(nxt)
        done_set.add(nxt)
    return out


def binding_order(space: Space, constraints: tuple[Constraint, ...]) -> list[str]:
    """`greedy_order` of every parameter for `constraints`."""
    deps = [param_deps(space, c.expr.names) for c in constraints]
    sizes = {p.name: len(p.values) for p in space.parameters}
    return greedy_order(deps, sizes, {n: i for i, n in enumerate(space.param_names)})


def by_step(order: Sequence[str], items: Iterable[T], deps: Callable[[T], Iterable[str]]) -> list[list[T]]:
    """`items` grouped by the step of `order` after which the parameters each reads (`deps`) are all bound (none:
    step 0), in their order within a step."""
    pos = {p: i for i, p in enumerate(order)}
    at_step: list[list[T]] = [[] for _ in order]
    for item in items:
        at_step[max((pos[p] for p in deps(item)), default=0)].append(item)
    return at_step


def funnel_order(space: Space) -> list[Constraint]:
    """The order the funnel reports the hard constraints in: as they become checkable while binding in
    `binding_order(space, space.hard)` (constants first), file order within one binding step."""
    steps = by_step(binding_order(space, space.hard), space.hard, lambda c: param_deps(space, c.expr.names))
    return [c for cs in steps for c in cs]


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
