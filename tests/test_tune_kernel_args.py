"""tune_kernel's and run_kernel's arguments are checked before any work (issue 53): every argument of Kernel Tuner
1.5's signatures given a wrong type or value is one error (a UserError; also a ValueError or TypeError where Kernel
Tuner raises one, with its words) naming the argument, and nothing is written: no space folder, no temporary
folder. Before these checks most of them gave raw tracebacks after the folder was written, or silently did
something else (`compiler_options="-O3"` read character by character, a mistyped strategy run as `auto`, a kernel
name with `/` writing outside the temporary folder)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autotune.errors import UserError
from autotune.kernel_tuner import run_kernel, tune_kernel

VECTOR_ADD = """
__global__ void vector_add(float *c, float *a, float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i<n) {
        c[i] = a[i] + b[i];
    }
}
"""
N = 100
A = np.ones(N, np.float32)
ARGS = [np.zeros(N, np.float32), A, A, np.int32(N)]

# (argument overrides, exception type besides UserError (Kernel Tuner's) or None, what the message says)
TUNE_CASES: list[tuple[dict[str, Any], type[Exception] | None, str]] = [
    ({"kernel_name": "../../evil"}, None, "kernel_name='../../evil' is not the name of a kernel"),
    ({"kernel_name": "a/b"}, None, "kernel_name"),
    ({"kernel_name": 5}, None, "kernel_name=5"),
    ({"kernel_source": b"__global__ void k() {}"}, TypeError, "kernel_source"),
    ({"problem_size": 10.5}, TypeError, "problem_size entry 10.5"),
    ({"problem_size": ()}, TypeError, "1 to 3 sizes"),
    ({"problem_size": (1, 2, 3, 4)}, TypeError, "1 to 3 sizes"),
    ({"problem_size": -5}, TypeError, "problem_size entry -5"),
    ({"problem_size": 2**70}, TypeError, "problem_size entry"),
    ({"arguments": np.zeros(4, np.float32)}, TypeError, "arguments=.* is not a list"),
    ({"tune_params": [("block_size_x", [32])]}, ValueError, "tune_params=.* is not a dict"),
    ({"tune_params": {}}, ValueError, "tune_params"),
    ({"tune_params": {"block_size_x": "128"}}, ValueError, r"tune_params\['block_size_x'\] = '128'"),
    ({"tune_params": {"block_size_x": 128}}, ValueError, r"tune_params\['block_size_x'\] = 128"),
    ({"tune_params": {"block_size_x": []}}, ValueError, "not a non-empty list"),
    ({"tune_params": {"block size": [32]}}, ValueError, "is not a name"),
    ({"tune_params": {"block_size_x": [32, float("nan")]}}, ValueError, "holds nan"),
    ({"tune_params": {"block_size_x": [32, {"a": 1}]}}, ValueError, "holds"),
    ({"tune_params": {"block_size_x": [32], "time": [1]}}, ValueError, "Tune parameter time .* has a forbidden name!"),
    ({"grid_div_x": 0}, ValueError, "grid_div_x entry 0"),
    ({"grid_div_y": [2.5]}, ValueError, "grid_div_y entry 2.5"),
    ({"grid_div_z": {"a": 1}}, ValueError, "grid_div_z entry"),
    ({"restrictions": 5}, ValueError, "restrictions=5"),
    ({"answer": np.zeros(4)}, None, "answer=.* is not a list"),
    ({"answer": [None]}, None, "answer has 1 entries, arguments 4"),
    ({"atol": "abc"}, None, "atol = 'abc' is not a number"),
    ({"atol": -1.0}, None, "atol = -1.0"),
    ({"atol": float("nan")}, None, "atol = nan"),
    ({"verify": 5}, None, "verify=5 is not a function"),
    ({"verbose": "yes"}, None, "verbose='yes' is not True or False"),
    ({"lang": 5}, None, "lang=5"),
    ({"device": "0"}, None, "device='0'"),
    ({"device": -1}, None, "device = -1"),
    ({"platform": 1.5}, None, "platform=1.5"),
    ({"smem_args": [4]}, TypeError, "smem_args=.* is not a dict"),
    ({"cmem_args": "d_filter"}, TypeError, "cmem_args=.* is not a dict"),
    ({"compiler": 5}, None, "compiler=5"),
    ({"compiler_options": "-O3"}, TypeError, r"compiler_options='-O3' is not a list of strings"),
    ({"compiler_options": ["-O3", 3]}, TypeError, "compiler_options"),
    ({"defines": ["a"]}, TypeError, "defines=.* is not a dict"),
    ({"log": "loud"}, None, "log='loud' is not a logging level"),
    ({"iterations": "7"}, None, "iterations='7'"),
    ({"iterations": 0}, None, "iterations = 0"),
    ({"iterations": 7.5}, None, "iterations=7.5"),
    ({"block_size_names": "bx"}, ValueError, "block_size_names should be a list of strings!"),
    ({"block_size_names": ["a", "b", "c", "d"]}, ValueError, "should not contain more than 3 names!"),
    ({"block_size_names": ["a", 5]}, ValueError, "should contain only strings!"),
    ({"quiet": "no"}, None, "quiet='no'"),
    ({"strategy": "brute_forse"}, ValueError, "Unknown strategy brute_forse, must be one of: brute_force, "),
    ({"strategy_options": [1]}, None, "strategy_options=.* is not a dict"),
    ({"strategy_options": {"max_fevals": 0}}, ValueError, "max_fevals must be greater than zero"),
    ({"strategy_options": {"max_fevals": "10"}}, ValueError, "max_fevals must be greater than zero"),
    ({"strategy_options": {"time_limit": -1}}, ValueError, "time_limit must be greater than zero"),
    ({"strategy_options": {"fraction": 2}}, ValueError, "fraction=2 is not a fraction"),
    ({"cache": True}, TypeError, "cache=True is not a file name"),
    ({"cache": 5}, TypeError, "cache=5"),
    ({"metrics": ["GFLOP/s"]}, ValueError, "metrics should be a dictionary"),
    ({"metrics": {"g": 5}}, ValueError, "metric dicts values should be strings or callable"),
    ({"metrics": {"g": "time / nope"}}, None, "metric 'g' = 'time / nope' reads 'nope'"),
    ({"metrics": {"g": "__import__('os')"}}, None, "metric 'g'"),
    ({"simulation_mode": "yes"}, None, "simulation_mode='yes'"),
    ({"parallel": "all"}, None, "parallel='all'"),
    ({"objective": 5}, None, "objective=5"),
    ({"objective_higher_is_better": "yes"}, None, "objective_higher_is_better='yes'"),
    ({"objectives": ["time"]}, ValueError, "objectives should be a dict"),
    ({"seed": "x"}, None, "seed='x'"),
    ({"seed": -1}, None, "seed = -1"),
    ({"space_dir": 5}, TypeError, "space_dir=5"),
    ({"database": 5}, None, "database=5"),
    ({"early_stop": "no"}, None, "early_stop='no'"),
]


def _call(tmp_path: Path, **kw: Any) -> Any:
    call: dict[str, Any] = dict(
        kernel_name="vector_add",
        kernel_source=VECTOR_ADD,
        problem_size=N,
        arguments=ARGS,
        tune_params={"block_size_x": [32, 64]},
        quiet=True,
        space_dir=tmp_path / "space",
    )
    call.update(kw)
    return tune_kernel(**call)


@pytest.mark.parametrize("kw, kt_type, message", TUNE_CASES, ids=[str(c[0])[:50] for c in TUNE_CASES])
def test_a_wrong_argument_is_one_error_before_any_work(
    kw: dict[str, Any], kt_type: type[Exception] | None, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    with pytest.raises(UserError, match=message) as err:
        _call(tmp_path, **kw)
    if kt_type is not None:  # a script's `except ValueError` / `except TypeError` around Kernel Tuner's call holds
        assert isinstance(err.value, kt_type), type(err.value).__mro__
    assert "tune_kernel" in str(err.value) and err.value.hint
    assert "\n" not in err.value.message  # one line (and its hint)
    assert not (tmp_path / "space").exists()  # nothing written: the check came first
    assert not list((tmp_path / "tmp").iterdir())
    assert not list(tmp_path.parent.glob("evil*"))


def test_parallel_with_simulation_mode_is_refused_in_kernel_tuners_words(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text("{}")
    with pytest.raises(ValueError, match="Enabling `parallel` and `simulation_mode` together is not supported"):
        _call(tmp_path, parallel=True, simulation_mode=True, cache=str(tmp_path / "c.json"))


def test_a_kernel_name_is_never_a_path_of_the_temporary_folder(tmp_path: Path) -> None:
    """A templated name (as Kernel Tuner's CuPy backend takes) is accepted; the folder the call makes is named
    from letters, digits and _ only, and lies under the temporary folder."""
    from autotune.interop.tune_kernel import safe_name

    assert safe_name("ns::k<float, 128>") == "ns__k_float__128_"
    assert safe_name("../../evil") == "______evil" and "/" not in safe_name("a/b")
    with pytest.raises(UserError, match="simulation_mode replays a cache"):  # the name passed the check
        tune_kernel("vector_add<float>", VECTOR_ADD, N, ARGS, {"block_size_x": [32]}, simulation_mode=True, quiet=True)


# run_kernel: Kernel Tuner's signature; wrong types are refused before the call goes to the CuPy path or to Kernel
# Tuner's own (which, not installed here, would say "Kernel Tuner cannot be imported" instead)
RUN_CASES: list[tuple[dict[str, Any], str]] = [
    ({"compiler_options": "-O3"}, r"compiler_options='-O3' is not a list of strings"),
    ({"params": [("block_size_x", 32)]}, "params=.* is not a dict"),
    ({"params": {"block_size_x": [32, 64]}}, "params=.* is not a dict of parameter names to single values"),
    ({"kernel_name": "../x"}, "kernel_name"),
    ({"problem_size": 1.5}, "problem_size entry 1.5"),
    ({"arguments": A}, "arguments=.* is not a list"),
    ({"block_size_names": "bx"}, "block_size_names should be a list of strings!"),
    ({"grid_div_x": 0}, "grid_div_x entry 0"),
    ({"device": -1}, "device = -1"),
    ({"quiet": "x"}, "quiet='x'"),
    ({"smem_args": 4}, "smem_args=4"),
    ({"log": 1.5}, "log=1.5"),
]


@pytest.mark.parametrize("kw, message", RUN_CASES, ids=[str(c[0])[:40] for c in RUN_CASES])
def test_run_kernel_checks_its_arguments_first(kw: dict[str, Any], message: str) -> None:
    call: dict[str, Any] = dict(
        kernel_name="vector_add",
        kernel_source=VECTOR_ADD,
        problem_size=N,
        arguments=ARGS,
        params={"block_size_x": 32},
        lang="cupy",
    )
    call.update(kw)
    with pytest.raises(UserError, match=message) as err:
        run_kernel(**call)
    assert "run_kernel" in str(err.value) and "cannot be imported" not in str(err.value)


def test_run_kernel_with_arguments_that_do_not_fit_its_signature_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="run_kernel: .*unexpected keyword argument 'iterations'"):
        run_kernel("vector_add", VECTOR_ADD, N, ARGS, {"block_size_x": 32}, iterations=3)
