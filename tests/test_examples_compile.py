"""Real nvcc compiles (sm_90, to an object) of the example kernels of examples/: at their #ifndef defaults,
at two settings the hard constraints allow, and one setting they reject (which must fail to compile, so
that the constraint reflects a real failure). No GPU needed."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.nvcc

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _check_compile():
    spec = importlib.util.spec_from_file_location("examples_check_compile", EXAMPLES / "check_compile.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CASES = {
    "transpose": (
        [
            dict(block_size_x=32, block_size_y=8, TILE_DIM=32, PAD=1),
            dict(block_size_x=64, block_size_y=16, TILE_DIM=64, PAD=0),
        ],
        dict(block_size_x=32, block_size_y=8, TILE_DIM=16, PAD=1),  # TILE_DIM % block_size_x != 0
    ),
    "stencil": (
        [
            dict(
                block_size_x=128, block_size_y=8, tile_size_x=2, tile_size_y=4, use_shmem=1, use_padding=1, read_only=0
            ),
            dict(
                block_size_x=16, block_size_y=4, tile_size_x=1, tile_size_y=2, use_shmem=0, use_padding=0, read_only=1
            ),
        ],
        dict(
            block_size_x=128, block_size_y=16, tile_size_x=1, tile_size_y=1, use_shmem=1, use_padding=0, read_only=0
        ),  # 2048 threads
    ),
    "softmax": (
        [
            dict(block_size_x=1024, rows_per_block=1, vector_width=4, use_cub=1),
            dict(block_size_x=64, rows_per_block=8, vector_width=2, use_cub=0),
        ],
        dict(block_size_x=48, rows_per_block=2, vector_width=4, use_cub=0),  # a row of 1.5 warps
    ),
}


def _compile(example: str, params: dict | None, tmp_path: Path) -> subprocess.CompletedProcess:
    cc = _check_compile()
    space = yaml.safe_load((EXAMPLES / example / "space.yaml").read_text())
    source = EXAMPLES / example / space["kernel"]["source"]
    out = tmp_path / "k.o"
    r = subprocess.run(cc.nvcc_command(source, params, out), capture_output=True, text=True, timeout=300)
    if r.returncode == 0:
        assert out.stat().st_size > 0
    return r


def _passes_hard(example: str, params: dict) -> bool:
    cc = _check_compile()
    space = cc.load(EXAMPLES / example / "space.yaml")
    _, hard, _ = cc.instances(space)
    return any(row["params"] == params for row in hard)


@pytest.mark.parametrize("example", sorted(CASES))
def test_defaults_compile(example: str, tmp_path: Path) -> None:
    r = _compile(example, None, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.parametrize("example,index", [(e, i) for e in sorted(CASES) for i in (0, 1)])
def test_allowed_settings_compile(example: str, index: int, tmp_path: Path) -> None:
    params = CASES[example][0][index]
    assert _passes_hard(example, params)
    r = _compile(example, params, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.parametrize("example", sorted(CASES))
def test_a_rejected_setting_fails_to_compile(example: str, tmp_path: Path) -> None:
    params = CASES[example][1]
    space = yaml.safe_load((EXAMPLES / example / "space.yaml").read_text())
    in_ranges = all(v in space["parameters"][k] for k, v in params.items())
    assert not in_ranges or not _passes_hard(example, params)
    r = _compile(example, params, tmp_path)
    assert r.returncode != 0
    assert "static assertion failed" in r.stderr or "static_assert" in r.stderr, r.stderr[-2000:]
