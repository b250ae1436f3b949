"""The compile worker's pool (`dask_compile.CompilePool`): compiles run in spawned single-threaded processes, and a
compile process that dies caches nothing, says so, and is replaced for the next call. Real nvcc compiles where nvcc exists."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autotune.errors import UserError
from autotune.sweep.backends.dask_compile import CompilePool, PoolFailed, pool_size
from autotune.sweep.compile.nvrtc import CompileRequest
from autotune.sweep.compile.nvcc import find_nvcc


class _DiesWhenUnpickled:
    """A request that kills the pool process receiving it (as a segfault or the OOM killer would), outside any
    compile."""

    timeout_s, name_expressions, source = None, ("k",), Path("dies.cu")

    def __reduce__(self) -> tuple:
        return (os._exit, (9,))


def _request(tmp_path: Path) -> CompileRequest:
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.f; }\n')
    return CompileRequest(tmp_path / "k.cu", ("k",), 80, compiler="nvcc", timeout_s=120)


def test_pool_size_reads_the_env_then_the_resource_then_the_cores() -> None:
    assert pool_size({"compile": 1}, {"AUTOTUNE_COMPILE_WORKERS": "3"}) == 3
    assert pool_size({"compile": 8}, {}) == 8
    assert pool_size({"compile": 1}, {}) == (os.cpu_count() or 1)
    for bad in ("many", "0", "-2", "1e999", "nan"):  # "0" and "-2" were 1 before; "1e999" an OverflowError
        with pytest.raises(UserError, match="AUTOTUNE_COMPILE_WORKERS"):
            pool_size({}, {"AUTOTUNE_COMPILE_WORKERS": bad})


def test_a_dead_compile_process_caches_nothing_and_is_replaced(tmp_path: Path) -> None:
    pool = CompilePool(1)
    cache = tmp_path / "cache"
    try:
        with pytest.raises(PoolFailed, match="nothing was cached"):
            pool.compile([_DiesWhenUnpickled()], str(cache))
        assert pool.replaced == 1 and not cache.exists()
        if find_nvcc() is None:
            pytest.skip("nvcc not found: the replaced pool's compile is not tried")
        (results,), pids, threads = pool.compile([_request(tmp_path)], str(cache))
        assert [ck.ok for ck in results] == [True], results[0].log
        assert os.getpid() not in pids and threads == 1
    finally:
        pool.close()
