"""GPU tier (`autotune.sweep.twins`): configurations whose defines give the same program compile it once, with the
real NVRTC. The transpose example gains a parameter its code never reads (three values): a sweep of its 12
configurations through the real GpuBackend verifies all 12 and compiles 4 programs in full; compile_batch called
one configuration after another serves the twin from the first's cubin."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autotune.sweep.compile import CompileRequest, compile_batch
from tests.support.gpu_sweep import gpu_sweep

pytestmark = pytest.mark.gpu
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def twin_space(tmp_path: Path) -> Path:
    folder = tmp_path / "transpose"
    shutil.copytree(EXAMPLES / "transpose", folder)
    space = folder / "space.yaml"
    text = space.read_text()
    for old, new in [
        (
            "defines: [block_size_x, block_size_y, TILE_DIM, PAD]",
            "defines: [block_size_x, block_size_y, TILE_DIM, PAD, UNUSED]",
        ),
        ("  block_size_x: [8, 16, 32, 64]", "  block_size_x: [32]"),
        ("  block_size_y: [1, 2, 4, 8, 16, 32]", "  block_size_y: [4, 8]"),
        ("  TILE_DIM: [16, 32, 64]", "  TILE_DIM: [32]\n  UNUSED: [0, 1, 2]"),
    ]:
        assert old in text, old
        text = text.replace(old, new)
    space.write_text(text)
    assert "UNUSED" not in (folder / "transpose.cu").read_text()
    return space


def test_a_sweep_compiles_each_distinct_program_once(tmp_path: Path) -> None:
    store = gpu_sweep(tmp_path, twin_space(tmp_path), "[{sizes: {rows: 333, cols: 1001}}]")
    frame = store.measurements()
    assert len(frame) == 12 and set(frame.status) == {"ok"}, frame[["instance", "status", "error"]]
    outcomes = list((tmp_path / "cache" / "twins").glob("*/*.json"))
    assert len(outcomes) == 4  # block_size_y x PAD: the programs compiled in full
    assert not list((tmp_path / "cache" / "twins").glob("*/*.lock"))  # every claim released
    assert len(list((tmp_path / "cache" / "blobs").glob("*.cubin"))) == 4


def test_a_twin_gets_the_first_compiles_cubin(tmp_path: Path) -> None:
    space = twin_space(tmp_path)
    src = space.parent / "transpose.cu"

    def request(unused: int, pad: int) -> CompileRequest:
        defines = {"block_size_x": 32, "block_size_y": 8, "TILE_DIM": 32, "PAD": pad, "UNUSED": unused}
        return CompileRequest(
            src, ("transpose_kernel",), 90, options=("-std=c++17", *(f"-D{k}={v}" for k, v in defines.items()))
        )

    cache = tmp_path / "cache"
    (first,) = compile_batch(request(0, 1), cache)
    (twin,) = compile_batch(request(2, 1), cache)
    (other,) = compile_batch(request(0, 0), cache)
    assert first.ok and twin.ok and other.ok and not twin.cached
    assert twin.blob == first.blob and twin.lowered_name == first.lowered_name and other.blob != first.blob
    assert twin.compile_s < first.compile_s, (twin.compile_s, first.compile_s)
