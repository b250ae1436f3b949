"""Reference and CuPy baseline of examples/transpose (see space.yaml)."""

from __future__ import annotations


def transpose(arrays, sizes):
    """out = inp^T; works for NumPy and CuPy arrays alike (array methods only)."""
    return {"out": arrays["inp"].T.copy()}


def cupy_transpose(arrays, sizes):
    """The same operation done by CuPy on the GPU, written into arrays['out'] in place."""
    arrays["out"][...] = arrays["inp"].T
