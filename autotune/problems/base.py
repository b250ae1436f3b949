"""The problem-kind protocol: what a test point is, and everything the pipeline needs to know about one.

A `ProblemKind` says
- which named sizes identify a test point (`size_names`), its precisions and variants (`shapes`);
- which names the kernel's launch expressions read for a point (`env`: GEMM exposes M N K batch);
- the work of a point: `flops` and the fewest `bytes_moved` (the roofline);
- the distance between two points (dispatch tables answer untuned problems from the nearest tuned one);
- the limits checked before any work: sizes a kernel can take (`check_limits`) and the device memory a
  point needs (`device_bytes`);
- on the GPU (CuPy imported only there): `allocate` builds the point's data, whose `args(copy)` is the kernel's
  argument tuple, `prepare_verify`/`reference`/`verify` check an output, and `baseline` (optional) times the
  vendor library or framework call that solves the same problem.

Built-in kinds (`autotune.problems.gemm`) and the kinds users declare in a space file
(`autotune.problems.declared`) or write in Python (`file.py:Class`, `module:Class`, `module:object`, or the
`autotune.problems` entry-point group; docs/kinds.md) implement this same class; the runner, the store and the
analyzer see nothing else. `autotune.testing.kinds` checks a kind against this contract.
"""

from __future__ import annotations

import math
import operator
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

from autotune.problems.loading import origin
from autotune.vocab import TestPoint

Scalars = Mapping[str, float]  # run-wide scalars of a sweep (GEMM: alpha, beta); see ProblemKind.scalar_defaults
INT32_MAX = 2**31 - 1  # the largest size a kernel taking `int` sizes accepts
# (size name, message, what to do): why a kernel cannot take a point's sizes (ProblemKind.check_limits)
SizeLimit = tuple[str, str, str]


def scalars_key(scalars: Scalars) -> tuple[tuple[str, float], ...]:
    """A hashable, order-independent key for a set of scalars (cache keys, early-stop seeds)."""
    return tuple(sorted((str(k), float(v)) for k, v in scalars.items()))


@dataclass(frozen=True)
class Verdict:
    """The outcome of checking one output against the reference."""

    ok: bool
    max_rel_err: float  # inf when an element is NaN/inf or never written
    unwritten: int  # output elements that are not finite after the launch
    tolerance: float

    @property
    def message(self) -> str:
        if self.ok:
            return f"max relative error {self.max_rel_err:.3g} <= {self.tolerance:.3g}"
        if self.unwritten:
            return f"{self.unwritten} output elements not finite (never written, or NaN/inf computed)"
        return f"max relative error {self.max_rel_err:.3g} > tolerance {self.tolerance:.3g}"


def judge(max_rel_err: float, unwritten: int, tolerance: float) -> Verdict:
    """Pure verdict from the measured error (NaN errors count as infinite)."""
    err = math.inf if (unwritten or not math.isfinite(max_rel_err)) else max_rel_err
    return Verdict(ok=unwritten == 0 and err <= tolerance, max_rel_err=err, unwritten=unwritten, tolerance=tolerance)


class ProblemData(ABC):
    """One test point's data on the GPU: `copies` independent sets that timed launches rotate over (so that
    every launch reads from device memory, not from L2), and what verification needs."""

    copies: int

    @abstractmethod
    def nbytes(self) -> int:
        """Device bytes held (for the worker's cache budget)."""

    @abstractmethod
    def args(self, copy: int) -> tuple[Any, ...]:
        """The kernel's argument tuple on one copy of the data."""

    @abstractmethod
    def prepare_verify(self) -> None:
        """Make copy 0's outputs ready for the verified launch (poisoned, or reset to their initial values)."""

    @abstractmethod
    def reference(self) -> Any:
        """The expected outputs of copy 0 (computed once per point and scalars, kept by the worker)."""

    @abstractmethod
    def verify(self, reference: Any) -> Verdict:
        """Compare copy 0's outputs (after the verified launch) with the reference."""

    def baseline(self) -> Callable[[int], None] | None:
        """A launcher `f(copy)` running the kind's baseline on one copy (writing the outputs), or None."""
        return None

    def verify_instance(self, reference: Any, params: Mapping[str, Any]) -> Verdict:
        """`verify` for the instance whose parameters are `params` (the GPU worker calls this; a kind whose
        check depends on the instance overrides it). Default: `verify(reference)`."""
        return self.verify(reference)

    def constants(self) -> Mapping[str, Any]:
        """Host arrays (NumPy) the GPU worker copies into the kernel module's `__constant__` symbols of these
        names before an instance runs on this data. Default: none."""
        return {}


class ProblemKind(ABC):
    """See the module docstring. Instances must pickle (they travel to the GPU worker process)."""

    name: str
    size_names: tuple[str, ...]
    precisions: tuple[str, ...] = ("fp32",)
    shapes: tuple[str, ...] = ("",)
    conventions: tuple[str, ...] = ("declared",)  # how a kernel may take its arguments
    baseline_name: str | None = None  # e.g. "cublas"; None: the kind has no baseline
    # Run-wide scalars a sweep config may set (`scalars: {name: value}`) and their defaults (GEMM: alpha 1,
    # beta 0). They reach `bytes_moved` and `allocate`, and are stored with each sweep.
    scalar_defaults: Mapping[str, float] = MappingProxyType({})
    # The space whose single instance is a kind's last-resort kernel in dispatch tables (GEMM: gemm_naive);
    # None: the kind has none, and a table falls back to the library (or answers "no kernel").
    generic_space: str | None = None
    generic_params: str = ""  # the parameters of that space's instance a table uses ("NAME=VALUE,..."; GEMM's)

    # ------------------------------------------------------------------ points and their names
    def point(self, precision: str, shape: str, sizes: Mapping[str, int]) -> TestPoint:
        """A checked test point of this kind (ValueError names what is wrong)."""
        if precision not in self.precisions:
            raise ValueError(f"{self.name}: precision {precision!r} is not one of {', '.join(self.precisions)}")
        if shape not in self.shapes:
            raise ValueError(f"{self.name}: variant {shape!r} is not one of {', '.join(map(repr, self.shapes))}")
        missing = [n for n in self.size_names if n not in sizes]
        extra = [n for n in sizes if n not in self.size_names]
        if missing or extra:
            raise ValueError(
                f"{self.name}: a test point has the sizes {', '.join(self.size_names)}"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; unknown {', '.join(extra)}" if extra else "")
            )
        return TestPoint(self.name, precision, shape, tuple((n, _as_size(n, sizes[n])) for n in self.size_names))

    def env(self, point: TestPoint) -> dict[str, int]:
        """The names a space's launch expressions (grid, block, shared_bytes, serves, where) read for a point."""
        return dict(point.sizes)

    def expr_names(self) -> tuple[str, ...]:
        """The names `env` defines (checked when a space file is loaded)."""
        return self.size_names

    def table_sizes(self) -> tuple[str, ...]:
        """The sizes a dispatch table answers over: distances, regions and validity predicates range over these
        (GEMM: m, n, k). The other sizes (`tie_sizes`, GEMM: batch) only break ties between equally near points."""
        return self.size_names

    def tie_sizes(self) -> tuple[str, ...]:
        table = set(self.table_sizes())
        return tuple(n for n in self.size_names if n not in table)

    # ------------------------------------------------------------------ sizes a problem may leave out
    # Sizes a workload problem or a held-out point of `autotune validate` may leave out; `derive_sizes` fills
    # them from a byte budget (GEMM: ("batch",), the smallest batch whose A, B and C take the budget). The
    # default kind derives nothing: every size must be given.
    derived_sizes: tuple[str, ...] = ()

    def derive_sizes(self, precision: str, shape: str, sizes: Mapping[str, int], budget_bytes: int) -> dict[str, int]:
        """`sizes` completed with the `derived_sizes` it leaves out, made to take about `budget_bytes` (given
        sizes are kept). Default: `sizes` unchanged."""
        return dict(sizes)

    # Shorthand keys a sweep config's `sizes:` may use besides the size names. `tied_sizes`: one value sets
    # several sizes equal (GEMM: square -> m, n, k; mn -> m, n); `tuple_sizes`: each element is a list giving
    # several sizes in order (GEMM: triples -> [m, n, k]). `size_forms_help` says how to write them.
    tied_sizes: Mapping[str, tuple[str, ...]] = MappingProxyType({})
    tuple_sizes: Mapping[str, tuple[str, ...]] = MappingProxyType({})
    size_forms_help: str = ""

    def infer_budget(self, points: Iterable[TestPoint]) -> int | None:
        """The byte budget `derive_sizes` gives these points' derived sizes with, when one does (the roundest);
        None when none does, or the kind derives nothing (the default)."""
        return None

    def scalars(self, given: Mapping[str, float] | None = None) -> dict[str, float]:
        """The run's scalars: the defaults overridden by `given` (ValueError names an unknown scalar)."""
        out = dict(self.scalar_defaults)
        for name, value in (given or {}).items():
            if name not in out:
                known = ", ".join(out) or "none"
                raise ValueError(f"{self.name}: unknown scalar {name!r} (this kind's scalars: {known})")
            out[name] = float(value)
        return out

    def own_scalars(self, run: Mapping[str, float] | None) -> dict[str, float]:
        """This kind's scalars from a run's, which may also hold other kinds' (a config whose spaces solve several
        kinds): the defaults overridden by the values of the names this kind has; other names are ignored."""
        return self.scalars({n: v for n, v in (run or {}).items() if n in self.scalar_defaults})

    # ------------------------------------------------------------------ work, distance
    def flops(self, point: TestPoint) -> float:
        return 0.0

    @abstractmethod
    def bytes_moved(self, point: TestPoint, scalars: Scalars) -> int:
        """Fewest bytes a kernel must move for this point (reads + writes): the roofline's numerator."""

    def distance(self, a: TestPoint, b: TestPoint) -> float:
        """How far apart two points of one precision and variant are: the sum of |log2 ratio| of the sizes."""
        return sum(abs(math.log2(x / y)) for (_, x), (_, y) in zip(a.sizes, b.sizes, strict=True))

    # ------------------------------------------------------------------ limits checked before any work
    def check_limits(self, point: TestPoint) -> SizeLimit | None:
        """Why a kernel of this kind cannot take `point`'s sizes, as (size name, message, what to do), or None.
        Checked when a sweep config or a workload is loaded (the error points at the size's line).
        Default: every size at most 2^31 - 1 (kernels take `int` sizes)."""
        return int32_limit(point)

    def device_bytes(self, point: TestPoint, scalars: Scalars) -> int:
        """Estimated device memory the GPU worker allocates for `point` (bytes): checked against the GPU's memory
        before a sweep allocates or records anything (`autotune.sweep.limits.check_points_fit`). Default: twice
        `bytes_moved` (the buffers, and a reference of the outputs)."""
        return 2 * self.bytes_moved(point, scalars)

    # ------------------------------------------------------------------ on the GPU
    @abstractmethod
    def allocate(self, point: TestPoint, convention: str, scalars: Scalars, l2_bytes: int, seed: int) -> ProblemData:
        """Build the point's data on the current GPU, with enough copies to protect timings from L2
        (`rotation_copies`)."""

    def describe(self) -> dict[str, Any]:
        """What identifies this kind's definition (stored with a sweep; equal kinds describe themselves equally)."""
        cls = type(self)
        file = origin(cls)  # a class from a user's file: its file name, not the per-path module name
        where = Path(file).name if file else cls.__module__
        return {
            "name": self.name,
            "class": f"{where}:{cls.__qualname__}",
            "size_names": list(self.size_names),
            "precisions": list(self.precisions),
            "shapes": list(self.shapes),
        }


def _as_size(name: str, value: Any) -> int:
    """An integer size: ints (NumPy's too) and integral floats; bools, other floats and strings are refused."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            if isinstance(value, float) and value.is_integer():
                return int(value)
    raise ValueError(f"size {name} must be an integer, got {value!r}")


def int32_limit(point: TestPoint) -> SizeLimit | None:
    """The first size of `point` above 2^31 - 1 (what `ProblemKind.check_limits` refuses by default), or None."""
    for name, value in point.sizes:
        if value > INT32_MAX:
            return (
                name,
                f"{name} = {value:,} is above 2^31 - 1, the largest size a kernel takes (int)",
                "use sizes below 2,147,483,648",
            )
    return None


MAX_COPIES = 4096


def rotation_copies(working_set: int, l2_bytes: int, max_copies: int = MAX_COPIES) -> int:
    """How many input/output sets to rotate over: 1 when one set is at least 2 x L2, else enough sets to
    cover 3 x L2 (at least 2), capped at `max_copies`."""
    if working_set >= 2 * l2_bytes:
        return 1
    return max(2, min(max_copies, math.ceil(3 * l2_bytes / max(1, working_set))))


def l2_protection(copies: int) -> str:
    return f"rotate:{copies}" if copies > 1 else "none"
