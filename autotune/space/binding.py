"""A space's parts (parameters, constraints, the kernel binding) and the binding of an instance to its kernel.

`Binding` is the part of `autotune.space.spec.Space` that evaluates an instance's names and binds it at a problem:
its C++ name expression, its `#define`s, its launch geometry, whether it serves and is valid there; each computed
once per (parameters, point) in a bounded memo that stays in its process.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from autotune import paths
from autotune.devices import PROFILES, DeviceLimits, get_device
from autotune.errors import SpaceError
from autotune.expr import Expr, ExprError, as_int, evaluate
from autotune.problems.base import ProblemKind
from autotune.space.instance import plain_value
from autotune.vocab import ELEM_BYTES, TestPoint

CPP_TYPES = {
    "fp64": ("double", "double"),
    "fp32": ("float", "float"),
    "fp16": ("__half", "float"),
    "bf16": ("__nv_bfloat16", "float"),
    "int64": ("long long", "long long"),
    "int32": ("int", "int"),
    "int16": ("short", "int"),
    "int8": ("signed char", "int"),
    "uint8": ("unsigned char", "int"),
}
TYPE_SYMBOLS = ("T", "S", "TRANS_A", "TRANS_B")
DEVICE_NAMES = tuple(PROFILES["H100"].names())  # the device limits an expression can read
_MISSING = object()
# bound of a Space's binding memo (entries: an instance's names, name, geometry, defines at a point)
MEMO_SIZE = 1 << 17


@dataclass(frozen=True)
class Located:
    """An expression with where it came from."""

    expr: Expr
    line: int | None


@dataclass(frozen=True)
class Parameter:
    name: str
    values: tuple[Any, ...]
    line: int | None


@dataclass(frozen=True)
class Constraint:
    name: str
    kind: str  # "hard" or "soft"
    expr: Expr
    reason: str
    line: int | None


@dataclass(frozen=True)
class Problems:
    precisions: tuple[str, ...]
    shapes: tuple[str, ...]
    where: Located | None


@dataclass(frozen=True)
class Geometry:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int


@dataclass(frozen=True)
class KernelBinding:
    source: str  # as written: relative to the space file, absolute, or (built-in spaces) under kernels_src/
    template: str  # a C++ function template (name expression `template<args>`) or a plain function name
    template_args: tuple[str, ...]  # empty for a plain function
    convention: str  # how the kernel takes its arguments: one of its problem kind's conventions
    block: tuple[Located, ...]
    grid: tuple[Located, ...]
    shared_bytes: Located
    problems: Problems
    serves: Located | None = None  # which problems an instance is measured on (params + the kind's sizes)
    valid: Located | None = None  # where an instance runs its intended path correctly (default: `serves`)
    path: Path | None = None  # the resolved kernel file
    defines: tuple[str, ...] = ()  # names passed as `#define NAME value` (parameters, derived names, sizes)
    plain: bool = False  # `name:` given: a plain (extern "C" or C++) function, no template arguments
    compiler: str = "nvrtc"  # `compiler:` nvrtc or nvcc (autotune/space/compiler.py)
    compiler_options: tuple[str, ...] = ()  # `compiler_options:` extra flags for that compiler
    semantics: str = "native"  # `semantics:` native or kerneltuner (autotune/space/kt_semantics.py)
    arch_specific: bool = False  # `arch_specific:` compile for sm_XXa (autotune.sweep.compile.nvrtc)

    @property
    def validity(self) -> Located | None:
        """The expression of where an instance is valid: `valid:`, else `serves:` (None: everywhere)."""
        return self.valid if self.valid is not None else self.serves

    @property
    def source_path(self) -> Path:
        return self.path if self.path is not None else paths.KERNELS_DIR / self.source

    def source_hash(self) -> str:
        return hashlib.sha256(self.source_path.read_bytes()).hexdigest()


class Binding:
    """The evaluation and binding of a space's instances (`Space` holds the fields read here)."""

    path: Path
    derived: tuple[tuple[str, Located], ...]
    kernel: KernelBinding | None
    kind: ProblemKind

    def error(
        self, message: str, line: int | None = None, expr: str | None = None, hint: str | None = None
    ) -> SpaceError:
        return SpaceError(message, file=self.path, line=line, expr=expr, hint=hint)

    def eval(self, located: Located | Constraint, env: Mapping[str, Any], mask: Any = None) -> Any:
        """Evaluate one of this space's expressions; errors name the file and line."""
        try:
            return evaluate(located.expr, env, mask)
        except ExprError as exc:
            raise self.error(exc.message, located.line, located.expr.text, exc.hint) from None

    def context(self, precision: str, device: DeviceLimits) -> dict[str, Any]:
        """Names every expression may read besides parameters: device limits and precision sizes."""
        acc = 8 if precision == "fp64" else 4
        return {**device.names(), "elem_bytes": ELEM_BYTES[precision], "acc_bytes": acc}

    def values(self, params: Mapping[str, Any], precision: str, device: DeviceLimits | None = None) -> dict[str, Any]:
        """Parameters, derived quantities, device limits and precision names for one instance."""
        env = {**self.context(precision, device or get_device(None)), **params}
        for name, located in self.derived:
            env[name] = self.eval(located, env)
        return env

    def _binding(self) -> KernelBinding:
        if self.kernel is None:
            raise self.error(
                "this space has no `kernel:` section", hint="add the binding to a kernel (docs/space-files.md)"
            )
        return self.kernel

    def __getstate__(self) -> dict[str, Any]:
        # the binding memo stays in this process (a Job's space is sent to compile processes and workers)
        return {k: v for k, v in self.__dict__.items() if k != "_memo"}

    def _memoized(self, key: tuple, make: Any) -> Any:
        """`make()`, computed once per key (an instance's parameters with a point or precision): the runner binds
        each instance before submitting it and the backend binds it again (name, geometry, defines), each from
        the same evaluated names. Bounded: cleared past MEMO_SIZE entries. Errors are not memoized."""
        memo = self.__dict__.get("_memo")
        if memo is None or len(memo) > MEMO_SIZE:
            memo = {}
            object.__setattr__(self, "_memo", memo)
        try:
            value = memo.get(key, _MISSING)
        except TypeError:  # an unhashable parameter value: nothing to share
            return make()
        if value is _MISSING:
            value = memo[key] = make()
        return value

    def template_name(self, params: Mapping[str, Any], precision: str, shape: str) -> str:
        """The NVRTC name expression of this instance for one precision and shape (a plain function's name)."""
        binding = self._binding()
        if binding.plain:
            return binding.template
        return self._memoized(
            ("name", tuple(params.items()), precision, shape), lambda: self._template_name(params, precision, shape)
        )

    def _template_name(self, params: Mapping[str, Any], precision: str, shape: str) -> str:
        binding = self._binding()
        env = self.values(params, precision)
        symbols = _type_symbols(precision, shape)
        tokens = [symbols[a] if a in symbols else str(as_int(env[a])) for a in binding.template_args]
        return f"{binding.template}<{', '.join(tokens)}>"

    def defines(self, params: Mapping[str, Any], point: TestPoint) -> tuple[tuple[str, str], ...]:
        """The `#define NAME value` pairs of this instance at a point (parameters, derived names, sizes; T is the
        precision's C type)."""
        binding = self._binding()
        if not binding.defines:
            return ()
        return self._memoized(("defines", tuple(params.items()), point), lambda: self._defines(params, point))

    def _defines(self, params: Mapping[str, Any], point: TestPoint) -> tuple[tuple[str, str], ...]:
        binding = self._binding()
        env = {**self._shared_env(params, point), **_type_symbols(point.precision, point.shape)}
        return tuple((name, _token(env[name])) for name in binding.defines)

    def _problem_env(self, params: Mapping[str, Any], point: TestPoint) -> dict[str, Any]:
        """One instance's names (parameters, derived, device, precision) with the problem's sizes."""
        return {**self.values(params, point.precision), **self.kind.env(point)}

    def _shared_env(self, params: Mapping[str, Any], point: TestPoint) -> Mapping[str, Any]:
        """`_problem_env` for geometry and defines (read only): the derived names, which never read the problem's
        sizes, are evaluated once per (parameters, precision), not once per point."""
        base = self._memoized(
            ("values", tuple(params.items()), point.precision), lambda: self.values(params, point.precision)
        )
        return {**base, **self.kind.env(point)}

    def geometry(self, params: Mapping[str, Any], point: TestPoint) -> Geometry:
        return self._memoized(("geometry", tuple(params.items()), point), lambda: self._geometry(params, point))

    def _geometry(self, params: Mapping[str, Any], point: TestPoint) -> Geometry:
        binding = self._binding()
        env = self._shared_env(params, point)

        def ints(items: tuple[Located, ...]) -> tuple[int, int, int]:
            out = [as_int(self.eval(x, env)) for x in items]
            return (out + [1, 1, 1])[:3]  # type: ignore[return-value]

        return Geometry(ints(binding.grid), ints(binding.block), as_int(self.eval(binding.shared_bytes, env)))

    def serves(self, params: Mapping[str, Any], point: TestPoint) -> bool:
        """Whether the kernel's `serves:` expression assigns this problem to the instance (True without one)."""
        kernel = self.kernel
        if kernel is None or kernel.serves is None:
            return True
        return bool(self.eval(kernel.serves, self._problem_env(params, point)))

    def valid(self, params: Mapping[str, Any], point: TestPoint) -> bool:
        """Whether the instance runs its intended path correctly on this problem: the kernel's `valid:`
        expression, else its `serves:` (True without either). Sharing and dispatch tables use it."""
        kernel = self.kernel
        expr = kernel.validity if kernel is not None else None
        return True if expr is None else bool(self.eval(expr, self._problem_env(params, point)))

    def accepts(self, point: TestPoint) -> bool:
        """Whether the kernel handles this problem (precision, shape, size limits)."""
        if point.kind != self.kind.name:
            return False
        if self.kernel is None:  # a space of recorded measurements (an import): the kind's precisions
            return point.precision in self.kind.precisions and point.shape in self.kind.shapes
        problems = self._binding().problems
        if point.precision not in problems.precisions or point.shape not in problems.shapes:
            return False
        if problems.where is None:
            return True
        return bool(self.eval(problems.where, self.kind.env(point)))


def _type_symbols(precision: str, shape: str) -> dict[str, str]:
    """T (element type), S (scalar type), and GEMM's TRANS_A / TRANS_B from the transposition."""
    t, s = CPP_TYPES[precision]
    out = {"T": t, "S": s}
    if len(shape) == 2:
        out.update(TRANS_A=str(int(shape[0] == "T")), TRANS_B=str(int(shape[1] == "T")))
    return out


def _token(value: Any) -> str:
    """A value as C source text: integers as integers, other numbers as doubles, strings as written."""
    if isinstance(value, str):
        return value
    value = plain_value(value)
    return repr(value) if isinstance(value, float) else str(int(value))
