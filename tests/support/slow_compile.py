"""A stand-in for `autotune.sweep.compile.nvrtc.compile_batch` in a real (spawn) compile pool (tests/test_sweep_stops.py):
requests whose name expressions have BLOCK_X = 8 "compile" at once; the others run `sleep 60` as a child process,
as nvcc would, after writing its pid to `pids/` so the test can check that a budget's end killed it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from autotune.sweep.compile.nvrtc import CompiledKernel, CompileRequest


def slow_compile(blob: str, pids: str, req: CompileRequest, cache_dir: Path) -> list[CompiledKernel]:
    if not all("0, 0, 8, " in name for name in req.name_expressions):
        proc = subprocess.Popen(["sleep", "60"])
        Path(pids, f"{proc.pid}").write_text(str(os.getpid()))
        proc.wait()
    return [
        CompiledKernel(name, True, f"key{i}", f"lowered_{i}", Path(blob), "cubin", "", 0.01)
        for i, name in enumerate(req.name_expressions)
    ]
