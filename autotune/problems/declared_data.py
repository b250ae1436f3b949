"""The GPU side of a declared problem kind: buffers, arguments, reference, verification, baseline.

Buffers are allocated as declared (dtype, shape in C order) and filled by their `init` (a file's array cast to
the buffer's dtype); `copies` independent
sets protect timings from L2 as for every kind. Before the verified launch, outputs are poisoned with NaN
(floats) or a sentinel (integers) so an element the kernel never writes fails; an output the kernel also reads
(in place: `output: true` with an explicit `init:`, whichever, `random` included; `Argument.inout`) is reset to
its initial values instead. The reference function receives copy 0's
arrays (CuPy) and the sizes and returns the expected outputs; the error of an output is
||got - ref||_2 / ||ref||_2 in float64 (exact equality when the reference is all zeros).

`init: {function: file.py:make}` arrays are made on the host once per point and copied to every set. Constants
(`constants:`) are made on the host (`host_constants`, NumPy) and copied by the GPU worker into the kernel module's
`__constant__` symbols; the reference and the check see them by name. With `check:`, the user's function decides
correctness instead of the tolerance (`verify_instance`: it receives host copies, the instance's parameters and
the sizes).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from autotune.errors import SpaceError
from autotune.expr import as_int, evaluate
from autotune.problems.base import ProblemData, Verdict, judge, rotation_copies
from autotune.problems.declared import CONSTANT_MEMORY_BYTES, DTYPES, Argument, DeclaredKind, FileInit, InitFunction
from autotune.problems.loading import load_attribute
from autotune.problems.npy_upload import upload_npy
from autotune.vocab import TestPoint

INT_SENTINEL = -7


def load_function(spec: str) -> Callable[..., Any]:
    """`/abs/file.py:fn` or `module:fn` -> the function (files are imported once, `autotune.problems.loading`)."""
    fn = load_attribute(spec)
    if not callable(fn):
        raise ImportError(f"{spec}: {spec.rsplit(':', 1)[-1]!r} is not a function")
    return fn


def _shape(arg: Argument, sizes: dict[str, int]) -> tuple[int, ...]:
    return tuple(as_int(evaluate(e, sizes)) for e in arg.shape)


class CheckError(Exception):
    """The user's `check:` function raised or returned something else than True, False, None or a message: the
    problem's fault, whatever the instance (the GPU worker stops the sweep with it)."""


@dataclass(frozen=True)
class CheckVerdict(Verdict):
    """A verdict of the user's `check:` function; `note` is its message (stored as the instance's error)."""

    note: str = ""

    @property
    def message(self) -> str:
        return self.note or Verdict.message.fget(self)  # type: ignore[attr-defined]


def _host(x: Any) -> Any:
    """A NumPy copy of a device array (NumPy arrays and scalars as they are)."""
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else x


class HostArrays(Mapping):
    """Arrays by name, copied to the host (NumPy) when first read."""

    def __init__(self, arrays: Mapping[str, Any]) -> None:
        self._arrays = arrays
        self._host: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._host:
            self._host[name] = _host(self._arrays[name])
        return self._host[name]

    def device(self, name: str) -> Any:
        """The array as the GPU holds it (no copy): for a check that compares on the device (kt_space's)."""
        return self._arrays[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)


class DeclaredData(ProblemData):
    """`copies` sets of a declared kind's buffers on the GPU (see the module docstring)."""

    def __init__(self, kind: DeclaredKind, point: TestPoint, copies: int, seed: int, xp: Any = None) -> None:
        if xp is None:
            import cupy

            xp = cupy
        cp = self.xp = xp  # CuPy on the GPU; NumPy works too (tests on machines without a GPU)
        self.kind, self.point, self.copies = kind, point, copies
        self.sizes = point.dims
        rng = cp.random.default_rng(seed)
        self.seed = seed
        self._made: dict[str, np.ndarray] = {}  # host data of init functions and files, made once per point
        self._device: dict[str, Any] = {}  # large .npy files read straight to the GPU (npy_upload), once per point
        self.sets: list[dict[str, Any]] = []
        for _ in range(copies):
            arrays = {}
            for a in kind.arguments:
                if a.is_buffer:
                    arrays[a.name] = self._fill(cp, rng, a)
            self.sets.append(arrays)
        self.initial = {a.name: _copy(self.sets[0][a.name]) for a in kind.arguments if a.is_buffer and a.inout}
        self._sentinels: dict[str, Any] = {}  # integer outputs filled with INT_SENTINEL (prepare_verify, GPU)
        self.scalars = {
            a.name: np.dtype(a.numpy_dtype(point.precision)).type(evaluate(a.value, self.sizes))
            for a in kind.arguments
            if not a.is_buffer and a.value is not None
        }
        self.host_constants = self._constants(np.random.default_rng(seed + 1))
        self.constant_arrays = {n: cp.asarray(v) for n, v in self.host_constants.items()}  # for reference, check
        self._made.clear()  # host copies of the functions' arrays are not kept
        self._device.clear()  # (the first set holds it)

    def _constants(self, rng: Any) -> dict[str, np.ndarray]:
        """The `constants:` at this point, on the host (what the GPU worker copies into `__constant__` symbols)."""
        out = {c.name: np.ascontiguousarray(self._fill(np, rng, c)) for c in self.kind.constants}
        total = sum(v.nbytes for v in out.values())
        if total > CONSTANT_MEMORY_BYTES:
            raise SpaceError(
                f"problem: the constants take {total:,} bytes at {self.point.key}; constant memory holds "
                f"{CONSTANT_MEMORY_BYTES:,}",
                file=self.kind.source or None,
                line=self.kind.constants[0].line,
                hint="make them smaller, or pass them as buffers",
            )
        return out

    def constants(self) -> Mapping[str, np.ndarray]:
        return self.host_constants

    @classmethod
    def build(cls, kind: DeclaredKind, point: TestPoint, l2_bytes: int, seed: int) -> "DeclaredData":
        one = sum(
            math.prod(kind.buffer_shape(a, point)) * DTYPES[a.numpy_dtype(point.precision)]
            for a in kind.arguments
            if a.is_buffer
        )
        return cls(kind, point, rotation_copies(one, l2_bytes), seed)

    def _fill(self, cp: Any, rng: Any, a: Argument) -> Any:
        dtype = cp.dtype(a.numpy_dtype(self.point.precision))
        shape = _shape(a, self.sizes)
        n = math.prod(shape)
        if isinstance(a.init, (FileInit, InitFunction)):  # host data: made (read) once per point, shape checked
            if a.name in self._device:  # a large .npy already read to the GPU: the next set copies it there
                return self._device[a.name].copy()
            if isinstance(a.init, FileInit) and a.init.key is None and cp is not np:
                a.init.check(shape, f"{a.name!r} at {self.point.key}")
                direct = upload_npy(cp, Path(a.init.path), dtype, shape)  # None: small, or needs numpy's reader
                if direct is not None:
                    self._device[a.name] = direct
                    return direct
            if a.name not in self._made:  # (SpaceError naming the space file), cast to the dtype
                self._made[a.name] = (
                    np.asarray(a.init.load(shape, f"{a.name!r} at {self.point.key}")).astype(dtype, copy=False)
                    if isinstance(a.init, FileInit)
                    else self._from_function(a, shape, dtype)
                )
            return cp.array(self._made[a.name])  # a copy for every set
        if not isinstance(a.init, str):
            values = evaluate(a.init, {**self.sizes, "i": np.arange(n, dtype=np.int64)})  # on the host
            return cp.asarray(np.broadcast_to(np.asarray(values), (n,))).astype(dtype).reshape(shape)
        if a.init == "zeros":
            return cp.zeros(shape, dtype=dtype)
        if a.init == "ones":
            return cp.ones(shape, dtype=dtype)
        if dtype.kind == "f":
            return (rng.random(n, dtype=cp.float32) * 2 - 1).astype(dtype).reshape(shape)
        return rng.integers(0, 100, n).astype(dtype).reshape(shape)

    def _from_function(self, a: Argument, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """`init: {function: ...}`'s array: of the declared shape, cast to the dtype; else SpaceError (file, line)."""
        spec = a.init.function  # type: ignore[union-attr]
        got = _host(load_function(spec)(a.name, dict(self.sizes), self.point.precision, self.seed))
        arr = np.asarray(got)
        if arr.shape != shape:
            raise SpaceError(
                f"problem: {a.name!r}: {spec.rsplit('/', 1)[-1]} returned an array of shape "
                f"{list(arr.shape)} at {self.point.key}; the declared shape there is {list(shape)}",
                file=self.kind.source or None,
                line=a.line,
                hint="return a NumPy array of the declared shape (it is cast to the dtype)",
            )
        return arr.astype(np.dtype(str(dtype)), copy=False)

    def nbytes(self) -> int:
        return (
            sum(x.nbytes for arrays in self.sets for x in arrays.values())
            + sum(x.nbytes for x in self.initial.values())
            + sum(x.nbytes for x in self._sentinels.values())
        )

    def args(self, copy: int) -> tuple[Any, ...]:
        arrays = self.sets[copy]
        return tuple(arrays[a.name] if a.is_buffer else self.scalars[a.name] for a in self.kind.arguments)

    def outputs(self) -> list[Argument]:
        return [a for a in self.kind.arguments if a.is_buffer and a.output]

    def prepare_verify(self) -> None:
        """Copy 0's outputs as before the verified launch: their initial values, else NaN (floats) or INT_SENTINEL.
        On the GPU a copy and the NaN fill are a memcpy and a memset (bytes 0xFF: a NaN in every float width), not
        CuPy kernels, which a fresh CuPy cache compiles at their first use (seconds, while the compile pool holds
        every core)."""
        for a in self.outputs():
            x = self.sets[0][a.name]
            raw: Any = getattr(x, "data", None)  # CuPy: a MemoryPointer
            flat = bool(x.flags.c_contiguous) and hasattr(raw, "memset_async")
            if a.name in self.initial:
                src = self.initial[a.name]
                if flat and src.flags.c_contiguous and src.dtype == x.dtype and src.size == x.size:
                    raw.copy_from_device_async(src.data, x.nbytes)
                else:
                    x[...] = src
            elif x.dtype.kind == "f":
                if flat:
                    raw.memset_async(0xFF, x.nbytes)
                else:
                    x.fill(float("nan"))
            elif flat:  # the sentinel uploaded once (no CuPy kernel), then copied
                if a.name not in self._sentinels:
                    self._sentinels[a.name] = self.xp.asarray(np.full(x.shape, INT_SENTINEL, dtype=str(x.dtype)))
                raw.copy_from_device_async(self._sentinels[a.name].data, x.nbytes)
            else:
                x.fill(INT_SENTINEL)

    def _inputs(self) -> dict[str, Any]:
        """Copy 0's arguments as the kernel sees them before it runs (outputs it reads: copies of their initial
        values, so the reference function cannot change them)."""

        def value(a: Argument) -> Any:
            if not a.is_buffer:
                return self.scalars[a.name]
            return _copy(self.initial[a.name]) if a.name in self.initial else self.sets[0][a.name]

        return {**{a.name: value(a) for a in self.kind.arguments}, **self.constant_arrays}

    def reference(self) -> Any:
        if self.kind.reference_fn is None:
            return None  # a `check:` without a reference
        fn = load_function(self.kind.reference_fn)
        got = fn(self._inputs(), dict(self.sizes))
        outs = self.outputs()
        if not isinstance(got, dict):
            if len(outs) != 1:
                raise ValueError(
                    f"{self.kind.reference_fn} returned one array; the problem has {len(outs)} outputs "
                    "(return a dict: name -> array)"
                )
            got = {outs[0].name: got}
        cp = self.xp
        missing = [a.name for a in outs if a.name not in got]
        if missing:
            raise ValueError(f"{self.kind.reference_fn} returned no {', '.join(missing)}")
        return {a.name: cp.asarray(got[a.name], dtype=cp.float64).reshape(self.sets[0][a.name].shape) for a in outs}

    def verify(self, reference: Any) -> Verdict:
        cp = self.xp
        worst, bad = 0.0, 0
        for a in self.outputs():
            got = self.sets[0][a.name].astype(cp.float64)
            ref = reference[a.name]
            finite = cp.isfinite(got)
            if got.dtype.kind == "f":
                bad += int(got.size - int(finite.sum()))
            norm = float(cp.linalg.norm(ref.ravel()))
            diff = float(cp.linalg.norm(cp.nan_to_num(got - ref, nan=cp.inf).ravel()))
            worst = max(worst, diff / norm if norm > 0 else (0.0 if diff == 0 else math.inf))
        return judge(worst, bad, self.kind.tolerance_of(self.point.precision))

    def verify_instance(self, reference: Any, params: Mapping[str, Any]) -> Verdict:
        """`verify`, or with `check:` the user's verdict on copy 0 after the verified launch: fn(outputs, expected,
        params, sizes), `outputs` every argument (the outputs as written) and constant by name, host copies."""
        spec = self.kind.check_fn
        if spec is None:
            return self.verify(reference)
        arrays = {**self.sets[0], **self.scalars, **self.host_constants}
        expected = None if reference is None else HostArrays(reference)
        try:
            got = load_function(spec)(HostArrays(arrays), expected, dict(params), dict(self.sizes))
        except Exception as exc:  # noqa: BLE001 - the user's check; a CUDA error is the kernel's, reported as such
            if type(exc).__module__.startswith(("cupy_backends.cuda", "cupy.cuda")):
                raise
            raise CheckError(f"{spec} raised at {self.point.key}: {type(exc).__name__}: {exc}") from exc
        if got is None or (isinstance(got, (bool, np.bool_)) and bool(got)):
            return CheckVerdict(True, 0.0, 0, 0.0, note=f"{_name(spec)} accepted the outputs")
        if isinstance(got, (bool, np.bool_)):
            return CheckVerdict(False, math.inf, 0, 0.0, note=f"{_name(spec)} returned False")
        if isinstance(got, str):
            return CheckVerdict(False, math.inf, 0, 0.0, note=f"{_name(spec)}: {got}"[:300])
        raise CheckError(
            f"{spec} returned {type(got).__name__} at {self.point.key}; return True or None (right), "
            "False or a message (wrong)"
        )

    def baseline(self) -> Callable[[int], None] | None:
        if self.kind.baseline_fn is None:
            return None
        fn = load_function(self.kind.baseline_fn)
        sizes = dict(self.sizes)

        def launch(r: int) -> None:
            arrays = self.sets[r % self.copies]
            fn({**arrays, **self.scalars}, sizes)

        return launch


def _name(spec: str) -> str:
    """`/abs/path/check.py:fn` -> `check.py:fn`."""
    return spec.rsplit("/", 1)[-1]


def _copy(x: Any) -> Any:
    """A copy of an array; of a contiguous CuPy array by a device memcpy, not CuPy's `copy()`, whose elementwise
    kernel a fresh CuPy cache compiles at its first use (about a second, while the compile pool holds every core)."""
    raw: Any = getattr(x, "data", None)
    if not (bool(x.flags.c_contiguous) and hasattr(raw, "copy_from_device_async")):
        return x.copy()
    import cupy as cp

    y = cp.empty_like(x)
    y.data.copy_from_device_async(raw, x.nbytes)
    return y
