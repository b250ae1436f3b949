"""Kernel Tuner's `run_kernel` for `lang="cupy"` without importing Kernel Tuner (`autotune.kernel_tuner.run_kernel`).

A Kernel Tuner script often computes its reference with `run_kernel` (a naive kernel, run once) before tuning; with
the one-import switch that call imported all of Kernel Tuner (on the H200 host with PyTorch installed: the 2D
convolution's script spent ~3.5 s more before its `tune_kernel` call than under Kernel Tuner, which had paid the
import already). Here the same steps as Kernel Tuner 1.5's CuPy backend (`kernel_tuner/interface.py` run_kernel,
`core.py`, `util.py`, `backends/cupy.py`), in this process:

* the source: a code string, or a file (`Path`, or a string that looks like a file name: Kernel Tuner's test);
* the instance: block size from `block_size_names` (defaults 256, 1, 1), the problem size (ints or expressions of
  the parameters), the grid `ceil(problem / product of the divisors)` (default divisor: the block size name), then
  Kernel Tuner's preamble: `#define grid_size_x ...`, the block sizes, each parameter, `kernel_tuner 1` (or the
  given `defines`), `#line 1`;
* compiled by `cupy.RawModule(code, options=("--std=c++11", *compiler_options), name_expressions=[name])`, the
  constants copied into their `__constant__` symbols, launched once with the dynamic shared memory of `smem_args`;
* the result: every argument, arrays copied back from the GPU (new arrays), scalars as given.

`supported` says whether a call is of that kind; every other call (another language, a kernel generator, texture
memory, Tunable or PyTorch arguments, grid divisor functions, `log`) is Kernel Tuner's own, imported then.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_BLOCK_SIZE_NAMES = ("block_size_x", "block_size_y", "block_size_z")
SHARED_MEMORY_ERRORS = (
    "uses too much shared data",
    "local memory limit exceeded",
    r"local memory \(\d+\) exceeds limit \(\d+\)",
)


def supported(call: Mapping[str, Any]) -> bool:
    """Whether this `run_kernel` call (its arguments by Kernel Tuner 1.5's names) is one `run` makes exactly as
    Kernel Tuner's CuPy backend does."""

    def scalar_or_expr(x: Any) -> bool:
        return isinstance(x, (str, int, np.integer)) and not isinstance(x, bool)

    def divisor(d: Any) -> bool:
        return d is None or scalar_or_expr(d) or (isinstance(d, (list, tuple)) and all(scalar_or_expr(x) for x in d))

    sizes = call["problem_size"] if isinstance(call["problem_size"], (list, tuple)) else [call["problem_size"]]
    source, arguments, lang = call["kernel_source"], call["arguments"], call["lang"]
    sources = source if isinstance(source, (list, tuple)) else [source]
    smem, cmem, options = call["smem_args"], call["cmem_args"], call["compiler_options"]
    names = call["block_size_names"]
    return (
        isinstance(lang, str)
        and lang.upper() == "CUPY"
        and len(sources) == 1
        and isinstance(sources[0], (str, Path))
        and 1 <= len(sizes) <= 3
        and all(scalar_or_expr(s) for s in sizes)
        and isinstance(arguments, (list, tuple))
        and all(isinstance(a, (np.ndarray, np.generic)) for a in arguments)
        and isinstance(call["params"], Mapping)
        and all(divisor(d) for d in grid_divisors(call))
        and (smem is None or (isinstance(smem, Mapping) and scalar_or_expr(smem.get("size", 0))))
        and (cmem is None or all(isinstance(v, (np.ndarray, np.generic)) for v in dict(cmem).values()))
        and not call["texmem_args"]
        and (options is None or all(isinstance(o, str) for o in options))
        and (call["defines"] is None or isinstance(call["defines"], Mapping))
        and (names is None or all(isinstance(n, str) for n in names))
        and not call["log"]
    )


def grid_divisors(call: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    return call["grid_div_x"], call["grid_div_y"], call["grid_div_z"]


def replace_param_occurrences(string: str, params: Mapping[str, Any]) -> str:
    """Kernel Tuner's `util.replace_param_occurrences`: every token that names a parameter becomes its value."""
    return "".join(str(params[p]) if p in params else p for p in re.split("([a-zA-Z0-9_]+)", string))


def looks_like_a_filename(source: Any) -> bool:
    """Kernel Tuner's `util.looks_like_a_filename`."""
    if not isinstance(source, str):
        return False
    result = len(source) <= 250 and not any(c in source for c in "();{}\\")
    result = result and not any(s in source for s in ("__global__ ", "__kernel ", "void ", "float "))
    return result and any(s in source for s in (".c", ".opencl", ".F", ".jl"))


def kernel_string(kernel_source: Any) -> str:
    """Kernel Tuner's `util.get_kernel_string` for a string or a Path."""
    source = kernel_source[0] if isinstance(kernel_source, (list, tuple)) else kernel_source
    if isinstance(source, Path) or looks_like_a_filename(source):
        return Path(source).read_text()
    return str(source)


def _eval(expr: str, params: Mapping[str, Any]) -> int:
    return int(eval(replace_param_occurrences(expr, params)))  # noqa: S307 - Kernel Tuner's own rule, the user's text


def block_and_grid(
    problem_size: Any, grid_div: Sequence[Any], params: Mapping[str, Any], block_size_names: Sequence[str]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Kernel Tuner's `util.setup_block_and_grid`: (threads, grid)."""
    threads = tuple(
        int(params.get(name, default)) for name, default in zip(block_size_names, (256, 1, 1), strict=False)
    )
    sizes = [problem_size] if isinstance(problem_size, (str, int, np.integer)) else list(problem_size)
    current = [1, 1, 1]
    for i, s in enumerate(sizes):
        current[i] = _eval(s, params) if isinstance(s, str) else int(s)

    def divisor(d: Any, default: str | None) -> int:
        if d is None:
            return int(params.get(default, 1)) if default is not None else 1
        if isinstance(d, (int, np.integer)):
            return int(d)
        if isinstance(d, str):
            return _eval(d, params)
        return math.prod(divisor(x, None) for x in d)

    divisors = [divisor(d, block_size_names[i]) for i, d in enumerate(grid_div)]
    return threads, tuple(int(np.ceil(float(current[i]) / float(d))) for i, d in enumerate(divisors))


def prepare_kernel_string(
    kernel_name: str,
    text: str,
    params: Mapping[str, Any],
    grid: Sequence[int],
    threads: Sequence[int],
    block_size_names: Sequence[str],
    defines: Mapping[str, Any] | None,
) -> tuple[str, str]:
    """Kernel Tuner's `util.prepare_kernel_string` for lang CUPY: (the instance's kernel name, its source)."""
    if defines is None:
        defines = {
            **{name: g for name, g in zip(("grid_size_x", "grid_size_y", "grid_size_z"), grid, strict=False)},
            **{block_size_names[i]: t for i, t in enumerate(threads)},
            **params,
            "kernel_tuner": 1,
        }
    prefix = ""
    for k, v in defines.items():
        if callable(v):
            v = v(params)
        elif isinstance(v, str):
            v = replace_param_occurrences(v, params)
        if not k.isidentifier():
            raise ValueError(f"name is not a valid identifier: {k}")
        prefix += f"#define {k} {str(v).replace(chr(10), chr(92) + chr(10))}\n"
    if prefix:
        prefix += "#line 1\n"
    return replace_param_occurrences(kernel_name, params), prefix + text


def run(call: Mapping[str, Any]) -> list[Any]:
    """The kernel of a `supported` `run_kernel` call (its arguments by Kernel Tuner 1.5's names) run once on its
    `device` (see the module docstring)."""
    import cupy as cp

    params, arguments, device = call["params"], call["arguments"], call["device"]
    smem_args, cmem_args = call["smem_args"], call["cmem_args"]
    names = list(call["block_size_names"] or DEFAULT_BLOCK_SIZE_NAMES)
    names += DEFAULT_BLOCK_SIZE_NAMES[len(names) :]
    threads, grid = block_and_grid(call["problem_size"], grid_divisors(call), params, names)
    source = kernel_string(call["kernel_source"])
    name, code = prepare_kernel_string(call["kernel_name"], source, params, grid, threads, names, call["defines"])
    with cp.cuda.Device(device):
        max_threads = cp.cuda.Device(device).attributes["MaxThreadsPerBlock"]
        if math.prod(threads) > max_threads:
            raise RuntimeError("cannot create kernel instance, too many threads per block")
        options = list(call["compiler_options"] or [])
        if not any("-std=" in o for o in options):
            options = ["--std=c++11", *options]
        try:
            module = cp.RawModule(code=code, options=tuple(options), name_expressions=[name])
            func = module.get_function(name)
        except Exception as exc:  # Kernel Tuner's messages (core.compile_kernel, interface.run_kernel)
            log = str(getattr(exc, "stderr", None) or exc)
            if any(re.search(m, log) for m in SHARED_MEMORY_ERRORS):
                raise RuntimeError("cannot compile kernel, too much shared memory used") from exc
            print("compile_kernel failed due to error: " + log)
            print("Error while compiling:", name)
            raise
        shared = 0
        if smem_args is not None and "size" in smem_args:
            size = smem_args["size"]
            shared = _eval(size, params) if isinstance(size, str) else int(size)
        for symbol, value in dict(cmem_args or {}).items():
            host = np.asarray(value)
            cp.ndarray(host.shape, host.dtype, module.get_global(symbol))[...] = cp.asarray(host)
        gpu_args = [cp.array(a) if isinstance(a, np.ndarray) else a for a in arguments]
        try:
            func(tuple(grid), threads, tuple(gpu_args), shared_mem=shared)
            cp.cuda.Device(device).synchronize()
        except Exception as exc:
            if "too many resources requested for launch" in str(exc) or "OUT_OF_RESOURCES" in str(exc):
                raise RuntimeError("runtime error occured, too many resources requested") from exc
            raise
        out = [a if not isinstance(a, np.ndarray) else cp.asnumpy(g) for a, g in zip(arguments, gpu_args, strict=True)]
        del gpu_args, module, func
        cp.get_default_memory_pool().free_all_blocks()  # the GPU memory is the tuning's (the GPU worker's) again
        return out


__all__ = ["block_and_grid", "kernel_string", "prepare_kernel_string", "run", "supported"]
