"""Golden funnels of the seed spaces: a change to a space file or to the generator that moves any
count shows up here. Regenerate deliberately with AUTOTUNE_UPDATE_GOLDEN=1 and review the diff."""

import json
import os
from pathlib import Path

import pytest

from autotune.problems.gemm import gemm_point
from autotune.devices import get_device
from autotune.space.generator import generate
from autotune.space.spec import load_space

GOLDEN = Path(__file__).parent / "data" / "golden_funnels.json"
CASES = [
    ("gemm_batched_simt", "H100", "fp64"),
    ("gemm_batched_simt", "H100", "fp32"),
    ("gemm_batched_simt", "K40c", "fp64"),
    ("gemm_vbatched_simt", "H100", "fp64"),
    ("gemm_small_simt", "H100", "fp64"),
    ("hgemm_wmma", "H100", "fp16"),
    ("hgemm_wmma", "V100", "fp16"),
    ("hgemm_mma", "H100", "fp16"),
    ("hgemm_small_tc", "H100", "fp16"),
    ("tsm2", "H100", "fp32"),
    ("ism2", "H100", "fp64"),
    ("gemm_tiny_simt", "H100", "fp32"),
]


def funnel(space: str, device: str, precision: str) -> list[list]:
    g = generate(load_space(space), get_device(device), precision)
    return [[f.kind, f.name, f.remaining] for f in g.funnel]


def test_golden_funnels():
    got = {f"{s}|{d}|{p}": funnel(s, d, p) for s, d, p in CASES}
    if os.environ.get("AUTOTUNE_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1) + "\n")
    want = json.loads(GOLDEN.read_text())
    assert got == want


@pytest.mark.parametrize("space", sorted({c[0] for c in CASES}))
def test_first_and_last_instances_bind_to_their_kernel(space):
    s = load_space(space)
    precision = s.kernel.problems.precisions[0]
    g = generate(s, get_device("H100"), precision)
    shape = s.kernel.problems.shapes[0]
    point = gemm_point(
        precision,
        shape,
        8,
        8,
        8,
        1 if s.kernel.problems.where and "batch == 1" in s.kernel.problems.where.expr.text else 1000,
    )
    for inst in (g.instances()[0], g.instances()[-1]):
        name = s.template_name(inst.param_dict, precision, shape)
        assert name.startswith(s.kernel.template + "<") and name.count(",") == len(s.kernel.template_args) - 1
        geo = s.geometry(inst.param_dict, point)
        assert all(x >= 1 for x in geo.grid + geo.block) and geo.shared_bytes >= 0
        assert geo.block[0] * geo.block[1] * geo.block[2] <= 1024
