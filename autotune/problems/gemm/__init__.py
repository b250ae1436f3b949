"""autotune.problems.gemm."""
