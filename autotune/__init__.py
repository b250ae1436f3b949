"""autotune: autotuning framework and search-space explorer for GPU kernels."""

__version__ = "0.1.0"
