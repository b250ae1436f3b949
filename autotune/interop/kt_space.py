"""A Kernel Tuner `tune_kernel` call -> a space folder: the kernel, `space.yaml`, `args/*.npy`, a check module.

`KTProblem` holds what `autotune.interop.tune_kernel` accepted (already checked against what is refused there);
`write_space_folder` writes:

* `kernel.cu` (a source string; a source file is named where it is, its folder allowed: `allowed_paths.allow`);
* `args/NAME.npy`: every NumPy array argument (`init: {file: args/NAME.npy}`), the `cmem_args` arrays as
  `args/cmem_SYMBOL.npy`; plain `.npy` files (numpy.save: no zip, no CRC; 400 MB took about 3x
  longer through savez on a 2-core host), which the GPU worker maps rather than reads (`FileInit.load`); `expected.npz`: the
  `answer` arrays that are not None;
* `kt_check.py`: the check function (below); `verify.pkl`: a `verify=` function (cloudpickle);
* `space.yaml`: one problem of kind `kt_NAME` with sizes `size_x[, size_y[, size_z]]` (Kernel Tuner's
  problem_size; 1 for a dimension given as an expression of the parameters); the kernel by `name:`, every
  parameter, `grid_size_x/y/z`, the block sizes and `kernel_tuner` as `#define`s (Kernel Tuner's defaults, or the
  `defines=` given); block from `block_size_names` (Kernel Tuner's defaults 256, 1, 1 where not a parameter);
  grid = ceil(problem size / product of the grid divisors); the restrictions and Kernel Tuner's implicit one
  (block threads <= the device's maximum) as hard constraints.

Verification follows Kernel Tuner's: `answer` -> numpy.allclose(expected, output, atol=atol) per array that is not
None (rtol 1e-5, NaNs equal where the answer has NaNs); `verify=` -> verify(answer, outputs, atol=atol) on the host;
neither -> no check. A generated `check:` (the space format's check function) does exactly that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import yaml

from autotune.errors import UserError
from autotune.expr import ExprError, parse
from autotune.problems import allowed_paths
from autotune.problems.declared import DTYPES
from autotune.interop.kt_check_module import CHECK_MODULE

AXES = ("x", "y", "z")
KT_DEFAULT_BLOCK = (256, 1, 1)  # kernel_tuner.util.get_thread_block_dimensions
SIZE_NAMES = ("size_x", "size_y", "size_z")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class KTProblem:
    """A checked tune_kernel call (see the module docstring)."""

    kernel_name: str
    source_text: str | None  # the kernel as a string, or None when `source_file` names it
    source_file: Path | None
    problem_size: tuple[int | str, ...]  # 1 to 3 entries
    arguments: list[Any]
    tune_params: dict[str, list[Any]]
    grid_div: tuple[list[int | str] | None, ...]  # per axis; None: Kernel Tuner's default (the block size name)
    block_size_names: tuple[str, str, str]
    restrictions: list[str] = field(default_factory=list)
    answer: list[Any] | None = None
    atol: float = 1e-6
    verify: Callable[..., Any] | None = None
    smem_size: int | str | None = None
    cmem_args: dict[str, Any] = field(default_factory=dict)
    compiler: str | None = None
    compiler_options: list[str] = field(default_factory=list)
    defines: dict[str, Any] | None = None  # None: Kernel Tuner's defaults


def _expr(text: str, known: set[str], what: str) -> str:
    """A Kernel Tuner string expression (Python over the tunable parameters) checked for the space format."""
    try:
        e = parse(text)
    except ExprError as exc:
        raise UserError(
            f"tune_kernel: {what} {text!r}: {exc.message}",
            hint=exc.hint or "write it with + - * / // % **, comparisons, and/or/not, min/max/ceil/floor",
        ) from None
    unknown = sorted(e.names - known)
    if unknown:
        raise UserError(
            f"tune_kernel: {what} {text!r} reads {unknown[0]!r}, which is not a tunable parameter",
            hint=f"parameters: {', '.join(sorted(known))}",
        )
    return e.text


def argument_names(kernel_name: str, source: str, count: int) -> list[str]:
    """The kernel's parameter names read from its signature where that is unambiguous, else arg0, arg1, ..."""
    m = re.search(r"\b" + re.escape(kernel_name) + r"\s*\(([^)]*)\)", source)
    if m:
        names = [re.findall(r"[A-Za-z_][A-Za-z0-9_]*", p.split("=")[0].strip())[-1:] for p in m.group(1).split(",")]
        flat = [n[0] for n in names if n]
        if (
            len(flat) == count == len(names)
            and len(set(flat)) == count
            and all(_IDENT.match(n) for n in flat)
            and not set(flat) & set(SIZE_NAMES)
        ):
            return flat
    return [f"arg{i}" for i in range(count)]


def _dtype(value: Any, what: str) -> str:
    name = np.dtype(value.dtype).name
    if name not in DTYPES:
        raise UserError(f"tune_kernel: {what} has dtype {name}", hint=f"use one of {', '.join(DTYPES)}")
    return name


def _grid(p: KTProblem, params: set[str], block_names: list[str]) -> dict[str, str]:
    """grid_size_x/y/z as expressions of the parameters (kernel_tuner.util.get_grid_dimensions)."""
    out = {}
    for i, axis in enumerate(AXES):
        size = p.problem_size[i] if i < len(p.problem_size) else 1
        size_text = f"floor({_expr(size, params, 'problem_size entry')})" if isinstance(size, str) else str(size)
        div = p.grid_div[i]
        if div is None:
            parts = [block_names[i]] if block_names[i] in params else []
        else:
            parts = [
                str(int(d)) if not isinstance(d, str) else f"floor({_expr(d, params, f'grid_div_{axis} entry')})"
                for d in div
            ]
        out[f"grid_size_{axis}"] = f"ceil(({size_text}) / ({' * '.join(parts) or '1'}))"
    return out


def write_space_folder(p: KTProblem, folder: Path) -> tuple[Path, dict[str, Any]]:
    """Write the folder; returns the space file and the test point's sizes."""
    folder.mkdir(parents=True, exist_ok=True)
    source, text = _write_source(p, folder)
    names = argument_names(p.kernel_name, text, len(p.arguments))
    params = set(p.tune_params)
    arrays, args, outputs = _arguments(p, names)
    _write_data(p, folder, names, arrays, args, outputs)
    name = re.sub(r"\W", "_", p.kernel_name)
    name = name if re.match(r"^[A-Za-z]", name) else f"k_{name}"
    if p.compiler == "nvcc":  # another space than NVRTC's: a database of one does not resume the other's instances
        name = f"{name}_nvcc"
    sizes = {SIZE_NAMES[i]: (s if isinstance(s, int) else 1) for i, s in enumerate(p.problem_size)}
    problem = _problem_section(p, name, list(sizes), args, arrays)
    block_names = list(p.block_size_names)
    derived, defines = _derived_and_defines(p, params, block_names)
    kernel: dict[str, Any] = {
        "source": source,
        "name": p.kernel_name,
        "defines": defines,
        "block": block_names,
        "grid": [f"grid_size_{a}" for a in AXES],
        "shared_bytes": (_expr(str(p.smem_size), params, "smem_args['size']") if p.smem_size is not None else 0),
    }
    if p.compiler:
        kernel["compiler"] = p.compiler
    if p.compiler_options:
        kernel["compiler_options"] = list(p.compiler_options)
    kernel["semantics"] = "kerneltuner"
    hard = [
        {
            "name": f"kt_restriction_{i}",
            "expr": _expr(r, params | set(derived), "restriction"),
            "reason": "a restriction given to tune_kernel",
        }
        for i, r in enumerate(p.restrictions)
    ]
    hard.append(
        {
            "name": "kt_max_threads",
            "expr": " * ".join(block_names) + " <= max_threads_per_block",
            "reason": "Kernel Tuner's implicit restriction: a block has at most the device's threads",
        }
    )
    doc = {
        "name": name,
        "description": f"generated by autotune.kernel_tuner.tune_kernel for {p.kernel_name}",
        "problem": problem,
        "kernel": kernel,
        "parameters": {k: list(v) for k, v in p.tune_params.items()},
        "derived": derived,
        "hard": hard,
    }
    space_file = folder / "space.yaml"
    space_file.write_text(yaml.safe_dump(doc, sort_keys=False, width=120, default_flow_style=None))
    return space_file, sizes


def _write_source(p: KTProblem, folder: Path) -> tuple[str, str]:
    """The kernel's source as the space names it, and its text: a source file stays where it is (its folder
    allowed), a source string is written to `kernel.cu`."""
    if p.source_file is not None:
        allowed_paths.allow([p.source_file.resolve().parent])  # its #includes stay where they are
        return str(p.source_file.resolve()), p.source_file.read_text()
    text = p.source_text or ""
    (folder / "kernel.cu").write_text(text)
    return "kernel.cu", text


def _arguments(p: KTProblem, names: list[str]) -> tuple[dict[str, np.ndarray], list[dict[str, Any]], list[str]]:
    """The arrays by argument name, the space's argument records and the names of the outputs read back."""
    arrays: dict[str, np.ndarray] = {}
    args: list[dict[str, Any]] = []
    answer = p.answer
    if answer is not None and len(answer) != len(p.arguments):
        raise UserError(
            f"tune_kernel: answer has {len(answer)} entries, arguments {len(p.arguments)}",
            hint="give one entry per argument, None where it is not checked",
        )
    # without an answer every array is an output the kernel may write; with one, only those it checks (Kernel Tuner's
    # `should_sync`: also for verify=, which then sees None for the others; a reduction's 3.2 GB input is never
    # read back)
    for i, (name, a) in enumerate(zip(names, p.arguments, strict=True)):
        if isinstance(a, np.ndarray):
            if a.ndim == 0 or a.size == 0:
                raise UserError(
                    f"tune_kernel: argument {i} ({name}) is an empty or 0-d array",
                    hint="pass a NumPy scalar (numpy.int32(n)) or a non-empty array",
                )
            dtype = _dtype(a, f"argument {i} ({name})")
            arrays[name] = np.ascontiguousarray(a)
            out = answer is None or answer[i] is not None
            args.append(
                {
                    "name": name,
                    "buffer": dtype,
                    "shape": list(a.shape),
                    "init": {"file": f"args/{name}.npy"},
                    **({"output": True} if out else {}),
                }
            )
        elif isinstance(a, np.generic):
            dtype = _dtype(a, f"argument {i} ({name})")
            args.append({"name": name, "scalar": dtype, "value": a.item()})
            if answer is not None and answer[i] is not None:
                raise UserError(
                    f"tune_kernel: answer[{i}] checks the scalar argument {name}",
                    hint="a scalar is never an output: put None there",
                )
        else:
            raise UserError(
                f"tune_kernel: argument {i} ({name}) is a {type(a).__name__}",
                hint="pass NumPy arrays and NumPy scalars (numpy.int32(n), numpy.float32(x)), as Kernel Tuner requires",
            )
    outputs = [a["name"] for a in args if a.get("output")]
    if not outputs:
        raise UserError(
            "tune_kernel: no argument is checked: answer has only None entries (or no arrays are given)",
            hint="give the expected array of an output in answer, or answer=None",
        )
    return arrays, args, outputs


def _write_data(
    p: KTProblem,
    folder: Path,
    names: list[str],
    arrays: dict[str, np.ndarray],
    args: list[dict[str, Any]],
    outputs: list[str],
) -> None:
    """Write `args/*.npy` (the `cmem_args` arrays added to `arrays`), `expected.npz`, `verify.pkl` and
    `kt_check.py`."""
    answer = p.answer
    for sym, a in p.cmem_args.items():
        arrays[f"cmem_{sym}"] = np.ascontiguousarray(np.asarray(a))
    (folder / "args").mkdir(exist_ok=True)
    for key, a in arrays.items():
        np.save(folder / "args" / f"{key}.npy", a, allow_pickle=False)
    # the answer's arrays (answer=None: none; else its length was checked)
    answered = zip(names, answer or [], p.arguments, strict=False)
    expected = {n: np.asarray(e) for n, e, a in answered if e is not None and isinstance(a, np.ndarray)}
    for n, e in expected.items():  # a verify= function compares as it likes (Kernel Tuner's reduction: a sum)
        if e.size != arrays[n].size and p.verify is None:
            raise UserError(
                f"tune_kernel: the answer for {n} has {e.size} elements, the argument {arrays[n].size}",
                hint="give the expected output with the argument's size",
            )
    if expected:
        shaped = {n: e if p.verify is not None else e.reshape(arrays[n].shape) for n, e in expected.items()}
        np.savez(folder / "expected.npz", **shaped)  # type: ignore[arg-type]  # numpy's stub types **kwds badly
    if p.verify is not None:
        import cloudpickle  # refused earlier where missing

        (folder / "verify.pkl").write_bytes(cloudpickle.dumps(p.verify))
    (folder / "kt_check.py").write_text(
        CHECK_MODULE.format(
            names=names,
            outputs=outputs,
            atol=repr(float(p.atol)),
            verify=p.verify is not None,
            scalars={a["name"]: (a["scalar"], a["value"]) for a in args if "scalar" in a},
            answer=[e is not None for e in answer] if answer is not None else None,
        )
    )


def _problem_section(
    p: KTProblem,
    name: str,
    size_names: list[str],
    args: list[dict[str, Any]],
    arrays: dict[str, np.ndarray],
) -> dict[str, Any]:
    """The space's `problem:` section: kind `kt_NAME`, its sizes and arguments, the check, the bytes moved and the
    `cmem_args` constants."""
    problem: dict[str, Any] = {"name": f"kt_{name}", "sizes": size_names, "precisions": ["fp32"], "arguments": args}
    problem["check"] = "kt_check.py:check"  # the check decides (it reads the answers itself): no reference
    problem["bytes"] = str(sum(int(a.nbytes) for a in arrays.values() if a is not None) or 1)
    if p.cmem_args:
        problem["constants"] = [
            {
                "name": sym,
                "dtype": _dtype(np.asarray(a), f"cmem_args[{sym!r}]"),
                "shape": list(np.asarray(a).shape) or [1],
                "init": {"file": f"args/cmem_{sym}.npy"},
            }
            for sym, a in p.cmem_args.items()
        ]
    return problem


def _derived_and_defines(p: KTProblem, params: set[str], block_names: list[str]) -> tuple[dict[str, str], list[str]]:
    """The derived parameters (the default block sizes, grid_size_x/y/z, the `defines=` expressions) and the names
    defined for the kernel (Kernel Tuner's defaults where `defines` is None)."""
    derived = {b: str(KT_DEFAULT_BLOCK[i]) for i, b in enumerate(block_names) if b not in params}
    derived.update(_grid(p, params, block_names))
    if p.defines is None:
        derived["kernel_tuner"] = "1"
        defines = [f"grid_size_{a}" for a in AXES] + block_names + [k for k in p.tune_params if k not in block_names]
        return derived, [*defines, "kernel_tuner"]
    defines = []
    for k, v in p.defines.items():
        if not (isinstance(k, str) and _IDENT.match(k)):
            raise UserError(f"tune_kernel: defines key {k!r} is not an identifier")
        if k in params:  # a parameter is defined as its value
            if str(v) != k:
                raise UserError(
                    f"tune_kernel: defines[{k!r}] = {v!r} redefines a tunable parameter",
                    hint=f"write defines[{k!r}] = {k!r} (its value) or rename the define",
                )
        elif k in derived and str(v) == k:  # grid_size_x, a block size: as Kernel Tuner computes it
            pass
        else:
            if callable(v):
                raise UserError(
                    f"tune_kernel: defines[{k!r}] is a function",
                    hint="give an expression of the tunable parameters as a string (or a number)",
                )
            derived[k] = _expr(str(v), params | set(derived) - {k}, f"defines[{k!r}]")
        defines.append(k)
    return derived, defines
