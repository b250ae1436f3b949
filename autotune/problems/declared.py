"""Problem kinds declared in a space file's `problem:` section (no Python class needed): `DeclaredKind`, its
arguments and initial values. `autotune.problems.declared_file.load_declared` reads the section (the vocabulary,
with an example, is there and in docs/kinds.md); `DeclaredKind` implements `autotune.problems.base.ProblemKind`;
its GPU side is `autotune.problems.declared_data`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.errors import SpaceError
from autotune.expr import Expr, ExprError, as_int, evaluate
from autotune.problems.base import ProblemKind, Scalars
from autotune.vocab import TestPoint

DTYPES = dict(float64=8, float32=4, float16=2, int64=8, int32=4, uint32=4, int16=2, int8=1, uint8=1)
PRECISION_DTYPES = {
    "fp64": "float64",
    "fp32": "float32",
    "fp16": "float16",
    **{t: t for t in ("int64", "int32", "int16", "int8", "uint8")},
}
INITS = ("random", "zeros", "ones")
DEFAULT_TOLERANCE = {"fp64": 1e-12, "fp32": 1e-5, "fp16": 1e-2}
CONSTANT_MEMORY_BYTES = 64 * 1024  # what a module's __constant__ symbols may hold together


@dataclass(frozen=True)
class InitFunction:
    """`init: {function: file.py:make}`: `make(name, sizes, precision, seed)` returns a NumPy array whose shape is
    the buffer's (or constant's) shape at the point; it is cast to the dtype (`declared_data`)."""

    function: str  # "/abs/file.py:make" or "module:make"


def init_text(init: "Init") -> Any:
    """An init form as `describe()` stores it."""
    if isinstance(init, str):
        return init
    return {"function": init.function} if isinstance(init, InitFunction) else init.text


@dataclass(frozen=True)
class FileInit:
    """A buffer filled from a `.npy` file or one array of a `.npz` file (`init: {file: ..., key: ...}`)."""

    path: str  # resolved, absolute
    key: str | None  # the array's name in a .npz (None for a .npy)
    given: str  # as written in the space file
    space_file: str
    line: int | None

    @property
    def text(self) -> str:
        return self.given + (f"[{self.key}]" if self.key else "")

    def shape(self) -> tuple[int, ...]:
        """The stored array's shape (read from its header only)."""
        return _stored_shape(self.path, self.key, Path(self.path).stat().st_mtime_ns)

    def check(self, shape: tuple[int, ...], where: str) -> None:
        """SpaceError naming the space file and line when the stored shape is not `shape` (the buffer's)."""
        got = self.shape()
        if got != tuple(shape):
            raise SpaceError(
                f"problem: `init: {{file: {self.text}}}` holds an array of shape {list(got)}; the buffer's "
                f"shape {where} is {list(shape)}",
                file=self.space_file,
                line=self.line,
                hint="save an array of the buffer's shape, or fix the buffer's `shape:`",
            )

    def load(self, shape: tuple[int, ...], where: str) -> Any:
        """The array (NumPy), after `check`; a `.npy` file is mapped read-only (no copy in host memory: a GB-sized
        input goes from the page cache to the GPU once)."""
        import numpy as np

        self.check(shape, where)
        if self.key is None:
            return np.load(self.path, mmap_mode="r", allow_pickle=False)
        with np.load(self.path, allow_pickle=False) as data:
            return data[self.key]


Init = (
    str | Expr | InitFunction | FileInit
)  # random | zeros | ones | an expression of the sizes and i | a function | a file


@functools.lru_cache(maxsize=64)
def _stored_shape(path: str, key: str | None, _mtime: int) -> tuple[int, ...]:
    import zipfile

    import numpy as np

    def header(f: Any) -> tuple[int, ...]:
        version = np.lib.format.read_magic(f)
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        return tuple(int(d) for d in reader(f)[0])

    if key is None:
        with open(path, "rb") as f:
            return header(f)
    with zipfile.ZipFile(path) as z, z.open(f"{key}.npy") as member:
        return header(member)


@dataclass(frozen=True)
class Argument:
    """One kernel argument: a device buffer (dtype, shape) or a scalar (dtype, value)."""

    name: str
    dtype: str  # a DTYPES name, or "T": the test point's precision
    shape: tuple[Expr, ...] = ()  # buffers: expressions of the sizes
    value: Expr | None = None  # scalars
    init: Init = "random"  # random | zeros | ones | an expression of the sizes and i (flat index) | function | file
    output: bool = False
    inout: bool = False  # an output the kernel also reads (declared with an explicit `init:`): never poisoned
    line: int | None = field(default=None, compare=False)  # where the space file declares it

    @property
    def is_buffer(self) -> bool:
        return self.value is None

    def numpy_dtype(self, precision: str) -> str:
        return PRECISION_DTYPES[precision] if self.dtype == "T" else self.dtype


@dataclass(frozen=True, kw_only=True)
class DeclaredKind(ProblemKind):
    """A problem kind read from a space file (see the module docstring)."""

    name: str
    size_names: tuple[str, ...]
    precisions: tuple[str, ...]
    arguments: tuple[Argument, ...]
    reference_fn: str | None  # "path/to/file.py:function" (absolute) or "module:function"; optional with `check_fn`
    tolerance: tuple[tuple[str, float], ...]
    bytes_expr: Expr
    flops_expr: Expr | None = None
    baseline_fn: str | None = None
    check_fn: str | None = None  # `check:` fn(outputs, expected, params, sizes) decides correctness
    constants: tuple[Argument, ...] = ()  # `constants:` __constant__ symbols (buffers that are no kernel argument)
    source: str = ""  # the file that declared it
    shapes: tuple[str, ...] = ("",)
    conventions: tuple[str, ...] = ("declared",)
    baseline_name: str | None = field(default=None)
    lines: tuple[int | None, int | None] = field(default=(None, None), compare=False)  # of `bytes:`, `flops:`

    def __post_init__(self) -> None:
        if self.baseline_fn is not None and self.baseline_name is None:
            object.__setattr__(self, "baseline_name", self.baseline_fn.rsplit(":", 1)[-1])

    def names(self, point: TestPoint) -> dict[str, Any]:
        return {**point.dims, "elem_bytes": point.elem_bytes}

    def bytes_moved(self, point: TestPoint, scalars: Scalars) -> int:
        n = as_int(self._count("bytes", self.bytes_expr, point))
        if n <= 0:
            raise self.count_error("bytes", self.bytes_expr, n, point)
        return n

    def flops(self, point: TestPoint) -> float:
        if self.flops_expr is None:
            return 0.0
        v = float(self._count("flops", self.flops_expr, point))
        if not (math.isfinite(v) and v >= 0):
            raise self.count_error("flops", self.flops_expr, v, point)
        return v

    def _count(self, what: str, expr: Expr, point: TestPoint) -> Any:
        """`bytes:` or `flops:` at `point`; SpaceError where it cannot be computed there (a division by zero)."""
        try:
            return evaluate(expr, self.names(point))
        except ExprError as exc:
            raise self.count_error(what, expr, f"not computable ({exc})", point) from None

    def count_error(self, what: str, expr: Expr, value: object, point: TestPoint) -> SpaceError:
        need = "a positive number" if what == "bytes" else "a finite number >= 0"
        return SpaceError(
            f"problem: `{what}:` is {value} at {point.key}; it must be {need}",
            file=self.source or None,
            line=self.lines[what == "flops"],
            expr=expr.text,
            hint="fix the expression (it counts the work of one problem, from its sizes)",
        )

    def buffer_shape(self, arg: Argument, point: TestPoint) -> tuple[int, ...]:
        """A buffer's shape at `point`; SpaceError when a dimension is negative (checked before a sweep)."""
        shape = tuple(as_int(evaluate(e, point.dims)) for e in arg.shape)
        if any(d < 0 for d in shape):
            raise SpaceError(
                f"problem: buffer `{arg.name}` has shape {list(shape)} at {point.key}: a dimension is negative",
                file=self.source or None,
                expr=", ".join(e.text for e in arg.shape),
                hint="fix the buffer's `shape:` (expressions of the sizes), or leave that point out",
            )
        if isinstance(arg.init, FileInit):
            arg.init.check(shape, f"{arg.name!r} at {point.key}")
        return shape

    def device_bytes(self, point: TestPoint, scalars: Scalars) -> int:
        """One copy of every buffer, plus the reference's outputs in float64 (what the GPU worker allocates at
        least; more copies only where they fit the L2 protection)."""
        total = 0
        for a in self.arguments:
            if a.is_buffer:
                n = math.prod(self.buffer_shape(a, point))
                total += n * DTYPES[a.numpy_dtype(point.precision)] + (8 * n if a.output else 0)
        return total

    def tolerance_of(self, precision: str) -> float:
        return dict(self.tolerance).get(precision, DEFAULT_TOLERANCE.get(precision, 0.0))

    def allocate(self, point: TestPoint, convention: str, scalars: Scalars, l2_bytes: int, seed: int) -> Any:
        from autotune.problems.declared_data import DeclaredData

        return DeclaredData.build(self, point, l2_bytes, seed)

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out.update(
            arguments=[
                {
                    "name": a.name,
                    "dtype": a.dtype,
                    "shape": [e.text for e in a.shape],
                    "value": a.value.text if a.value is not None else None,
                    "init": init_text(a.init),
                    "output": a.output,
                    **({"inout": True} if a.inout else {}),
                }
                for a in self.arguments
            ],
            reference=self.reference_fn,
            tolerance=dict(self.tolerance),
            bytes=self.bytes_expr.text,
            flops=self.flops_expr.text if self.flops_expr is not None else None,
            baseline=self.baseline_fn,
        )
        if self.constants:
            out["constants"] = [
                {"name": c.name, "dtype": c.dtype, "shape": [e.text for e in c.shape], "init": init_text(c.init)}
                for c in self.constants
            ]
        if self.check_fn is not None:
            out["check"] = self.check_fn
        return out


__all__ = ["Argument", "DeclaredKind", "FileInit", "InitFunction", "init_text"]
