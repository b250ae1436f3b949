"""Calls for tests/test_compile_pool.py, importable by the pool's spawned processes."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from autotune.sweep.compile.nvrtc import CompileFailed


def pid_after(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def sleep_then(seconds: float, value: Any) -> Any:
    time.sleep(seconds)
    return value


def env_of(name: str) -> str | None:
    return os.environ.get(name)


def fail(log: str) -> None:
    raise CompileFailed(log)


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def slow_start_if(marker: str, seconds: float) -> None:
    """A pool initializer: a process started while `marker` exists takes `seconds` to become ready."""
    if os.path.exists(marker):
        time.sleep(seconds)


def die_at_start_if(marker: str) -> None:
    """A pool initializer: a process started while `marker` exists dies before it is ready."""
    if os.path.exists(marker):
        os.kill(os.getpid(), signal.SIGKILL)


def later_then(counter: str, times: int, value: Any) -> Any:
    """A call that answers `twins.Later` (itself, again in 0.2 s) its first `times` calls, then (value, calls)."""
    from pathlib import Path

    from autotune.sweep.compile.twins import Later

    path = Path(counter)
    calls = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(calls))
    if calls <= times:
        return Later(later_then, (counter, times, value), 0.2)
    return value, calls


def install_standin_compiler(seconds: float) -> None:
    """A pool initializer: this process's NVRTC is a stand-in whose every build takes `seconds` (tests of the
    compile flow without NVRTC: tests/test_compile_twins.py)."""
    from autotune.sweep.compile import nvrtc as comp

    os.environ["AUTOTUNE_COMPILE_SUPERVISED"] = "1"

    def build(text: str, filename: str, names: tuple, options: tuple, kind: str) -> tuple:
        time.sleep(seconds)
        return b"cubin:" + repr(sorted(options)).encode(), {n: f"_lowered_{n}" for n in names}, ""

    comp.nvrtc_compile = build  # type: ignore[assignment]
    comp.nvrtc_version = lambda: (13, 0)  # type: ignore[assignment]
    comp.nvrtc_archs = lambda: (90,)  # type: ignore[assignment]
    comp.cuda_include_dir = lambda: ""  # type: ignore[assignment]
