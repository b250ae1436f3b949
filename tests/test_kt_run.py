"""`autotune.kernel_tuner.run_kernel` with lang="cupy" runs without Kernel Tuner (autotune.interop.kt_run): the
instance it builds is Kernel Tuner 1.5's. The expected block, grid, name and source preamble below are what Kernel
Tuner 1.5's `util.setup_block_and_grid` and `util.prepare_kernel_string(..., lang="CUPY", defines)` returned for
the same arguments (generated once with kernel_tuner==1.5.0 installed); other calls go to Kernel Tuner's own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autotune.interop import kt_run

SOURCE = "__global__ void k(float *x) { x[0] = 1.0f; }\n"
CASES = [
    (  # convolution_correct.py's reference: the naive kernel, 16x16 blocks
        dict(
            name="convolution_naive",
            problem=(4096, 4096),
            params={"block_size_x": 16, "block_size_y": 16},
            grid_div=(["block_size_x"], ["block_size_y"], None),
            names=None,
            defines=None,
        ),
        (16, 16, 1),
        (256, 256, 1),
        "convolution_naive",
        "#define grid_size_x 256\n#define grid_size_y 256\n#define grid_size_z 1\n#define block_size_x 16\n"
        "#define block_size_y 16\n#define block_size_z 1\n#define kernel_tuner 1\n#line 1\n",
    ),
    (  # zeromeanfilter.py: an empty divisor list for y
        dict(
            name="computeMeanVertically",
            problem=(4096, 1),
            params={"block_size_x": 64, "block_size_y": 4},
            grid_div=(["block_size_x"], [], None),
            names=None,
            defines=None,
        ),
        (64, 4, 1),
        (64, 1, 1),
        "computeMeanVertically",
        "#define grid_size_x 64\n#define grid_size_y 1\n#define grid_size_z 1\n#define block_size_x 64\n"
        "#define block_size_y 4\n#define block_size_z 1\n#define kernel_tuner 1\n#line 1\n",
    ),
    (  # expressions in the problem size and a divisor, an int divisor, two block size names given
        dict(
            name="k_tile_size_x",
            problem=("n_x * 2", 100, 3),
            params={"bx": 32, "by": 2, "n_x": 1000, "tile_size_x": 4},
            grid_div=(["bx", "tile_size_x"], "by * 3", 2),
            names=["bx", "by"],
            defines=None,
        ),
        (32, 2, 1),
        (16, 17, 2),
        "k_tile_size_x",
        "#define grid_size_x 16\n#define grid_size_y 17\n#define grid_size_z 2\n#define bx 32\n#define by 2\n"
        "#define block_size_z 1\n#define n_x 1000\n#define tile_size_x 4\n#define kernel_tuner 1\n#line 1\n",
    ),
    (  # given defines: expressions of the parameters, a number, a newline escaped
        dict(
            name="k",
            problem=777,
            params={"block_size_x": 128, "unroll": 2},
            grid_div=(None, None, None),
            names=None,
            defines={"UNROLL": "unroll * 2", "N": 777, "BS": "block_size_x", "MULTI": "a\nb"},
        ),
        (128, 1, 1),
        (7, 1, 1),
        "k",
        "#define UNROLL 2 * 2\n#define N 777\n#define BS 128\n#define MULTI a\\\nb\n#line 1\n",
    ),
]


@pytest.mark.parametrize(("call", "threads", "grid", "name", "prefix"), CASES)
def test_the_instance_is_kernel_tuners(call: dict, threads: tuple, grid: tuple, name: str, prefix: str) -> None:
    names = list(call["names"] or kt_run.DEFAULT_BLOCK_SIZE_NAMES)
    names += kt_run.DEFAULT_BLOCK_SIZE_NAMES[len(names) :]
    got_threads, got_grid = kt_run.block_and_grid(call["problem"], call["grid_div"], call["params"], names)
    assert (got_threads, got_grid) == (threads, grid)
    got_name, code = kt_run.prepare_kernel_string(
        call["name"], SOURCE, call["params"], got_grid, got_threads, names, call["defines"]
    )
    assert got_name == name and code == prefix + SOURCE


def test_a_source_file_is_read_where_kernel_tuner_reads_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kernel.cu").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    assert kt_run.kernel_string("kernel.cu") == SOURCE == kt_run.kernel_string(tmp_path / "kernel.cu")
    assert kt_run.kernel_string(SOURCE) == SOURCE  # code, not a file name (Kernel Tuner's looks_like_a_filename)
    assert [kt_run.looks_like_a_filename(s) for s in ("a.c", "k.jl", "f.F90", "void f(){}", "kernel")] == [
        True,
        True,
        True,
        False,
        False,
    ]


def _supported(**kw: object) -> bool:
    base: dict = dict(
        kernel_source=SOURCE,
        problem_size=(64,),
        arguments=[np.zeros(64, np.float32), np.int32(64)],
        params={"block_size_x": 32},
        grid_div_x=None,
        grid_div_y=None,
        grid_div_z=None,
        lang="cupy",
        smem_args=None,
        cmem_args={"d_filter": np.ones(9, np.float32)},
        texmem_args=None,
        compiler_options=None,
        defines=None,
        block_size_names=None,
        log=None,
    )
    return kt_run.supported({**base, **kw})


def test_only_cupy_calls_with_plain_arguments_run_without_kernel_tuner() -> None:
    assert _supported() and _supported(lang="CuPy", smem_args={"size": "block_size_x * 4"})
    assert not _supported(lang=None)  # Kernel Tuner's default CUDA backend (PyCUDA, nvcc): its own
    assert not _supported(lang="CUDA")
    assert not _supported(kernel_source=lambda params: SOURCE)  # a generator
    assert not _supported(kernel_source=[SOURCE, "other.cu"])  # several files
    assert not _supported(texmem_args={"tex": np.zeros(4)})
    assert not _supported(arguments=[[1.0, 2.0]])  # not a NumPy array
    assert not _supported(grid_div_x=[lambda p: 2])  # a divisor function
    assert not _supported(log=10)
