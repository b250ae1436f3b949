"""Test tiers: unit (everywhere), nvcc (where nvcc is), gpu (where CuPy sees a GPU)."""
from __future__ import annotations

import os
import shutil

import pytest

# `import autotune.kernel_tuner` starts a GPU backend in the background (kt_prewarm): not in the test process, where
# an unused one would hold compile processes and a CUDA context through other tests (tests that want it say so)
os.environ.setdefault("AUTOTUNE_PREWARM", "0")


def _have_gpu() -> bool:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu = None
    nvcc = shutil.which("nvcc") is not None
    for item in items:
        if "gpu" in item.keywords:
            if gpu is None:
                gpu = _have_gpu()
            if not gpu:
                item.add_marker(pytest.mark.skip(reason="no CUDA GPU visible to CuPy"))
        if "nvcc" in item.keywords and not nvcc:
            item.add_marker(pytest.mark.skip(reason="nvcc not found"))
