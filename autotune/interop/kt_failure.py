"""What `tune_kernel` does when its sweep stopped on a systematic failure (`autotune.sweep.compile.failstop`: the first
configurations all failed with one compile or launch error), whatever `quiet` says.

Kernel Tuner raises on a compile error that is not about resources (`core.compile_kernel`), so a script learns
why; here the sweep records each failure and stops the space once they repeat, and then:

* a compile error under NVRTC (no `compiler=` given) with nvcc there (`autotune.sweep.compile.nvcc.find_nvcc`: CUDA_PATH,
  CUDA_HOME, the PATH, /usr/local/cuda): the call is run again with `compiler="nvcc"`, after one line on stderr
  saying why. NVRTC rejects what the toolkit's headers need from nvcc (`#include <cub/cub.cuh>`: "A function
  explicitly marked as a __host__ function is not allowed in JIT mode"); the space and its instances are then
  those of `compiler="nvcc"` (another space name, so a database of the NVRTC attempt does not resume them);
* anything else: a `SystematicFailure` error with the error text, and what to do (without nvcc: how to ask for it).

`decide` is the whole decision, pure (testable without a GPU); `autotune.interop.tune_kernel` acts on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.errors import UserError

COMPILE_ERROR = "compile_error"


@dataclass(frozen=True)
class Stopped:
    """The sweep stopped the call's space: its first `count` configurations failed alike (`status`, `example`)."""

    kernel_name: str
    status: str  # compile_error or launch_error
    example: str  # the first such error, as recorded
    count: int


class SystematicFailure(UserError, RuntimeError):
    """Every configuration tried failed with one error (a RuntimeError, as Kernel Tuner's compile errors are)."""


@dataclass(frozen=True)
class Decision:
    retry_with_nvcc: bool
    line: str  # printed before the retry (stderr), or the error's message
    hint: str = ""

    def error(self) -> SystematicFailure:
        return SystematicFailure(self.line, hint=self.hint)


def decide(stop: Stopped, compiler: str | None, nvcc: str | None) -> Decision:
    """Retry with nvcc, or the error to raise (see the module docstring). `compiler`: what the call compiled with
    (None: NVRTC chosen by default; "nvrtc" asked for by name, so not replaced); `nvcc`: the nvcc found, or None."""
    what = "compile" if stop.status == COMPILE_ERROR else "launch"
    by = "nvcc" if compiler == "nvcc" else "NVRTC"
    said = " ".join(stop.example.split())[:300] or "(no message)"
    head = (
        f"tune_kernel: {stop.kernel_name}: the first {stop.count} configurations all failed with the same {what} "
        f"error{f' under {by}' if what == 'compile' else ''}: {said}"
    )
    if what == "compile" and compiler is None and nvcc is not None:
        return Decision(True, f"{head}; compiling with nvcc ({nvcc}) instead, as compiler='nvcc' does")
    if what == "compile" and compiler != "nvcc":
        how = (
            "nvcc was not found (CUDA_PATH, CUDA_HOME, PATH, /usr/local/cuda): install the CUDA toolkit and the "
            "call retries with it by itself, or pass compiler='nvcc'"
            if nvcc is None
            else "pass compiler='nvcc' (compiler='nvrtc' asked for NVRTC alone)"
        )
        return Decision(
            False,
            f"{head}; the rest were not tried",
            f"if the kernel needs nvcc (CUB, Thrust, host headers NVRTC lacks), {how}; else fix the kernel",
        )
    if what == "compile":
        return Decision(False, f"{head}; the rest were not tried", "fix the kernel: nvcc's message is above")
    return Decision(
        False,
        f"{head}; the rest were not tried",
        "fix the kernel or its launch (grid_div_*, block_size_names, problem_size, the arguments' sizes)",
    )
