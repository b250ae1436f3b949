"""Reference and CuPy baseline of examples/stencil (see space.yaml and convolution.cu)."""

from __future__ import annotations

RADIUS = 2
WIDTH = 2 * RADIUS + 1
# the taps of convolution.cu's __constant__ weights: (k + 1) / 325 for tap k = 5 * dy + dx
WEIGHTS = [[(WIDTH * dy + dx + 1) / 325.0 for dx in range(WIDTH)] for dy in range(WIDTH)]


def _convolve(inp, ny, nx, dtype=None):
    """sum over the taps of weight * shifted window; array methods only, so NumPy and CuPy both work."""
    acc = None
    for dy in range(WIDTH):
        for dx in range(WIDTH):
            window = inp[dy : dy + ny, dx : dx + nx]
            if dtype is not None:
                window = window.astype(dtype)
            term = window * WEIGHTS[dy][dx]
            acc = term if acc is None else acc + term
    return acc


def convolution(arrays, sizes):
    """out[y, x] = sum_{dy, dx} w[dy][dx] * inp[y + dy, x + dx], computed in float64."""
    ny, nx = int(sizes["ny"]), int(sizes["nx"])
    return {"out": _convolve(arrays["inp"], ny, nx, dtype="float64")}


def cupy_convolution(arrays, sizes):
    """The same convolution with cupyx.scipy.ndimage.correlate on the GPU, written into arrays['out'].

    correlate (not convolve: no filter flip) over the valid part of the padded input: the output is the
    ny x nx interior of the (ny + 4) x (nx + 4) result.
    """
    import cupy
    from cupyx.scipy import ndimage

    ny, nx = int(sizes["ny"]), int(sizes["nx"])
    inp = arrays["inp"]
    weights = cupy.asarray(WEIGHTS, dtype=inp.dtype)
    full = ndimage.correlate(inp, weights, mode="constant")
    arrays["out"][...] = full[RADIUS : RADIUS + ny, RADIUS : RADIUS + nx]
