"""Kernel Tuner's tune_kernel on our engine (issue 31 item 1), without a GPU: the generated space folder of
Kernel Tuner-style calls loads and passes `autotune space show`; unsupported arguments are refused with one clear
error; results of a replayed cache (simulation_mode) have Kernel Tuner's shape (compared with Kernel Tuner 1.5
itself where AUTOTUNE_KT_PYTHON or .venv-kt has it). The real GPU path: tests/gpu/test_tune_kernel_gpu.py."""

from __future__ import annotations

import json
from typing import Any
import subprocess
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.errors import UserError
from autotune.interop.kerneltuner import KTCache, KTRecord, write_cache
from autotune.interop.kt_space import KTProblem, write_space_folder
from autotune.kernel_tuner import tune_kernel
from autotune.devices import get_device
from autotune.space.generator import generate
from autotune.space.spec import load_space

from tests.support.harness import KT_PYTHON  # noqa: E402

VECTOR_ADD = """
__global__ void vector_add(float *c, float *a, float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i<n) {
        c[i] = a[i] + b[i];
    }
}
"""
CONVOLUTION = """
__constant__ float d_filter[17*17];
__global__ void convolution_kernel(float *output, float *input, float *filter) {
    int x = blockIdx.x * block_size_x * tile_size_x + threadIdx.x;
    int y = blockIdx.y * block_size_y * tile_size_y + threadIdx.y;
    if (x < 256 && y < 128) output[y * 256 + x] = input[y * 256 + x] * filter[0];
}
"""
REDUCTION = """
__global__ void sum_floats(float *sum_global, float *array, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    float s = 0.0f;
    for (; i < n; i += num_blocks * block_size_x) s += array[i];
    atomicAdd(sum_global + blockIdx.x, s);
}
"""


def _problem(**kw) -> KTProblem:  # noqa: ANN003
    base = dict(grid_div=(None, None, None), block_size_names=("block_size_x", "block_size_y", "block_size_z"))
    return KTProblem(**{**base, **kw})


def _vector_add(n: int = 10_000, answer: bool = True) -> tuple[list, list | None]:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    args = [np.zeros_like(a), a, b, np.int32(n)]
    return args, ([a + b, None, None, None] if answer else None)


def _show(space_file: Path) -> str:
    result = CliRunner().invoke(app, ["space", "show", str(space_file)])
    assert result.exit_code == 0, result.output
    return result.output


def test_vector_add_folder_loads_and_shows(tmp_path: Path) -> None:
    args, answer = _vector_add()
    space_file, sizes = write_space_folder(
        _problem(
            kernel_name="vector_add",
            source_text=VECTOR_ADD,
            source_file=None,
            problem_size=(10_000,),
            arguments=args,
            tune_params={"block_size_x": [128 + 64 * i for i in range(15)]},
            answer=answer,
        ),
        tmp_path,
    )
    space = load_space(space_file)
    assert sizes == {"size_x": 10_000}
    assert [a.name for a in space.kind.arguments] == ["c", "a", "b", "n"]  # read from the kernel's signature
    assert [a.name for a in space.kind.arguments if a.output] == ["c"]
    point = space.kind.point("fp32", "", sizes)
    assert space.geometry({"block_size_x": 192}, point).grid == [53, 1, 1]  # ceil(10000 / 192), as Kernel Tuner
    assert space.geometry({"block_size_x": 192}, point).block == [192, 1, 1]
    assert dict(space.defines({"block_size_x": 192}, point)) == {
        "grid_size_x": "53",
        "grid_size_y": "1",
        "grid_size_z": "1",
        "block_size_x": "192",
        "block_size_y": "1",
        "block_size_z": "1",
        "kernel_tuner": "1",
    }
    assert len(generate(space, get_device("H100")).ids()) == 15
    assert "15 instances" in _show(space_file)
    assert np.array_equal(np.load(tmp_path / "args" / "a.npy"), args[1])


def test_convolution_with_grid_div_and_restrictions(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    out, inp = np.zeros(256 * 128, np.float32), rng.standard_normal(256 * 128).astype(np.float32)
    filt = rng.standard_normal(17 * 17).astype(np.float32)
    tune_params = {
        "block_size_x": [16 * i for i in range(1, 9)],
        "block_size_y": [2**i for i in range(6)],
        "tile_size_x": [1, 2, 4],
        "tile_size_y": [1, 2, 4],
        "use_padding": [0, 1],
    }
    space_file, _ = write_space_folder(
        _problem(
            kernel_name="convolution_kernel",
            source_text=CONVOLUTION,
            source_file=None,
            problem_size=(256, 128),
            arguments=[out, inp, filt],
            tune_params=tune_params,
            grid_div=(["block_size_x", "tile_size_x"], ["block_size_y", "tile_size_y"], None),
            restrictions=["use_padding==0 or (block_size_x % 32 != 0)"],
            answer=[out, None, None],
        ),
        tmp_path,
    )
    space = load_space(space_file)
    point = space.kind.point("fp32", "", {"size_x": 256, "size_y": 128})
    params = {"block_size_x": 48, "block_size_y": 4, "tile_size_x": 2, "tile_size_y": 4, "use_padding": 1}
    assert space.geometry(params, point).grid == [3, 8, 1]  # ceil(256 / 96), ceil(128 / 16)
    ids = generate(space, get_device("H100")).ids()
    raw = 8 * 6 * 3 * 3 * 2
    kept = sum(
        1
        for bx in tune_params["block_size_x"]
        for by in tune_params["block_size_y"]
        for _ in range(9)
        for pad in (0, 1)
        if (pad == 0 or bx % 32 != 0) and bx * by <= 1024
    )
    assert len(ids) == kept < raw
    assert "kt_restriction_0" in _show(space_file)


def test_reduction_without_answer_and_a_problem_size_expression(tmp_path: Path) -> None:
    x = np.random.default_rng(3).random(100_000).astype(np.float32)
    space_file, sizes = write_space_folder(
        _problem(
            kernel_name="sum_floats",
            source_text=REDUCTION,
            source_file=None,
            problem_size=("num_blocks",),
            arguments=[np.zeros(1024, np.float32), x, np.int32(x.size)],
            tune_params={"block_size_x": [32, 64, 1024], "num_blocks": [32, 1024, 2048]},
            grid_div=([], None, None),
            answer=None,
        ),
        tmp_path,
    )
    space = load_space(space_file)
    assert sizes == {"size_x": 1}
    assert all(a.output for a in space.kind.arguments if a.is_buffer)  # no answer: every array may be written
    point = space.kind.point("fp32", "", sizes)
    assert space.geometry({"block_size_x": 64, "num_blocks": 2048}, point).grid == [2048, 1, 1]
    _show(space_file)


def test_a_source_file_is_named_where_it_is(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "vadd.cu").write_text(VECTOR_ADD)
    args, answer = _vector_add(100)
    space_file, _ = write_space_folder(
        _problem(
            kernel_name="vector_add",
            source_text=None,
            source_file=tmp_path / "src" / "vadd.cu",
            problem_size=(100,),
            arguments=args,
            tune_params={"block_size_x": [32]},
            answer=answer,
        ),
        tmp_path / "space",
    )
    assert load_space(space_file).kernel.source_path == (tmp_path / "src" / "vadd.cu").resolve()


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"restrictions": lambda p: True}, "a restrictions function"),
        ({"texmem_args": {"tex": np.zeros(4)}}, "texmem_args"),
        ({"observers": [object()]}, "observers"),
        ({"lang": "OpenCL"}, "lang='OpenCL'"),
        ({"grid_div_x": lambda p: 1}, "a grid_div_x function"),
        ({"problem_size": lambda p: (10,)}, "a problem_size function"),
        ({"kernel_source": lambda p: VECTOR_ADD}, "a kernel_source function"),
        ({"smem_args": {"size": 4, "config": 1}}, "smem_args keys"),
        ({"compiler": "g++"}, "compiler='g\\+\\+'"),
        ({"objective": "GFLOP/s"}, "objective='GFLOP/s'"),
        ({"strategy": object()}, "a user-defined strategy"),
    ],
)
def test_unsupported_arguments_are_refused_with_one_clear_error(kw: dict, message: str) -> None:
    args, answer = _vector_add(100)
    call = {
        **dict(
            kernel_name="vector_add",
            kernel_source=VECTOR_ADD,
            problem_size=100,
            arguments=args,
            tune_params={"block_size_x": [32]},
            answer=answer,
            quiet=True,
        ),
        **kw,
    }
    with pytest.raises(UserError, match=message) as err:
        tune_kernel(**call)
    assert "tune_kernel" in str(err.value) and err.value.hint


def test_bad_arguments_name_the_argument() -> None:
    args, _ = _vector_add(100)
    with pytest.raises(UserError, match=r"argument 3 \(n\) is a int"):
        tune_kernel("vector_add", VECTOR_ADD, 100, args[:3] + [100], {"block_size_x": [32]}, quiet=True)
    with pytest.raises(UserError, match="restriction 'block_size_x <= nope' reads 'nope'"):
        tune_kernel(
            "vector_add",
            VECTOR_ADD,
            100,
            args,
            {"block_size_x": [32]},
            restrictions=["block_size_x <= nope"],
            quiet=True,
        )
    with pytest.raises(UserError, match="simulation_mode replays a cache file"):
        tune_kernel("vector_add", VECTOR_ADD, 100, args, {"block_size_x": [32]}, simulation_mode=True, quiet=True)


def _cache(path: Path, n: int) -> None:
    records = (
        KTRecord({"block_size_x": 128}, "ok", 0.5, (0.5, 0.4, 0.6), {"compile_time": 100.0}),
        KTRecord({"block_size_x": 256}, "ok", 0.3, (0.3, 0.3, 0.3), {"compile_time": 90.0}),
        KTRecord({"block_size_x": 512}, "compile_error", None, (), {"compile_time": 10.0}),
    )
    write_cache(
        KTCache(
            "NVIDIA H100 80GB HBM3",
            "vector_add",
            n,
            ("block_size_x",),
            {"block_size_x": [128, 256, 512]},
            "time",
            records,
        ),
        path,
    )


def _simulate(tmp_path: Path, **kwargs: Any) -> tuple[list[dict], dict]:
    """tune_kernel replaying a 3-configuration cache of vector_add (`_cache`) in simulation mode."""
    args, answer = _vector_add()
    _cache(tmp_path / "cache.json", 10_000)
    return tune_kernel(
        "vector_add",
        VECTOR_ADD,
        10_000,
        args,
        {"block_size_x": [128, 256, 512]},
        answer=answer,
        cache=str(tmp_path / "cache.json"),
        simulation_mode=True,
        quiet=True,
        **kwargs,
    )


def test_simulation_mode_replays_a_cache_with_kernel_tuners_result_shape(tmp_path: Path) -> None:
    results, env = _simulate(tmp_path, space_dir=tmp_path / "space")
    assert [r["block_size_x"] for r in results] == [128, 256, 512]
    assert [r.get("time") for r in results] == [0.5, 0.3, None]
    assert results[0]["times"] == [0.5, 0.4, 0.6] and results[0]["compile_time"] == 100.0
    assert str(results[2]["__error__"]) == "CompilationFailedConfig" and "time" not in results[2]
    assert env["best_config"]["block_size_x"] == 256 and env["device_name"] == "NVIDIA H100 80GB HBM3"
    assert env["iterations"] == 7 and (tmp_path / "space" / "space.yaml").is_file()  # kept: space_dir
    if KT_PYTHON.is_file():  # the keys Kernel Tuner 1.5 itself returns replaying the same cache
        script = tmp_path / "kt.py"
        script.write_text(
            "import json, sys, numpy\nfrom kernel_tuner import tune_kernel\n"
            f"src = {VECTOR_ADD!r}\nn = 10000\na = numpy.ones(n, numpy.float32)\n"
            "res, env = tune_kernel('vector_add', src, n, [a, a, a, numpy.int32(n)], "
            "{'block_size_x': [128, 256, 512]}, cache=sys.argv[1], simulation_mode=True, quiet=True)\n"
            "print(json.dumps({'keys': [sorted(r) for r in res], 'env': sorted(env)}))\n"
        )
        _cache(tmp_path / "kt_cache.json", 10_000)
        out = subprocess.run(
            [str(KT_PYTHON), str(script), str(tmp_path / "kt_cache.json")], capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, out.stderr[-2000:]
        kt = json.loads(out.stdout.strip().splitlines()[-1])
        for ours, theirs in zip(results, kt["keys"], strict=True):
            assert set(theirs) - {"time"} <= set(ours), (theirs, sorted(ours))  # a failure: time holds the marker
        assert "best_config" in env and "device_name" in env


def test_a_run_writes_no_cache_over_an_existing_one(tmp_path: Path) -> None:
    args, answer = _vector_add(100)
    (tmp_path / "c.json").write_text("{}")
    with pytest.raises(UserError, match="continuing the existing cache"):
        tune_kernel("vector_add", VECTOR_ADD, 100, args, {"block_size_x": [32]}, cache=str(tmp_path / "c"), quiet=True)


def _module(path: Path):  # noqa: ANN202
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"kt_check_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_check_is_kernel_tuners_allclose_with_atol(tmp_path: Path) -> None:
    args, answer = _vector_add(1000)
    write_space_folder(
        _problem(
            kernel_name="vector_add",
            source_text=VECTOR_ADD,
            source_file=None,
            problem_size=(1000,),
            arguments=args,
            tune_params={"block_size_x": [32]},
            answer=answer,
            atol=1e-3,
        ),
        tmp_path,
    )
    check = _module(tmp_path / "kt_check.py").check
    right = answer[0].copy()
    assert check({"c": right}, None, {}, {}) is True
    assert check({"c": right + 5e-4}, None, {}, {}) is True  # within atol: absolute, as numpy.allclose
    wrong = right.copy()
    wrong[7] += 0.01
    assert "1 of 1000 elements differ" in check({"c": wrong}, None, {}, {})


def test_the_generated_check_calls_verify_as_kernel_tuner(tmp_path: Path) -> None:
    """With an answer, verify= gets the checked outputs and None for every other argument (Kernel Tuner's
    `should_sync`), and only those are read back from the GPU; without one, every array and the scalars."""
    pytest.importorskip("cloudpickle")
    x = np.arange(10, dtype=np.float32)

    def verify_partial(cpu_result, gpu_result, atol=None):  # Kernel Tuner's reduction example (+ what it receives)
        assert len(gpu_result) == 3 and atol == 1e-6 and cpu_result[1] is None and gpu_result[1:] == [None, None]
        return np.isclose(cpu_result[0], np.sum(gpu_result[0]), atol=atol)

    write_space_folder(
        _problem(
            kernel_name="sum_floats",
            source_text=REDUCTION,
            source_file=None,
            problem_size=("num_blocks",),
            arguments=[np.zeros(4, np.float32), x, np.int32(10)],
            tune_params={"num_blocks": [4]},
            answer=[np.float32(45.0), None, None],
            verify=verify_partial,
        ),
        tmp_path,
    )
    check = _module(tmp_path / "kt_check.py").check
    assert check({"sum_global": np.array([40, 5, 0, 0], np.float32), "array": x}, None, {}, {}) is True
    assert check({"sum_global": np.zeros(4, np.float32), "array": x}, None, {}, {}) == "verify= returned False"
    kind = load_space(tmp_path / "space.yaml").kind
    assert [a.name for a in kind.arguments if a.output] == ["sum_global"]  # the 3.2 GB input is never read back

    def verify_all(cpu_result, gpu_result, atol=None):
        assert cpu_result is None and gpu_result[1] is not None and gpu_result[2] == 10
        return float(np.sum(gpu_result[0])) == 45.0

    write_space_folder(
        _problem(
            kernel_name="sum_floats",
            source_text=REDUCTION,
            source_file=None,
            problem_size=("num_blocks",),
            arguments=[np.zeros(4, np.float32), x, np.int32(10)],
            tune_params={"num_blocks": [4]},
            answer=None,
            verify=verify_all,
        ),
        tmp_path / "b",
    )
    check = _module(tmp_path / "b" / "kt_check.py").check
    assert check({"sum_global": np.array([40, 5, 0, 0], np.float32), "array": x}, None, {}, {}) is True


def test_cmem_args_and_verify_use_the_vocabulary_keys_where_they_exist(tmp_path: Path) -> None:
    """`constants:` and `check:` (issue 31, the vocab helper): written into the space."""
    args = [np.zeros(256 * 128, np.float32), np.ones(256 * 128, np.float32), np.ones(289, np.float32)]
    call = dict(
        kernel_name="convolution_kernel",
        kernel_source=CONVOLUTION,
        problem_size=(256, 128),
        arguments=args,
        tune_params={"block_size_x": [32], "block_size_y": [4], "tile_size_x": [1], "tile_size_y": [1]},
        cmem_args={"d_filter": args[2]},
        quiet=True,
    )
    space_file, _ = write_space_folder(
        _problem(
            kernel_name="convolution_kernel",
            source_text=CONVOLUTION,
            source_file=None,
            problem_size=(256, 128),
            arguments=args,
            tune_params=call["tune_params"],
            cmem_args={"d_filter": args[2]},
        ),
        tmp_path,
    )
    _show(space_file)
    assert "d_filter" in space_file.read_text()


def test_time_limit_counts_from_the_calls_start_as_kernel_tuners() -> None:
    from autotune.interop.kt_args import read_strategy as _strategy

    assert _strategy(None, {"time_limit": 40}, None, 2.5) == {"strategy": "brute", "budget": "37.500s"}
    assert _strategy("random_sample", {"time_limit": 3, "max_fevals": 9}, None, 5.0) == {
        "strategy": {"name": "random", "budget": 9},
        "budget": "1.000s",
    }  # at least a second is left


def test_run_kernel_is_kernel_tuners_imported_only_at_a_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """`from autotune.kernel_tuner import tune_kernel, run_kernel` (a script that imported both from Kernel Tuner)
    does not import Kernel Tuner; calling run_kernel does, and says what to do where it is not installed."""
    import importlib.util
    import os
    import sys

    code = "import sys; from autotune.kernel_tuner import run_kernel, tune_kernel; print('kernel_tuner' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "AUTOTUNE_PREWARM": "0"},
        check=True,
    )
    assert out.stdout.strip() == "False", out
    if importlib.util.find_spec("kernel_tuner") is None:
        from autotune.kernel_tuner import run_kernel

        with pytest.raises(UserError, match="run_kernel is Kernel Tuner's own") as err:
            run_kernel("k", "__global__ void k() {}", 1, [], {})
        assert "pip install kernel_tuner" in str(err.value.hint)


def test_the_call_returns_before_its_clean_up_and_the_folder_goes(tmp_path: Path) -> None:
    """The generated folder (and a backend) are cleaned up in a thread once the call has returned; the thread is
    not a daemon (the interpreter waits for it), and the folder is gone once it ends."""
    import threading

    from autotune.interop.tune_kernel import CLEANUP_THREAD

    results, env = _simulate(tmp_path)
    folder = Path(env["autotune"]["database"].removeprefix("sqlite:///")).parent
    assert len(results) == 3 and env["autotune"]["space_dir"] is None
    threads = [t for t in threading.enumerate() if t.name == CLEANUP_THREAD]
    assert all(not t.daemon for t in threads)
    for t in threads:
        t.join(30)
    assert folder.name.startswith("kt_vector_add_") and not folder.exists()
