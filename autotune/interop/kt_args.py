"""Kernel Tuner's `tune_kernel` / `run_kernel` arguments, checked before any work (no folder written, nothing compiled)
and read into autotune's terms (`autotune.interop.tune_kernel`). Light: imported by `import autotune.kernel_tuner`.

Checking: each argument of Kernel Tuner 1.5's signatures has one rule here (`check_tune_call`, `check_run_call`); a
wrong one is one error naming the argument, what it got and what to give. Where Kernel Tuner raises for the same
mistake the error is also of its exception type (`KTValueError` is a ValueError, `KTTypeError` a TypeError), with its
wording: a script's `except ValueError` keeps working. What autotune does not support (a callable restriction,
observers, ...) is refused later, in `autotune.interop.tune_kernel`; here only what is not a valid call at all.

Reading: the kernel source, problem size, grid divisors, restrictions and strategy, with a UserError that says what
to give instead for what autotune does not take.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from autotune.errors import UserError
from autotune.untrusted import number
from autotune.vocab import MAX_SIZE

LANGS = (None, "CUDA", "CUPY", "NVCUDA")
# Kernel Tuner 1.5's strategy names (kernel_tuner/interface.py `strategy_map`)
KT_STRATEGIES = (
    "brute_force",
    "random_sample",
    "minimize",
    "basinhopping",
    "diff_evo",
    "genetic_algorithm",
    "greedy_mls",
    "ordered_greedy_mls",
    "greedy_ils",
    "dual_annealing",
    "mls",
    "pso",
    "simulated_annealing",
    "skopt",
    "firefly_algorithm",
    "bayes_opt",
    "pyatf_strategies",
    "hybrid_vndx",
    "adaptive_tabu_greywolf",
    "nsga2",
    "nsga3",
)
# the numeric keys of a result dict a metric expression may read besides the parameters and earlier metrics
RESULT_KEYS = ("time", "compile_time", "verification_time", "benchmark_time", "strategy_time", "framework_time")


class KTValueError(UserError, ValueError):
    """A mistake Kernel Tuner raises a ValueError for."""


class KTTypeError(UserError, TypeError):
    """A mistake Kernel Tuner raises a TypeError for."""


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({type(value).__name__})"


def refuse(what: str, hint: str) -> UserError:
    return UserError(f"tune_kernel: {what} is not supported by autotune's tune_kernel", hint=hint)


def read_source(kernel_source: Any) -> tuple[str | None, Path | None]:
    if callable(kernel_source):
        raise refuse("a kernel_source function (code generation)", "pass the generated code as a string")
    if isinstance(kernel_source, (list, tuple)):
        if len(kernel_source) != 1:
            raise refuse("a list of source files (host code tuning)", "pass the kernel's file or code alone")
        kernel_source = kernel_source[0]
    if isinstance(kernel_source, Path) or (
        isinstance(kernel_source, str)
        and "\n" not in kernel_source
        and Path(kernel_source).suffix
        and Path(kernel_source).is_file()
    ):
        return None, Path(kernel_source)
    if not isinstance(kernel_source, str):
        raise UserError(
            f"tune_kernel: kernel_source is a {type(kernel_source).__name__}",
            hint="pass the code as a string or a file name",
        )
    return kernel_source, None


def read_problem_size(problem_size: Any) -> tuple[int | str, ...]:
    """problem_size (its types checked: `check_tune_call`) as 1 to 3 ints and strings; a function is refused."""
    if callable(problem_size):
        raise refuse("a problem_size function", "give integers, or strings: expressions of the tunable parameters")
    if isinstance(problem_size, np.ndarray):
        problem_size = problem_size.tolist()
    sizes = problem_size if isinstance(problem_size, (tuple, list)) else (problem_size,)
    return tuple(s if isinstance(s, str) else int(s) for s in sizes)


def read_grid_div(div: Any, axis: str) -> list[int | str] | None:
    """A grid divisor (its types checked: `check_tune_call`) as a list; a function is refused."""
    if div is None:
        return None
    items = div if isinstance(div, (list, tuple)) else [div]
    if any(callable(d) for d in items):
        raise refuse(
            f"a grid_div_{axis} function",
            "write the divisor as a string expression of the parameters, "
            "e.g. grid_div_x=['block_size_x * tile_size_x']",
        )
    return list(items)


def read_restrictions(restrictions: Any) -> list[str]:
    if restrictions is None:
        return []
    if callable(restrictions):
        raise refuse(
            "a restrictions function",
            "give the restrictions as a list of strings, e.g. "
            "['block_size_x * block_size_y <= 1024'] (a function cannot be evaluated over the space)",
        )
    items = [restrictions] if isinstance(restrictions, str) else list(restrictions)
    if not all(isinstance(r, str) for r in items):
        raise refuse(
            "a restriction that is not a string (a function or a Constraint object)",
            "write each restriction as a boolean expression string",
        )
    return items


def read_strategy(
    strategy: str | None, options: Mapping[str, Any] | None, space_size: int | None, elapsed_s: float = 0.0
) -> dict[str, Any]:
    """Kernel Tuner's strategy name and options -> the sweep config's `strategy:` and `budget:`. `time_limit` counts
    from the call's start, as Kernel Tuner's does: the sweep's budget is what is left after `elapsed_s`."""
    options = dict(options or {})
    if strategy is not None and not isinstance(strategy, str):
        raise refuse("a user-defined strategy object", "give a Kernel Tuner strategy name")
    name = {None: "brute", "brute_force": "brute", "random_sample": "random"}.get(strategy, "auto")
    out: dict[str, Any] = {}
    fevals = options.get("max_fevals")
    if fevals is None and name == "random" and space_size:  # Kernel Tuner samples 10% unless told otherwise
        fevals = max(1, math.ceil(float(options.get("fraction", 0.1)) * space_size))
    if fevals is None and name == "auto":
        fevals = 100  # Kernel Tuner's optimizing strategies default to 100 evaluations
    out["strategy"] = {"name": name, "budget": int(fevals)} if fevals is not None else name
    if options.get("time_limit") is not None:
        out["budget"] = f"{max(1.0, float(options['time_limit']) - elapsed_s):.3f}s"
    return out


def check_strategy(strategy: Any, options: Any) -> None:
    if isinstance(strategy, str) and strategy not in KT_STRATEGIES:
        raise KTValueError(
            f"tune_kernel: Unknown strategy {strategy}, must be one of: {', '.join(KT_STRATEGIES)}",
            hint="give one of those names (or leave strategy out: brute force)",
        )
    if options is None:
        return
    if not isinstance(options, Mapping):
        raise UserError(
            f"tune_kernel: strategy_options={shown(options)} is not a dict",
            hint="e.g. strategy_options={'max_fevals': 100}",
        )
    v = options.get("max_fevals")
    if v is not None and (not _is_int(v) or int(v) <= 0):  # Kernel Tuner's words
        raise KTValueError(f"tune_kernel: max_fevals must be greater than zero (got {shown(v)})", hint="e.g. 100")
    v = options.get("time_limit")
    if v is not None and (not _is_real(v) or not math.isfinite(float(v)) or float(v) <= 0):
        raise KTValueError(
            f"tune_kernel: time_limit must be greater than zero (got {shown(v)})", hint="seconds, e.g. 60"
        )
    v = options.get("fraction")
    if v is not None and (not _is_real(v) or not 0 < float(v) <= 1):
        raise KTValueError(
            f"tune_kernel: strategy_options fraction={shown(v)} is not a fraction in (0, 1]", hint="e.g. 0.1"
        )


def check_metrics(metrics: Any, params: list[str]) -> None:
    """Kernel Tuner's rules for `metrics` (its words), and each string metric parsed against the names it may read
    (the parameters, the result's numeric keys, the metrics before it), before anything runs."""
    if metrics is None:
        return
    if not isinstance(metrics, dict):
        raise KTValueError(
            "tune_kernel: metrics should be a dictionary to preserve order and support composability",
            hint="e.g. metrics={'GFLOP/s': lambda p: 2 * n**3 / 1e9 / (p['time'] / 1e3)}",
        )
    from autotune.expr import ExprError, parse

    known = set(params) | set(RESULT_KEYS)
    for name, m in metrics.items():
        if not isinstance(name, str):
            raise KTValueError(f"tune_kernel: metric name {shown(name)} is not a string", hint="name it with a string")
        if isinstance(m, str):
            try:
                unknown = sorted(parse(m).names - known)
            except ExprError as exc:
                raise UserError(
                    f"tune_kernel: metric {name!r} = {m!r}: {exc.message}",
                    hint=exc.hint or "write it with + - * / // % **, min/max/ceil/floor, or give a function",
                ) from None
            if unknown:
                raise UserError(
                    f"tune_kernel: metric {name!r} = {m!r} reads {unknown[0]!r}, which is neither a tunable parameter, "
                    "a result key nor an earlier metric",
                    hint=f"it may read: {', '.join(sorted(known))}",
                )
        elif not callable(m):
            raise KTValueError(
                f"tune_kernel: metric dicts values should be strings or callable (metric {name!r} is {shown(m)})",
                hint="give a string expression of the result's keys or a function of the result dict",
            )
        known.add(name)


# ------------------------------------------------------------------------------------------------ checking

KT_FORBIDDEN_PARAMS = ("grid_size_x", "grid_size_y", "grid_size_z", "time")  # kernel_tuner.util.check_tune_params_list
MAX_ITERATIONS = 100_000
# a kernel's name: a C++ (qualified) identifier, optionally with template arguments; never a path
KERNEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*(\s*<[^/\\\x00\n\r]*>)?")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _bad(func: str, name: str, value: Any, want: str, hint: str, kind: type[UserError] = UserError) -> UserError:
    return kind(f"{func}: {name}={shown(value)} is not {want}", hint=hint)


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))


def _is_flag(v: Any) -> bool:
    return isinstance(v, (bool, np.bool_)) or (_is_int(v) and int(v) in (0, 1))


def _flag(func: str, name: str, value: Any, none_ok: bool = False) -> None:
    if (value is None and none_ok) or _is_flag(value):
        return
    raise _bad(func, name, value, "True or False", f"write {name}=True or {name}=False")


def _count(func: str, name: str, value: Any, lo: int, hi: int, example: str) -> int:
    if not _is_int(value):
        raise _bad(func, name, value, f"a whole number from {lo} to {hi:,}", f"e.g. {name}={example}")
    return int(number(int(value), name=f"{func}: {name}", integer=True, lo=lo, hi=hi, example=example))


def _path_like(func: str, name: str, value: Any, hint: str) -> None:
    if value is None or isinstance(value, (str, os.PathLike)):
        return
    raise _bad(func, name, value, "a file name (a string or a Path)", hint, KTTypeError)


def _mapping(func: str, name: str, value: Any, hint: str) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise _bad(func, name, value, "a dict", hint, KTTypeError)


def _kernel_name(func: str, name: Any) -> None:
    if not isinstance(name, str) or len(name) > 256 or not KERNEL_NAME.fullmatch(name.strip()):
        raise _bad(
            func,
            "kernel_name",
            name,
            "the name of a kernel (a C++ identifier, e.g. 'vector_add', optionally with template arguments)",
            "give the __global__ function's name as it is in the source; a name is never a path",
        )


def _problem_size(func: str, problem_size: Any) -> None:
    if callable(problem_size):
        return  # Kernel Tuner's own (run_kernel); tune_kernel refuses it by name
    if isinstance(problem_size, np.ndarray):
        problem_size = problem_size.tolist()
    sizes = problem_size if isinstance(problem_size, (tuple, list)) else [problem_size]
    if not 1 <= len(sizes) <= 3:
        raise _bad(func, "problem_size", problem_size, "1 to 3 sizes", "e.g. problem_size=(4096, 4096)", KTTypeError)
    for s in sizes:
        if not isinstance(s, str) and (not _is_int(s) or not 1 <= int(s) <= MAX_SIZE):
            raise KTTypeError(
                f"{func}: problem_size entry {shown(s)} is neither a positive integer (at most 2**62) nor a string "
                "(Kernel Tuner: problem_size should only contain strings or integers)",
                hint="e.g. problem_size=(4096, 4096) or problem_size='num_blocks'",
            )


def _arguments(func: str, arguments: Any) -> None:
    if not isinstance(arguments, (list, tuple)):
        raise _bad(
            func,
            "arguments",
            arguments,
            "a list",
            "give the kernel's arguments as a list of NumPy arrays and scalars, e.g. [c, a, b, numpy.int32(n)]",
            KTTypeError,
        )


def _grid_div(func: str, axis: str, div: Any) -> None:
    if div is None or callable(div):
        return
    items = div if isinstance(div, (list, tuple)) else [div]
    for d in items:
        if not (callable(d) or isinstance(d, str)) and (not _is_int(d) or int(d) < 1):
            raise KTValueError(
                f"{func}: grid_div_{axis} entry {shown(d)} is not a positive integer, a string or a function "
                "(Kernel Tuner: unrecognized type in grid divisor list, should be any of int, str, callable, or iterable)",
                hint=f"e.g. grid_div_{axis}=['block_size_{axis}', 'tile_size_{axis}'] or grid_div_{axis}=1",
            )


def _block_size_names(func: str, names: Any) -> None:
    """Kernel Tuner's `check_block_size_names`, its words."""
    if names is None:
        return
    hint = "e.g. block_size_names=['bx', 'by'] (at most 3 names, in x, y, z order)"
    if not isinstance(names, (list, tuple)):
        raise KTValueError(f"{func}: block_size_names should be a list of strings! (got {shown(names)})", hint=hint)
    if len(names) > 3:
        raise KTValueError(f"{func}: block_size_names should not contain more than 3 names! ({len(names)})", hint=hint)
    if not all(isinstance(n, str) and IDENT.fullmatch(n) for n in names):
        raise KTValueError(f"{func}: block_size_names should contain only strings! (identifiers: {names!r})", hint=hint)


def _name(func: str, name: str, value: Any, want: str, hint: str) -> None:
    """An argument that is None or a string (a language, a compiler, a database, an objective)."""
    if value is not None and not isinstance(value, str):
        raise _bad(func, name, value, want, hint)


def _compiler_options(func: str, options: Any) -> None:
    if options is None:
        return
    if not isinstance(options, (list, tuple)) or not all(isinstance(o, str) for o in options):
        raise _bad(
            func,
            "compiler_options",
            options,
            "a list of strings (a string would be read character by character)",
            f"write compiler_options={[options] if isinstance(options, str) else ['-O3']!r}",
            KTTypeError,
        )


def _log(func: str, log: Any) -> None:
    if log is None or log is False:
        return
    if _is_int(log) and int(log) >= 0:
        return
    if isinstance(log, str) and isinstance(logging.getLevelName(log.upper()), int):
        return
    raise _bad(func, "log", log, "a logging level", "e.g. log=logging.DEBUG (or leave it out)")


def _common(func: str, a: Mapping[str, Any]) -> None:
    """The arguments tune_kernel and run_kernel share (Kernel Tuner's `_kernel_options` and `_device_options`)."""
    _kernel_name(func, a["kernel_name"])
    if not (callable(a["kernel_source"]) or isinstance(a["kernel_source"], (str, Path, list, tuple))):
        raise KTTypeError(
            f"{func}: kernel_source={shown(a['kernel_source'])} is neither a string nor a file name "
            "(Kernel Tuner: kernel_source is not a string nor a callable function)",
            hint="pass the code as a string, or a file name or Path",
        )
    _problem_size(func, a["problem_size"])
    _arguments(func, a["arguments"])
    for axis in "xyz":
        _grid_div(func, axis, a[f"grid_div_{axis}"])
    _name(func, "lang", a["lang"], "a language name", "e.g. lang='CUDA' or lang='CuPy' (or leave it out)")
    for key in ("device", "platform"):
        _count(func, key, a[key], 0, 1023, "0")
    for key in ("smem_args", "cmem_args", "texmem_args"):
        _mapping(func, key, a[key], f"give {key} as a dict (or leave it out)")
    _name(func, "compiler", a["compiler"], "a compiler name", "e.g. compiler='nvcc' (or leave it out)")
    _compiler_options(func, a["compiler_options"])
    _mapping(func, "defines", a["defines"], "give defines as a dict of names to values or expressions")
    _block_size_names(func, a["block_size_names"])
    _flag(func, "quiet", a["quiet"])
    _log(func, a["log"])


def check_run_call(a: Mapping[str, Any]) -> None:
    """A run_kernel call's arguments (Kernel Tuner 1.5's signature, every one bound): raises on the first wrong."""
    _common("run_kernel", a)
    params = a["params"]
    if not isinstance(params, Mapping) or not all(
        isinstance(k, str) and isinstance(v, (int, float, str, bool, np.generic)) for k, v in params.items()
    ):
        raise _bad(
            "run_kernel",
            "params",
            params,
            "a dict of parameter names to single values",
            "e.g. params={'block_size_x': 256}",
            KTTypeError,
        )


def check_tune_call(a: Mapping[str, Any]) -> None:
    """A tune_kernel call's arguments (Kernel Tuner 1.5's signature and autotune's extra keywords, every one bound):
    raises on the first wrong one, before anything is written or started."""
    f = "tune_kernel"
    _common(f, a)
    _tune_params(a["tune_params"])
    restrictions = a["restrictions"]
    if restrictions is not None and not (callable(restrictions) or isinstance(restrictions, (str, list, tuple))):
        raise _bad(
            f,
            "restrictions",
            restrictions,
            "a list of strings",
            "e.g. restrictions=['block_size_x * block_size_y <= 1024']",
            KTValueError,
        )
    answer = a["answer"]
    if answer is not None:
        if not isinstance(answer, (list, tuple)):
            raise _bad(f, "answer", answer, "a list", "give one entry per argument, None where it is not checked")
        if len(answer) != len(a["arguments"]):
            raise UserError(
                f"tune_kernel: answer has {len(answer)} entries, arguments {len(a['arguments'])}",
                hint="give one entry per argument, None where it is not checked",
            )
    atol = a["atol"]
    if isinstance(atol, np.generic):
        atol = atol.item()
    number(atol, name="tune_kernel: atol", lo=0, example="1e-6")
    if a["verify"] is not None and not callable(a["verify"]):
        raise _bad(f, "verify", a["verify"], "a function", "give verify(cpu_result, gpu_result, atol=None) -> bool")
    for key in ("verbose", "simulation_mode", "early_stop"):
        _flag(f, key, a[key], none_ok=key == "simulation_mode")
    _count(f, "iterations", a["iterations"], 1, MAX_ITERATIONS, "7")
    check_strategy(a["strategy"], a["strategy_options"])
    _path_like(f, "cache", a["cache"], "give the cache's file name, e.g. cache='vector_add.json'")
    _path_like(f, "space_dir", a["space_dir"], "give a folder name, e.g. space_dir='kt_space'")
    _name(f, "database", a["database"], "a database URL or file name", "e.g. database='results.sqlite'")
    parallel = a["parallel"]
    if parallel is not None and not (_is_flag(parallel) or (_is_int(parallel) and int(parallel) >= 1)):
        raise _bad(f, "parallel", parallel, "True, False or a number of workers", "leave parallel out")
    if parallel and a["simulation_mode"]:  # Kernel Tuner's words
        raise KTValueError(
            "tune_kernel: Enabling `parallel` and `simulation_mode` together is not supported",
            hint="leave parallel out in simulation mode",
        )
    check_metrics(a["metrics"], list(a["tune_params"]))
    objectives = a["objectives"]
    if objectives and not isinstance(objectives, dict):
        raise KTValueError(
            "tune_kernel: objectives should be a dict of (objective, higher_is_better) pairs",
            hint="e.g. objectives={'time': False}",
        )
    _name(f, "objective", a["objective"], "a name", "e.g. objective='time' or the name of a metric")
    _flag(f, "objective_higher_is_better", a["objective_higher_is_better"], none_ok=True)
    if a["seed"] is not None:
        _count(f, "seed", a["seed"], 0, 2**32 - 1, "0")


def _tune_params(tune_params: Any) -> None:
    hint = "e.g. tune_params={'block_size_x': [64, 128, 256]}: each name a list of values"
    if not isinstance(tune_params, Mapping) or not tune_params:
        raise _bad("tune_kernel", "tune_params", tune_params, "a dict of parameters", hint, KTValueError)
    for name, values in tune_params.items():
        if name in KT_FORBIDDEN_PARAMS:  # Kernel Tuner's words
            raise KTValueError(
                f"tune_kernel: Tune parameter {name} with value {shown(values)} has a forbidden name!",
                hint=f"rename it: {', '.join(KT_FORBIDDEN_PARAMS)} are Kernel Tuner's own",
            )
        if not isinstance(name, str) or not IDENT.fullmatch(name):
            raise KTValueError(
                f"tune_kernel: tune_params key {shown(name)} is not a name (letters, digits, _)",
                hint="the key is a #define in the kernel: a C identifier",
            )
        if isinstance(values, np.ndarray):
            values = values.tolist()
        if not isinstance(values, (list, tuple, range)) or len(values) == 0:
            raise KTValueError(
                f"tune_kernel: tune_params[{name!r}] = {shown(values)} is not a non-empty list of values", hint=hint
            )
        for v in values:
            finite = isinstance(v, (float, np.floating)) and math.isfinite(float(v))
            if not (isinstance(v, (str, bool, np.bool_)) or finite or (_is_int(v) and abs(int(v)) <= MAX_SIZE)):
                raise KTValueError(
                    f"tune_kernel: tune_params[{name!r}] holds {shown(v)}, not a number (finite, at most 2**62) "
                    "or a string",
                    hint=hint,
                )


def bind(signature: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any], func: str) -> dict[str, Any]:
    """Every argument of `signature` as called (defaults filled in); a call that does not fit it is one TypeError."""
    import inspect

    sig = inspect.signature(signature)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as exc:
        raise KTTypeError(f"{func}: {exc}", hint=f"{func}'s arguments are Kernel Tuner 1.5's") from None
    bound.apply_defaults()
    return dict(bound.arguments)
