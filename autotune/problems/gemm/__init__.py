"""Batched GEMM, the built-in problem kind (strided, pointer-array and vbatched conventions, TSM2)."""

from autotune.problems.gemm.kind import CONVENTIONS, GEMM, GEMM_SIZES, PRECISIONS, SHAPES, GemmKind, gemm_point

__all__ = ["CONVENTIONS", "GEMM", "GEMM_SIZES", "PRECISIONS", "SHAPES", "GemmKind", "gemm_point"]
