"""`init: {file: data.npy}` / `init: {file: data.npz, key: NAME}`: host data for a declared buffer. The
file lies in the space's folder tree, its array has the buffer's shape at the point and is cast to the buffer's
dtype; every mistake is a SpaceError naming the space file and line. Data on NumPy (CuPy on the GPU)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from autotune.errors import SpaceError
from autotune.problems.declared import FileInit
from autotune.problems.declared_data import DeclaredData
from autotune.space.spec import load_space


def _space(folder: Path, x_init: str, shape: str = "[n]") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ref.py").write_text("def ref(a, s):\n    return 2 * a['x']\n")
    (folder / "space.yaml").write_text(
        textwrap.dedent(f"""\
        name: scale
        problem:
          name: scale
          sizes: [n]
          arguments:
            - {{name: y, buffer: float32, shape: [n], output: true}}
            - {{name: x, buffer: float32, shape: {shape}, init: {x_init}}}
            - {{name: n, scalar: int32, value: n}}
          reference: ref.py:ref
          bytes: 2 * n * elem_bytes
        parameters:
          bs: [32]
        """)
    )
    return folder / "space.yaml"


def test_a_npy_file_fills_the_buffer_cast_to_its_dtype(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.arange(40, dtype=np.float64))
    kind = load_space(_space(tmp_path, "{file: x.npy}")).kind
    x = kind.arguments[1]
    assert isinstance(x.init, FileInit) and x.init.path == str((tmp_path / "x.npy").resolve())
    assert kind.describe()["arguments"][1]["init"] == "x.npy"
    data = DeclaredData(kind, kind.point("fp32", "", {"n": 40}), copies=2, seed=0, xp=np)
    for copy in data.sets:
        assert copy["x"].dtype == np.float32 and np.array_equal(copy["x"], np.arange(40, dtype=np.float32))
    data.sets[0]["y"][...] = 2 * data.sets[0]["x"]
    assert data.verify(data.reference()).ok


def test_a_npz_key_fills_the_buffer(tmp_path: Path) -> None:
    np.savez(tmp_path / "args.npz", a=np.ones((4, 5)), x=np.full(20, 3, dtype=np.int64))
    kind = load_space(_space(tmp_path, "{file: args.npz, key: x}")).kind
    data = DeclaredData(kind, kind.point("fp32", "", {"n": 20}), copies=1, seed=0, xp=np)
    assert data.sets[0]["x"].dtype == np.float32 and (data.sets[0]["x"] == 3).all()


def test_a_shape_that_differs_at_a_point_names_the_file_and_line(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros(40, dtype=np.float32))
    kind = load_space(_space(tmp_path, "{file: x.npy}")).kind
    point = kind.point("fp32", "", {"n": 41})
    with pytest.raises(SpaceError) as err:
        kind.device_bytes(point, {})  # before the sweep (autotune.sweep.limits)
    assert "shape [40]" in str(err.value) and "[41]" in str(err.value) and err.value.line == 7
    assert str(tmp_path / "space.yaml") in str(err.value)
    with pytest.raises(SpaceError, match=r"shape \[40\]"):
        DeclaredData(kind, point, copies=1, seed=0, xp=np)


def test_a_constant_shape_is_checked_when_the_space_is_loaded(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((4, 10), dtype=np.float32))
    with pytest.raises(SpaceError, match=r"shape \[4, 10\].*is \[40\]") as err:
        load_space(_space(tmp_path, "{file: x.npy}", shape="[40]"))
    assert err.value.line == 7
    load_space(_space(tmp_path, "{file: x.npy}", shape="[4, 10]"))


@pytest.mark.parametrize(
    "init, saved, message",
    [
        ("{file: missing.npy}", None, "no file"),
        ("{file: args.npz}", "npz", "needs `key:`"),
        ("{file: x.npy, key: x}", "npy", "`key:` goes with a .npz file only"),
        ("{file: args.npz, key: nope}", "npz", "has no array 'nope'"),
        ("{file: ref.py}", None, "not a .npy or .npz file"),
        ("{file: x.npy, dtype: float32}", "npy", "a file init is"),
        ("{file: ../outside.npy}", "outside", "outside the space file's folder"),
    ],
)
def test_mistakes_name_the_space_file_and_line(tmp_path: Path, init: str, saved: str | None, message: str) -> None:
    folder = tmp_path / "space"
    folder.mkdir()
    if saved == "npz":
        np.savez(folder / "args.npz", x=np.zeros(8))
    elif saved == "npy":
        np.save(folder / "x.npy", np.zeros(8))
    elif saved == "outside":
        np.save(tmp_path / "outside.npy", np.zeros(8))
    with pytest.raises(SpaceError, match=message.replace("(", r"\(")) as err:
        load_space(_space(folder, init))
    assert err.value.line == 7 and str(folder / "space.yaml") in str(err.value)
