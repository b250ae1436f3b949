"""Per-instance compile timeout (issue 31, item 5): a hung or slow compiler call is killed after its limit and its
instances recorded as compile errors ("compile timeout"), never cached; the other instances go on."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from autotune.errors import UserError
from autotune.sweep.compile.nvrtc import (
    TIMEOUT_ERROR,
    CompileFailed,
    CompileTimeout,
    compile_batch,
    compile_timeout_s,
    with_time_limit,
)
from tests.test_nvcc_compile import FLOAT, request


def _slow() -> bytes:
    time.sleep(30)
    return b"never"


def _fails() -> None:
    raise CompileFailed("kernel.cu(3): error: identifier x is undefined\n")


def test_a_call_past_its_limit_is_killed_and_others_pass_through() -> None:
    t0 = time.monotonic()
    with pytest.raises(CompileTimeout, match="ran past 0.5 s and was killed") as err:
        with_time_limit(_slow, 0.5, "NVRTC compiling 1 instance(s) of k.cu")
    assert time.monotonic() - t0 < 5 and err.value.log.startswith(TIMEOUT_ERROR)
    assert with_time_limit(lambda: (b"cubin" * 1000, {"k": "_Z1kv"}, ""), 10, "x") == (
        b"cubin" * 1000,
        {"k": "_Z1kv"},
        "",
    )
    with pytest.raises(CompileFailed, match="identifier x is undefined") as err:
        with_time_limit(_fails, 10, "x")
    assert not isinstance(err.value, CompileTimeout) and "kernel.cu(3)" in err.value.log
    assert with_time_limit(lambda: 7, None, "x") == 7  # no limit: called here


def test_the_limit_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AUTOTUNE_COMPILE_TIMEOUT", raising=False)
    assert compile_timeout_s() == 600.0
    monkeypatch.setenv("AUTOTUNE_COMPILE_TIMEOUT", "45")
    assert compile_timeout_s() == 45.0
    assert compile_timeout_s("off") is None and compile_timeout_s("0") is None
    for bad in ("soon", "-1", "nan", "inf", "1e999"):  # "-1" and "nan" meant no limit before
        with pytest.raises(UserError, match=f"AUTOTUNE_COMPILE_TIMEOUT = '{bad}' is not a number"):
            compile_timeout_s(bad)


@pytest.mark.nvcc
def test_an_nvcc_compile_past_its_limit_is_recorded_and_not_cached(tmp_path: Path) -> None:
    slow = dataclasses.replace(request((FLOAT,)), timeout_s=0.05)
    (ck,) = compile_batch(slow, tmp_path)
    assert not ck.ok and ck.log.startswith(TIMEOUT_ERROR) and "ran past 0.05 s" in ck.log
    assert not list((tmp_path / "index").rglob("*.json"))  # not cached: the next sweep compiles it again
    (ck,) = compile_batch(dataclasses.replace(slow, timeout_s=600), tmp_path)
    assert ck.ok, ck.log


def test_screening_options_are_off_unless_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune.sweep.backends.local import GpuBackend
    from autotune.sweep.compile.nvrtc import DEFAULT_OPTIONS, screen_options

    monkeypatch.delenv("AUTOTUNE_COMPILE_SCREEN", raising=False)
    assert screen_options() == () and GpuBackend().options == DEFAULT_OPTIONS
    monkeypatch.setenv("AUTOTUNE_COMPILE_SCREEN", "1")
    assert GpuBackend().options == (*DEFAULT_OPTIONS, "--Ofast-compile=max")
    assert screen_options("-Xptxas -O1") == ("-Xptxas", "-O1") and screen_options("0") == ()


def test_a_shared_memory_failure_turns_the_precheck_on_for_its_kernel_file(tmp_path, monkeypatch) -> None:
    from concurrent.futures import Future

    from autotune.sweep.backends.local import GpuBackend
    from autotune.sweep.compile.nvrtc import CompiledKernel, CompileRequest, resource_failure

    log = "ptxas error   : Entry function '_Z3bigILi20000EEvPf' uses too much shared data (0x13880 bytes, 0xc000 max)"
    assert resource_failure(log) and not resource_failure("error: identifier x is undefined")
    backend = GpuBackend()
    req = CompileRequest(tmp_path / "k.cu", ("big<20000>",), 90)
    done: Future = Future()
    done.set_result([CompiledKernel("big<20000>", False, "k", None, None, None, log, 1.0)])
    backend._collect([(req, done)])
    assert backend.precheck_sources == {tmp_path / "k.cu"}
    monkeypatch.setenv("AUTOTUNE_COMPILE_PRECHECK", "0")
    off = GpuBackend()
    off._collect([(req, done)])
    assert off.precheck_sources == set()
