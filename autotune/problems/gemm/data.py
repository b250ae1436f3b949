"""Problem data on the GPU and the argument tuples of the three calling conventions.

Matrices are column-major with the smallest leading dimensions (lda = rows of the stored A, ...), the
batch packed with stride = ld * columns. Inputs are uniform random in [-1, 1) in the element type,
never zeros. When one problem's working set (A + B + C, plus the pointer arrays) is under twice the L2,
the data holds `copies` independent sets laid one after another, and timed launches rotate over them,
so that every launch reads from device memory rather than from L2 (copies * working set >= 3 * L2).
`layout` and `rotation_copies` are pure; `ProblemData` allocates (CuPy is imported only there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autotune.problems.base import ProblemData as _ProblemData
from autotune.problems.base import l2_protection, rotation_copies  # noqa: F401 - re-exported
from autotune.vocab import TestPoint

CONVENTIONS = ("strided", "ptr_array", "vbatched")


@dataclass(frozen=True)
class Layout:
    """Shapes of the stored matrices of one test point (column-major, per batch entry)."""

    point: TestPoint
    a_rows: int
    a_cols: int
    b_rows: int
    b_cols: int
    lda: int
    ldb: int
    ldc: int

    @property
    def stride_a(self) -> int:
        return self.lda * self.a_cols

    @property
    def stride_b(self) -> int:
        return self.ldb * self.b_cols

    @property
    def stride_c(self) -> int:
        return self.ldc * self.point.n

    def elements(self) -> tuple[int, int, int]:
        """Elements of A, B and C for the whole batch (one copy)."""
        b = self.point.batch
        return self.stride_a * b, self.stride_b * b, self.stride_c * b

    def working_set(self, convention: str) -> int:
        """Bytes one launch touches: the matrices, plus 3 pointer arrays (and 6 int arrays for vbatched)."""
        total = sum(self.elements()) * self.point.elem_bytes
        if convention != "strided":
            total += 3 * 8 * self.point.batch
        if convention == "vbatched":
            total += 6 * 4 * self.point.batch
        return total


def layout(point: TestPoint) -> Layout:
    m, n, k = point.m, point.n, point.k
    a_rows, a_cols = (m, k) if point.shape[0] == "N" else (k, m)
    b_rows, b_cols = (k, n) if point.shape[1] == "N" else (n, k)
    return Layout(point, a_rows, a_cols, b_rows, b_cols, lda=a_rows, ldb=b_rows, ldc=m)


DTYPES = {"fp64": "float64", "fp32": "float32", "fp16": "float16"}
SCALARS = {"fp64": "float64", "fp32": "float32", "fp16": "float32"}


class ProblemData(_ProblemData):
    """`copies` random instances of one test point on the GPU, plus pointer/size arrays per convention.
    `alpha` and `beta` are the sweep's scalars: `args(copy)` passes them, the reference uses them."""

    def __init__(
        self, point: TestPoint, convention: str, copies: int, seed: int = 0, alpha: float = 1.0, beta: float = 0.0
    ) -> None:
        import cupy as cp

        if convention not in CONVENTIONS:
            raise ValueError(f"unknown calling convention {convention!r}; expected one of {CONVENTIONS}")
        self.point, self.convention, self.copies = point, convention, copies
        self.alpha, self.beta = alpha, beta
        self.lay = layout(point)
        self.dtype = cp.dtype(DTYPES[point.precision])
        ea, eb, ec = self.lay.elements()
        rng = cp.random.default_rng(seed)

        def rand(n: int) -> Any:
            return (rng.random(n * copies, dtype=cp.float32) * 2 - 1).astype(self.dtype)

        self.a, self.b = rand(ea), rand(eb)
        self.c = rand(ec)  # beta != 0 reads C: random initial values, never zeros
        self.c_init = self.c[:ec].copy()  # copy 0's C before any launch (for the reference)
        self.ptrs: list[tuple[Any, Any, Any]] = []
        self.sizes: tuple[Any, ...] = ()
        if convention != "strided":
            self._pointer_arrays(cp)

    def _pointer_arrays(self, cp: Any) -> None:
        lay, batch, es = self.lay, self.point.batch, self.dtype.itemsize
        ea, eb, ec = lay.elements()
        idx = cp.arange(batch, dtype=cp.uint64)
        for c in range(self.copies):
            pa = self.a.data.ptr + (c * ea + idx * lay.stride_a) * es
            pb = self.b.data.ptr + (c * eb + idx * lay.stride_b) * es
            pc = self.c.data.ptr + (c * ec + idx * lay.stride_c) * es
            self.ptrs.append((pa.astype(cp.uint64), pb.astype(cp.uint64), pc.astype(cp.uint64)))
        if self.convention == "vbatched":
            p = self.point
            self.sizes = tuple(cp.full(batch, v, dtype=cp.int32) for v in (p.m, p.n, p.k, lay.lda, lay.ldb, lay.ldc))

    def nbytes(self) -> int:
        total = self.a.nbytes + self.b.nbytes + self.c.nbytes + self.c_init.nbytes
        total += sum(x.nbytes for trio in self.ptrs for x in trio) + sum(x.nbytes for x in self.sizes)
        return total

    def c_copy(self, copy: int) -> Any:
        """C of one copy (the whole batch, flat), a view."""
        ec = self.lay.elements()[2]
        return self.c[copy * ec : (copy + 1) * ec]

    def matrices(self, copy: int) -> tuple[Any, Any]:
        """(A, B) of one copy as flat views."""
        ea, eb, _ = self.lay.elements()
        return self.a[copy * ea : (copy + 1) * ea], self.b[copy * eb : (copy + 1) * eb]

    def args(self, copy: int) -> tuple[Any, ...]:
        """The kernel argument tuple of the convention for one copy of the data."""
        p, lay, alpha, beta = self.point, self.lay, self.alpha, self.beta
        if self.convention == "strided":
            a, b = self.matrices(copy)
            return strided_args(
                p.precision,
                (p.m, p.n, p.k),
                alpha,
                Operand(a, lay.lda, lay.stride_a),
                Operand(b, lay.ldb, lay.stride_b),
                beta,
                Operand(self.c_copy(copy), lay.ldc, lay.stride_c),
                p.batch,
            )
        pa, pb, pc = self.ptrs[copy]
        if self.convention == "ptr_array":
            return ptr_array_args(
                p.precision,
                (p.m, p.n, p.k),
                alpha,
                Operand(pa, lay.lda),
                Operand(pb, lay.ldb),
                beta,
                Operand(pc, lay.ldc),
                p.batch,
            )
        return vbatched_args(p.precision, self.sizes, alpha, (pa, pb, pc), beta, p.batch, (p.m, p.n, p.k))

    # ------------------------------------------------------------------ verification and baseline
    def prepare_verify(self) -> None:
        from autotune.problems.gemm.verify import poison

        poison(self, 0, self.beta)

    def reference(self) -> Any:
        from autotune.problems.gemm.verify import reference_chunks

        return reference_chunks(self, self.alpha, self.beta)

    def verify(self, reference: Any) -> Any:
        from autotune.problems.gemm.verify import verify

        return verify(self, reference)

    def baseline(self) -> Any:
        from autotune.problems.gemm.cublas import cublas_launcher

        if self.convention != "strided":
            return None
        return cublas_launcher(self, self.alpha, self.beta)


# ------------------------------------------------------------------------- argument tuples (pure)
def _scalar(precision: str) -> Any:
    import numpy as np

    return np.dtype(SCALARS[precision]).type


@dataclass(frozen=True)
class Operand:
    """One matrix of a kernel call: `data` (the device array of the strided convention, or the device array of
    pointers of the pointer-array one), its leading dimension `ld` and its batch stride `stride` (strided only)."""

    data: Any
    ld: int
    stride: int = 0

    def args(self, strided: bool) -> tuple[Any, ...]:
        """(data, ld as int32) and, `strided`, the stride as int64: the operand's slots of a kernel call."""
        import numpy as np

        head = (self.data, np.int32(self.ld))
        return (*head, np.int64(self.stride)) if strided else head


def _args(
    strided: bool, precision: str, mnk: tuple[int, int, int], alpha: float, ops: tuple[Operand, ...], beta: float
) -> tuple[Any, ...]:
    """(M, N, K, alpha, A's slots, B's slots, beta, C's slots) of either convention (`ops` = A, B, C)."""
    import numpy as np

    s = _scalar(precision)
    a, b, c = (o.args(strided) for o in ops)
    return (*(np.int32(v) for v in mnk), s(alpha), *a, *b, s(beta), *c)


def strided_args(
    precision: str, mnk: tuple[int, int, int], alpha: float, a: Operand, b: Operand, beta: float, c: Operand, batch: int
) -> tuple[Any, ...]:
    """(M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch) as the strided
    convention's kernels take them (int32 sizes, int64 strides, scalars of the precision's compute type);
    `mnk` = (M, N, K)."""
    import numpy as np

    return (*_args(True, precision, mnk, alpha, (a, b, c), beta), np.int32(batch))


def ptr_array_args(
    precision: str, mnk: tuple[int, int, int], alpha: float, a: Operand, b: Operand, beta: float, c: Operand, batch: int
) -> tuple[Any, ...]:
    """(M, N, K, alpha, A[], lda, B[], ldb, beta, C[], ldc, batch): the pointer-array convention (each operand's
    `data`: its device array of pointers; its `stride` is not passed); `mnk` = (M, N, K)."""
    import numpy as np

    return (*_args(False, precision, mnk, alpha, (a, b, c), beta), np.int32(batch))


def vbatched_args(
    precision: str,
    sizes: tuple[Any, ...],
    alpha: float,
    pointers: tuple[Any, Any, Any],
    beta: float,
    batch: int,
    maxima: tuple[int, int, int],
) -> tuple[Any, ...]:
    """(m[], n[], k[], alpha, A[], lda[], B[], ldb[], beta, C[], ldc[], batch, max M, max N, max K): the vbatched
    convention; `sizes` = the device arrays (m, n, k, lda, ldb, ldc), `pointers` = the device arrays of pointers
    (A[], B[], C[])."""
    import numpy as np

    s, i32 = _scalar(precision), np.int32
    m, n, k, lda, ldb, ldc = sizes
    pa, pb, pc = pointers
    return (m, n, k, s(alpha), pa, lda, pb, ldb, s(beta), pc, ldc, i32(batch), *(i32(v) for v in maxima))
