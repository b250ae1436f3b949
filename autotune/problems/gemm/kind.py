"""Batched GEMM as a problem kind: C (m x n) = alpha * op(A) * op(B) + beta * C, `batch` times, column-major.

One kind serves every GEMM kernel family: a test point is (precision, transposition, m, n, k, batch) whatever
the kernel's calling convention, so a strided kernel, a pointer-array kernel, a vbatched kernel and TSM2 all
compete at the same points and one dispatch table can choose among them. The convention (`strided`,
`ptr_array`, `vbatched`) only says how the data is handed to a kernel (`data.ProblemData.args`).
Space expressions read the sizes as M, N, K and batch. The baseline is cuBLAS (strided batched, fp16 with
fp32 accumulation).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Iterable, Mapping

from autotune.problems.base import ProblemKind, Scalars, SizeLimit, rotation_copies
from autotune.problems.gemm import limits
from autotune.problems.gemm.batch import batch_for_bytes, infer_batch_bytes
from autotune.vocab import TestPoint

PRECISIONS = ("fp64", "fp32", "fp16")  # GEMM's precisions
SHAPES = ("NN", "NT", "TN", "TT")  # GEMM's transpositions (op(A), op(B))
CONVENTIONS = ("strided", "ptr_array", "vbatched")
GEMM_SIZES = ("m", "n", "k", "batch")
CPP_TYPES = {"fp64": ("double", "double"), "fp32": ("float", "float"), "fp16": ("__half", "float")}  # T, S
CPP_PARAMETERS = {  # parameter lists of the calling conventions (shared contract), T element, S scalar
    "strided": "int, int, int, S, const T*, int, long long, const T*, int, long long, S, T*, int, long long, int",
    "ptr_array": "int, int, int, S, const T* const*, int, const T* const*, int, S, T* const*, int, int",
    "vbatched": "const int*, const int*, const int*, S, const T* const*, const int*, const T* const*, "
    "const int*, S, T* const*, const int*, int, int, int, int",
}


class GemmKind(ProblemKind):
    name = "gemm"
    size_names = GEMM_SIZES
    precisions = PRECISIONS
    shapes = SHAPES
    conventions = CONVENTIONS
    baseline_name = "cublas"
    scalar_defaults = MappingProxyType({"alpha": 1.0, "beta": 0.0})
    generic_space = "gemm_naive"
    generic_params = "BLOCK_X=32,BLOCK_Y=4"

    derived_sizes = ("batch",)  # a problem without a batch takes the batch rule (problems/gemm/batch.py)
    tied_sizes = MappingProxyType({"square": ("m", "n", "k"), "mn": ("m", "n")})
    tuple_sizes = MappingProxyType({"triples": ("m", "n", "k")})
    size_forms_help = (
        "use one of: `square: S`; `mn: S, k: S` (M = N varying, fixed K); `m: S, n: S, k: S` "
        "(all combinations); `triples: [[m, n, k], ...]`"
    )

    def table_sizes(self) -> tuple[str, ...]:
        return ("m", "n", "k")  # the batch count only breaks ties

    def derive_sizes(self, precision: str, shape: str, sizes: Mapping[str, int], budget_bytes: int) -> dict[str, int]:
        """The smallest batch whose A, B and C take at least `budget_bytes`, where `sizes` give none."""
        out = dict(sizes)
        if "batch" not in out:
            out["batch"] = batch_for_bytes(budget_bytes, precision, out["m"], out["n"], out["k"])
        return out

    def infer_budget(self, points: Iterable[TestPoint]) -> int | None:
        return infer_batch_bytes(p for p in points if p.kind == self.name)

    def cpp_parameters(self, convention: str, precision: str) -> str | None:
        """The C++ parameter list of a kernel of this convention and precision (dispatch headers instantiate
        template kernels with it); None for an unknown convention or precision."""
        import re

        if convention not in CPP_PARAMETERS or precision not in CPP_TYPES:
            return None
        t, s = CPP_TYPES[precision]
        return re.sub(r"\bT\b", t, re.sub(r"\bS\b", s, CPP_PARAMETERS[convention]))

    def env(self, point: TestPoint) -> dict[str, int]:
        return {"M": point.m, "N": point.n, "K": point.k, "batch": point.batch}

    def expr_names(self) -> tuple[str, ...]:
        return ("M", "N", "K", "batch")

    def flops(self, point: TestPoint) -> float:
        return 2.0 * point.m * point.n * point.k * point.batch

    def bytes_moved(self, point: TestPoint, scalars: Scalars) -> int:
        """Read A and B once, write C once (and read C when beta != 0)."""
        mn = point.m * point.n
        beta_nonzero = float(scalars.get("beta", 0.0)) != 0.0
        words = point.m * point.k + point.k * point.n + mn + (mn if beta_nonzero else 0)
        return point.batch * point.elem_bytes * words

    def distance(self, a: TestPoint, b: TestPoint) -> float:
        """|log2 M/M'| + |log2 N/N'| + |log2 K/K'| (the batch count breaks ties elsewhere)."""
        import math

        return sum(abs(math.log2(x / y)) for x, y in ((a.m, b.m), (a.n, b.n), (a.k, b.k)))

    def check_limits(self, point: TestPoint) -> SizeLimit | None:
        return limits.check_limits(point)

    def device_bytes(self, point: TestPoint, scalars: Scalars) -> int:
        return limits.device_bytes(point, scalars)

    def allocate(self, point: TestPoint, convention: str, scalars: Scalars, l2_bytes: int, seed: int) -> Any:
        from autotune.problems.gemm.data import ProblemData, layout

        copies = rotation_copies(layout(point).working_set(convention), l2_bytes)
        return ProblemData(
            point,
            convention,
            copies,
            seed=seed,
            alpha=float(scalars.get("alpha", 1.0)),
            beta=float(scalars.get("beta", 0.0)),
        )


GEMM = GemmKind()


def gemm_point(precision: str, shape: str, m: int, n: int, k: int, batch: int) -> TestPoint:
    """A GEMM test point (checked)."""
    return GEMM.point(precision, shape, {"m": m, "n": n, "k": k, "batch": batch})
