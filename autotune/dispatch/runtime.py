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
   With `library_steps` in the structure (cost mode; predicates over the sizes, `parse_steps`), the library is
   priced from its K nearest measurements at tuned points of the problem's step class (the same truth value of
   every predicate), or of every class where the group has no library measurement in the problem's class; K = 1
   then takes this rule too (the mean of one).
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

import numbers
import warnings
from typing import Any, Mapping, Sequence

from autotune.dispatch.cost import (  # noqa: F401 INVALID: an answer's name, imported from here
    GENERIC,
    INVALID,
    LIBRARY,
    NONE,
    CostRules,
    Group,
    Means,
    parse_steps,
    step_class,
    step_failures,
)
from autotune.dispatch.features import FX_BITS, ModelLanes, cost_log_margin, ilog2_fx, model_margin
from autotune.dispatch.lanes import Boxes, Checks, Invalid, Keys

RUNTIME_VERSION = 3  # 1: copied into generated modules; 2: imported, with the selection model (rule 4''); 3: copied
NO_LIMIT = 1 << 62
MAX_SIZE = (1 << 31) - 1  # sizes are C ints in most kernels' calling conventions
FALLBACKS = {"library": LIBRARY, "naive": GENERIC, "generic": GENERIC, "none": NONE}
_INT = {int}  # the types of a problem's sizes on the fast path of Lookup.check (not bool)


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


class Lookup(CostRules):
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
        self.steps = parse_steps(structure.get("library_steps", []), self.names)
        self._step_fails = step_failures(self.steps, self._limits)
        self.log_margin = cost_log_margin(float(structure.get("library_margin", 0.0)))
        self.model_margin = model_margin(float(structure.get("library_margin", 0.0)))
        self._rule4 = {
            "model": self._predicted,
            "cost": self._cheapest if self.neighbours <= 1 and not self.steps else self._cheapest_mean,
        }.get(self.mode, self._nearest)
        self._groups: dict[tuple[str, str], Group] = {}
        self._mean = Means(len(self.kernels), max(1, self.neighbours), self.log_margin)
        self._read_points(table)
        self._read_model(table)
        for g in self._groups.values():
            g.regions = Boxes(g.boxes, self.near_dims) if g.boxes else None
            if g.sizes:
                dims = self.near_dims + self.tie_dims
                g.keys = Keys([[p[d] for d in dims] for p in g.sizes], dims, ilog2_fx, len(self.near_dims))
                at = g.keys.bits - g.keys.shift + self._code_bits  # the price above the distance and the code
                g.priced = [[(c << at | code, bit) for c, code, bit in p] for p in g.costs]
            self._prepare_means(g)
        self._groups = {k: g for k, g in self._groups.items() if k[0] in self.precisions and k[1] in self.shapes}
        for g in self._groups.values() if self.mode == "cost" else ():
            self._calibrate(g)
            if self._rule4 == self._cheapest_mean and self.neighbours > 1 and g.keys is not None:
                g.keys.index()  # after `_calibrate`, which times the bands; K = 1 reads a band or two (cheaper)
        self.device = str(table.get("provenance", {}).get("device", ""))
        self._warned: set[str] = set()

    def _group(self, precision: str, shape: str) -> Group:
        return self._groups.setdefault((precision, shape), Group())

    def _read_kernels(self, table: dict) -> None:
        """The kernels, their validity bounds and checks, the library, the generic kernel and the fallback."""
        self.kernels = table["kernels"]
        self.generic = table.get("generic") or {}
        bounds = [validity_bounds(k.get("valid", []), self.names) for k in self.kernels]
        # per kernel, the sizes its predicates constrain: (size, multiple, min, max); None: tuned_only
        self._checks: list[Checks | None] = [
            None
            if k.get("tuned_only", False)
            else tuple(
                (d, mult[d], lo[d], hi[d])
                for d in range(len(self.names))
                if mult[d] != 1 or lo[d] > 1 or hi[d] < MAX_SIZE
            )
            for k, (mult, lo, hi) in zip(self.kernels, bounds, strict=True)
        ]
        # tabulated (lanes.py) up to twice the largest tuned value of each size
        self._limits = [2 * max((int(p["sizes"][n]) for p in table["points"]), default=0) for n in self.names]
        self._invalid = Invalid([(c, 1 << i) for i, c in enumerate(self._checks)], self._limits)  # kernel i: bit i
        self.library = table.get("library") or {}
        self.fallback = FALLBACKS[table.get("fallback", "library")]
        self._code_bits = (len(self.kernels) + 1).bit_length()  # cost mode: 0 the library, kernel i: i + 1

    def _read_points(self, table: dict) -> None:
        """The tuned points per (precision, shape): sizes, logs, ranked and near lists, costs (rules 2, 4, 4'), and
        the merged regions (rule 3)."""
        self.points: dict[tuple[str, str], list[tuple[tuple[int, ...], tuple[int, ...], list[int], list[int]]]] = {}
        self.exact: dict[tuple[str, str], dict[tuple[int, ...], list[int]]] = {}  # tuned point -> ranked (rule 2)
        price = {LIBRARY: 1000, **{i: 1000 + self.margin for i in range(len(self.kernels))}}
        for p in table["points"]:
            key = (p["precision"], p["shape"])
            g = self._group(*key)
            dims = tuple(int(p["sizes"][n]) for n in self.names)
            logs = tuple(ilog2_fx(d) for d in dims)
            ranked, near = list(p["ranked"]), list(p.get("near", p["ranked"]))
            self.points.setdefault(key, []).append((dims, logs, ranked, near))
            if dims not in self.exact.setdefault(key, {}):
                self.exact[key][dims] = ranked
                g.exact[dims] = ranked[0] if ranked else self.fallback  # measured here: every entry is valid
            costs = {int(a): int(c) for a, c in p.get("costs", [])}
            costs = {a: c for a, c in costs.items() if a in price}  # the kernels and the library it measured
            bit = {a: 1 << (a if a >= 0 else len(self.kernels)) for a in costs}  # the library: above the kernels
            g.costs.append(sorted((c * price[a], a + 1 if a >= 0 else 0, bit[a]) for a, c in costs.items()))
            g.measured.append(sum(bit.values()))
            g.log_costs.append([(a, ilog2_fx(max(1, c))) for a, c in sorted(costs.items())])
            g.near.append(near)
            g.near_bits.append(-1 if any(c < 0 for c in near) else sum(1 << c for c in set(near)))
            g.sizes.append(dims)
            g.classes.append(step_class(self.steps, dims))
            if LIBRARY in costs:
                g.library_classes.add(g.classes[-1])
        for r in table["regions"]:
            lo = [int(r["bounds"][n][0]) for n in table["table_sizes"]]
            hi = [int(r["bounds"][n][1]) for n in table["table_sizes"]]
            self._group(r["precision"], r["shape"]).boxes.append((lo, hi, int(r["kernel"])))

    def _read_model(self, table: dict) -> None:
        """The selection models (rule 4''): per kernel and per group's library, packed per group (`ModelLanes`)."""
        model = table.get("model") or {}
        kernels = [
            (list(m["tiles"]), list(m["coef"])) if m else None
            for m in (model.get("kernels") or [None] * len(self.kernels))
        ]
        ntab = len(self.near_dims)
        entries: dict[tuple[str, str], list[tuple[int, tuple[int, ...], list[int]]]] = {}
        for key, c in (model.get("library") or {}).items():
            precision, _, shape = key.partition(":")
            entries.setdefault((precision, shape), []).append((LIBRARY, (1,) * ntab, list(c)))
        for i, (kern, m) in enumerate(zip(self.kernels, kernels, strict=False)):
            if m is not None:
                group = (kern.get("precision"), kern.get("shape"))
                entries.setdefault(group, []).append((i, tuple(m[0]), m[1]))  # type: ignore[arg-type]
        for (precision, shape), e in entries.items():
            raised = [0 if a == LIBRARY else self.model_margin for a, _, _ in e]
            checks = [() if a == LIBRARY else self._checks[a] for a, _, _ in e]
            model = ModelLanes(e, len(self.names), self.near_dims, raised, checks, self._limits)
            self._group(precision, shape).model = model

    def check(self, precision: object, shape: object, sizes: Any) -> tuple[int, ...]:
        """The problem's sizes as ints in the table's order (ValueError for invalid input)."""
        if (
            type(sizes) is tuple
            and len(sizes) == len(self.names) > 0
            and _INT.issuperset(map(type, sizes))
            and 1 <= min(sizes)
            and max(sizes) <= MAX_SIZE
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

    def index(self, precision: str, shape: str, sizes: Any) -> int:
        """Answer for a problem (see the module docstring): a kernel index, GENERIC (-1), LIBRARY (-2) or NONE
        (-4). `sizes`: {name: value} or the values in the table's size order."""
        g = self._groups.get((precision, shape)) if type(precision) is str and type(shape) is str else None
        if (
            g is not None
            and type(sizes) is tuple
            and len(sizes) == len(self.names) > 0
            and _INT.issuperset(map(type, sizes))
            and 1 <= min(sizes)
            and max(sizes) <= MAX_SIZE
        ):
            dims = sizes  # the common call, checked without building anything
        else:
            dims = self.check(precision, shape, sizes)  # ValueError for invalid input
            g = self._groups.get((precision, shape))
            if g is None:
                return self.fallback
        answer = g.exact.get(dims)
        if answer is not None:
            return answer  # rule 2
        if g.regions is not None:  # rule 3: the first region containing the problem whose answer is valid there
            inside, bad = g.regions.at(dims), -1
            while inside:
                low = inside & -inside
                kern = g.regions.kernels[low.bit_length() - 1]
                if kern < 0:
                    return kern
                bad = self._invalid.at(dims) if bad < 0 else bad
                if not bad >> kern & 1:
                    return kern
                inside ^= low
        return self._rule4(g, dims)

    def _nearest(self, g: Group, dims: tuple[int, ...]) -> int:
        """Rule 4: the first valid entry of the near list of the nearest tuned point that has one."""
        if g.keys is None:
            return self.fallback
        bad, bits, mask = self._invalid.at(dims), g.near_bits, g.keys.order_mask
        for band in g.keys.bands(dims):
            for key in band:
                if bits[key & mask] & ~bad:
                    return _first_valid(g.near[key & mask], bad)  # type: ignore[return-value]
        return self.fallback

    def nearest(self, precision: str, shape: str, dims: tuple[int, ...]) -> int | None:
        """The position in `points[(precision, shape)]` of the tuned point nearest a problem (distance, the tie
        sizes' distance, table order), None where the group has none."""
        g = self._groups.get((precision, shape))
        if g is None or g.keys is None:
            return None
        return next(iter(g.keys.bands(dims)))[0] & g.keys.order_mask

    def predicted_times(self, precision: str, shape: str, dims: tuple[int, ...]) -> dict[int, int]:
        """Model mode: {answer: predicted log2 time (32 fractional bits)} for every valid kernel of the group that
        has a model and the library where the group has its model (no margin applied): `model_time` over
        `model_features`."""
        g = self._groups.get((precision, shape))
        packed = g.model if g is not None else None
        if packed is None:
            return {}
        values = packed.lanes(dims)
        return {
            a: v - packed.bias - r
            for a, v, r in zip(packed.answers, values, packed.raised, strict=True)
            if v != packed.full
        }

    def _predicted(self, g: Group, dims: tuple[int, ...]) -> int:
        """Model mode (rule 4''): the answer with the smallest predicted time, kernels' raised by the margin (ties:
        the library, then the smaller index: the lower lane)."""
        if g.model is None:
            return self.fallback
        values = g.model.lanes(dims)
        low = min(values)
        return self.fallback if low == g.model.full else g.model.answers[values.index(low)]

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


def _first_valid(answers: list[int], bad: int) -> int | None:
    """The first answer of a near list that is valid (`bad`: the kernels that are not, as bits), None if none is."""
    for c in answers:
        if c < 0 or not bad >> c & 1:
            return c
    return None
