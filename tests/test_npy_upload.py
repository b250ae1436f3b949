"""`autotune.problems.npy_upload` without a GPU: the header it reads, and the files it leaves to numpy's reader
(decided before any GPU call: `cp` is never touched). The upload itself: tests/gpu/test_npy_upload_gpu.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autotune.problems import npy_upload


def test_the_header_gives_shape_order_dtype_and_where_the_data_starts(tmp_path: Path) -> None:
    a = np.arange(24, dtype=np.int32).reshape(4, 6)
    np.save(tmp_path / "a.npy", a)
    shape, fortran, dtype, offset = npy_upload.npy_header(tmp_path / "a.npy")
    assert (shape, fortran, dtype) == ((4, 6), False, np.dtype(np.int32))
    raw = (tmp_path / "a.npy").read_bytes()
    assert np.array_equal(np.frombuffer(raw[offset:], dtype=np.int32).reshape(4, 6), a)


def test_small_fortran_other_dtype_short_and_unreadable_files_take_numpys_path(tmp_path: Path) -> None:
    big = np.zeros((npy_upload.MIN_BYTES // 8, 2), dtype=np.float32)
    np.save(tmp_path / "f.npy", np.asfortranarray(big))
    np.save(tmp_path / "c.npy", big)
    np.save(tmp_path / "small.npy", np.zeros(10, np.float32))
    full = (tmp_path / "c.npy").read_bytes()
    (tmp_path / "short.npy").write_bytes(full[:-4])  # a truncated file: numpy's reader reports it
    (tmp_path / "junk.npy").write_bytes(b"not a npy file at all")
    none = object()  # a "CuPy" that fails at any use: nothing may reach it
    assert npy_upload.upload_npy(none, tmp_path / "f.npy", np.float32, big.shape) is None
    assert npy_upload.upload_npy(none, tmp_path / "c.npy", np.float64, big.shape) is None
    assert npy_upload.upload_npy(none, tmp_path / "c.npy", np.float32, (7,)) is None  # another element count
    assert npy_upload.upload_npy(none, tmp_path / "small.npy", np.float32, (10,)) is None
    assert npy_upload.upload_npy(none, tmp_path / "short.npy", np.float32, big.shape) is None
    assert npy_upload.upload_npy(none, tmp_path / "junk.npy", np.float32, (4,)) is None
