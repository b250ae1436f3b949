"""Compile-only checks of the kernel families with nvcc for sm_90 (no GPU needed)."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from autotune.paths import KERNELS_DIR


def compile_object(cu: Path, timeout: float = 170) -> subprocess.CompletedProcess:
    """`nvcc -std=c++17 -arch=sm_90 -I kernels_src -c cu -o cu.o`."""
    cmd = ["nvcc", "-std=c++17", "-arch=sm_90", f"-I{KERNELS_DIR}", "-c", str(cu), "-o", str(cu.with_suffix(".o"))]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def assert_all_compile(units: list[Path]) -> None:
    """Compile the translation units two at a time (CI has 2 cores) and check each produced an object."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(compile_object, units))
    for cu, r in zip(units, results, strict=True):
        assert r.returncode == 0, f"nvcc failed on {cu.name}:\n{r.stderr[-4000:]}"
        assert cu.with_suffix(".o").stat().st_size > 0
