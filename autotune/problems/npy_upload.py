"""A large `.npy` file's array straight to the GPU: read (`os.preadv`) into pinned host buffers by a few threads and
copied from there asynchronously, two buffers per thread so that reading and copying overlap.

Why: `cupy.array` of the file mapped by `numpy.load(mmap_mode="r")` copies from pageable memory through the
mapping's page faults. The 3.2 GB input of Kernel Tuner's reduction example took 2.6-2.9 s that way on an H100 host,
against 0.35-0.38 s here (scripts/bench_npy_upload.py, results/bench/PROVENANCE.md); inside tune_kernel's GPU worker
that was 2.2-3.1 s before the first measurement. Files below `MIN_BYTES`, Fortran-ordered arrays, another dtype than
the buffer's, or anything numpy's header reader refuses take the plain path (the caller's `numpy.load`).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

MIN_BYTES = 64 << 20  # smaller files: numpy.load + cupy.array (a pinned buffer costs more than it saves)
CHUNK_BYTES = 32 << 20
READERS = 4


def npy_header(path: Path) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """(shape, fortran order, dtype, offset of the data) of a `.npy` file."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        return tuple(int(d) for d in shape), bool(fortran), np.dtype(dtype), f.tell()


def upload_npy(cp: Any, path: Path, dtype: Any, shape: tuple[int, ...]) -> Any | None:
    """The array of the `.npy` file `path` on the current GPU (CuPy), shaped `shape`, or None where the plain path
    serves (see the module docstring). The file's data must be `shape`'s product of `dtype` items in C order."""
    try:
        stored, fortran, stored_dtype, offset = npy_header(path)
    except (OSError, ValueError):
        return None
    dtype = np.dtype(dtype)
    count = int(np.prod(stored, dtype=np.int64))
    nbytes = count * dtype.itemsize
    if (
        fortran
        or stored_dtype != dtype
        or dtype.hasobject
        or count != int(np.prod(shape, dtype=np.int64))
        or nbytes < MIN_BYTES
        or os.path.getsize(path) < offset + nbytes
    ):
        return None
    out = cp.empty(shape, dtype=dtype)
    flat = out.reshape(-1).view(cp.uint8)
    starts = list(range(0, nbytes, CHUNK_BYTES))
    device = out.device.id
    errors: list[BaseException] = []
    fd = os.open(path, os.O_RDONLY)

    def reader(k: int) -> None:
        try:
            with cp.cuda.Device(device):
                stream = cp.cuda.Stream(non_blocking=True)
                buffers = [cp.cuda.alloc_pinned_memory(CHUNK_BYTES) for _ in range(2)]
                views = [np.frombuffer(b, dtype=np.uint8, count=CHUNK_BYTES) for b in buffers]
                done: list[Any] = [None, None]
                for j, start in enumerate(starts[k::READERS]):
                    size = min(CHUNK_BYTES, nbytes - start)
                    if done[j % 2] is not None:
                        done[j % 2].synchronize()  # the copy out of this buffer is over
                    view = views[j % 2][:size]
                    got = 0
                    while got < size:
                        n = os.preadv(fd, [view[got:].data], offset + start + got)
                        if n <= 0:
                            raise OSError(f"{path}: the file ended {nbytes - start - got} bytes early")
                        got += n
                    flat[start : start + size].set(view, stream=stream)
                    done[j % 2] = stream.record()
                stream.synchronize()
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
            errors.append(exc)

    try:
        threads = [threading.Thread(target=reader, args=(k,), daemon=True) for k in range(min(READERS, len(starts)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        os.close(fd)
    if errors:
        raise errors[0]
    return out
