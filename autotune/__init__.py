"""autotune: autotuning framework and search-space explorer for GPU kernels."""

__version__ = "0.1.0"  # the one version: pyproject.toml reads it, sweeps record it, every dispatch.json names it
