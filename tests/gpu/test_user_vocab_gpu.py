"""GPU tier: the problem vocabulary through the real GpuBackend.

- a 2D convolution whose filter is a `__constant__` array with no initializer, set from the host by `constants:`
  (its values from `init: {function:}`, like the input image): every instance is right; the same space without
  `constants:` leaves the filter at zero and every instance is wrong (so the copy really happened); a constant the
  module lacks stops the sweep with one error and records nothing;
- `semantics: kerneltuner` prunes the blocks of more than max_threads_per_block threads before anything runs;
- a reduction whose number of partial sums is a tuning parameter, checked by an instance-aware `check:` (no
  reference), with Kernel Tuner's `loop_unroll_factor_0` compiled by NVRTC; instances that drop a partial sum are
  `wrong` with the check's message."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from autotune.errors import UserError
from autotune.store.store import Store
from tests.support.gpu_sweep import gpu_sweep

pytestmark = pytest.mark.gpu

CONV_CU = """\
#ifndef block_size_x
#define block_size_x 16
#endif
#ifndef block_size_y
#define block_size_y 16
#endif
__constant__ float filt[25];  // no initializer: zero unless the host sets it

extern "C" __global__ void conv(float* __restrict__ out, const float* __restrict__ inp, int ny, int nx)
{
    const int x = blockIdx.x * block_size_x + threadIdx.x;
    const int y = blockIdx.y * block_size_y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    float s = 0.0f;
    for (int dy = 0; dy < 5; dy++)
        for (int dx = 0; dx < 5; dx++)
            s += filt[5 * dy + dx] * inp[(y + dy) * (nx + 4) + x + dx];
    out[y * nx + x] = s;
}
"""
GEN = """\
import numpy as np

def image(name, sizes, precision, seed):
    return np.random.default_rng(seed).standard_normal((sizes["ny"] + 4, sizes["nx"] + 4))

def taps(name, sizes, precision, seed):
    return (np.arange(25) + 1) / 325.0  # asymmetric: a flipped or transposed index fails

def positive(name, sizes, precision, seed):
    return np.random.default_rng(seed).random(sizes["n"]) + 0.5
"""
REF = """\
import numpy as np

def conv(a, s):
    f = a["filt"] if "filt" in a else (np.arange(25) + 1) / 325.0  # without constants: the filter it should be
    f = f.reshape(5, 5).astype("float64").tolist()
    inp = a["inp"].astype("float64")
    ny, nx = s["ny"], s["nx"]
    return sum(f[dy][dx] * inp[dy:dy + ny, dx:dx + nx] for dy in range(5) for dx in range(5))
"""
CONV_SPACE = """\
name: cmem_conv
problem:
  name: cmem_conv
  sizes: [ny, nx]
  arguments:
    - {name: out, buffer: float32, shape: [ny, nx], output: true}
    - {name: inp, buffer: float32, shape: ["ny + 4", "nx + 4"], init: {function: gen.py:image}}
    - {name: ny, scalar: int32, value: ny}
    - {name: nx, scalar: int32, value: nx}
  constants:
    - {name: filt, dtype: float32, shape: [25], init: {function: gen.py:taps}}
  reference: ref.py:conv
  tolerance: {fp32: 1e-5}
  bytes: "((ny + 4) * (nx + 4) + ny * nx) * elem_bytes"
kernel:
  source: conv.cu
  name: conv
  semantics: kerneltuner
  block: [block_size_x, block_size_y, 1]
  grid: ["ceil(nx / block_size_x)", "ceil(ny / block_size_y)", 1]
parameters:
  block_size_x: [16, 32, 64]
  block_size_y: [4, 16, 32]
"""
CONV_POINTS = "[{sizes: {ny: [64, 101], nx: [128, 77]}}]"


def conv_space(folder: Path, text: str = CONV_SPACE) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in (("conv.cu", CONV_CU), ("gen.py", GEN), ("ref.py", REF), ("space.yaml", text)):
        (folder / name).write_text(body)
    return folder / "space.yaml"


def rows(store: Store, sql: str) -> list[tuple]:
    with store.engine.connect() as conn:
        return [tuple(r) for r in conn.exec_driver_sql(sql).fetchall()]


def test_a_constant_filter_set_from_the_host_and_kerneltuner_pruning(tmp_path: Path) -> None:
    store = gpu_sweep(tmp_path, conv_space(tmp_path / "user"), CONV_POINTS)
    frame = store.measurements()
    threads = frame.block_size_x * frame.block_size_y
    assert threads.max() <= 1024 and len(frame) == 8 * 4, frame[["instance", "status", "error"]]  # 9 - (64 x 32)
    assert set(frame.status) <= {"ok", "skipped"} and (frame.status == "ok").any(), frame[["status", "error"]]


def test_without_constants_the_filter_stays_zero_and_every_instance_is_wrong(tmp_path: Path) -> None:
    text = CONV_SPACE.replace(
        "  constants:\n    - {name: filt, dtype: float32, shape: [25], init: {function: gen.py:taps}}\n", ""
    )
    assert "constants:" not in text
    store = gpu_sweep(tmp_path, conv_space(tmp_path / "user", text), "[{sizes: {ny: 64, nx: 128}}]")
    frame = store.measurements()
    assert len(frame) == 8 and set(frame.status) == {"wrong"}, frame[["status", "error"]]


def test_a_constant_the_module_lacks_is_the_problems_fault(tmp_path: Path) -> None:
    text = CONV_SPACE.replace("{name: filt, dtype", "{name: weights, dtype")
    with pytest.raises(UserError) as err:
        gpu_sweep(tmp_path, conv_space(tmp_path / "user", text), "[{sizes: {ny: 64, nx: 128}}]", max_instances=3)
    assert "no __constant__ symbol 'weights'" in str(err.value), str(err.value)
    store = Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}")
    assert rows(store, "SELECT COUNT(*) FROM measurements") == [(0,)]


REDUCE_CU = """\
#ifndef block_size_x
#define block_size_x 128
#endif
// num_blocks partial sums, one per block; the host adds them (the check knows how many there are)
extern "C" __global__ void partial_sums(float* __restrict__ partial, const float* __restrict__ x, int n)
{
    __shared__ float sh[block_size_x];
    float s = 0.0f;
    const int stride = num_blocks * block_size_x;
#pragma unroll loop_unroll_factor_0
    for (int i = blockIdx.x * block_size_x + threadIdx.x; i < n; i += stride)
        s += x[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int k = block_size_x / 2; k > 0; k /= 2) {
        if (threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
        __syncthreads();
    }
#if drop_last
    if (num_blocks > 1 && blockIdx.x == num_blocks - 1) return;  // a bug: the last partial sum is never written
#endif
    if (threadIdx.x == 0) partial[blockIdx.x] = sh[0];
}
"""
CHECK = """\
import numpy as np

def partial_sums(outputs, expected, params, sizes):
    k = int(params["num_blocks"])
    got = float(np.sum(outputs["partial"][:k], dtype=np.float64))
    want = float(np.sum(outputs["x"], dtype=np.float64))
    if abs(got - want) <= 1e-5 * want:
        return True
    return f"{k} partial sums add to {got:.6g}, expected {want:.6g}"
"""
REDUCE_SPACE = """\
name: partial_reduce
problem:
  name: partial_reduce
  sizes: [n]
  arguments:
    - {name: partial, buffer: float32, shape: [1024], output: true}
    - {name: x, buffer: float32, shape: [n], init: {function: gen.py:positive}}
    - {name: n, scalar: int32, value: n}
  check: check.py:partial_sums
  bytes: n * elem_bytes
kernel:
  source: reduce.cu
  name: partial_sums
  semantics: kerneltuner
  block: [block_size_x, 1, 1]
  grid: [num_blocks, 1, 1]
parameters:
  block_size_x: [64, 256]
  num_blocks: [1, 4, 32]
  loop_unroll_factor_0: [0, 4]
  drop_last: [0, 1]
"""


def test_an_instance_aware_check_of_a_reduction_with_unrolled_loops(tmp_path: Path) -> None:
    folder = tmp_path / "user"
    folder.mkdir()
    for name, body in (("reduce.cu", REDUCE_CU), ("gen.py", GEN), ("check.py", CHECK), ("space.yaml", REDUCE_SPACE)):
        (folder / name).write_text(textwrap.dedent(body))
    store = gpu_sweep(tmp_path, folder / "space.yaml", "[{sizes: {n: [100000, 4097]}}]")
    frame = store.measurements()
    assert len(frame) == 24 * 2, frame[["instance", "status", "error"]]
    for blocks, drop, status, error in zip(frame.num_blocks, frame.drop_last, frame.status, frame.error, strict=True):
        if drop == 1 and blocks > 1:  # the check saw this instance's number of partial sums
            assert status == "wrong" and re.match(rf"check\.py:partial_sums: {blocks} partial sums add to", error), (
                blocks,
                drop,
                status,
                error,
            )
        else:
            assert status in ("ok", "skipped"), (blocks, drop, status, error)
    assert set(frame.loop_unroll_factor_0) == {0, 4}
