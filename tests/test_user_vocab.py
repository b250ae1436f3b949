"""On the CPU: buffers and constants from a user's function (`init: {function: ...}`), `constants:`
(`__constant__` symbols set from the host), an instance-aware `check:`, and `kernel: semantics: kerneltuner`
(Kernel Tuner's implicit block-size restriction and loop_unroll_factor_* parameters). The data run on NumPy
(CuPy on the GPU: tests/gpu/test_user_vocab_gpu.py)."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import numpy as np
import pytest

from autotune.devices import get_device
from autotune.errors import SpaceError
from autotune.interop.kerneltuner import KTCache, KTRecord
from autotune.interop.kt_store import space_yaml
from autotune.problems.declared_data import CheckError, DeclaredData
from autotune.problems.loading import load_attribute
from autotune.space.generator import generate
from autotune.space.kt_semantics import split_unroll, unrolled_source
from autotune.space.spec import load_space
from autotune.sweep.backends.local import GpuBackend, LocalOptions
from autotune.sweep.backends.tasks import KernelTask, Variant
from autotune.sweep.compile.nvrtc import CompileRequest, compile_batch

GEN = """\
import numpy as np

def make(name, sizes, precision, seed):
    return np.arange(sizes["n"], dtype=np.float64) * 0.5 + (1 if name == "x" else 0)

def filt(name, sizes, precision, seed):
    return np.linspace(1, 5, 5)

def wrong_shape(name, sizes, precision, seed):
    return np.zeros(sizes["n"] + 1)
"""
CHECK = """\
import numpy as np

SEEN = []

def partial_sums(outputs, expected, params, sizes):
    SEEN.append((expected, dict(params), dict(sizes), sorted(outputs)))
    parts = params["parts"]
    got = outputs["y"][:parts].sum()
    want = (outputs["x"] * outputs["filt"].sum()).sum()
    if not np.isfinite(got):
        return False
    return None if abs(got - want) <= 1e-3 * abs(want) else f"sum of {parts} partial sums is {got}, not {want}"

def boom(outputs, expected, params, sizes):
    raise KeyError("no such output")

def odd(outputs, expected, params, sizes):
    return 3
"""


def space(tmp_path: Path, problem: str, kernel_extra: str = "", parameters: str = "parts: [1, 4]") -> Path:
    (tmp_path / "gen.py").write_text(GEN)
    (tmp_path / "check.py").write_text(CHECK)
    (tmp_path / "ref.py").write_text("def ref(a, s):\n    return {'y': a['x'] * a['filt'].sum()}\n")
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(float* y, const float* x, int n) {}\n')
    (tmp_path / "space.yaml").write_text(
        textwrap.dedent("""\
        name: vocab
        problem:
        {problem}
        kernel:
          source: k.cu
          name: k
          block: [bs, 1, 1]
          grid: ["ceil(n / bs)", 1, 1]
        {kernel_extra}
        parameters:
          bs: [32, 64]
          {parameters}
        """).format(
            problem=textwrap.indent(textwrap.dedent(problem), "  "),
            kernel_extra=textwrap.indent(kernel_extra, "  "),
            parameters=parameters,
        )
    )
    return tmp_path / "space.yaml"


PROBLEM = """\
name: vocab
sizes: [n]
arguments:
  - {name: y, buffer: float32, shape: [n], output: true}
  - {name: x, buffer: float32, shape: [n], init: {function: gen.py:make}}
  - {name: n, scalar: int32, value: n}
constants:
  - {name: filt, dtype: float32, shape: [5], init: {function: gen.py:filt}}
  - {name: scale, dtype: T, shape: [n], init: "i + 1"}
reference: ref.py:ref
bytes: 2 * n * elem_bytes
"""


def data(kind, n: int = 8, copies: int = 2) -> DeclaredData:  # noqa: ANN001
    return DeclaredData(kind, kind.point("fp32", "", {"n": n}), copies=copies, seed=5, xp=np)


def test_buffers_and_constants_from_a_function(tmp_path: Path) -> None:
    kind = load_space(space(tmp_path, PROBLEM)).kind
    d = data(kind)
    x = d.sets[1]["x"]
    assert x.dtype == np.float32 and list(x[:3]) == [1.0, 1.5, 2.0]  # cast to the buffer's dtype
    assert np.array_equal(d.sets[0]["x"], x) and d.sets[0]["x"] is not x  # one call, a copy for every set
    consts = d.constants()
    assert list(consts) == ["filt", "scale"] and consts["filt"].dtype == np.float32
    assert list(consts["filt"]) == [1, 2, 3, 4, 5] and list(consts["scale"]) == list(range(1, 9))
    assert consts["scale"].flags.c_contiguous
    ref = d.reference()  # the reference reads the constant by name
    assert np.allclose(ref["y"], 15 * d.sets[0]["x"])
    assert kind.describe()["constants"][0] == {
        "name": "filt",
        "dtype": "float32",
        "shape": ["5"],
        "init": {"function": str((tmp_path / "gen.py").resolve()) + ":filt"},
    }


def test_a_function_of_the_wrong_shape_names_file_and_line(tmp_path: Path) -> None:
    kind = load_space(space(tmp_path, PROBLEM.replace("gen.py:make", "gen.py:wrong_shape"))).kind
    with pytest.raises(SpaceError) as err:
        data(kind)
    assert err.value.line == 7 and err.value.file.endswith("space.yaml")
    assert "gen.py:wrong_shape returned an array of shape [9]" in err.value.message and "[8]" in err.value.message


@pytest.mark.parametrize(
    "change, line, message",
    [
        (("gen.py:make", "gen.py make"), 7, "must be file.py:function"),
        (("{function: gen.py:make}", "{function: gen.py:make, seed: 3}"), 7, "`init:` as a mapping is {function"),
        (("gen.py:make", "nothere.py:make"), 7, "no file"),
        (("{name: scale, dtype: T", "{name: x, dtype: T"), 11, "constant name 'x' is used twice"),
        (("shape: [5]", "shape: [20000]"), 10, "constant 'filt' is 80,000 bytes"),
        (("dtype: float32, shape: [5]", "dtype: float33, shape: [5]"), 10, "unknown dtype 'float33'"),
        (("{name: filt, dtype: float32, shape: [5],", "{name: filt, shape: [5],"), 10, "each constant is"),
        (("reference: ref.py:ref", "tolerance: {fp32: 1e-5}"), 3, "missing `reference:` (or `check:`)"),
    ],
)
def test_bad_vocabulary_names_file_and_line(tmp_path: Path, change: tuple[str, str], line: int, message: str) -> None:
    with pytest.raises(SpaceError) as err:
        load_space(space(tmp_path, PROBLEM.replace(*change)))
    assert message in err.value.message and err.value.line == line and err.value.file.endswith("space.yaml")


def test_an_init_function_outside_the_folder_tree_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "gen.py").write_text(GEN)
    folder = tmp_path / "user"
    folder.mkdir()
    path = space(folder, PROBLEM.replace("gen.py:make", "../elsewhere/gen.py:make"))
    with pytest.raises(SpaceError) as err:
        load_space(path)
    assert (
        "problem: argument 'x' init: function:" in err.value.message
        and "outside the space file's folder" in err.value.message
        and err.value.line == 7
    )


CHECKED = PROBLEM.replace("reference: ref.py:ref", "check: check.py:partial_sums")


def test_an_instance_aware_check_decides_without_a_reference(tmp_path: Path) -> None:
    kind = load_space(space(tmp_path, CHECKED)).kind
    assert kind.reference_fn is None and kind.check_fn.endswith("check.py:partial_sums")
    d = data(kind)
    ref = d.reference()
    assert ref is None
    d.prepare_verify()
    total = float((d.sets[0]["x"] * 15).sum())
    d.sets[0]["y"][:4] = total / 4  # what an instance with 4 partial sums writes
    assert d.verify_instance(ref, {"parts": 4, "bs": 32}).ok
    v = d.verify_instance(ref, {"parts": 1, "bs": 32})  # the same output read as 1 partial sum is wrong
    assert not v.ok and v.message.startswith("check.py:partial_sums: sum of 1 partial sums is")
    d.prepare_verify()  # poisoned: the check sees NaN where nothing was written
    v = d.verify_instance(ref, {"parts": 4, "bs": 32})
    assert not v.ok and v.message == "check.py:partial_sums returned False"
    seen = load_attribute(kind.check_fn.replace(":partial_sums", ":SEEN"))  # the file as the kind loaded it
    expected, params, sizes, names = seen[0]
    assert expected is None and params == {"parts": 4, "bs": 32} and sizes == {"n": 8}
    assert names == ["filt", "n", "scale", "x", "y"]  # every argument and constant, by name


def test_a_check_with_a_reference_gets_the_expected_outputs(tmp_path: Path) -> None:
    (tmp_path / "check2.py").write_text(
        "def close(outputs, expected, params, sizes):\n"
        "    return bool(abs(outputs['y'] - expected['y']).max() < 1e-3)\n"
    )
    kind = load_space(
        space(tmp_path, PROBLEM.replace("reference: ref.py:ref", "reference: ref.py:ref\ncheck: check2.py:close"))
    ).kind
    d = data(kind)
    ref = d.reference()
    d.prepare_verify()
    d.sets[0]["y"][...] = 15 * d.sets[0]["x"]
    assert d.verify_instance(ref, {}).ok
    d.sets[0]["y"][0] += 1
    assert not d.verify_instance(ref, {}).ok
    assert d.verify(ref).ok is False  # the plain comparison still works on its own


@pytest.mark.parametrize(
    "fn, message", [("boom", "check.py:boom raised at vocab:fp32:-:8: KeyError"), ("odd", "check.py:odd returned int")]
)
def test_a_check_that_raises_is_the_problems_fault(tmp_path: Path, fn: str, message: str) -> None:
    kind = load_space(space(tmp_path, CHECKED.replace("partial_sums", fn))).kind
    d = data(kind)
    with pytest.raises(CheckError, match=message):
        d.verify_instance(None, {"parts": 1})


# ---------------------------------------------------------------------------------- semantics: kerneltuner
def test_kerneltuner_semantics_adds_the_implicit_block_restriction(tmp_path: Path) -> None:
    kernel = "semantics: kerneltuner\n"
    params = "block_size_y: [1, 8, 16, 32]"
    native = load_space(_rewrite(tmp_path, "", params))
    kt = load_space(_rewrite(tmp_path, kernel, params))
    assert native.kernel.semantics == "native" and kt.kernel.semantics == "kerneltuner"
    (extra,) = [c for c in kt.hard if c.name == "kerneltuner_block_threads"]
    assert extra.expr.text == "(bs) * (block_size_y) * (1) <= max_threads_per_block"
    h100 = get_device("H100")
    assert generate(native, h100, soft=False).count == 8
    kept = generate(kt, h100, soft=False)
    assert kept.count == 7  # 64 x 32 = 2048 threads is what Kernel Tuner never runs
    assert not ((kept.frame.bs == 64) & (kept.frame.block_size_y == 32)).any()


def _rewrite(tmp_path: Path, kernel: str, params: str) -> Path:
    path = space(tmp_path, PROBLEM, kernel, params)
    path.write_text(path.read_text().replace("[bs, 1, 1]", "[bs, block_size_y, 1]"))
    return path


def test_bad_semantics_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpaceError) as err:
        load_space(space(tmp_path, PROBLEM, "semantics: kt\n"))
    assert "kernel.semantics: 'kt' is not one of native, kerneltuner" in err.value.message and err.value.line == 20


def test_loop_unroll_factors_follow_kernel_tuner() -> None:
    defines = (("block_size_x", "64"), ("loop_unroll_factor_0", "0"), ("loop_unroll_factor_1", "4"))
    plain, unroll = split_unroll(defines)
    assert plain == (("block_size_x", "64"),) and unroll == defines[1:]
    text = "a\n  #pragma unroll loop_unroll_factor_0\nb\n#pragma unroll loop_unroll_factor_1\nc\n"
    out = unrolled_source(text, unroll)
    assert out == "constexpr int loop_unroll_factor_1 = 4;\n#line 1\na\n\nb\n#pragma unroll loop_unroll_factor_1\nc\n"
    assert unrolled_source(text, ()) == text


def test_the_backend_takes_unroll_factors_out_of_the_defines(tmp_path: Path) -> None:
    backend = GpuBackend(LocalOptions(cache_dir=tmp_path))
    v = Variant(None, "k", (1, 1, 1), (64, 1, 1), 0, (("bs", "64"), ("loop_unroll_factor_0", "4")))  # type: ignore
    for semantics, minus_d, unroll in (("native", 2, ()), ("kerneltuner", 1, (("loop_unroll_factor_0", "4"),))):
        task = KernelTask("i", tmp_path / "k.cu", "declared", (v,), None, semantics=semantics)  # type: ignore
        (req,) = backend._requests([task], 90)
        assert sum(o.startswith("-D") for o in req.options) == minus_d and req.unroll == unroll


UNROLL_KERNEL = """\
extern "C" __global__ void k(float* y, const float* x, int n) {
  float s = 0;
#pragma unroll loop_unroll_factor_0
  for (int i = 0; i < n; i++) s += x[i] * x[i];
  y[0] = s;
}
"""


@pytest.mark.nvcc
@pytest.mark.parametrize("factor", ["0", "4"])
def test_an_unroll_parameter_compiles_as_kernel_tuner_compiles_it(tmp_path: Path, factor: str) -> None:
    (tmp_path / "k.cu").write_text(UNROLL_KERNEL)
    defines = (("loop_unroll_factor_0", factor),)
    as_define = CompileRequest(
        tmp_path / "k.cu",
        ("k",),
        90,
        options=("-std=c++17", f"-Dloop_unroll_factor_0={factor}"),
        defines=defines,
        compiler="nvcc",
    )
    (ck,) = compile_batch(as_define, tmp_path / "c1")
    assert not ck.ok and "loop_unroll_factor_0" in ck.log  # a #pragma unroll argument is not macro-expanded
    kt = CompileRequest(
        tmp_path / "k.cu", ("k",), 90, options=("-std=c++17",), defines=defines, compiler="nvcc", unroll=defines
    )
    (ck,) = compile_batch(kt, tmp_path / "c2")
    assert ck.ok, ck.log
    assert (tmp_path / "k.cu").read_text() == UNROLL_KERNEL  # the user's file is unchanged


def test_imported_kerneltuner_spaces_say_how_to_get_its_semantics() -> None:
    cache = KTCache(
        device_name="A100",
        kernel_name="vector_add",
        problem_size=(100,),
        tune_params_keys=("block_size_x",),
        tune_params={"block_size_x": [32, 64]},
        objective="time",
        records=(KTRecord({"block_size_x": 32}, "ok", 1.0),),
    )
    text = space_yaml(cache, "vector_add")
    assert "#   semantics: kerneltuner\n" in text and "#   block: [block_size_x, 1, 1]\n" in text
    evil = space_yaml(dataclasses.replace(cache, kernel_name="x\nkernel: {}"), "v")
    assert "\nkernel:" not in evil and "#   name: KERNEL\n" in evil
