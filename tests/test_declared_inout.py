"""An output the kernel also reads (declared with an explicit `init:`, whichever) keeps its initial values before
the verified launch; a write-only output (no `init:`) is poisoned so that an element never written fails. The
data run on NumPy here (CuPy on the GPU: tests/gpu/test_user_kinds.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from autotune.problems.declared_data import INT_SENTINEL, DeclaredData
from autotune.space.spec import load_space


def _kind(tmp_path: Path, arguments: str):  # noqa: ANN202
    (tmp_path / "ref.py").write_text("def ref(a, s):\n    return {'y': 2 * a['y'], 'z': a['x'] + 1}\n")
    (tmp_path / "space.yaml").write_text(
        textwrap.dedent("""\
        name: inplace
        problem:
          name: inplace
          sizes: [n]
          arguments:
        {arguments}
            - {{name: n, scalar: int32, value: n}}
          reference: ref.py:ref
          tolerance: {{fp32: 1e-6}}
          bytes: 3 * n * elem_bytes
        parameters:
          bs: [32]
        """).format(arguments=textwrap.indent(textwrap.dedent(arguments), "    "))
    )
    return load_space(tmp_path / "space.yaml").kind


@pytest.mark.parametrize("init", ["random", "zeros", "ones", "'i % 5'"])
def test_an_output_with_an_explicit_init_is_in_place(tmp_path: Path, init: str) -> None:
    kind = _kind(
        tmp_path,
        f"""\
        - {{name: y, buffer: float32, shape: [n], output: true, init: {init}}}
        - {{name: z, buffer: int32, shape: [n], output: true}}
        - {{name: x, buffer: int32, shape: [n], init: 'i'}}""",
    )
    y, z, x = kind.arguments[:3]
    assert y.inout and not z.inout and not x.inout
    assert kind.describe()["arguments"][0]["inout"] is True and "inout" not in kind.describe()["arguments"][1]
    data = DeclaredData(kind, kind.point("fp32", "", {"n": 50}), copies=2, seed=3, xp=np)
    initial = data.sets[0]["y"].copy()
    ref = data.reference()
    data.sets[0]["y"][...] = np.nan  # what earlier timed launches left behind
    data.prepare_verify()
    assert np.array_equal(data.sets[0]["y"], initial)  # reset, never poisoned
    assert (data.sets[0]["z"] == INT_SENTINEL).all()  # the write-only output is poisoned
    data.sets[0]["y"] *= 2  # a right in-place kernel
    data.sets[0]["z"][...] = data.sets[0]["x"] + 1
    assert data.verify(ref).ok
    data.prepare_verify()
    data.sets[0]["z"][...] = data.sets[0]["x"] + 1
    assert data.verify(ref).ok == (init == "zeros")  # an in-place output left as it was is wrong, unless 2y == y
    assert ref["y"].shape == (50,) and np.array_equal(ref["y"], 2 * initial.astype(np.float64))


def test_a_write_only_output_is_poisoned(tmp_path: Path) -> None:
    kind = _kind(
        tmp_path,
        """\
        - {name: y, buffer: float32, shape: [n], output: true}
        - {name: z, buffer: int32, shape: [n], output: true}
        - {name: x, buffer: int32, shape: [n], init: 'i'}""",
    )
    assert not any(a.inout for a in kind.arguments)
    data = DeclaredData(kind, kind.point("fp32", "", {"n": 8}), copies=1, seed=0, xp=np)
    data.prepare_verify()
    assert np.isnan(data.sets[0]["y"]).all() and (data.sets[0]["z"] == INT_SENTINEL).all()
    assert not data.initial
