"""A space's compiler choice (`kernel: compiler:`) and extra flags (`kernel: compiler_options:`), checked on load.

`nvrtc` (the default) compiles in-process through CuPy's NVRTC bindings; `nvcc` runs the CUDA toolkit's
`nvcc -cubin`, for C++ NVRTC rejects (CUB's device-wide headers, host-only code behind `#include <cub/cub.cuh>`).
Either way the sweep loads one cubin (or PTX) per compile and looks kernels up by their lowered name, so flags
that change what is produced, or where, are refused here rather than failing every instance later.
"""

from __future__ import annotations

from typing import Any

COMPILERS = ("nvrtc", "nvcc")

# flag (or its `--long` / `=value` forms) -> why the sweep cannot use it
_REFUSED = {
    flag: why
    for why, flags in {
        "the sweep names the output file itself": "-o --output-file -odir --output-directory",
        "the sweep needs a cubin, not an object file": "-c --compile",
        "the sweep chooses the binary (a cubin, or PTX where NVRTC does not know the GPU)": "-ptx --ptx",
        "the sweep already asks for a cubin": "-cubin --cubin",
        "the sweep loads a cubin, not a fat binary": "-fatbin --fatbin",
        "preprocessing only yields no binary": "-E --preprocess",
        "dependency output yields no binary": "-M -MM",
        "the sweep loads one cubin, not a library": "-lib --lib",
        "the sweep loads one cubin, not a linked program": "-link --link -dlink --device-link",
        "relocatable device code needs a link step the sweep does not run": (
            "-dc --device-c -rdc --relocatable-device-code"
        ),
        "link-time optimisation needs a link step the sweep does not run": "-dlto --dlink-time-opt",
        "the sweep targets the GPU it runs on (sm_XX of the device)": (
            "-arch --gpu-architecture -code --gpu-code -gencode --generate-code"
        ),
        "the sweep runs the kernels itself": "--run -run",
    }.items()
    for flag in flags.split()
}


def refused_option(option: str) -> str | None:
    """Why `option` (one item of `compiler_options:`) would break loading the compiled kernels, or None."""
    flag = option.split("=", 1)[0].strip()
    if flag in _REFUSED:
        return _REFUSED[flag]
    if flag.startswith("-arch") or flag.startswith("-gencode"):  # -arch=sm_90, -archsm_90
        return _REFUSED["-arch"]
    return None


def check_compiler(value: Any) -> str | None:
    """None when `value` names a compiler, else the error message."""
    if value in COMPILERS:
        return None
    return f"kernel.compiler: {value!r} is not a compiler; choose {' or '.join(COMPILERS)}"


def check_options(value: Any) -> tuple[tuple[str, ...], str | None]:
    """(the options, None) or ((), the error message) for a `compiler_options:` value."""
    if not isinstance(value, list) or not all(isinstance(x, str) and x.strip() for x in value):
        return (), 'kernel.compiler_options must be a list of flags (strings), e.g. ["-O3", "--use_fast_math"]'
    for opt in value:
        why = refused_option(opt)
        if why is not None:
            return (), f"kernel.compiler_options: {opt!r} cannot be used: {why}"
    return tuple(x.strip() for x in value), None
