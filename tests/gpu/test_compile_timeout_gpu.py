"""GPU tier (issue 31 item 5): NVRTC under the per-call time limit (a forked child of the compile process, CuPy's
NVRTC bindings loaded): a normal compile passes through with its lowered name and cubin, a call past the limit is
a compile error "compile timeout" and is not cached, and the screening build's option is accepted by this NVRTC."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from autotune.sweep.compile import SCREEN_DEFAULT, TIMEOUT_ERROR, CompileRequest, compile_batch

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
    (late,) = compile_batch(dataclasses.replace(req, name_expressions=("scale<64>",), timeout_s=0.001),
                            tmp_path / "cache")
    assert not late.ok and late.log.startswith(TIMEOUT_ERROR), late.log
    (again,) = compile_batch(dataclasses.replace(req, name_expressions=("scale<64>",)), tmp_path / "cache")
    assert again.ok and not again.cached  # the timeout was not cached
    (fast,) = compile_batch(dataclasses.replace(req, options=(*req.options, *SCREEN_DEFAULT)), tmp_path / "cache")
    assert fast.ok and not fast.cached, fast.log  # another key: the screening build is its own binary
