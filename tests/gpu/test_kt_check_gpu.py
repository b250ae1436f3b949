"""GPU tier (issue 31): the check generated for Kernel Tuner's `answer` compares on the GPU (numpy.allclose's rule,
cupy.allclose) when the worker hands it device arrays, the answer uploaded once; a wrong output still gets the
host's message naming how many elements differ."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autotune.interop.kt_space import write_space_folder
from autotune.problems.declared_data import HostArrays
from tests.test_tune_kernel import VECTOR_ADD, _module, _problem, _vector_add

pytestmark = pytest.mark.gpu


def test_the_generated_check_compares_on_the_device(tmp_path: Path) -> None:
    import cupy

    args, answer = _vector_add(1 << 20)
    write_space_folder(
        _problem(
            kernel_name="vector_add",
            source_text=VECTOR_ADD,
            source_file=None,
            problem_size=(1 << 20,),
            arguments=args,
            tune_params={"block_size_x": [32]},
            answer=answer,
            atol=1e-3,
        ),
        tmp_path,
    )
    module = _module(tmp_path / "kt_check.py")
    right = cupy.asarray(answer[0] + 5e-4)  # within atol
    outputs = HostArrays({"c": right})
    assert module.check(outputs, None, {}, {}) is True
    assert "c" not in outputs._host  # nothing copied to the host
    assert isinstance(module._CACHE[("dev", "c")], cupy.ndarray)  # the answer, uploaded once
    wrong = right.copy()
    wrong[7] += 0.01
    assert "1 of 1048576 elements differ" in module.check(HostArrays({"c": wrong}), None, {}, {})
    assert np.array_equal(module._CACHE[("dev", "c")].get(), answer[0])
