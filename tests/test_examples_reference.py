"""The reference functions of examples/*/reference.py against naive Python loops (NumPy, small sizes),
and the space files' arguments against the kernels' signatures and the references' outputs."""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NAMES = ("transpose", "stencil", "softmax")


def _module(example: str):
    path = EXAMPLES / example / "reference.py"
    spec = importlib.util.spec_from_file_location(f"examples_{example}_reference", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _space(example: str) -> dict:
    return yaml.safe_load((EXAMPLES / example / "space.yaml").read_text())


def _inputs(space: dict, sizes: dict, rng: np.random.Generator) -> dict:
    """The declared buffers (random uniform [-1, 1) inputs, NaN outputs), shaped as the space file says."""
    arrays = {}
    for arg in space["problem"]["arguments"]:
        if "buffer" not in arg:
            continue
        shape = tuple(int(eval(str(e), {"__builtins__": {}}, dict(sizes))) for e in arg["shape"])  # noqa: S307
        if arg.get("output"):
            arrays[arg["name"]] = np.full(shape, np.nan, dtype=np.float32)
        else:
            arrays[arg["name"]] = rng.uniform(-1, 1, size=shape).astype(np.float32)
    return arrays


def _reference(example: str, arrays: dict, sizes: dict) -> dict:
    space = _space(example)
    file, fn = space["problem"]["reference"].split(":")
    assert file == "reference.py"
    out = getattr(_module(example), fn)(arrays, sizes)
    return out if isinstance(out, dict) else {"out": out}


SMALL = {"transpose": {"rows": 5, "cols": 7}, "stencil": {"ny": 5, "nx": 7}, "softmax": {"rows": 5, "cols": 7}}


def test_transpose_reference_matches_loops() -> None:
    rng = np.random.default_rng(1)
    sizes = SMALL["transpose"]
    arrays = _inputs(_space("transpose"), sizes, rng)
    got = _reference("transpose", arrays, sizes)["out"]
    inp = arrays["inp"]
    assert got.shape == (7, 5)
    for r in range(5):
        for c in range(7):
            assert got[c, r] == inp[r, c]


def test_stencil_reference_matches_loops() -> None:
    rng = np.random.default_rng(2)
    sizes = SMALL["stencil"]
    arrays = _inputs(_space("stencil"), sizes, rng)
    got = _reference("stencil", arrays, sizes)["out"]
    inp = arrays["inp"].astype(np.float64)
    assert inp.shape == (9, 11) and got.shape == (5, 7) and got.dtype == np.float64
    for y in range(5):
        for x in range(7):
            want = sum((5 * dy + dx + 1) / 325.0 * inp[y + dy, x + dx] for dy in range(5) for dx in range(5))
            assert math.isclose(got[y, x], want, rel_tol=1e-12, abs_tol=1e-12)


def test_stencil_weights_match_the_kernels_constant_array() -> None:
    """convolution.cu initialises its __constant__ weights in the source; reference.py must use the same taps."""
    text = (EXAMPLES / "stencil" / "convolution.cu").read_text()
    body = re.search(r"__constant__\s+float\s+weights\[[^\]]*\]\s*=\s*\{([^}]*)\}", text).group(1)
    taps = [float(a) / float(b) for a, b in re.findall(r"([0-9.]+)f\s*/\s*([0-9.]+)f", body)]
    want = [w for row in _module("stencil").WEIGHTS for w in row]
    assert len(taps) == 25
    assert np.allclose(taps, want, rtol=0, atol=1e-15)
    assert math.isclose(sum(want), 1.0)
    assert want != want[::-1]  # asymmetric on purpose: a flipped index fails verification


def test_stencil_baseline_indexing_with_scipy() -> None:
    """The baseline's correlate-then-slice (cupyx.scipy.ndimage mirrors scipy.ndimage) equals the reference."""
    ndimage = pytest.importorskip("scipy.ndimage")
    rng = np.random.default_rng(3)
    sizes = {"ny": 6, "nx": 9}
    arrays = _inputs(_space("stencil"), sizes, rng)
    mod = _module("stencil")
    full = ndimage.correlate(arrays["inp"].astype(np.float64), np.asarray(mod.WEIGHTS), mode="constant")
    r = mod.RADIUS
    assert np.allclose(full[r : r + 6, r : r + 9], mod.convolution(arrays, sizes)["out"], rtol=1e-12, atol=1e-12)


def test_softmax_reference_matches_loops() -> None:
    rng = np.random.default_rng(4)
    sizes = SMALL["softmax"]
    arrays = _inputs(_space("softmax"), sizes, rng)
    arrays["inp"][2, :] *= 50  # a row with a large spread
    got = _reference("softmax", arrays, sizes)["out"]
    inp = arrays["inp"].astype(np.float64)
    for r in range(5):
        total = sum(math.exp(float(inp[r, c])) for c in range(7))
        for c in range(7):
            assert math.isclose(got[r, c], math.exp(float(inp[r, c])) / total, rel_tol=1e-12)
        assert math.isclose(float(got[r].sum()), 1.0, rel_tol=1e-12)


def test_softmax_reference_agrees_with_scipy() -> None:
    special = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(5)
    arrays = {"inp": rng.uniform(-1, 1, size=(4, 257)).astype(np.float32)}
    got = _module("softmax").softmax(arrays, {"rows": 4, "cols": 257})["out"]
    assert np.allclose(got, special.softmax(arrays["inp"].astype(np.float64), axis=1), rtol=1e-12)


@pytest.mark.parametrize("example", NAMES)
def test_reference_outputs_are_the_declared_outputs(example: str) -> None:
    """One output per `output: true` argument, with its declared shape; inputs are left unchanged."""
    space = _space(example)
    sizes = SMALL[example]
    arrays = _inputs(space, sizes, np.random.default_rng(6))
    before = {k: v.copy() for k, v in arrays.items()}
    got = _reference(example, arrays, sizes)
    outputs = {a["name"]: a for a in space["problem"]["arguments"] if a.get("output")}
    assert set(got) == set(outputs)
    for name, arr in got.items():
        assert arr.shape == arrays[name].shape
        assert np.isfinite(arr).all()
    for name, arr in arrays.items():
        if name not in outputs:
            assert np.array_equal(arr, before[name])


@pytest.mark.parametrize("example", NAMES)
def test_space_arguments_follow_the_kernel_signature(example: str) -> None:
    """The space file lists the kernel's arguments in order, by name; the kernel name is defined."""
    space = _space(example)
    text = (EXAMPLES / example / space["kernel"]["source"]).read_text()
    name = space["kernel"]["name"]
    m = re.search(rf"\b{re.escape(name)}\s*\(([^)]*)\)\s*\{{", text)
    assert m, f"{name} not defined in {space['kernel']['source']}"
    params = [p.strip().split()[-1].lstrip("*") for p in m.group(1).split(",")]
    assert params == [a["name"] for a in space["problem"]["arguments"]]
    assert space["kernel"]["defines"] == list(space["parameters"])
