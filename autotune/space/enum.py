"""Prune-while-enumerate: the survivors of a set of constraints, and exact funnel counts, without the full product.

Rows hold small integer codes (indices into each parameter's values). Parameters are bound one at a time; after
each binding every constraint whose names (parameters, and the derived quantities they determine) are all bound is
applied to the partial combinations, vectorized with numpy over blocks of at most `CHUNK` rows, so a partial
combination that fails is never expanded further (`autotune/space/survivors.py`).

The funnel reports, for a fixed reporting order c_1..c_K, how many full combinations pass c_1..c_k for every k.
Pruning by c_j before c_1..c_{j-1} are decided would lose the combinations that pass c_1..c_k (k < j) but fail c_j,
so these counts come from a separate exact count per prefix (`Enumerator.count`): the constraints of the prefix are
split into groups that share no unbound parameter (their counts multiply); each group is counted once per distinct
value of the bound parameters it reads, by binding one more parameter, dropping the rows that fail the constraints
it decides, and splitting again. Parameters no constraint reads are never bound (a factor of their value count).

Both passes count the partial combinations they expand; above `max_raw` they stop with an error that names the knob
and says how far they got (`LimitReached`).
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from autotune.errors import SpaceError
from autotune.expr import FUNCTIONS, Expr
from autotune.space.orders import greedy_order
from autotune.space.spec import Constraint, Space

CHUNK = 1 << 20  # rows per vectorized block
TABLE = 1 << 20  # a constraint reading parameters of at most this many value combinations is tabulated once,
SPLIT = 1 << 16  # when it has been evaluated on as many rows; an `and` operand is split off if its table is this small


class TooCostly(Exception):
    """A count given a budget (`Enumerator.count(..., budget=)`) would expand more rows than that."""


class LimitReached(Exception):
    """A limit stopped enumeration (not an evaluation error): carries the user-facing SpaceError."""

    def __init__(self, error: SpaceError) -> None:
        super().__init__(error.message)
        self.error = error


@dataclass(frozen=True)
class Con:
    """A constraint with the parameters it reads (directly or through derived quantities) and its funnel rank."""

    c: Constraint
    deps: frozenset[str]
    rank: int
    key: str = ""  # tables are cached under it (the constraint's name, plus `#i` for the i-th part of an `and`)


def _part(c: Constraint, node: ast.expr, i: int) -> Constraint:
    names = frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id not in FUNCTIONS)
    expr = Expr(text=ast.unparse(node), tree=ast.Expression(body=node), names=names)
    return replace(c, expr=expr)


def code_dtype(n: int) -> type:
    return np.uint8 if n <= 0xFF else np.uint16 if n <= 0xFFFF else np.uint32


def segment_sum(parent: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    """Sums of `values` per parent index 0..k-1 (`parent` sorted ascending); exact for int64 and Python ints."""
    bounds = np.searchsorted(parent, np.arange(k + 1), "left")
    csum = np.concatenate([np.zeros(1, dtype=values.dtype), np.cumsum(values)])
    return csum[bounds[1:]] - csum[bounds[:-1]]


class Enumerator:
    """One space, one evaluation context (device and precision), one expansion budget."""

    def __init__(
        self,
        space: Space,
        context: Mapping[str, Any],
        deps: Callable[[Iterable[str]], frozenset[str]],
        check: Callable[[Constraint, Mapping[str, Any], int], np.ndarray],
        max_raw: int,
        raw: int,
        enforce: bool,
        chunk: int = CHUNK,
    ) -> None:
        self.space, self.context = space, context
        self.check = check
        self.domains = {p.name: np.array(p.values) for p in space.parameters}
        self.derived = dict(space.derived)
        self.derived_deps = {n: deps([n]) for n in self.derived}
        self.dtables: dict[str, tuple[tuple[str, ...], tuple[int, ...], np.ndarray] | None] = {}
        self.sizes = {p.name: len(p.values) for p in space.parameters}
        self.file_pos = {n: i for i, n in enumerate(space.param_names)}
        self.max_raw, self.raw, self.enforce = max_raw, raw, enforce
        self.expanded, self.chunk = 0, chunk
        self.big = raw >= 1 << 62  # counts may not fit int64: Python integers
        self.value_codes: dict[str, np.ndarray] = {n: np.arange(d, dtype=code_dtype(d)) for n, d in self.sizes.items()}
        self.where = ""  # which pass is running, for the limit message
        self.tables: dict[str, tuple[tuple[str, ...], tuple[int, ...], np.ndarray] | None] = {}
        self.seen: dict[str, int] = {}  # rows each untabulated constraint was evaluated on
        self.memo: dict[tuple, np.ndarray] = {}  # group counts (see _count_group)
        self.stop_at: int | None = None  # see count(budget=)

    def env(self, codes: dict[str, np.ndarray]) -> "_Env":
        return _Env(self, codes)

    def _grid(self, names: tuple[str, ...]) -> tuple[tuple[int, ...], dict[str, np.ndarray], int]:
        """Every combination of `names` (the last varies fastest): strides and codes."""
        strides, stride = [], 1
        for q in reversed(names):
            strides.append(stride)
            stride *= self.sizes[q]
        strides.reverse()
        codes = {}
        # q's codes each repeated st times, the whole repeated (stride / st / size) times
        for q, st in zip(names, strides, strict=True):
            codes[q] = np.tile(np.repeat(self.value_codes[q], st), stride // (st * self.sizes[q]))
        return tuple(strides), codes, stride

    @staticmethod
    def _key(codes: Mapping[str, np.ndarray], names: tuple[str, ...], strides: tuple[int, ...]) -> np.ndarray:
        key = codes[names[0]].astype(np.int32)
        if strides[0] != 1:
            key *= np.int32(strides[0])
        for q, st in zip(names[1:], strides[1:], strict=True):
            key += codes[q].astype(np.int32) * np.int32(st) if st != 1 else codes[q]
        return key

    def derived_value(self, name: str, env: "_Env") -> Any:
        """A derived quantity over the env's rows: from its table over the parameters it reads when that table is
        at most half as long as the rows (built once), else evaluated."""
        names = tuple(sorted(self.derived_deps[name], key=self.file_pos.__getitem__))
        size = math.prod(self.sizes[q] for q in names)
        if names and size <= TABLE and 2 * size <= env.n:
            if name not in self.dtables:
                self.dtables[name] = None
                strides, codes, _ = self._grid(names)
                try:
                    value = np.broadcast_to(np.asarray(self.space.eval(self.derived[name], self.env(codes))), (size,))
                    self.dtables[name] = (names, strides, np.ascontiguousarray(value))
                except SpaceError:
                    pass  # an error over combinations enumeration might never reach: evaluate row by row
            tab = self.dtables[name]
            if tab is not None:
                return tab[2][self._key(env.codes, tab[0], tab[1])]
        return self.space.eval(self.derived[name], env)

    def prepare(self, cons: Sequence[Con], deps: Callable[[frozenset[str]], frozenset[str]]) -> list[Con]:
        """Constraints as enumeration applies them: a top-level `a and b and ...` becomes one constraint per
        operand (each applied as soon as its own parameters are bound) where every operand can be tabulated
        without an error, since an operand evaluated alone loses the short-circuit that guarded it."""
        out: list[Con] = []
        for con in cons:
            body = con.c.expr.tree.body
            if isinstance(body, ast.BoolOp) and isinstance(body.op, ast.And):
                parts = []
                for i, node in enumerate(body.values):
                    part = _part(con.c, node, i)
                    parts.append(Con(part, deps(part.expr.names), con.rank, f"{con.c.name}#{i}"))
                if all(p.deps and self.table(p, SPLIT) is not None for p in parts):
                    out.extend(parts)
                    continue
            out.append(con if con.key else replace(con, key=con.c.name))
        return out

    def table(self, con: Con, rows: int) -> tuple[tuple[str, ...], tuple[int, ...], np.ndarray] | None:
        """The constraint's verdict for every combination of the parameters it reads, built once the constraint has
        been (or is about to be) evaluated on as many rows as the table has entries (None: not yet, too many, or the
        evaluation over combinations enumeration would never reach raised an error: evaluated row by row)."""
        name = con.key or con.c.name
        if name not in self.tables:
            names = tuple(sorted(con.deps, key=self.file_pos.__getitem__))
            size = math.prod(self.sizes[q] for q in names)
            seen = self.seen.get(name, 0) + rows
            if size > seen:
                self.seen[name] = seen
                return None
            self.tables[name] = None
            if names and size <= TABLE:
                strides, codes, _ = self._grid(names)
                try:
                    verdict = np.array(self.check(con.c, self.env(codes), size))
                except SpaceError:
                    verdict = None
                if verdict is not None:
                    self.tables[name] = (names, strides, verdict)
        return self.tables[name]

    def spend(self, n: int, bound: Sequence[str], kept: int, need: int | None = None) -> None:
        """Count `n` expanded rows; stop when the budget is exhausted (or `need` more rows are certain to go over)."""
        self.expanded += n
        if self.stop_at is not None and self.expanded > self.stop_at:
            raise TooCostly()
        total = self.expanded + (need or 0)
        if self.enforce and total > self.max_raw:
            names = ", ".join(bound) if bound else "none"
            got = (
                f"{self.where} had bound {names} ({len(bound)} of {len(self.sizes)} parameters) and kept {kept:,} "
                f"rows of its last block, {self.expanded:,} partial combinations expanded in all"
                + (f", and would expand at least {need:.3g} more" if need else "")
            )
            raise LimitReached(
                self.space.error(
                    f"the space has {self.raw:.3g} raw combinations, above the limit of {self.max_raw:.3g} combinations "
                    f"to expand: {got}",
                    hint="add hard constraints that read the parameters bound first, narrow the largest parameters, or "
                    "raise the limit: --max-raw N (autotune space) or AUTOTUNE_MAX_RAW=N (every command); "
                    "generation time grows with the number of combinations expanded",
                )
            )

    def order(
        self, cons: Sequence[Con], params: Sequence[str] | None = None, bound: frozenset[str] = frozenset()
    ) -> list[str]:
        """`greedy_order` of `params` (default: all) after `bound` for `cons`."""
        return greedy_order([c.deps for c in cons], self.sizes, self.file_pos, params, bound)

    def expansions(self, cons: Sequence[Con], order: Sequence[str], budget: int) -> int | None:
        """Rows `survivors` expands in this binding order (exact: level sizes from counts); None when counting the
        levels would expand more than `budget` rows."""
        total, prev, bound = 0, 1, set()
        rest = math.prod(self.sizes.values())
        for i, p in enumerate(order):
            total += prev * self.sizes[p]
            bound.add(p)
            rest //= self.sizes[p]
            if i + 1 == len(order):
                break
            try:
                prev = self.count([c for c in cons if c.deps <= bound], budget) // rest
            except TooCostly:
                return None
            if not prev:
                break
        return total

    def _filter(
        self, cons: Sequence[Con], codes: dict[str, np.ndarray], m: int, extra: list[np.ndarray] | None = None
    ) -> tuple[dict[str, np.ndarray], int, list[np.ndarray]]:
        """Apply `cons` (in rank order) to the rows; returns the kept rows (and `extra` arrays filtered alike)."""
        codes, m, pos = self.select(cons, codes, m)
        return codes, m, [a if pos is None else a[pos] for a in (extra or [])]

    def select(
        self, cons: Sequence[Con], codes: dict[str, np.ndarray], m: int
    ) -> tuple[dict[str, np.ndarray], int, np.ndarray | None]:
        """Apply `cons` (in rank order) to the rows: the kept rows and their positions (None: every row kept).
        Tabulated verdicts are combined and the rows filtered once; a constraint evaluated from its expression
        sees only the rows that passed the ones before it."""
        mask: np.ndarray | None = None
        pos: np.ndarray | None = None

        def take(mask: np.ndarray) -> None:
            nonlocal codes, m, pos
            idx = np.flatnonzero(mask)
            if len(idx) < m:
                codes = {q: a[idx] for q, a in codes.items()}
                pos = idx if pos is None else pos[idx]
                m = len(idx)

        for con in sorted(cons, key=lambda c: c.rank):
            tab = self.table(con, m)
            if tab is not None:
                names, strides, verdict = tab
                keep = verdict[self._key(codes, names, strides)]
                mask = keep if mask is None else np.logical_and(mask, keep, out=mask)
                continue
            if mask is not None:
                take(mask)
                mask = None
            if m:
                take(self.check(con.c, self.env(codes), m))
            if not m:
                break
        if mask is not None and m:
            take(mask)
        return codes, m, pos

    def apply(
        self, cons: Sequence[Con], codes: dict[str, np.ndarray], m: int
    ) -> tuple[dict[str, np.ndarray], int, list]:
        """Filter whole rows by `cons`, in blocks of at most `chunk` rows."""
        if m <= self.chunk:
            return self._filter(cons, codes, m)
        keep = np.zeros(m, dtype=bool)
        for lo in range(0, m, self.chunk):
            part = {q: a[lo : lo + self.chunk] for q, a in codes.items()}
            n = len(next(iter(part.values())))
            _, _, (idx,) = self._filter(cons, part, n, [np.arange(lo, lo + n)])
            keep[idx] = True
        kept = int(np.count_nonzero(keep))
        return {q: a[keep] for q, a in codes.items()}, kept, []

    def _full(self, n: int, value: int) -> np.ndarray:
        return np.full(n, value, dtype=object) if self.big else np.full(n, value, dtype=np.int64)

    def count(self, cons: Sequence[Con], budget: int | None = None) -> int:
        """How many full combinations pass every constraint of `cons` (TooCostly past `budget` expanded rows)."""
        if budget is not None:
            self.stop_at = self.expanded + budget
            try:
                return self.count(cons)
            finally:
                self.stop_at = None
        self.where = "counting the funnel"
        constant = [c for c in cons if not c.deps]
        if constant:
            _, m, _ = self._filter(constant, {}, 1)
            if not m:
                return 0
        return int(self._count({}, 1, [c for c in cons if c.deps], list(self.sizes))[0])

    def _components(self, cons: Sequence[Con], unbound: Sequence[str]) -> list[tuple[list[Con], list[str]]]:
        """Groups of constraints connected through the unbound parameters they read."""
        free = set(unbound)
        parent = {p: p for p in free}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for con in cons:
            ps = [p for p in con.deps if p in free]
            for q in ps[1:]:
                a, b = find(ps[0]), find(q)
                if a != b:
                    parent[a] = b
        groups: dict[str, tuple[list[Con], list[str]]] = {}
        for con in cons:
            root = find(next(p for p in con.deps if p in free))
            groups.setdefault(root, ([], []))[0].append(con)
        for p in unbound:
            r = find(p)
            if r in groups:
                groups[r][1].append(p)
        return list(groups.values())

    def _count(self, rows: dict[str, np.ndarray], n: int, cons: list[Con], unbound: list[str]) -> np.ndarray:
        """Per row: completions of the unbound parameters that pass `cons` (each reads an unbound parameter)."""
        comps = self._components(cons, unbound)
        used = {p for _, ps in comps for p in ps}
        total = self._full(n, math.prod(self.sizes[p] for p in unbound if p not in used))
        for ccons, cparams in comps:
            iface = sorted({p for c in ccons for p in c.deps} - set(cparams))
            if not iface or n == 1:
                sub = self._count_group({q: rows[q] for q in iface}, n if iface else 1, ccons, cparams)
                total = total * (sub if iface else sub[0])
                continue
            key, radix = np.zeros(n, dtype=np.int64), 1
            for q in iface:
                key += rows[q].astype(np.int64) * radix
                radix *= self.sizes[q]
            if radix < 1 << 62:
                _, first, inv = np.unique(key, return_index=True, return_inverse=True)
            else:  # too many interface values for one integer key
                stacked = np.stack([rows[q].astype(np.int64) for q in iface], axis=1)
                _, first, inv = np.unique(stacked, axis=0, return_index=True, return_inverse=True)
            sub = self._count_group({q: rows[q][first] for q in iface}, len(first), ccons, cparams)
            total = total * sub[inv.reshape(-1)]
        return total

    def _count_group(self, rows: dict[str, np.ndarray], m: int, cons: list[Con], params: list[str]) -> np.ndarray:
        """Per row: completions of `params` (connected through `cons`) that pass `cons`; remembered across the
        funnel's prefixes, which share most groups."""
        key = (frozenset(c.key for c in cons), tuple(sorted(rows)), b"".join(rows[q].tobytes() for q in sorted(rows)))
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = self._count_group_new(rows, m, cons, params)
        return hit

    def _count_group_new(self, rows: dict[str, np.ndarray], m: int, cons: list[Con], params: list[str]) -> np.ndarray:
        bound = frozenset(rows)
        p = self.order(cons, params, bound)[0]
        d = self.sizes[p]
        now = bound | {p}
        decided = [c for c in cons if c.deps <= now]
        rest = [c for c in cons if not c.deps <= now]
        rest_params = [q for q in params if q != p]
        keep_cols = {q for c in rest for q in c.deps} & now
        out = self._full(m, 0)
        per = max(1, self.chunk // d)
        for lo in range(0, m, per):
            hi = min(m, lo + per)
            k = hi - lo
            self.spend(k * d, sorted(now, key=self.file_pos.__getitem__), 0)
            new = {q: np.repeat(a[lo:hi], d) for q, a in rows.items()}
            new[p] = np.tile(self.value_codes[p], k)
            parent = np.repeat(np.arange(k), d)
            size = k * d
            if decided:
                new, size, (parent,) = self._filter(decided, new, size, [parent])
            if not size:
                continue
            if rest:
                sub = self._count({q: new[q] for q in keep_cols}, size, rest, rest_params)
            else:
                sub = self._full(size, math.prod(self.sizes[q] for q in rest_params))
            out[lo:hi] += segment_sum(parent, sub, k)
        return out


class _Env(dict):
    """Names for evaluating over a block of rows: context, parameters decoded, derived quantities on demand."""

    def __init__(self, engine: Enumerator, codes: dict[str, np.ndarray]) -> None:
        super().__init__(engine.context)
        self.engine, self.codes = engine, codes
        self.n = len(next(iter(codes.values()))) if codes else 1

    def __missing__(self, name: str) -> Any:
        if name in self.codes:
            value = self.engine.domains[name][self.codes[name]]
        elif name in self.engine.derived:
            value = self.engine.derived_value(name, self)
        else:
            raise KeyError(name)
        self[name] = value
        return value
