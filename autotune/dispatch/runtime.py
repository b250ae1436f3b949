"""Dispatch-table lookup, standard library only.

Every generated Python lookup module (emit.py) carries a copy of this module's code after its `__future__` line
(RUNTIME_VERSION: the table layout this code reads), so the package and the generated module answer with the same
code and the module needs nothing but the standard library: keep it so (no autotune or third-party import here).
The C++ header (emit.py) implements the same rules
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


def ilog2_fx(x: int) -> int:
    """floor(log2(x) * 2**16) computed on integers (x >= 1), identical in Python and C++."""
    n = x.bit_length() - 1
    y = x << (30 - n) if n <= 30 else x >> (n - 30)  # mantissa in [2**30, 2**31)
    r = n << FX_BITS
    for i in range(FX_BITS):
        y = (y * y) >> 30
        if y >= (1 << 31):
            y >>= 1
            r |= 1 << (FX_BITS - 1 - i)
    return r


def model_features(dims: Sequence[int], table_dims: Sequence[int], tiles: Sequence[int]) -> list[int]:
    """The selection model's features of a problem for a kernel whose tiles over the table sizes are `tiles` (1
    for the library), each a fixed-point log2 (`ilog2_fx`, 16 fractional bits): 1 (the intercept), every size,
    every table size rounded up to MODEL_ALIGN, padded to the kernel's tile, and its tile count, 1 where the
    table size is a multiple of MODEL_ALIGN (else 0), 1 where it is even (else 0), and the sum of
    the pairwise products of the table sizes (the size itself for a kind with one table size; saturated at
    MODEL_SATURATE). Integers only, identical in the C++ header."""
    out = [1 << FX_BITS]
    out += [ilog2_fx(d) for d in dims]
    out += [ilog2_fx(-(-dims[j] // MODEL_ALIGN) * MODEL_ALIGN) for j in table_dims]
    out += [ilog2_fx(-(-dims[j] // t) * t) for j, t in zip(table_dims, tiles, strict=True)]
    out += [ilog2_fx(-(-dims[j] // t)) for j, t in zip(table_dims, tiles, strict=True)]
    out += [(1 << FX_BITS) if dims[j] % MODEL_ALIGN == 0 else 0 for j in table_dims]
    out += [(1 << FX_BITS) if dims[j] % 2 == 0 else 0 for j in table_dims]
    pairs = 0
    if len(table_dims) == 1:
        pairs = dims[table_dims[0]]
    for a in range(len(table_dims)):
        for b in range(a + 1, len(table_dims)):
            term = dims[table_dims[a]] * dims[table_dims[b]]
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
    import math

    return int(round(math.log2(1.0 + float(library_margin)) * (1 << (2 * FX_BITS))))


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


class Lookup:
    """A prepared table (the JSON object of dispatch.py, version 3) answering `index` and `kernel`."""

    def __init__(self, table: dict) -> None:
        self.table = table
        self.names = list(table["size_names"])
        self.precisions = list(table["precisions"])
        self.shapes = list(table["shapes"])
        self.near_dims = [self.names.index(n) for n in table["table_sizes"]]
        self.tie_dims = [d for d in range(len(self.names)) if d not in self.near_dims]
        self.kernels = table["kernels"]
        self.generic = table.get("generic") or {}
        self.bounds = [validity_bounds(k.get("valid", []), self.names) for k in self.kernels]
        self.tuned_only = [bool(k.get("tuned_only", False)) for k in self.kernels]
        self.library = table.get("library") or {}
        self.fallback = FALLBACKS[table.get("fallback", "library")]
        self.points: dict[tuple[str, str], list[tuple[tuple[int, ...], tuple[int, ...], list[int], list[int]]]] = {}
        self.costs: dict[tuple[str, str], list[dict[int, int]]] = {}
        structure = table.get("structure") or {}
        self.mode = str(structure.get("mode", "regions"))
        self.margin = int(round(1000 * float(structure.get("library_margin", 0.0))))  # per mille
        self.reach = int(round(float(structure.get("reach", 1.0)) * (1 << FX_BITS)))
        for p in table["points"]:
            dims = tuple(int(p["sizes"][n]) for n in self.names)
            logs = tuple(ilog2_fx(d) for d in dims)
            self.points.setdefault((p["precision"], p["shape"]), []).append(
                (dims, logs, list(p["ranked"]), list(p.get("near", p["ranked"])))
            )
            self.costs.setdefault((p["precision"], p["shape"]), []).append(
                {int(a): int(c) for a, c in p.get("costs", [])}
            )
        self.regions: dict[tuple[str, str], list[tuple[list[int], list[int], int]]] = {}
        for r in table["regions"]:
            lo = [int(r["bounds"][n][0]) for n in table["table_sizes"]]
            hi = [int(r["bounds"][n][1]) for n in table["table_sizes"]]
            self.regions.setdefault((r["precision"], r["shape"]), []).append((lo, hi, int(r["kernel"])))
        model = table.get("model") or {}
        self.model_kernels = [
            (list(m["tiles"]), list(m["coef"])) if m else None
            for m in (model.get("kernels") or [None] * len(self.kernels))
        ]
        self.model_library = {key: list(c) for key, c in (model.get("library") or {}).items()}
        self.model_margin = model_margin(float(structure.get("library_margin", 0.0)))
        self.device = str(table.get("provenance", {}).get("device", ""))
        self._warned: set[str] = set()

    def check(self, precision: object, shape: object, sizes: Any) -> tuple[int, ...]:
        """The problem's sizes as ints in the table's order (ValueError for invalid input)."""
        return check_problem(precision, shape, sizes, self.names, self.precisions, self.shapes)

    def valid(self, kernel: int, dims: tuple[int, ...], tuned: bool = False) -> bool:
        """Whether an answer may serve `dims` (`tuned`: at a tuned point that measured it)."""
        if kernel == LIBRARY or tuned:
            return True
        if self.tuned_only[kernel]:
            return False
        mult, lo, hi = self.bounds[kernel]
        return all(dims[d] % mult[d] == 0 and lo[d] <= dims[d] <= hi[d] for d in range(len(dims)))

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

    def _distance(self, logs: Sequence[int], plogs: Sequence[int]) -> tuple[int, int]:
        return (
            sum(abs(logs[d] - plogs[d]) for d in self.near_dims),
            sum(abs(logs[d] - plogs[d]) for d in self.tie_dims),
        )

    def index(self, precision: str, shape: str, sizes: Any) -> int:
        """Answer for a problem (see the module docstring): a kernel index, GENERIC (-1), LIBRARY (-2) or NONE
        (-4). `sizes`: {name: value} or the values in the table's size order."""
        dims = self.check(precision, shape, sizes)
        group = (precision, shape)
        points = self.points.get(group, [])
        for pdims, _, ranked, _ in points:
            if pdims == dims:
                return next((c for c in ranked if self.valid(c, dims, tuned=True)), self.fallback)
        if self.mode == "model":
            return self._predicted(precision, shape, dims)
        near = [dims[d] for d in self.near_dims]
        for lo, hi, kern in self.regions.get(group, []):
            if all(lo[j] <= near[j] <= hi[j] for j in range(len(near))) and self.valid(kern, dims):
                return kern
        logs = [ilog2_fx(d) for d in dims]
        if self.mode == "cost":
            return self._cheapest(group, dims, logs)
        best, best_key = self.fallback, None
        for order, (_, plogs, _, near_list) in enumerate(points):
            found = next((c for c in near_list if self.valid(c, dims)), None)
            if found is None:
                continue
            key = self._distance(logs, plogs) + (order,)
            if best_key is None or key < best_key:
                best, best_key = found, key
        return best

    def predicted_times(self, precision: str, shape: str, dims: tuple[int, ...]) -> dict[int, int]:
        """Model mode: {answer: predicted log2 time (32 fractional bits)} for every valid kernel of the group that
        has a model and the library where the group has its model (no margin applied)."""
        out: dict[int, int] = {}
        lib = self.model_library.get(f"{precision}:{shape}")
        if lib is not None:
            out[LIBRARY] = model_time(lib, model_features(dims, self.near_dims, [1] * len(self.near_dims)))
        for i, kern in enumerate(self.kernels):
            m = self.model_kernels[i] if i < len(self.model_kernels) else None
            if m is None or kern.get("precision") != precision or kern.get("shape") != shape or not self.valid(i, dims):
                continue
            out[i] = model_time(m[1], model_features(dims, self.near_dims, m[0]))
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
        points = self.points.get(group, [])
        if not points:
            return self.fallback
        keys = [self._distance(logs, plogs) + (order,) for order, (_, plogs, _, _) in enumerate(points)]
        limit = min(k[0] for k in keys) + self.reach
        best, best_key = self.fallback, None
        for answer in [LIBRARY] + list(range(len(self.kernels))):
            if not self.valid(answer, dims):
                continue
            near = min(
                (keys[i] + (c[answer],) for i, c in enumerate(self.costs.get(group, [])) if answer in c), default=None
            )
            if near is None or near[0] > limit:
                continue
            price = near[3] * (1000 if answer == LIBRARY else 1000 + self.margin)
            key = (price, near[0], 0 if answer == LIBRARY else 1, answer)
            if best_key is None or key < best_key:
                best, best_key = answer, key
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
