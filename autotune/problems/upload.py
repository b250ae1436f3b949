"""Host arrays to the GPU, fast for large ones: a `.npy` mapped from the page cache or an array a user's function
made is copied in chunks through two pinned staging buffers, the copy of one chunk into pinned memory overlapping
the DMA of the other. `cupy.array` of such an array copies from pageable memory (the driver stages it through a
small pinned buffer of its own, one page fault at a time on a mapped file): Kernel Tuner's reduction example's 3.2
GB input took 2.6 s to prepare on an H100 host that way (results/bench/kt_switch_h100_kt4.csv's timeline).
`python3 scripts/bench_upload.py` measures both paths on a GPU machine.
"""

from __future__ import annotations

from typing import Any

import numpy as np

CHUNKED_MIN_BYTES = 64 << 20  # smaller arrays: cupy.array (one call, no pinned buffers to allocate)
CHUNK_BYTES = 32 << 20
H2D = 1  # cudaMemcpyHostToDevice


def to_device(cp: Any, host: np.ndarray) -> Any:
    """A CuPy array equal to `host` (its shape and dtype), on the current device."""
    if host.nbytes < CHUNKED_MIN_BYTES or not host.flags.c_contiguous:
        return cp.array(host)
    out = cp.empty(host.shape, dtype=host.dtype)
    staged_copy(cp, memoryview(host.reshape(-1).view(np.uint8)), out.data.ptr)
    return out


def staged_copy(cp: Any, src: memoryview, dst_ptr: int, chunk: int = CHUNK_BYTES) -> None:
    """Copy the bytes of `src` to device address `dst_ptr` through two pinned buffers of `chunk` bytes, on a stream
    of its own, and wait for the last copy."""
    n = len(src)
    mem = [cp.cuda.alloc_pinned_memory(chunk) for _ in range(2)]
    bufs = [np.frombuffer(m, dtype=np.uint8, count=chunk) for m in mem]
    done = [cp.cuda.Event(disable_timing=True) for _ in range(2)]
    used = [False, False]
    stream = cp.cuda.Stream(non_blocking=True)
    source = np.frombuffer(src, dtype=np.uint8)
    for i, off in enumerate(range(0, n, chunk)):
        b, size = i % 2, min(chunk, n - off)
        if used[b]:
            done[b].synchronize()  # its previous chunk has left for the GPU
        np.copyto(bufs[b][:size], source[off : off + size])
        cp.cuda.runtime.memcpyAsync(dst_ptr + off, mem[b].ptr, size, H2D, stream.ptr)
        done[b].record(stream)
        used[b] = True
    stream.synchronize()
