"""GPU tier: kernels written the Kernel Tuner way (`#define` parameters, plain `__global__` functions, extern "C"
or C++ names, CUB, `__constant__` memory, in their own folder) swept unchanged through the real GpuBackend;
a wrong kernel is caught by the declared reference; the declared baseline is timed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autotune.store.store import Store
from tests.support.gpu_sweep import gpu_sweep

pytestmark = pytest.mark.gpu
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def sweep(tmp_path: Path, space: Path, points: str, max_instances: int = 12) -> Store:
    return gpu_sweep(tmp_path, space, points, max_instances)


@pytest.mark.parametrize(
    "name, points",
    [
        ("transpose", "[{sizes: {rows: [64, 333], cols: [96, 1001]}}]"),
        ("stencil", "[{sizes: {ny: [64, 101], nx: [128, 77]}}]"),
        ("softmax", "[{sizes: {rows: [3, 100], cols: [5, 1000, 1027]}}]"),
    ],
)
def test_example_kernels_sweep_unchanged(tmp_path: Path, name: str, points: str) -> None:
    folder = tmp_path / name  # the user's own folder, outside the checkout
    shutil.copytree(EXAMPLES / name, folder)
    store = sweep(tmp_path, folder / "space.yaml", points)
    frame = store.measurements()
    counts = frame.status.value_counts().to_dict()
    assert counts.get("ok", 0) + counts.get("skipped", 0) == len(frame) > 0, frame[["instance", "status", "error"]]
    assert (frame.roofline_frac.dropna() > 0).all()
    with store.engine.connect() as conn:
        base = conn.exec_driver_sql("SELECT status, COUNT(*) FROM baselines GROUP BY status").fetchall()
    assert dict(base).get("ok", 0) > 0, base  # the declared baseline is verified and timed at every point


def test_a_wrong_kernel_is_recorded_as_wrong(tmp_path: Path) -> None:
    folder = tmp_path / "user"
    shutil.copytree(EXAMPLES / "transpose", folder)
    src = folder / "transpose.cu"
    text = src.read_text()
    assert "out[" in text
    src.write_text(text.replace("out[", "out[1 + ", 1))  # every write lands one element off
    store = sweep(tmp_path, folder / "space.yaml", "[{sizes: {rows: 64, cols: 64}}]", max_instances=3)
    frame = store.measurements()
    assert set(frame.status) <= {"wrong", "launch_error"} and "wrong" in set(frame.status)
