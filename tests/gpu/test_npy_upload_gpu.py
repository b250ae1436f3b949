"""GPU tier: a large `.npy` file read straight to the GPU (`autotune.problems.npy_upload`) holds the file's array, for
sizes that do not divide the chunk or the readers, both header versions, and a buffer of a tune_kernel-style space
filled from such a file; the fallbacks (small, Fortran order, another dtype) leave it to numpy's reader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autotune.problems import npy_upload

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(
    "count, dtype",
    [
        ((npy_upload.MIN_BYTES + 12_345 * 4) // 4, np.float32),  # ends mid-chunk, 3 readers with one chunk more
        (npy_upload.CHUNK_BYTES * npy_upload.READERS * 3 // 8, np.float64),  # whole chunks, every reader busy
        (npy_upload.MIN_BYTES // 2 + 7, np.int16),
    ],
)
def test_a_large_file_reaches_the_gpu_whole(tmp_path: Path, count: int, dtype: type) -> None:
    import cupy as cp

    rng = np.random.default_rng(count)
    host = (rng.random(count) * 1000).astype(dtype)
    path = tmp_path / "x.npy"
    np.save(path, host)
    got = npy_upload.upload_npy(cp, path, host.dtype, (count,))
    assert got is not None and got.dtype == host.dtype and got.shape == (count,)
    back = cp.asnumpy(got)
    assert np.array_equal(back, host)


def test_a_version_2_header_and_a_2d_shape(tmp_path: Path) -> None:
    import cupy as cp

    host = np.arange(npy_upload.MIN_BYTES // 4 + 1000, dtype=np.float32).reshape(-1, 8)[:, :]
    path = tmp_path / "x.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array(f, host, version=(2, 0))
    got = npy_upload.upload_npy(cp, path, np.float32, host.shape)
    assert got is not None and got.shape == host.shape and np.array_equal(cp.asnumpy(got), host)


def test_what_needs_numpys_reader_is_left_to_it(tmp_path: Path) -> None:
    import cupy as cp

    big = np.zeros((npy_upload.MIN_BYTES // 8, 2), dtype=np.float32)
    np.save(tmp_path / "f.npy", np.asfortranarray(big))
    np.save(tmp_path / "c.npy", big)
    np.save(tmp_path / "small.npy", np.zeros(10, np.float32))
    assert npy_upload.upload_npy(cp, tmp_path / "f.npy", np.float32, big.shape) is None  # Fortran order
    assert npy_upload.upload_npy(cp, tmp_path / "c.npy", np.float64, big.shape) is None  # another dtype
    assert npy_upload.upload_npy(cp, tmp_path / "small.npy", np.float32, (10,)) is None
