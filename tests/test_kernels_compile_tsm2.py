"""nvcc compiles kernels_src/tsm2.cuh for sm_90 with several TSM2 and ISM2 instances (any machine with nvcc)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from autotune.paths import KERNELS_DIR

pytestmark = pytest.mark.nvcc

ARGS = "int, int, int, {t}, const {t}*, int, long long, const {t}*, int, long long, {t}, {t}*, int, long long, int"
TSM2 = [  # (type, TRANS_A, TRANS_B, T1, T2, T3, KS, RPT, BPF, AST): paper config, k-split, rows per thread,
    # T3 == T1, both B prefetch modes, cp.async pipeline of A
    ("float", 0, 0, 128, 16, 8, 4, 1, 1, 0),
    ("float", 0, 0, 128, 2, 4, 1, 1, 1, 0),
    ("double", 0, 0, 64, 4, 4, 8, 2, 0, 0),
    ("double", 0, 1, 32, 16, 8, 4, 1, 0, 0),
    ("float", 1, 1, 32, 3, 32, 2, 2, 1, 0),
    ("float", 1, 0, 256, 1, 1, 1, 2, 0, 0),
    ("float", 0, 0, 64, 16, 8, 2, 1, 0, 3),
    ("double", 1, 1, 32, 3, 32, 2, 1, 0, 2),
    ("double", 0, 0, 32, 16, 4, 4, 2, 0, 4),
]
ISM2 = [  # (type, TRANS_A, TRANS_B, T1, T2, T3, TCF)
    ("float", 0, 0, 128, 8, 8, 4),
    ("double", 0, 1, 64, 16, 4, 1),
    ("double", 1, 0, 32, 5, 2, 64),
]


def instantiation(kernel: str, params: tuple) -> str:
    t, *ints = params
    targs = ", ".join([t, *map(str, ints)])
    return f"template __global__ void autotune::{kernel}<{targs}>({ARGS.format(t=t)});"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_tsm2_ism2_compile_for_sm90(tmp_path: Path) -> None:
    lines = ['#include "tsm2.cuh"']
    lines += [instantiation("tsm2", p) for p in TSM2]
    lines += [instantiation("ism2", p) for p in ISM2]
    src = tmp_path / "tsm2_instances.cu"
    src.write_text("\n".join(lines) + "\n")
    obj = tmp_path / "tsm2_instances.o"
    proc = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", f"-I{KERNELS_DIR}", "-Xptxas", "-v", "-c", str(src), "-o", str(obj)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert obj.stat().st_size > 0
    # every instance became a kernel, and none of them spills registers to local memory
    entries = proc.stderr.count("Compiling entry function")
    assert entries == len(TSM2) + len(ISM2), proc.stderr[-4000:]
    assert "bytes spill stores" in proc.stderr
    for line in proc.stderr.splitlines():
        if "spill stores" in line:
            assert line.strip().startswith("0 bytes stack frame, 0 bytes spill stores"), line


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_tsm2_rejects_t3_not_dividing_t1(tmp_path: Path) -> None:
    """The hard constraint t3_divides_t1 of spaces/tsm2.yaml is a compile error, not a wrong result."""
    src = tmp_path / "bad.cu"
    src.write_text('#include "tsm2.cuh"\n' + instantiation("tsm2", ("float", 0, 0, 96, 4, 64, 1, 1, 0, 0)) + "\n")
    proc = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", f"-I{KERNELS_DIR}", "-c", str(src), "-o", str(tmp_path / "bad.o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "T3 must divide T1" in proc.stderr + proc.stdout
