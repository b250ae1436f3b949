"""GPU tier (issue 31 item 5): NVRTC under the per-call time limit (a forked child of the compile process, CuPy's
NVRTC bindings loaded): a normal compile passes through with its lowered name and cubin, a call past the limit is
a compile error "compile timeout" and is not cached, and the screening build's option is accepted by this NVRTC."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from autotune.sweep.compile.nvrtc import SCREEN_DEFAULT, TIMEOUT_ERROR, CompileRequest, compile_batch

pytestmark = pytest.mark.gpu
SOURCE = """
template <int N> __global__ void scale(float *x) { x[blockIdx.x * N + threadIdx.x] *= 2.0f; }
"""


def test_nvrtc_under_a_time_limit(tmp_path: Path) -> None:
    src = tmp_path / "scale.cu"
    src.write_text(SOURCE)
    req = CompileRequest(src, ("scale<128>",), 90, timeout_s=600)
    (ck,) = compile_batch(req, tmp_path / "cache")
    assert ck.ok and ck.lowered_name.startswith("_Z5scaleILi128EEvPf") and ck.blob.is_file(), ck.log
    (late,) = compile_batch(
        dataclasses.replace(req, name_expressions=("scale<64>",), timeout_s=0.001), tmp_path / "cache"
    )
    assert not late.ok and late.log.startswith(TIMEOUT_ERROR), late.log
    (again,) = compile_batch(dataclasses.replace(req, name_expressions=("scale<64>",)), tmp_path / "cache")
    assert again.ok and not again.cached  # the timeout was not cached
    (fast,) = compile_batch(dataclasses.replace(req, options=(*req.options, *SCREEN_DEFAULT)), tmp_path / "cache")
    assert fast.ok and not fast.cached, fast.log  # another key: the screening build is its own binary


SHARED = """
template <int N> __global__ void big(float *x) {
    __shared__ float tile[N];
    tile[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    x[threadIdx.x] = tile[(threadIdx.x + 1) % N];
}
"""


def test_a_fast_build_finds_a_shared_memory_limit_before_the_full_build(tmp_path: Path) -> None:
    from autotune.sweep.compile.nvrtc import PRECHECK_NOTE, resource_failure

    src = tmp_path / "big.cu"
    src.write_text(SHARED)
    full = CompileRequest(src, ("big<20000>",), 90)  # 80 KB of static shared memory: over the 48 KB a block may have
    (ck,) = compile_batch(full, tmp_path / "full")
    assert not ck.ok and resource_failure(ck.log), ck.log  # what ptxas says after a full build
    (pre,) = compile_batch(dataclasses.replace(full, precheck=True), tmp_path / "pre")
    assert not pre.ok and pre.log.startswith(PRECHECK_NOTE) and resource_failure(pre.log), pre.log
    (fits,) = compile_batch(dataclasses.replace(full, name_expressions=("big<1024>",), precheck=True), tmp_path / "pre")
    assert fits.ok and fits.binary_kind == "cubin", fits.log  # within the limit: the full build, as without
