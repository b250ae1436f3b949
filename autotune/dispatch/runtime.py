"""Dispatch-table lookup, standard library only.

This file is copied verbatim into every generated Python lookup module (emit.py), so the package and
the generated module answer with the same code; the C++ header (emit.py) implements the same rules
with integer arithmetic only, so both agree bit for bit.

Answers: an index into the table's kernels (>= 0), GENERIC = -1 (the gemm_naive kernel), LIBRARY = -2
(call the vendor library the table was measured against, e.g. cuBLAS). Invalid input (a precision or
shape not in PRECISIONS / SHAPES, a size or batch that is not an integer in 1..MAX_SIZE; bools and
floats are not integers) raises ValueError here; the C++ lookup returns INVALID = -3 for the same inputs.

Rules, for a valid problem (precision, shape, M, N, K, batch):
1. Only tuned points and regions of the same precision and shape are considered.
2. Exact tuned point: the first entry of its ranked list (the table's kernels measured there and the
   library, fastest first); each was verified and timed at this very problem, so the measurement stands
   in for the predicates (an instance recorded before its space's `serves` changed keeps its own points).
3. Merged region (a box over M, N, K, in table order) that contains the problem and whose kernel (or
   the library) is valid here: that answer. A region exists only where every measured point inside it had
   that answer within TOL of the best of the measured instances and the library.
4. Nearest tuned point: among tuned points with a valid entry in their `near` list (the ranked list, with
   the library before kernels not faster than it by the table's library margin; `ranked` where a table has
   no `near`), the nearest one by the log-ratio distance |log2 M/M'| + |log2 N/N'| + |log2 K/K'| (ties:
   |log2 batch/batch'|, then table order) gives its first valid entry. Logarithms are fixed point (16 fractional bits, `ilog2_fx`).
4'. Tables of structure mode "cost" replace rule 4 (and have no regions): every valid answer is priced by its
   cost (ms per byte moved) at the tuned point nearest the problem where it was measured; answers measured
   within `reach` (fixed point, like the distances) of the nearest tuned point compete; the cheapest wins,
   kernels' costs multiplied by 1 + library_margin (per mille, integers) against the library's.
5. Nothing valid: the table's `fallback`, LIBRARY by default, GENERIC for a table emitted with
   `--fallback naive` (and for version-1 tables, which had no library).
A kernel is valid where all its predicates hold; predicates are one-key objects: {"m_multiple_of": 8},
{"max_k": 256}, {"min_batch": 2}, ... for the dimensions m, n, k, batch. A kernel marked `tuned_only` is
valid nowhere but at the tuned points where it was measured (rule 2). The library is valid everywhere.
"""
from __future__ import annotations

import numbers
import warnings

PRECISIONS = ("fp64", "fp32", "fp16")
SHAPES = ("NN", "NT", "TN", "TT")
DIMS = ("m", "n", "k", "batch")
FX_BITS = 16
NO_LIMIT = (1 << 62)
MAX_SIZE = (1 << 31) - 1  # sizes and batch are C ints in the kernels' calling conventions
GENERIC, LIBRARY, INVALID = -1, -2, -3
FALLBACKS = {"library": LIBRARY, "naive": GENERIC}


def check_problem(precision: object, shape: object, m: object, n: object, k: object,
                  batch: object) -> tuple[int, int, int, int]:
    """The problem's sizes as ints, or ValueError for anything the C++ lookup answers INVALID (-3)."""
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {list(PRECISIONS)}")
    if not isinstance(shape, str) or shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; expected one of {list(SHAPES)}")
    dims = []
    for name, value in zip(DIMS, (m, n, k, batch)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
        if not 1 <= int(value) <= MAX_SIZE:
            raise ValueError(f"{name} must be in 1..{MAX_SIZE}, got {int(value)}")
        dims.append(int(value))
    return dims[0], dims[1], dims[2], dims[3]


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


def validity_bounds(valid: list[dict[str, int]]) -> tuple[list[int], list[int], list[int]]:
    """Predicates -> (multiple_of, min, max) per dimension m, n, k, batch."""
    mult, lo, hi = [1, 1, 1, 1], [1, 1, 1, 1], [NO_LIMIT] * 4
    for pred in valid:
        for key, value in pred.items():
            value = int(value)
            if key.endswith("_multiple_of") and key[: -len("_multiple_of")] in DIMS:
                d = DIMS.index(key[: -len("_multiple_of")])
                a, b = mult[d], value
                while b:
                    a, b = b, a % b
                mult[d] = mult[d] * value // a  # lcm
            elif key.startswith("min_") and key[4:] in DIMS:
                lo[DIMS.index(key[4:])] = max(lo[DIMS.index(key[4:])], value)
            elif key.startswith("max_") and key[4:] in DIMS:
                hi[DIMS.index(key[4:])] = min(hi[DIMS.index(key[4:])], value)
            else:
                raise ValueError(f"unknown validity predicate {key!r}: use <dim>_multiple_of, min_<dim>, max_<dim>")
    return mult, lo, hi


class Lookup:
    """A prepared table (the JSON object of dispatch.py) answering `index` and `kernel`."""

    def __init__(self, table: dict) -> None:
        self.table = table
        self.kernels = table["kernels"]
        self.generic = table.get("generic", {})
        self.bounds = [validity_bounds(k.get("valid", [])) for k in self.kernels]
        self.tuned_only = [bool(k.get("tuned_only", False)) for k in self.kernels]
        self.library = table.get("library") or {}
        version1 = int(table.get("version", 2)) < 2
        self.fallback = FALLBACKS[table.get("fallback", "naive" if version1 else "library")]
        self.points: dict[tuple[str, str], list[tuple[tuple[int, ...], tuple[int, ...], list[int], list[int]]]] = {}
        self.costs: dict[tuple[str, str], list[dict[int, int]]] = {}
        structure = table.get("structure") or {}
        self.mode = str(structure.get("mode", "regions"))
        self.margin = int(round(1000 * float(structure.get("library_margin", 0.0))))  # per mille
        self.reach = int(round(float(structure.get("reach", 1.0)) * (1 << FX_BITS)))
        for p in table["points"]:
            dims = (int(p["m"]), int(p["n"]), int(p["k"]), int(p["batch"]))
            logs = tuple(ilog2_fx(d) for d in dims)
            self.points.setdefault((p["precision"], p["shape"]), []).append(
                (dims, logs, list(p["ranked"]), list(p.get("near", p["ranked"]))))
            self.costs.setdefault((p["precision"], p["shape"]), []).append(
                {int(a): int(c) for a, c in p.get("costs", [])})
        self.regions: dict[tuple[str, str], list[tuple[list[int], list[int], int]]] = {}
        for r in table["regions"]:
            lo = [int(r["m"][0]), int(r["n"][0]), int(r["k"][0])]
            hi = [int(r["m"][1]), int(r["n"][1]), int(r["k"][1])]
            self.regions.setdefault((r["precision"], r["shape"]), []).append((lo, hi, int(r["kernel"])))
        self.device = str(table.get("provenance", {}).get("device", ""))
        self._warned: set[str] = set()

    def valid(self, kernel: int, dims: tuple[int, ...], tuned: bool = False) -> bool:
        """Whether an answer may serve `dims` (`tuned`: at a tuned point that measured it)."""
        if kernel == LIBRARY or tuned:
            return True
        if self.tuned_only[kernel]:
            return False
        mult, lo, hi = self.bounds[kernel]
        return all(dims[d] % mult[d] == 0 and lo[d] <= dims[d] <= hi[d] for d in range(4))

    def check_device(self, device: str | None) -> bool:
        """True when `device` is the GPU the table was tuned on (or unknown); warns once otherwise."""
        if not device or not self.device or device.strip().lower() == self.device.strip().lower():
            return True
        if device not in self._warned:
            self._warned.add(device)
            warnings.warn(f"dispatch table was tuned on {self.device!r} but is used on {device!r}: "
                          "its choices and loss bounds may not hold; re-tune on this GPU", stacklevel=3)
        return False

    def index(self, precision: str, shape: str, m: int, n: int, k: int, batch: int) -> int:
        """Answer for a problem (see the module docstring): a kernel index, GENERIC (-1) or LIBRARY (-2)."""
        dims = check_problem(precision, shape, m, n, k, batch)
        group = (precision, shape)
        points = self.points.get(group, [])
        for pdims, _, ranked, _ in points:
            if pdims == dims:
                return next((c for c in ranked if self.valid(c, dims, tuned=True)), self.fallback)
        for lo, hi, kern in self.regions.get(group, []):
            if all(lo[d] <= dims[d] <= hi[d] for d in range(3)) and self.valid(kern, dims):
                return kern
        logs = [ilog2_fx(d) for d in dims]
        if self.mode == "cost":
            return self._cheapest(group, dims, logs)
        best, best_key = self.fallback, None
        for order, (_, plogs, _, near) in enumerate(points):
            kern = next((c for c in near if self.valid(c, dims)), None)
            if kern is None:
                continue
            key = (sum(abs(logs[d] - plogs[d]) for d in range(3)), abs(logs[3] - plogs[3]), order)
            if best_key is None or key < best_key:
                best, best_key = kern, key
        return best

    def _cheapest(self, group: tuple[str, str], dims: tuple[int, ...], logs: list[int]) -> int:
        """Cost mode (rule 4'): each valid answer's cost at the tuned point nearest the problem where it was
        measured (distance, then |log2 batch ratio|, then table order); answers measured within `reach` of the
        nearest tuned point compete; the cheapest wins (kernel costs times 1 + margin against the library's;
        ties: the nearer measurement, then the library, then the smaller index)."""
        points = self.points.get(group, [])
        if not points:
            return self.fallback
        keys = [(sum(abs(logs[d] - plogs[d]) for d in range(3)), abs(logs[3] - plogs[3]), order)
                for order, (_, plogs, _, _) in enumerate(points)]
        limit = min(k[0] for k in keys) + self.reach
        best, best_key = self.fallback, None
        for answer in [LIBRARY] + list(range(len(self.kernels))):
            if not self.valid(answer, dims):
                continue
            near = min((keys[i] + (c[answer],) for i, c in enumerate(self.costs.get(group, [])) if answer in c),
                       default=None)
            if near is None or near[0] > limit:
                continue
            price = near[3] * (1000 if answer == LIBRARY else 1000 + self.margin)
            key = (price, near[0], 0 if answer == LIBRARY else 1, answer)
            if best_key is None or key < best_key:
                best, best_key = answer, key
        return best

    def kernel(self, index: int, precision: str, shape: str) -> dict:
        """The kernel record for an index; the generic kernel's record for -1; the library's for -2
        ({"library": "cublas", "instance_id": None, ...}: call the vendor library)."""
        if index >= 0:
            return self.kernels[index]
        if index == LIBRARY:
            return {**self.library, "library": self.library.get("name", "cublas"), "instance_id": None,
                    "precision": precision, "shape": shape, "template": None, "generic": False}
        templates = self.generic.get("templates", {})
        return {**self.generic, "instance_id": None, "precision": precision, "shape": shape,
                "template": templates.get(f"{precision}:{shape}"), "generic": True}
