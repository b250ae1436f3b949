"""A space's `kernel: semantics: kerneltuner`: what Kernel Tuner does implicitly, done here too.

Kernel Tuner 1.x (github.com/KernelTuner/kernel_tuner):
- `kernel_tuner/util.py`, `config_valid` / `check_thread_block_dimensions`: a configuration whose thread block
  (the product of the block size parameters) exceeds the device's maximum threads per block is never run.
  Here: a hard constraint `BLOCK_X * BLOCK_Y * BLOCK_Z <= max_threads_per_block` over the space's `kernel: block:`
  expressions (`implicit_constraint`), so the space is as large as Kernel Tuner's.
- `kernel_tuner/util.py`, `prepare_kernel_string`: a define whose name contains `loop_unroll_factor` is, for CUDA,
  not a `#define` (a `#pragma unroll` argument is not macro-expanded; it must be a constant expression) but a line
  `constexpr int NAME = VALUE;` before the source; VALUE 0 removes every `#pragma unroll NAME` line instead (the
  compiler then decides). Here: `split_unroll` takes them out of the -D options, `unrolled_source` edits the
  program text the compiler sees (`autotune.sweep.compile.nvrtc`); the file on disk is unchanged.
"""

from __future__ import annotations

import re

SEMANTICS = ("native", "kerneltuner")
UNROLL = "loop_unroll_factor"  # Kernel Tuner: `if "loop_unroll_factor" in k` (anywhere in the name)
CONSTRAINT_NAME = "kerneltuner_block_threads"


def split_unroll(
    defines: tuple[tuple[str, str], ...],
) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """(the defines passed as -D, the loop-unroll factors) of one instance under Kernel Tuner's semantics."""
    plain = tuple((k, v) for k, v in defines if UNROLL not in k)
    unroll = tuple((k, v) for k, v in defines if UNROLL in k)
    return plain, unroll


def unrolled_source(text: str, unroll: tuple[tuple[str, str], ...]) -> str:
    """The program text with Kernel Tuner's loop-unroll factors applied (see the module docstring). Lines keep
    their numbers: a removed pragma leaves its line empty, and `#line 1` follows the inserted declarations."""
    prefix = ""
    for name, value in unroll:
        if str(value) == "0":
            pattern = re.compile(
                r"^[ \t]*#[ \t]*pragma[ \t]+unroll[ \t]+" + re.escape(name) + r"\b[^\n]*$", re.MULTILINE
            )
            text = pattern.sub("", text)
        else:
            prefix += f"constexpr int {name} = {value};\n"
    return f"{prefix}#line 1\n{text}" if prefix else text


def implicit_constraint(block: tuple[str, ...]) -> str:
    """The expression of Kernel Tuner's implicit restriction over the `kernel: block:` expressions."""
    return " * ".join(f"({b})" for b in block) + " <= max_threads_per_block"
