"""Problem kinds on the CPU: the declared kinds of examples/ load, generate, bind and plan like GEMM; their data,
reference and verification run on NumPy (the GPU runs the same code on CuPy); bad declarations are reported
with file and line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from autotune.devices import get_device
from autotune.errors import SpaceError, UserError
from autotune.problems.declared import DeclaredKind
from autotune.problems.declared_data import DeclaredData
from autotune.problems.gemm import GEMM, gemm_point
from autotune.space.generator import generate, serving
from autotune.space.spec import load_space
from autotune.sweep.config import load_config, parse_config
from autotune.sweep.runner import plan_sweep
from autotune.vocab import TestPoint

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {"transpose": "transpose", "stencil": "convolution5x5", "softmax": "softmax"}  # folder -> kind


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_spaces_load_generate_and_bind(name: str) -> None:
    space = load_space(ROOT / "examples" / name / "space.yaml")
    assert isinstance(space.kind, DeclaredKind) and space.kind.name == EXAMPLES[name]
    assert space.kernel is not None and space.kernel.plain and space.kernel.source_path.is_file()
    cfg = load_config(ROOT / "examples" / name / "sweep.yaml")
    assert cfg.points and all(p.kind == EXAMPLES[name] for p in cfg.points)
    plans = plan_sweep(cfg, lambda _: get_device("H100"))
    (plan,) = plans
    assert plan.pairs > 0
    inst, points = next(iter(plan.work.items()))
    p = points[0]
    assert space.template_name(inst.param_dict, p.precision, p.shape) == space.kernel.template
    defines = dict(space.defines(inst.param_dict, p))
    assert set(defines) == set(space.kernel.defines) and all(v.lstrip("-").isdigit() for v in defines.values())
    geo = space.geometry(inst.param_dict, p)
    assert all(x >= 1 for x in geo.grid + geo.block)
    assert space.kind.bytes_moved(p, {}) > 0


def test_points_of_a_kind_are_the_product_of_named_sizes(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        textwrap.dedent(f"""\
        spaces: [{ROOT / "examples/transpose/space.yaml"}]
        points:
          - sizes: {{rows: [64, 65], cols: {{pow2: [32, 128]}}}}
        """)
    )
    cfg = load_config(tmp_path / "c.yaml")
    assert len(cfg.points) == 6
    assert cfg.points[0] == TestPoint("transpose", "fp32", "", (("rows", 64), ("cols", 32)))
    assert cfg.points[0].rows == 64 and cfg.points[0].key == "transpose:fp32:-:64x32"


@pytest.mark.parametrize(
    "text, message",
    [
        ("points: [{kind: gemm, sizes: {rows: 4, cols: 4}}]", "no space of this config solves the problem kind 'gemm'"),
        ("points: [{sizes: {rows: 4}}]", "sizes of transpose miss cols"),
        ("points: [{sizes: {rows: 4, cols: 4, depth: 2}}]", "unknown key `depth`"),
        ("points: [{sizes: {rows: 4, cols: 4}, precisions: [fp64]}]", "unknown precisions entry 'fp64'"),
    ],
)
def test_bad_points_of_a_kind_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UserError) as err:
        parse_config(f"spaces: [{ROOT / 'examples/transpose/space.yaml'}]\n{text}\n", file=tmp_path / "c.yaml")
    assert message in str(err.value) and err.value.line == 2


def _declared(tmp_path: Path, problem: str, kernel_name: str = "k") -> Path:
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(float* y, const float* x, int n) {}\n')
    (tmp_path / "ref.py").write_text(
        "def ref(a, s):\n    return {'y': 2 * a['x']}\n\ndef twice(a, s):\n    a['y'][...] = 2 * a['x']\n"
    )
    (tmp_path / "space.yaml").write_text(
        textwrap.dedent("""\
        name: scale
        problem:
        {problem}
        kernel:
          source: k.cu
          name: {kernel_name}
          block: [bs, 1, 1]
          grid: ["ceil(n / bs)", 1, 1]
        parameters:
          bs: [32, 64]
        """).format(problem=textwrap.indent(problem, "  "), kernel_name=kernel_name)
    )
    return tmp_path / "space.yaml"


SCALE = textwrap.dedent("""\
    name: scale
    sizes: [n]
    arguments:
      - {name: y, buffer: T, shape: [n], output: true}
      - {name: x, buffer: T, shape: [n]}
      - {name: n, scalar: int32, value: n}
    reference: ref.py:ref
    tolerance: {fp32: 1e-6}
    bytes: 2 * n * elem_bytes
    baseline: ref.py:twice""")


def test_declared_data_verifies_on_numpy(tmp_path: Path) -> None:
    space = load_space(_declared(tmp_path, SCALE))
    kind = space.kind
    p = kind.point("fp32", "", {"n": 1000})
    data = DeclaredData(kind, p, copies=3, seed=1, xp=np)
    y, x, n = data.args(1)
    assert y.shape == x.shape == (1000,) and y.dtype == np.float32 and n == np.int32(1000)
    assert data.nbytes() == 3 * 2 * 4000
    ref = data.reference()
    data.prepare_verify()
    assert np.isnan(data.sets[0]["y"]).all()
    assert not data.verify(ref).ok  # nothing written: every output element fails
    data.sets[0]["y"][...] = 2 * data.sets[0]["x"]  # what a right kernel writes
    assert data.verify(ref).ok
    data.sets[0]["y"][7] += 1.0  # one wrong element
    v = data.verify(ref)
    assert not v.ok and 0 < v.max_rel_err < 1
    data.prepare_verify()
    data.baseline()(0)  # the baseline writes the right answer
    assert data.verify(ref).ok
    assert space.defines({"bs": 64}, p) == (("bs", "64"),)  # a plain kernel gets every parameter as a define


def test_init_expressions_and_in_place_outputs(tmp_path: Path) -> None:
    problem = SCALE.replace(
        "{name: y, buffer: T, shape: [n], output: true}",
        "{name: y, buffer: T, shape: [n], output: true, init: 'i % 7'}",
    )
    kind = load_space(_declared(tmp_path, problem)).kind
    data = DeclaredData(kind, kind.point("fp32", "", {"n": 20}), copies=1, seed=0, xp=np)
    assert list(data.sets[0]["y"][:8]) == [0, 1, 2, 3, 4, 5, 6, 0]
    data.sets[0]["y"][...] = -1
    data.prepare_verify()  # an output with an explicit init is read by the kernel: reset, not poisoned
    assert list(data.sets[0]["y"][:8]) == [0, 1, 2, 3, 4, 5, 6, 0]


@pytest.mark.parametrize(
    "change, line, message",
    [
        (("bytes: 2 * n * elem_bytes", "bytes: 2 * m"), 11, "bytes: unknown name 'm'"),
        (("reference: ref.py:ref", "reference: nothere.py:ref"), 9, "no file"),
        (("{name: n, scalar: int32, value: n}", "{name: n, scalar: int33, value: n}"), 8, "unknown dtype 'int33'"),
        (("output: true", "output: false"), 6, "no argument is marked `output: true`"),
        (("sizes: [n]", "sizes: n"), 4, "`sizes:` must be a list"),
        (("bytes: 2 * n * elem_bytes", "bytes: 1 / 0"), 11, "`bytes:` cannot be computed: division by zero"),
        (("bytes: 2 * n * elem_bytes", "bytes: 2 ** 2000"), 11, "`bytes:` cannot be computed: exponent larger"),
        (("bytes: 2 * n * elem_bytes", "bytes: 1e308 * 10"), 11, "`bytes:` is inf; it must be positive"),
    ],
)
def test_bad_declarations_name_file_and_line(tmp_path: Path, change: tuple[str, str], line: int, message: str) -> None:
    with pytest.raises(SpaceError) as err:
        load_space(_declared(tmp_path, SCALE.replace(*change)))
    assert message in err.value.message and err.value.line == line and err.value.file.endswith("space.yaml")


def test_work_that_cannot_be_computed_at_a_point_names_file_line_and_point(tmp_path: Path) -> None:
    """`bytes:` that divides by zero at one point: a SpaceError at its line naming the point (it was a bare ExprError
    with a traceback); the other points are counted as written."""
    kind = load_space(_declared(tmp_path, SCALE.replace("bytes: 2 * n * elem_bytes", "bytes: 64 / (n - 8)"))).kind
    assert kind.bytes_moved(kind.point("fp32", "", {"n": 9}), {}) == 64
    with pytest.raises(SpaceError) as err:
        kind.bytes_moved(kind.point("fp32", "", {"n": 8}), {})
    assert "`bytes:` is not computable (division by zero) at" in err.value.message and err.value.line == 11


def test_python_kind_by_module_and_class(tmp_path: Path) -> None:
    (tmp_path / "mykind.py").write_text(
        textwrap.dedent("""\
        from autotune.problems.base import ProblemKind

        class Copy(ProblemKind):
            name = "copy"
            size_names = ("n",)
            def bytes_moved(self, point, scalars):
                return 2 * point.n * point.elem_bytes
            def allocate(self, point, convention, scalars, l2_bytes, seed):
                raise NotImplementedError
        """)
    )
    space_file = _declared(tmp_path, SCALE)
    space_file.write_text(
        space_file.read_text().replace("problem:\n  name: scale", "problem: mykind.py:Copy\nold:\n  name: scale")
    )
    text = space_file.read_text().split("old:")[0] + "kernel:" + space_file.read_text().split("kernel:")[1]
    space_file.write_text(text)
    space = load_space(space_file)
    assert space.kind.name == "copy" and space.kind.bytes_moved(space.kind.point("fp32", "", {"n": 8}), {}) == 64
    space_file.write_text(text.replace("mykind.py:Copy", "mykind.py:Nope"))
    with pytest.raises(SpaceError, match="mykind.py defines no .Nope."):
        load_space(space_file)
    space_file.write_text(text.replace("mykind.py:Copy", "fft"))
    with pytest.raises(SpaceError, match="unknown problem kind 'fft'"):
        load_space(space_file)


def test_gemm_is_a_kind_like_any_other() -> None:
    p = gemm_point("fp16", "NT", 8, 16, 32, 100)
    assert p == GEMM.point("fp16", "NT", {"m": 8, "n": 16, "k": 32, "batch": 100})
    assert (p.m, p.n, p.k, p.batch) == (8, 16, 32, 100) and GEMM.env(p) == {"M": 8, "N": 16, "K": 32, "batch": 100}
    assert GEMM.bytes_moved(p, {"beta": 0.0}) == 100 * 2 * (8 * 32 + 32 * 16 + 8 * 16)
    assert GEMM.distance(p, gemm_point("fp16", "NT", 16, 16, 32, 1)) == 1.0
    with pytest.raises(ValueError, match="missing k"):
        GEMM.point("fp16", "NN", {"m": 1, "n": 2, "batch": 3})
    with pytest.raises(ValueError, match="integer >= 1"):
        gemm_point("fp32", "NN", 0, 1, 1, 1)
    with pytest.raises(AttributeError, match="no size 'rows'"):
        _ = p.rows
    space = load_space("gemm_batched_simt")
    g = generate(space, get_device("H100"), "fp32")
    assert serving(g, p).shape == (g.count,)
