"""What tune_kernel says and does when its sweep stopped on a systematic failure (issue 53): a kernel NVRTC cannot
compile (`#include <cub/cub.cuh>`) stopped after 8 identical failures without a word at quiet=True. Now the stop is
read back from the database (`kt_sweep.stopped`), and `kt_sweep.decide` retries with nvcc where it is there
(a line on stderr at any `quiet`) or raises with the reason and how to ask for nvcc. The decision and the read-back
run here on real databases; the whole path on a GPU: tests/gpu/test_tune_kernel_gpu.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autotune.interop import kt_sweep
from autotune.interop.kerneltuner import KTCache, KTRecord
from autotune.interop.kt_sweep import Stopped, SystematicFailure, decide
from autotune.interop.kt_store import store_cache
from autotune.kernel_tuner import tune_kernel
from autotune.space.spec import load_space
from autotune.store.store import Store

JIT = "cub/util_device.cuh(120): error: A function explicitly marked as a __host__ function is not allowed in JIT mode"
NVCC = "/usr/local/cuda/bin/nvcc"


@pytest.mark.parametrize(
    "status, compiler, nvcc, retry, says, hint",
    [
        ("compile_error", None, NVCC, True, "compiling with nvcc (/usr/local/cuda/bin/nvcc) instead", ""),
        ("compile_error", None, None, False, "failed with the same compile error under NVRTC", "nvcc was not found"),
        ("compile_error", "nvrtc", NVCC, False, "under NVRTC", "pass compiler='nvcc'"),
        ("compile_error", "nvcc", NVCC, False, "under nvcc", "fix the kernel"),
        ("launch_error", None, NVCC, False, "the same launch error", "grid_div_"),
    ],
)
def test_the_decision(status: str, compiler: str | None, nvcc: str | None, retry: bool, says: str, hint: str) -> None:
    d = decide(Stopped("block_sum", status, JIT, 8), compiler, nvcc)
    assert d.retry_with_nvcc is retry
    assert says in d.line and "block_sum" in d.line and "JIT mode" in d.line and "first 8 configurations" in d.line
    if not retry:
        err = d.error()
        assert isinstance(err, RuntimeError) and hint in str(err.hint) and "\n" not in err.message


def _store_failures(tmp_path: Path, statuses: list[str]) -> tuple[Store, str]:
    """A real database holding one configuration per status, in order, recorded as the sweep records them."""
    (tmp_path / "s.yaml").write_text("name: k\nparameters:\n  b: [" + ", ".join(map(str, range(len(statuses)))) + "]\n")
    records = tuple(
        KTRecord({"b": i}, s, 1.0 if s == "ok" else None, (1.0,) if s == "ok" else ()) for i, s in enumerate(statuses)
    )
    cache = KTCache("GPU", "k", 100, ("b",), {}, "time", records)
    store = Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}")
    got = store_cache(cache, tmp_path / "c.json", store, load_space(tmp_path / "s.yaml"))
    return store, got.point


def test_the_stop_is_read_back_from_the_database(tmp_path: Path) -> None:
    store, point = _store_failures(tmp_path, ["compile_error"] * 8)
    stop = kt_sweep.stopped(store, "k", point, "kerneltuner:GPU", 8, "k")
    assert stop is not None and stop.status == "compile_error" and stop.count == 8
    assert kt_sweep.stopped(store, "k", point, "kerneltuner:GPU", 0, "k") is None  # stop_after_failures: 0


def test_a_success_first_is_no_systematic_failure(tmp_path: Path) -> None:
    store, point = _store_failures(tmp_path, ["ok"] + ["compile_error"] * 8)
    assert kt_sweep.stopped(store, "k", point, "kerneltuner:GPU", 8, "k") is None


VECTOR_ADD = "__global__ void vector_add(float *c, float *a, float *b, int n) {}\n"


def _call(tmp_path: Path, **kw: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    a = np.ones(100, np.float32)
    return tune_kernel(
        "vector_add",
        VECTOR_ADD,
        100,
        [np.zeros_like(a), a, a, np.int32(100)],
        {"block_size_x": [32, 64]},
        quiet=True,
        space_dir=tmp_path / "space",
        **kw,
    )


class _Attempts:
    """run_attempt as the GPU gives it: NVRTC's attempt stops on a systematic compile error, nvcc's succeeds."""

    def __init__(self, nvcc_fails: bool = False) -> None:
        self.calls: list[tuple[str | None, Path]] = []
        self.nvcc_fails = nvcc_fails

    def __call__(self, problem: Any, folder: Path, start: float, call: Any, cleanup: Any) -> Any:
        self.calls.append((problem.compiler, folder))
        if problem.compiler is None or self.nvcc_fails:
            raise kt_sweep.StoppedRun(Stopped(problem.kernel_name, "compile_error", JIT, 8))
        return [{"block_size_x": 32, "time": 1.0}], {"autotune": {"database": "db"}}


def test_nvrtcs_systematic_failure_is_retried_with_nvcc_and_said_at_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    attempts = _Attempts()
    monkeypatch.setattr(kt_sweep, "run_attempt", attempts)
    monkeypatch.setattr("autotune.sweep.compile.nvcc.find_nvcc", lambda: NVCC)
    results, env = _call(tmp_path)
    space = (tmp_path / "space").resolve()
    assert attempts.calls == [(None, space), ("nvcc", space / "nvcc")]
    assert results[0]["time"] == 1.0 and env["autotune"]["space_dir"] == str(space / "nvcc")
    err = capsys.readouterr().err
    assert "JIT mode" in err and "compiling with nvcc" in err


def test_without_nvcc_the_failure_is_raised_with_how_to_ask_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kt_sweep, "run_attempt", _Attempts())
    monkeypatch.setattr("autotune.sweep.compile.nvcc.find_nvcc", lambda: None)
    with pytest.raises(SystematicFailure, match="JIT mode") as err:
        _call(tmp_path)
    assert "compiler='nvcc'" in str(err.value.hint) and "nvcc was not found" in str(err.value.hint)


def test_when_nvcc_fails_too_its_failure_is_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kt_sweep, "run_attempt", _Attempts(nvcc_fails=True))
    monkeypatch.setattr("autotune.sweep.compile.nvcc.find_nvcc", lambda: NVCC)
    with pytest.raises(SystematicFailure, match="under nvcc"):
        _call(tmp_path)


def test_a_retry_with_nvcc_is_another_space(tmp_path: Path) -> None:
    """The space of compiler='nvcc' has its own name: a database the NVRTC attempt recorded into (database=) does not
    resume its failed instances as done."""
    from autotune.interop.kt_space import KTProblem, write_space_folder

    a = np.ones(100, np.float32)
    base = dict(
        kernel_name="vector_add",
        source_text=VECTOR_ADD,
        source_file=None,
        problem_size=(100,),
        arguments=[np.zeros_like(a), a, a, np.int32(100)],
        tune_params={"block_size_x": [32]},
        grid_div=(None, None, None),
        block_size_names=("block_size_x", "block_size_y", "block_size_z"),
    )
    nvrtc, _ = write_space_folder(KTProblem(**base), tmp_path / "a")  # type: ignore[arg-type]
    nvcc, _ = write_space_folder(KTProblem(**base, compiler="nvcc"), tmp_path / "b")  # type: ignore[arg-type]
    assert load_space(nvrtc).name == "vector_add" and load_space(nvcc).name == "vector_add_nvcc"
