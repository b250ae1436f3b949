"""The space generator: enumerate the instances that pass the hard (and soft) constraints.

`generate` prunes while it enumerates (autotune/space/enum.py, docs/space_enum.md): every applied constraint,
hard or soft, is checked as soon as the parameters it reads are bound, on vectorized blocks of integer codes, and
the funnel comes from exact counts per prefix of the reporting order, so it equals what filtering the full product
constraint by constraint would leave.

`generate_reference` is the generator before that (hard constraints while enumerating, in an order chosen for
them; soft constraints afterwards on every hard survivor): the tests compare the two, and `generate` falls back to it
when evaluating a constraint earlier than it would raises an error.
"""

from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import numpy as np

from autotune.devices import DeviceLimits
from autotune.errors import SpaceError
from autotune.space.instance import Instance, plain_value, instance_id
from autotune.vocab import TestPoint
from autotune.space.enum import Con, Enumerator, LimitReached, TooCostly, code_dtype
from autotune.space.orders import binding_order, by_step, file_order, funnel_order, param_deps
from autotune.space.spec import Constraint, Space
from autotune.space.survivors import survivors

if TYPE_CHECKING:  # pandas is imported where a frame is made: planning a sweep (instances) never needs it
    import pandas as pd

CHUNK = 1 << 20  # rows per vectorized block
# Limits checked during generation, so a huge space is refused with a message instead of running for hours or
# exhausting memory: MAX_RAW bounds the partial combinations enumeration expands (generate_reference: the raw product),
# MAX_SURVIVORS the instances kept. Raised per call (`--max-raw`, `--max-survivors` of `autotune space ...`) or for
# every command through the environment (AUTOTUNE_MAX_RAW, AUTOTUNE_MAX_SURVIVORS).
MAX_RAW = 10**10
MAX_SURVIVORS = 10**8  # survivors are kept in memory as integer codes (and as a frame by `space list`)
FULL_RAW = 1 << 12  # spaces up to this many raw combinations: the full product, filtered in funnel order
REFERENCE_RAW = 1 << 16  # up to this many: generate_reference (planning and counting would not pay off)
COUNT_BUDGET = 1 << 22  # rows a count made only to plan enumeration may expand
SORT_COST = 4  # rows expanded that cost about as much as sorting one survivor into file order
SMALL = 1 << 18  # a funnel prefix that leaves at most this many is enumerated, the rest filters it in turn


def _limit(given: int | None, env: str, default: int) -> int:
    """`given` (a caller's max_raw or max_survivors), else the environment variable `env`, else `default`: a whole
    number of at least 1, read by autotune.untrusted (a bad value is one error naming its source)."""
    from autotune.untrusted import env_number, number

    if given is not None:
        return int(number(given, name=env.removeprefix("AUTOTUNE_").lower(), integer=True, lo=1))
    return int(env_number(env, default, integer=True, lo=1, example=str(default)) or default)


@dataclass(frozen=True)
class FunnelStep:
    kind: str  # "raw", "hard" or "soft"
    name: str
    reason: str
    remaining: int
    removed: int
    line: int | None = None


@dataclass
class Generated:
    """The surviving instances of one space for one device and precision."""

    space: Space
    device: DeviceLimits
    precision: str
    soft_applied: tuple[str, ...]
    codes: dict[str, np.ndarray]
    funnel: list[FunnelStep]
    seconds: float
    _values: dict[str, np.ndarray] = field(repr=False, default_factory=dict)

    @property
    def count(self) -> int:
        return int(self.funnel[-1].remaining)

    def column(self, name: str) -> np.ndarray:
        return _domain(self.space, name)[self.codes[name]]

    @cached_property
    def frame(self) -> pd.DataFrame:
        """One row per instance, one column per parameter, in file order."""
        import pandas as pd

        return pd.DataFrame({p.name: self.column(p.name) for p in self.space.parameters})

    def with_derived(self) -> pd.DataFrame:
        """Parameters plus derived quantities (as evaluated for this device and precision)."""
        env = _Env(self.space, self.space.context(self.precision, self.device), self.codes)
        out = self.frame.copy()
        for name, _ in self.space.derived:
            out[name] = np.broadcast_to(env[name], (self.count,))
        return out

    def ids(self, rows: Iterable[int] | None = None) -> list[str]:
        """Stable IDs of the instances at `rows` (all rows by default)."""
        frame = self.frame if rows is None else self.frame.iloc[list(rows)]
        return [
            instance_id(self.space.name, dict(zip(frame.columns, row, strict=True)))
            for row in frame.itertuples(index=False)
        ]

    def instances(self) -> list[Instance]:
        """Every row as an Instance (the values as `Instance.of` makes them), column by column: a 29,920-row space
        in a fraction of the row-by-row time (planning is on the path to the first measurement)."""
        # each (name, value) pair is built once per value of the parameter's domain and shared by the rows that
        # hold it (one tuple per instance, not one per parameter as well): the values are `plain_value`'s of the
        # domain's array, as the frame's columns hold them
        space = self.space.name
        columns = []
        for p in self.space.parameters:
            pairs = [(p.name, v) for v in _plain_column(_domain(self.space, p.name))]
            columns.append([pairs[c] for c in self.codes[p.name].tolist()])
        collect = gc.isenabled()
        gc.disable()  # tens of thousands of new objects and no cycle among them: no collection passes meanwhile
        try:
            return [Instance(space, row) for row in zip(*columns, strict=True)]
        finally:
            if collect:
                gc.enable()


def _plain_column(column: Any) -> list:
    """A column's values as `instance.plain_value` makes them: Python scalars, integral floats as ints."""
    kind = getattr(column.dtype, "kind", "O")
    if kind in "iub":
        return column.tolist()
    if kind == "f":
        return [int(v) if v.is_integer() else v for v in column.tolist()]
    return [plain_value(v) for v in column.tolist()]


_DOMAINS: dict[int, tuple[tuple, np.ndarray]] = {}  # id(values) -> (values, array): built once per parameter


def _domain(space: Space, name: str) -> np.ndarray:
    p = next(p for p in space.parameters if p.name == name)
    cached = _DOMAINS.get(id(p.values))
    if cached is None or cached[0] is not p.values:
        if len(_DOMAINS) > 256:
            _DOMAINS.clear()
        cached = _DOMAINS[id(p.values)] = (p.values, np.array(p.values))
    return cached[1]


class _Env(dict):
    """Names for expression evaluation over a chunk: parameters decoded, derived computed on demand."""

    def __init__(self, space: Space, context: Mapping[str, Any], codes: Mapping[str, np.ndarray]) -> None:
        super().__init__(context)
        self.space, self.codes = space, codes
        self.derived = dict(space.derived)

    def __missing__(self, name: str) -> Any:
        if name in self.codes:
            value = _domain(self.space, name)[self.codes[name]]
        elif name in self.derived:
            value = self.space.eval(self.derived[name], self)
        else:
            raise KeyError(name)
        self[name] = value
        return value


def _check(space: Space, c: Constraint, env: Mapping[str, Any], n: int) -> np.ndarray:
    result = np.asarray(space.eval(c, env))
    if result.dtype.kind not in "b":
        if result.dtype.kind in "iuf":
            result = result != 0
        else:
            raise space.error(
                f"{c.kind} constraint {c.name!r} does not give true/false",
                c.line,
                c.expr.text,
                "write a comparison, e.g. `threads <= 512`",
            )
    return np.broadcast_to(result, (n,))


def _checked_args(space: Space, precision: str | None, soft_off: Iterable[str]) -> tuple[str, tuple[str, ...]]:
    precision = precision or (space.kernel.problems.precisions[0] if space.kernel else "fp64")
    if space.kernel and precision not in space.kernel.problems.precisions:
        raise space.error(
            f"this space does not support precision {precision!r}",
            hint=f"choose from {', '.join(space.kernel.problems.precisions)}",
        )
    soft_off = tuple(soft_off)
    unknown = [n for n in soft_off if n not in {c.name for c in space.soft}]
    if unknown:
        raise space.error(
            f"no soft constraint named {unknown[0]!r}",
            hint=f"soft constraints: {', '.join(c.name for c in space.soft) or 'none'}",
        )
    return precision, soft_off


def generate(
    space: Space,
    device: DeviceLimits,
    precision: str | None = None,
    soft: bool = True,
    soft_off: Iterable[str] = (),
    max_raw: int | None = None,
    max_survivors: int | None = None,
) -> Generated:
    """Enumerate the valid instances of `space` for `device` and `precision` (default: its first).

    Every applied constraint, hard or soft, prunes as soon as the parameters it reads are bound
    (autotune/space/enum.py); the funnel counts are exact. A space of more than `max_raw` raw
    combinations is built as long as enumeration expands at most `max_raw` partial combinations (it
    stops with a SpaceError that says how far it got), and it stops as soon as more than
    `max_survivors` instances pass (defaults: MAX_RAW and MAX_SURVIVORS, or the environment's
    AUTOTUNE_MAX_RAW and AUTOTUNE_MAX_SURVIVORS)."""
    start = time.perf_counter()
    setup = _setup(space, device, precision, soft, soft_off, max_raw, max_survivors)
    precision, sizes, raw, limit_raw = setup.precision, setup.sizes, setup.raw, setup.max_raw
    ranked = funnel_order(space) + [c for c in space.soft if c.name in setup.applied_soft]
    which = "hard and soft" if setup.applied_soft else "hard"

    def too_many(n: int, which: str = which) -> SpaceError:
        return _too_many(space, n, which, raw)

    if raw <= FULL_RAW and raw <= limit_raw:
        return _full_product(space, device, setup, ranked, too_many, start)
    if raw <= REFERENCE_RAW:
        return generate_reference(space, device, precision, soft, setup.soft_off, max_raw, max_survivors)
    cons = [Con(c, param_deps(space, c.expr.names), i) for i, c in enumerate(ranked)]
    engine = Enumerator(
        space,
        setup.context,
        lambda names: param_deps(space, names),
        lambda c, env, n: _check(space, c, env, n),
        limit_raw,
        raw,
        enforce=raw > limit_raw,
        chunk=CHUNK,
    )
    try:
        codes, count, remaining, order = _pruned(space, engine, cons, setup.max_survivors, too_many)
    except LimitReached as stop:
        raise stop.error from None
    except SpaceError:
        # a constraint evaluated earlier than the reference path evaluates it raised (e.g. a division its guard
        # in a later-bound constraint would have prevented): build the way the reference does
        if raw > limit_raw:
            raise
        return generate_reference(space, device, precision, soft, setup.soft_off, max_raw, max_survivors)
    funnel = [_raw_step(raw)]
    # strict=False: without constraints remaining holds one count (the survivors, all raw rows) and cons none
    for con, left in zip(cons, remaining, strict=False):
        funnel.append(FunnelStep(con.c.kind, con.c.name, con.c.reason, left, funnel[-1].remaining - left, con.c.line))
    if count and order != list(space.param_names):
        codes = file_order(space, codes, sizes)
    return Generated(space, device, precision, setup.applied_soft, codes, funnel, time.perf_counter() - start)


@dataclass(frozen=True)
class _Setup:
    """What both generators start from: the checked arguments, the expressions' context, the sizes and limits."""

    precision: str
    soft_off: tuple[str, ...]
    context: Mapping[str, Any]
    sizes: dict[str, int]
    raw: int
    max_raw: int
    max_survivors: int
    applied_soft: tuple[str, ...]


def _setup(
    space: Space,
    device: DeviceLimits,
    precision: str | None,
    soft: bool,
    soft_off: Iterable[str],
    max_raw: int | None,
    max_survivors: int | None,
) -> _Setup:
    """The generators' arguments checked, the limits read (the caller's, else the environment's, else the defaults)."""
    precision, soft_off = _checked_args(space, precision, soft_off)
    context = space.context(precision, device)
    sizes = {p.name: len(p.values) for p in space.parameters}
    return _Setup(
        precision,
        soft_off,
        context,
        sizes,
        math.prod(sizes.values()),
        _limit(max_raw, "AUTOTUNE_MAX_RAW", MAX_RAW),
        _limit(max_survivors, "AUTOTUNE_MAX_SURVIVORS", MAX_SURVIVORS),
        tuple(c.name for c in space.soft if soft and c.name not in soft_off),
    )


def _too_many(space: Space, n: int, which: str, raw: int) -> SpaceError:
    """More than `n` instances pass the `which` constraints: stopped before memory runs out."""
    return space.error(
        f"more than {n:,} instances pass the {which} constraints (raw {raw:,}); stopped before running out of memory",
        hint="add hard constraints or narrow the parameters, or raise the limit: "
        "--max-survivors N (autotune space) or AUTOTUNE_MAX_SURVIVORS=N (every command)",
    )


def _raw_step(raw: int) -> FunnelStep:
    """The funnel's first step: every combination."""
    return FunnelStep("raw", "raw combinations", "product of all parameter values", raw, 0)


def _pruned(
    space: Space, engine: Enumerator, cons: list[Con], max_survivors: int, too_many: Callable[[int], SpaceError]
) -> tuple[dict[str, np.ndarray], int, list[int], list[str]]:
    """Prune while enumerating: the survivors' codes, their count, the funnel's remaining count after each of
    `cons` and the binding order the codes are in."""
    parts = engine.prepare(cons, lambda names: param_deps(space, names))
    remaining, upto = _prefix_counts(engine, cons, parts)
    prefix = [c for c in parts if c.rank <= upto]
    # how many survive the prefix: known when it stopped early, else counted unless that is costly
    total: int | None = remaining[upto] if upto < len(cons) - 1 else None
    if total is None:
        try:
            total = engine.count(prefix, budget=COUNT_BUDGET)
        except TooCostly:
            pass
    kept = total if total is not None else remaining[-1] if remaining else engine.raw
    order = _enumeration_order(space, engine, prefix, kept)
    codes = survivors(engine, prefix, order, max_survivors, too_many, total)
    count = len(codes[order[0]])
    if upto == len(cons) - 1:
        remaining.append(count)
    for con in cons[upto + 1 :]:
        if count:
            codes, count, _ = engine.apply([c for c in parts if c.rank == con.rank], codes, count)
        remaining.append(count)
    return codes, count, remaining, order


def _prefix_counts(engine: Enumerator, cons: list[Con], parts: list[Con]) -> tuple[list[int], int]:
    """The funnel's counts, prefix by prefix, until one prefix leaves few enough rows to enumerate them and filter by
    the remaining constraints one by one (then the counts are lengths): the counts and that prefix's last rank (else
    the last constraint's, the survivors of all)."""
    remaining: list[int] = []
    upto = len(cons) - 1
    for k in range(len(cons) - 1):
        remaining.append(engine.count([c for c in parts if c.rank <= k]))
        if remaining[-1] <= SMALL:
            upto = k
            break
    return remaining, upto


def _enumeration_order(space: Space, engine: Enumerator, prefix: list[Con], kept: int) -> list[str]:
    """The greedy binding order, or file order when it expands about as few rows (its survivors need no sort)."""
    order = engine.order(prefix)
    if order != list(space.param_names):
        greedy = engine.expansions(prefix, order, COUNT_BUDGET)
        in_file = engine.expansions(prefix, space.param_names, COUNT_BUDGET)
        if greedy is not None and in_file is not None and in_file <= greedy + SORT_COST * kept:
            order = list(space.param_names)
    return order


def _full_product(
    space: Space, device: DeviceLimits, setup: _Setup, ranked: list[Constraint], too_many: Any, start: float
) -> Generated:
    """A small space: every combination, in file order, filtered by the constraints in funnel order. Each constraint
    sees the combinations that passed the ones before it, so it meets exactly the values the reference path gives
    it (the reference's partial combinations at that step are these combinations' projections)."""
    context, limit_survivors, raw = setup.context, setup.max_survivors, setup.raw
    codes: dict[str, np.ndarray] = {}
    inner = raw
    for p, d in setup.sizes.items():
        inner //= d
        codes[p] = np.tile(np.repeat(np.arange(d, dtype=code_dtype(d)), inner), raw // (inner * d))
    funnel = [_raw_step(raw)]
    try:  # one environment for every constraint (derived quantities computed once), errors checked on live rows only
        env, alive, counts = _Env(space, context, codes), np.ones(raw, dtype=bool), []
        for c in ranked:
            result = np.asarray(space.eval(c, env, alive))
            if result.dtype.kind not in "biuf":  # _check below says what is wrong
                raise SpaceError("not true/false")
            alive &= np.broadcast_to(result != 0, (raw,))
            counts.append(int(np.count_nonzero(alive)))
    except SpaceError:  # e.g. a derived quantity that divides by zero on rows an earlier constraint removes
        counts = []
    count = raw
    for i, c in enumerate(ranked):
        if c.kind == "soft" and funnel[-1].kind != "soft" and count > limit_survivors:
            raise too_many(limit_survivors, "hard")
        if i < len(counts):
            count = counts[i]
        elif count:  # each constraint on the rows that passed the ones before it, as the reference gives them
            keep = _check(space, c, _Env(space, context, codes), count)
            kept = int(np.count_nonzero(keep))
            if kept < count:
                codes = {q: a[keep] for q, a in codes.items()}
                count = kept
        funnel.append(FunnelStep(c.kind, c.name, c.reason, count, funnel[-1].remaining - count, c.line))
    if counts:
        codes = {q: a[alive] for q, a in codes.items()}
    if funnel[-1].kind != "soft" and count > limit_survivors:
        raise too_many(limit_survivors, "hard")
    return Generated(space, device, setup.precision, setup.applied_soft, codes, funnel, time.perf_counter() - start)


def generate_reference(
    space: Space,
    device: DeviceLimits,
    precision: str | None = None,
    soft: bool = True,
    soft_off: Iterable[str] = (),
    max_raw: int | None = None,
    max_survivors: int | None = None,
) -> Generated:
    """The generator before prune-while-enumerate (hard constraints while enumerating, soft ones on every hard survivor),
    kept as the reference that tests compare `generate` against and as its fallback when evaluating a
    constraint earlier than this path does raises an error. Refuses a space of more than `max_raw` raw
    combinations before any work."""
    start = time.perf_counter()
    setup = _setup(space, device, precision, soft, soft_off, max_raw, max_survivors)
    context, sizes, raw = setup.context, setup.sizes, setup.raw
    order = binding_order(space, space.hard)
    rest = [math.prod(sizes[p] for p in order[i + 1 :]) for i in range(len(order))]
    if raw > setup.max_raw:
        raise _too_raw(space, raw, setup.max_raw)
    kept_rows = [0]
    at_step = by_step(order, space.hard, lambda c: param_deps(space, c.expr.names))
    applied_order = [c for cs in at_step for c in cs]
    survivors = {c.name: 0 for c in applied_order}
    pieces: list[dict[str, np.ndarray]] = []

    def expand(codes: dict[str, np.ndarray], n: int, i: int) -> None:
        if i == len(order):
            pieces.append(codes)
            kept_rows[0] += n
            if kept_rows[0] > setup.max_survivors:
                raise _too_many(space, setup.max_survivors, "hard", raw)
            return
        p, d = order[i], sizes[order[i]]
        rows_per_piece = max(1, CHUNK // d)
        for lo in range(0, n, rows_per_piece):
            hi = min(n, lo + rows_per_piece)
            m = (hi - lo) * d
            new = {q: np.repeat(arr[lo:hi], d) for q, arr in codes.items()}
            new[p] = np.tile(np.arange(d, dtype=code_dtype(d)), hi - lo)
            env = _Env(space, context, new)
            for c in at_step[i]:
                keep = _check(space, c, env, m)
                kept = int(keep.sum())
                survivors[c.name] += kept * rest[i]
                if kept < m:
                    new = {q: arr[keep] for q, arr in new.items()}
                    m = kept
                    env = _Env(space, context, new)
            if m:
                expand(new, m, i + 1)

    expand({}, 1, 0)
    codes = (
        {p: np.concatenate([pc[p] for pc in pieces]) for p in order}
        if pieces
        else {p: np.zeros(0, dtype=code_dtype(sizes[p])) for p in order}
    )
    pieces.clear()  # keep one copy of the survivors, not two
    funnel = [_raw_step(raw)]
    for c in applied_order:
        before = funnel[-1].remaining
        funnel.append(FunnelStep("hard", c.name, c.reason, survivors[c.name], before - survivors[c.name], c.line))
    codes = _soft_filtered(space, context, codes, setup.applied_soft, funnel)
    # file order of rows: sort by parameter codes in file order so listings are stable
    if len(codes[order[0]]):
        keys = [codes[p.name] for p in reversed(space.parameters)]
        idx = np.lexsort(keys)
        codes = {q: arr[idx] for q, arr in codes.items()}
    return Generated(space, device, setup.precision, setup.applied_soft, codes, funnel, time.perf_counter() - start)


def _too_raw(space: Space, raw: int, max_raw: int) -> SpaceError:
    """The space has more raw combinations than the reference generator may expand."""
    biggest = sorted(space.parameters, key=lambda p: -len(p.values))[:3]
    return space.error(
        f"the space has {raw:.3g} raw combinations, above the limit of {max_raw:.3g}",
        hint="narrow the largest parameters ("
        + ", ".join(f"{p.name}: {len(p.values):,} values" for p in biggest)
        + f") or raise the limit: --max-raw {raw} (autotune space) or AUTOTUNE_MAX_RAW={raw} "
        "(every command); generation time grows with the raw count",
    )


def _soft_filtered(
    space: Space,
    context: Mapping[str, Any],
    codes: dict[str, np.ndarray],
    applied_soft: tuple[str, ...],
    funnel: list[FunnelStep],
) -> dict[str, np.ndarray]:
    """The rows that pass the applied soft constraints, in file order of the constraints, each appending its step to
    `funnel`."""
    for c in space.soft:
        if c.name not in applied_soft:
            continue
        n = len(next(iter(codes.values())))
        keep = np.ones(n, dtype=bool)
        for lo in range(0, n, CHUNK):
            part = {q: arr[lo : lo + CHUNK] for q, arr in codes.items()}
            keep[lo : lo + CHUNK] = _check(space, c, _Env(space, context, part), len(part[next(iter(part))]))
        codes = {q: arr[keep] for q, arr in codes.items()}
        remaining = int(keep.sum())
        funnel.append(FunnelStep("soft", c.name, c.reason, remaining, funnel[-1].remaining - remaining, c.line))
    return codes


def serving(generated: Generated, point: TestPoint) -> np.ndarray:
    """Rows whose instance the kernel's `serves:` expression assigns to `point` (all rows without one)."""
    kernel = generated.space.kernel
    return _rows(generated, point, kernel.serves if kernel is not None else None)


def valid_rows(generated: Generated, point: TestPoint) -> np.ndarray:
    """Rows whose instance is valid on `point`: the kernel's `valid:` expression, else `serves:` (all rows
    without either). `serving` rows are a subset wherever a space's `valid` contains its `serves`."""
    kernel = generated.space.kernel
    return _rows(generated, point, kernel.validity if kernel is not None else None)


def _rows(generated: Generated, point: TestPoint, expr: Any) -> np.ndarray:
    if expr is None:
        return np.ones(generated.count, dtype=bool)
    space = generated.space
    env = _Env(space, space.context(generated.precision, generated.device), generated.codes)
    env.update(space.kind.env(point))
    return np.broadcast_to(np.asarray(space.eval(expr, env), dtype=bool), (generated.count,))


def where(generated: Generated, text: str, label: str = "--where") -> np.ndarray:
    """Rows of `generated` for which the user's expression holds (`space list --where`, a config's `where:`)."""
    from autotune.expr import where_rows

    space = generated.space
    env = _Env(space, space.context(generated.precision, generated.device), generated.codes)
    return where_rows(
        text, env, generated.count, SpaceError, f"{', '.join(space.param_names)} and derived quantities", label
    )
