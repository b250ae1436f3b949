"""Dispatch-table lookup, standard library only.

Every generated Python lookup module (emit.py) carries a copy of this module's code after its `__future__` line
(RUNTIME_VERSION: the table layout this code reads), so the package and the generated module answer with the same
code and the module needs nothing but the standard library: keep it so (no autotune or third-party import here).
The C++ header (emit_cpp.py, cpp_text.py) implements the same rules
with integer arithmetic only, so both agree bit for bit.

A table (JSON version 3) answers problems of one problem kind: a precision (one of the table's
`precisions`), a variant `shape` (one of its `shapes`; "" for kinds without variants) and one integer
size per name of `size_names`, in the kind's order. `table_sizes` are the sizes the table answers over
(distances, regions, validity); the others (`tie_sizes`) only break ties between equally near points.

Answers: an index into the table's kernels (>= 0), GENERIC = -1 (the kind's generic last-resort kernel),
LIBRARY = -2 (call the library the table was measured against, the kind's baseline) or NONE = -4 (nothing
the table knows may serve the problem: no kernel of the table is valid there and the table has neither a
library nor a generic kernel; the caller must run its own code). Invalid input (a precision or shape not
in the table's lists, a size that is not an integer in 1..MAX_SIZE; bools and floats are not integers,
missing or unknown size names) raises ValueError here; the C++ lookup returns INVALID = -3 for the same
inputs.

Rules, for a valid problem (precision, shape, sizes):
1. Only tuned points and regions of the same precision and shape are considered.
2. Exact tuned point (every size equal): the first entry of its ranked list (the table's kernels measured
   there and the library, fastest first); each was verified and timed at this very problem, so the
   measurement stands in for the predicates (an instance recorded before its space's `serves` changed
   keeps its own points).
3. Merged region (a box over the table sizes, in table order) that contains the problem and whose kernel
   (or the library) is valid here: that answer. A region exists only where every measured point inside it
   had that answer within TOL of the best of the measured instances and the library.
4. Nearest tuned point: among tuned points with a valid entry in their `near` list (the ranked list, with
   the library before kernels not faster than it by the table's library margin; `ranked` where a table has
   no `near`), the nearest one by the log-ratio distance, the sum over the table sizes of |log2 s/s'|
   (ties: the same sum over the tie sizes, then table order) gives its first valid entry. Logarithms are
   fixed point (16 fractional bits, `ilog2_fx`).
4'. Tables of structure mode "cost" replace rule 4 (and have no regions): every valid answer is priced by its
   cost (ms per byte moved) at the tuned point nearest the problem where it was measured; answers measured
   within `reach` (fixed point, like the distances) of the nearest tuned point compete; the cheapest wins,
   kernels' costs multiplied by 1 + library_margin (per mille, integers) against the library's.
   With `neighbours` K >= 2 in the structure, each competing answer is priced instead by the mean fixed-point
   log2 of its cost (`ilog2_fx`, the sum divided by the count, truncated) at the K tuned points nearest the problem
   where it was measured (nearest by distance, then the tie sizes' distance, then table order; fewer where it was
   measured fewer times); kernels' prices raised by `log_margin` (log2(1 + library_margin), 16 fractional bits,
   `cost_log_margin`); the cheapest wins (ties: the library, then the smaller index).
4''. Tables of structure mode "model" replace rules 3 and 4: every valid kernel of the problem's precision and
   shape that has a fitted model, and the library where the table has its model for that group, is priced by
   its predicted time (`model_time`: a linear model of log2 time over integer features of the problem and the
   kernel's tiles, `model_features`, fixed point, integers only); the cheapest wins, a kernel's price raised
   by log2(1 + library_margin) against the library's (ties: the library, then the smaller index).
5. Nothing valid: the table's `fallback`: LIBRARY ("library"), GENERIC ("naive") or NONE ("none").
A kernel is valid where all its predicates hold; predicates are one-key objects over any size name:
{"<size>_multiple_of": 8}, {"min_<size>": 2}, {"max_<size>": 256}. A kernel marked `tuned_only` is
valid nowhere but at the tuned points where it was measured (rule 2). The library is valid everywhere.
"""

from __future__ import annotations

import math
import numbers
import warnings
from operator import le, mul, sub
from typing import Any, Mapping, Sequence

RUNTIME_VERSION = 3  # 1: copied into generated modules; 2: imported, with the selection model (rule 4''); 3: copied
FX_BITS = 16
NO_LIMIT = 1 << 62
MAX_SIZE = (1 << 31) - 1  # sizes are C ints in most kernels' calling conventions
GENERIC, LIBRARY, INVALID, NONE = -1, -2, -3, -4
MODEL_ALIGN = 8  # model feature: each table size rounded up to a multiple of this
MODEL_SATURATE = 1 << 62  # the sum of pairwise products saturates here (C++ long long)
FALLBACKS = {"library": LIBRARY, "naive": GENERIC, "generic": GENERIC, "none": NONE}


def check_problem(
    precision: object, shape: object, sizes: Any, names: Sequence[str], precisions: Sequence[str], shapes: Sequence[str]
) -> tuple[int, ...]:
    """The problem's sizes as ints in the order of `names`, or ValueError for anything the C++ lookup answers
    INVALID (-3). `sizes`: a mapping {name: value} with exactly `names`, or a sequence in that order."""
    if not isinstance(precision, str) or precision not in precisions:
        raise ValueError(f"unknown precision {precision!r}; expected one of {list(precisions)}")
    if not isinstance(shape, str) or shape not in shapes:
        raise ValueError(f"unknown shape {shape!r}; expected one of {list(shapes)}")
    if isinstance(sizes, Mapping):
        if set(sizes) != set(names):
            raise ValueError(f"the sizes are {', '.join(names)}; got {', '.join(map(str, sizes)) or 'none'}")
        values = [sizes[n] for n in names]
    else:
        values = list(sizes)
        if len(values) != len(names):
            raise ValueError(f"expected {len(names)} sizes ({', '.join(names)}), got {len(values)}")
    out = []
    for name, value in zip(names, values, strict=True):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
        if not 1 <= int(value) <= MAX_SIZE:
            raise ValueError(f"{name} must be in 1..{MAX_SIZE}, got {int(value)}")
        out.append(int(value))
    return tuple(out)


def _ilog2_loop(x: int) -> int:
    """floor(log2(x) * 2**16) computed on integers (x >= 1): the definition, identical in the C++ header."""
    n = x.bit_length() - 1
    y = x << (30 - n) if n <= 30 else x >> (n - 30)  # mantissa in [2**30, 2**31)
    r = n << FX_BITS
    for i in range(FX_BITS):
        y = (y * y) >> 30
        if y >= (1 << 31):
            y >>= 1
            r |= 1 << (FX_BITS - 1 - i)
    return r


def ilog2_fx(x: int) -> int:
    """`_ilog2_loop(x)` (floor(log2(x) * 2**16) on integers, as the C++ header computes it), 10 times faster: the
    loop's truncations move its result off floor(2**16 * log2(x)) only where that is within 3e-4 of an integer,
    so a float log2 farther than 0.01 from one gives the same integer, and the loop answers the rest
    (tests/test_lookup_speed.py compares both on every x up to 2**17 and on random x up to 2**62)."""
    if not x & (x - 1):
        return (x.bit_length() - 1) << FX_BITS  # a power of two: what the loop gives
    v = math.log2(x) * (1 << FX_BITS)
    f = math.floor(v)
    return f if 0.01 < v - f < 0.99 else _ilog2_loop(x)


_SMALL_LOGS = [0, *(_ilog2_loop(x) for x in range(1, 1 << 12))]  # ilog2_fx(x) for x < 4096, by index


def _logs(values: Sequence[int]) -> list[int]:
    """ilog2_fx of each value."""
    small, n = _SMALL_LOGS, len(_SMALL_LOGS)
    return [small[v] if v < n else ilog2_fx(v) for v in values]


def model_features(dims: Sequence[int], table_dims: Sequence[int], tiles: Sequence[int]) -> list[int]:
    """The selection model's features of a problem for a kernel whose tiles over the table sizes are `tiles` (1
    for the library), each a fixed-point log2 (`ilog2_fx`, 16 fractional bits): 1 (the intercept), every size,
    every table size rounded up to MODEL_ALIGN, padded to the kernel's tile, and its tile count, 1 where the
    table size is a multiple of MODEL_ALIGN (else 0), 1 where it is even (else 0), and the sum of
    the pairwise products of the table sizes (the size itself for a kind with one table size; saturated at
    MODEL_SATURATE). Integers only, identical in the C++ header."""
    table = [dims[j] for j in table_dims]
    return _model_head(dims, table) + _model_tiled(table, tiles) + _model_tail(table)


def _model_head(dims: Sequence[int], table: Sequence[int]) -> list[int]:
    """The intercept, every size and every table size rounded up to MODEL_ALIGN (model_features)."""
    return [1 << FX_BITS, *_logs(dims), *_logs([-(-x // MODEL_ALIGN) * MODEL_ALIGN for x in table])]


def _model_tiled(table: Sequence[int], tiles: Sequence[int]) -> list[int]:
    """Every table size padded to the kernel's tile, then its tile count (model_features)."""
    counts = [-(-x // t) for x, t in zip(table, tiles, strict=True)]
    return _logs([c * t for c, t in zip(counts, tiles, strict=True)] + counts)


def _model_tail(table: Sequence[int]) -> list[int]:
    """Whether each table size is a multiple of MODEL_ALIGN, whether it is even, and the pairs (model_features)."""
    out = [(1 << FX_BITS) if x % MODEL_ALIGN == 0 else 0 for x in table]
    out += [(1 << FX_BITS) if x % 2 == 0 else 0 for x in table]
    pairs = table[0] if len(table) == 1 else 0
    for a in range(len(table)):
        for b in range(a + 1, len(table)):
            term = table[a] * table[b]
            pairs = MODEL_SATURATE if pairs > MODEL_SATURATE - term else pairs + term
    out.append(ilog2_fx(max(1, pairs)))
    return out


def model_count(num_sizes: int, num_table_sizes: int) -> int:
    """How many features `model_features` gives."""
    return 2 + num_sizes + 5 * num_table_sizes


def model_time(coef: Sequence[int], features: Sequence[int]) -> int:
    """Predicted log2 time (32 fractional bits): the sum of coefficients (16 fractional bits) times features."""
    return sum(int(c) * int(x) for c, x in zip(coef, features, strict=True))


def model_margin(library_margin: float) -> int:
    """log2(1 + library_margin) in the units of `model_time` (what a kernel's price is raised by)."""
    return int(round(math.log2(1.0 + float(library_margin)) * (1 << (2 * FX_BITS))))


def cost_log_margin(library_margin: float) -> int:
    """log2(1 + library_margin) with 16 fractional bits: what a kernel's mean log cost is raised by in cost mode
    with neighbours (rule 4'; the C++ header takes this integer as written by emit)."""
    return int(round(math.log2(1.0 + float(library_margin)) * (1 << FX_BITS)))


def validity_bounds(valid: list[dict[str, int]], names: Sequence[str]) -> tuple[list[int], list[int], list[int]]:
    """Predicates -> (multiple_of, min, max) per size of `names`."""
    n = len(names)
    mult, lo, hi = [1] * n, [1] * n, [NO_LIMIT] * n
    for pred in valid:
        for key, value in pred.items():
            value = int(value)
            if key.endswith("_multiple_of") and key[: -len("_multiple_of")] in names:
                d = names.index(key[: -len("_multiple_of")])
                a, b = mult[d], value
                while b:
                    a, b = b, a % b
                mult[d] = mult[d] * value // a  # lcm
            elif key.startswith("min_") and key[4:] in names:
                lo[names.index(key[4:])] = max(lo[names.index(key[4:])], value)
            elif key.startswith("max_") and key[4:] in names:
                hi[names.index(key[4:])] = min(hi[names.index(key[4:])], value)
            else:
                raise ValueError(
                    f"unknown validity predicate {key!r}: use <size>_multiple_of, min_<size>, max_<size> "
                    f"with a size of {', '.join(names)}"
                )
    return mult, lo, hi


class _Packed:
    """The selection models of one group's answers evaluated at once, exactly: `model_time` of answer i is lane i
    (`width` bits, offset by `bias`) of one integer, the sum over the features of each feature times the integer
    whose lanes are the answers' coefficients of that feature (Python integers have no overflow; a lane holds any
    sum its coefficients can give, so lanes never spill into each other)."""

    def __init__(self, entries: list[tuple[int, tuple[int, ...], list[int]]], nsizes: int, ntab: int) -> None:
        head = 1 + nsizes + ntab  # model_features: head, then padded and count per table size, then the tail
        bound = max(sum(abs(int(c)) for c in coef) for _, _, coef in entries) << 23  # every feature < 2**23
        self.width = bound.bit_length() + 2
        self.bias = 1 << (self.width - 1)
        self.mask = (1 << self.width) - 1
        self.answers = [answer for answer, _, _ in entries]
        lanes = [self.width * lane for lane in range(len(entries))]
        shared = [f for f in range(len(entries[0][2])) if not head <= f < head + 2 * ntab]
        self.shared = [sum(int(coef[f]) << at for (_, _, coef), at in zip(entries, lanes, strict=True)) for f in shared]
        self.start = sum(self.bias << at for at in lanes)
        # per table size and tile: the lanes' coefficients of the padded size and of the tile count
        self.tiled: list[tuple[int, int, int, int]] = []
        for j in range(ntab):
            for tile in sorted({tiles[j] for _, tiles, _ in entries}):
                pad = cnt = 0
                for (_, tiles, coef), at in zip(entries, lanes, strict=True):
                    if tiles[j] == tile:
                        pad += int(coef[head + j]) << at
                        cnt += int(coef[head + ntab + j]) << at
                self.tiled.append((j, int(tile), pad, cnt))

    def value(self, shared: list[int], table: list[int]) -> int:
        """The packed model times at a problem: `shared` its features that do not depend on tiles (head and tail
        of model_features), `table` its table sizes."""
        small, n = _SMALL_LOGS, len(_SMALL_LOGS)
        v = self.start + sum(map(mul, self.shared, shared))
        for j, tile, pad, cnt in self.tiled:
            count = -(-table[j] // tile)
            padded = count * tile
            v += pad * (small[padded] if padded < n else ilog2_fx(padded)) + cnt * (
                small[count] if count < n else ilog2_fx(count)
            )
        return v


class Lookup:
    """A prepared table (the JSON object of dispatch.py, version 3) answering `index` and `kernel`."""

    def __init__(self, table: dict) -> None:
        self.table = table
        self.names = list(table["size_names"])
        self.precisions = list(table["precisions"])
        self.shapes = list(table["shapes"])
        self.near_dims = [self.names.index(n) for n in table["table_sizes"]]
        self.tie_dims = [d for d in range(len(self.names)) if d not in self.near_dims]
        self._read_kernels(table)
        structure = table.get("structure") or {}
        self.mode = str(structure.get("mode", "regions"))
        self.margin = int(round(1000 * float(structure.get("library_margin", 0.0))))  # per mille
        self.reach = int(round(float(structure.get("reach", 1.0)) * (1 << FX_BITS)))
        self.neighbours = int(structure.get("neighbours", 1))
        self.log_margin = cost_log_margin(float(structure.get("library_margin", 0.0)))
        self.model_margin = model_margin(float(structure.get("library_margin", 0.0)))
        self._read_points(table)
        self._read_regions(table)
        self._read_model(table)
        self.device = str(table.get("provenance", {}).get("device", ""))
        self._warned: set[str] = set()

    def _read_kernels(self, table: dict) -> None:
        """The kernels, their validity bounds and checks, the library, the generic kernel and the fallback."""
        self.kernels = table["kernels"]
        self.generic = table.get("generic") or {}
        self.bounds = [validity_bounds(k.get("valid", []), self.names) for k in self.kernels]
        self.tuned_only = [bool(k.get("tuned_only", False)) for k in self.kernels]
        # per kernel, the sizes its predicates constrain: (size, multiple, min, max); None: tuned_only
        self._checks: list[tuple[tuple[int, int, int, int], ...] | None] = [
            None
            if only
            else tuple(
                (d, mult[d], lo[d], hi[d])
                for d in range(len(self.names))
                if mult[d] != 1 or lo[d] > 1 or hi[d] < MAX_SIZE
            )
            for only, (mult, lo, hi) in zip(self.tuned_only, self.bounds, strict=True)
        ]
        self.library = table.get("library") or {}
        self.fallback = FALLBACKS[table.get("fallback", "library")]

    def _read_points(self, table: dict) -> None:
        """The tuned points per (precision, shape): sizes, logs, ranked and near lists, costs (rules 2, 4, 4')."""
        self.points: dict[tuple[str, str], list[tuple[tuple[int, ...], tuple[int, ...], list[int], list[int]]]] = {}
        self.costs: dict[tuple[str, str], list[dict[int, int]]] = {}
        self.exact: dict[tuple[str, str], dict[tuple[int, ...], list[int]]] = {}  # tuned point -> ranked (rule 2)
        for p in table["points"]:
            dims = tuple(int(p["sizes"][n]) for n in self.names)
            logs = tuple(ilog2_fx(d) for d in dims)
            self.points.setdefault((p["precision"], p["shape"]), []).append(
                (dims, logs, list(p["ranked"]), list(p.get("near", p["ranked"])))
            )
            self.exact.setdefault((p["precision"], p["shape"]), {}).setdefault(dims, list(p["ranked"]))
            self.costs.setdefault((p["precision"], p["shape"]), []).append(
                {int(a): int(c) for a, c in p.get("costs", [])}
            )
        # cost mode, per group and point: {answer: (cost, point order)} for the kernels and the library it measured
        self._measured = {
            group: [
                {a: (c, order) for a, c in costs.items() if a == LIBRARY or 0 <= a < len(self.kernels)}
                for order, costs in enumerate(per_point)
            ]
            for group, per_point in self.costs.items()
        }
        # cost mode with neighbours, per group and point: [(answer, ilog2_fx(cost))] of the answers it measured
        self._log_costs = {
            group: [[(a, ilog2_fx(max(1, c))) for a, (c, _) in sorted(m.items())] for m in per_point]
            for group, per_point in self._measured.items()
        }
        # per group, each point's logs of the table sizes (distances)
        self._near_logs = {
            group: [tuple(plogs[d] for d in self.near_dims) for _, plogs, _, _ in points]
            for group, points in self.points.items()
        }

    def _read_regions(self, table: dict) -> None:
        """The merged regions per (precision, shape): boxes over the table sizes and their answer (rule 3)."""
        self.regions: dict[tuple[str, str], list[tuple[list[int], list[int], int]]] = {}
        for r in table["regions"]:
            lo = [int(r["bounds"][n][0]) for n in table["table_sizes"]]
            hi = [int(r["bounds"][n][1]) for n in table["table_sizes"]]
            self.regions.setdefault((r["precision"], r["shape"]), []).append((lo, hi, int(r["kernel"])))

    def _read_model(self, table: dict) -> None:
        """The selection models (rule 4''): per kernel and per group's library, packed per group (`_Packed`)."""
        model = table.get("model") or {}
        self.model_kernels = [
            (list(m["tiles"]), list(m["coef"])) if m else None
            for m in (model.get("kernels") or [None] * len(self.kernels))
        ]
        self.model_library = {key: list(c) for key, c in (model.get("library") or {}).items()}
        # model mode, per group: the library's and each modelled kernel's coefficients split as the features are
        # (model_features: those of the problem alone, those of its tiles, the flags and pairs after them)
        ntab = len(self.near_dims)
        entries: dict[tuple[str, str], list[tuple[int, tuple[int, ...], list[int]]]] = {}
        for key, c in self.model_library.items():
            precision, _, shape = key.partition(":")
            entries.setdefault((precision, shape), []).append((LIBRARY, (1,) * ntab, c))
        for i, (kern, m) in enumerate(zip(self.kernels, self.model_kernels, strict=False)):
            if m is not None:
                group = (kern.get("precision"), kern.get("shape"))
                entries.setdefault(group, []).append((i, tuple(m[0]), m[1]))  # type: ignore[arg-type]
        self._model = {group: _Packed(e, len(self.names), ntab) for group, e in entries.items()}

    def check(self, precision: object, shape: object, sizes: Any) -> tuple[int, ...]:
        """The problem's sizes as ints in the table's order (ValueError for invalid input)."""
        if (
            type(sizes) is tuple
            and len(sizes) == len(self.names)
            and all(type(v) is int and 1 <= v <= MAX_SIZE for v in sizes)
            and precision in self.precisions
            and shape in self.shapes
            and type(precision) is str
            and type(shape) is str
        ):
            return sizes  # the common call, checked without building anything
        return check_problem(precision, shape, sizes, self.names, self.precisions, self.shapes)

    def valid(self, kernel: int, dims: tuple[int, ...], tuned: bool = False) -> bool:
        """Whether an answer may serve `dims` (`tuned`: at a tuned point that measured it)."""
        if kernel == LIBRARY or tuned:
            return True
        checks = self._checks[kernel]
        if checks is None:
            return False
        for d, mult, lo, hi in checks:
            x = dims[d]
            if x % mult or x < lo or x > hi:
                return False
        return True

    def check_device(self, device: str | None) -> bool:
        """True when `device` is the GPU the table was tuned on (or unknown); warns once otherwise."""
        if not device or not self.device or device.strip().lower() == self.device.strip().lower():
            return True
        if device not in self._warned:
            self._warned.add(device)
            warnings.warn(
                f"dispatch table was tuned on {self.device!r} but is used on {device!r}: "
                "its choices and loss bounds may not hold; re-tune on this GPU",
                stacklevel=3,
            )
        return False

    def _distances(self, group: tuple[str, str], logs: Sequence[int]) -> list[int]:
        """The log-ratio distance over the table sizes from a problem (its `logs`) to every tuned point of its
        group (one expression for up to 3 table sizes, the common case)."""
        near = [logs[d] for d in self.near_dims]
        rows = self._near_logs[group]
        if len(near) == 3:
            a, b, c = near
            return [
                (a - x if a > x else x - a) + (b - y if b > y else y - b) + (c - z if c > z else z - c)
                for x, y, z in rows
            ]
        if len(near) == 2:
            a, b = near
            return [(a - x if a > x else x - a) + (b - y if b > y else y - b) for x, y in rows]
        return [sum(map(abs, map(sub, near, row))) for row in rows]

    def _tie(self, group: tuple[str, str], logs: Sequence[int], order: int) -> int:
        """The log-ratio distance over the tie sizes from a problem to the group's tuned point `order`."""
        plogs = self.points[group][order][1]
        return sum(abs(logs[d] - plogs[d]) for d in self.tie_dims)

    def _distance(self, logs: Sequence[int], plogs: Sequence[int]) -> tuple[int, int]:
        near, tie = self.near_dims, self.tie_dims
        return (
            sum(map(abs, map(sub, [logs[d] for d in near], [plogs[d] for d in near]))),
            sum(map(abs, map(sub, [logs[d] for d in tie], [plogs[d] for d in tie]))),
        )

    def index(self, precision: str, shape: str, sizes: Any) -> int:
        """Answer for a problem (see the module docstring): a kernel index, GENERIC (-1), LIBRARY (-2) or NONE
        (-4). `sizes`: {name: value} or the values in the table's size order."""
        dims = self.check(precision, shape, sizes)
        group = (precision, shape)
        ranked = self.exact.get(group, {}).get(dims)
        if ranked is not None:
            return ranked[0] if ranked else self.fallback  # measured here: every ranked entry is valid (rule 2)
        points = self.points.get(group, [])
        if self.mode == "model":
            return self._predicted(precision, shape, dims)
        near = [dims[d] for d in self.near_dims]
        for lo, hi, kern in self.regions.get(group, []):
            if all(map(le, lo, near)) and all(map(le, near, hi)) and self.valid(kern, dims):
                return kern
        if not points:
            return self.fallback
        logs = _logs(dims)
        if self.mode == "cost":
            return self._cheapest(group, dims, logs)
        dist = self._distances(group, logs)
        best, best_key = self.fallback, None
        seen: dict[int, bool] = {}  # validity of each answer at this problem, computed once
        nearest = min(dist)
        # the nearest points first: one of them answers unless none has a valid entry; then every point
        for candidates in ([i for i, x in enumerate(dist) if x == nearest], range(len(points))):
            for order in candidates:
                if best_key is not None and dist[order] > best_key[0]:
                    continue  # farther than the best so far: it cannot win
                found = None
                for c in points[order][3]:
                    ok = seen.get(c)
                    if ok is None:
                        ok = seen[c] = self.valid(c, dims)
                    if ok:
                        found = c
                        break
                if found is None:
                    continue
                key = (dist[order], self._tie(group, logs, order), order)
                if best_key is None or key < best_key:
                    best, best_key = found, key
            if best_key is not None:
                break
        return best

    def predicted_times(self, precision: str, shape: str, dims: tuple[int, ...]) -> dict[int, int]:
        """Model mode: {answer: predicted log2 time (32 fractional bits)} for every valid kernel of the group that
        has a model and the library where the group has its model (no margin applied): `model_time` over
        `model_features`, the features a problem shares across kernels computed once."""
        out: dict[int, int] = {}
        packed = self._model.get((precision, shape))
        if packed is None:
            return out
        table = [dims[j] for j in self.near_dims]
        value = packed.value(_model_head(dims, table) + _model_tail(table), table)
        width, mask, bias = packed.width, packed.mask, packed.bias
        for lane, answer in enumerate(packed.answers):
            if answer >= 0:
                checks = self._checks[answer]
                if checks is None or (checks and not self.valid(answer, dims)):
                    continue
            out[answer] = ((value >> (width * lane)) & mask) - bias
        return out

    def _predicted(self, precision: str, shape: str, dims: tuple[int, ...]) -> int:
        """Model mode (rule 4''): the answer with the smallest predicted time, kernels' raised by the margin."""
        best, best_key = self.fallback, None
        for answer, t in self.predicted_times(precision, shape, dims).items():
            key = (t if answer == LIBRARY else t + self.model_margin, 0 if answer == LIBRARY else 1, answer)
            if best_key is None or key < best_key:
                best, best_key = answer, key
        return best

    def _cheapest(self, group: tuple[str, str], dims: tuple[int, ...], logs: list[int]) -> int:
        """Cost mode (rule 4'): each valid answer's cost at the tuned point nearest the problem where it was
        measured (distance, then the tie sizes' distance, then table order); answers measured within `reach` of
        the nearest tuned point compete; the cheapest wins (kernel costs times 1 + margin against the library's;
        ties: the nearer measurement, then the library, then the smaller index)."""
        if self.neighbours > 1:
            return self._cheapest_mean(group, dims, logs)
        dist = self._distances(group, logs)
        limit = min(dist) + self.reach
        within = sorted((dist[i], self._tie(group, logs, i), i) for i in range(len(dist)) if dist[i] <= limit)
        nearest: dict[int, tuple[int, int]] = {}  # answer -> (its cost, the order of its nearest measurement)
        measured = self._measured[group]
        for _, _, order in reversed(within):  # an answer measured farther is overwritten by a nearer measurement
            nearest.update(measured[order])
        kernel_price = 1000 + self.margin
        ranked = [
            (cost * (1000 if a == LIBRARY else kernel_price), dist[order], a != LIBRARY, a)
            for a, (cost, order) in nearest.items()
            if a == LIBRARY or self.valid(a, dims)
        ]
        best = min(ranked)[3] if ranked else self.fallback
        return best

    def _cheapest_mean(self, group: tuple[str, str], dims: tuple[int, ...], logs: list[int]) -> int:
        """Cost mode with neighbours K >= 2 (rule 4'): the answers measured within `reach` of the nearest tuned
        point compete, each priced by the mean log2 cost of its K nearest measurements; kernels' raised by
        `log_margin`; the cheapest wins (ties: the library, then the smaller index)."""
        dist = self._distances(group, logs)
        limit = min(dist) + self.reach
        measured = self._log_costs[group]
        competing = {a for i, x in enumerate(dist) if x <= limit for a, _ in measured[i]}
        ok = {a for a in competing if a == LIBRARY or self.valid(a, dims)}
        if not ok:
            return self.fallback
        if self.tie_dims:
            order = sorted(range(len(dist)), key=lambda i: (dist[i], self._tie(group, logs, i), i))
        else:
            order = sorted(range(len(dist)), key=lambda i: (dist[i], i))
        k = self.neighbours
        sums: dict[int, int] = dict.fromkeys(ok, 0)
        counts: dict[int, int] = dict.fromkeys(ok, 0)
        full = 0
        for i in order:
            for a, lc in measured[i]:
                n = counts.get(a)
                if n is None or n >= k:
                    continue
                sums[a] += lc
                counts[a] = n + 1
                full += n + 1 == k
            if full == len(ok):
                break
        best, best_key = self.fallback, None
        for a in ok:
            price = sums[a] // counts[a] + (0 if a == LIBRARY else self.log_margin)
            key = (price, a != LIBRARY, a)
            if best_key is None or key < best_key:
                best, best_key = a, key
        return best

    def kernel(self, index: int, precision: str, shape: str) -> dict:
        """The kernel record for an index; the generic kernel's record for -1 (`generic: True`); the library's for
        -2 ({"library": name, "instance_id": None, ...}: call the library); for -4 {"none": True, ...}."""
        if index >= 0:
            return self.kernels[index]
        if index == LIBRARY:
            return {
                **self.library,
                "library": self.library.get("name"),
                "instance_id": None,
                "precision": precision,
                "shape": shape,
                "template": None,
                "generic": False,
            }
        if index == NONE:
            return {
                "none": True,
                "instance_id": None,
                "precision": precision,
                "shape": shape,
                "template": None,
                "generic": False,
            }
        templates = self.generic.get("templates", {})
        return {
            **self.generic,
            "instance_id": None,
            "precision": precision,
            "shape": shape,
            "template": templates.get(f"{precision}:{shape}"),
            "generic": True,
        }
