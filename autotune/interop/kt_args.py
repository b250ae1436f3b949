"""Kernel Tuner's `tune_kernel` arguments read into autotune's terms (`autotune.interop.tune_kernel`): the kernel
source, problem size, grid divisors, restrictions and strategy, each checked, with a UserError that says what to give
instead for what autotune does not take. Light: imported by `import autotune.kernel_tuner`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from autotune.errors import UserError

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
    """problem_size (its types checked: `kt_checks`) as 1 to 3 ints and strings; a function is refused."""
    if callable(problem_size):
        raise refuse("a problem_size function", "give integers, or strings: expressions of the tunable parameters")
    if isinstance(problem_size, np.ndarray):
        problem_size = problem_size.tolist()
    sizes = problem_size if isinstance(problem_size, (tuple, list)) else (problem_size,)
    return tuple(s if isinstance(s, str) else int(s) for s in sizes)


def read_grid_div(div: Any, axis: str) -> list[int | str] | None:
    """A grid divisor (its types checked: `kt_checks`) as a list; a function is refused."""
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
    if fevals is None and "fraction" in options and space_size:
        fevals = max(1, int(float(options["fraction"]) * space_size))
    if fevals is None and name == "auto":
        fevals = 100  # Kernel Tuner's optimizing strategies default to 100 evaluations
    out["strategy"] = {"name": name, "budget": int(fevals)} if fevals is not None else name
    if options.get("time_limit") is not None:
        out["budget"] = f"{max(1.0, float(options['time_limit']) - elapsed_s):.3f}s"
    return out


def check_strategy(strategy: Any, options: Any) -> None:
    if strategy is not None and isinstance(strategy, str) and strategy not in KT_STRATEGIES:
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
    if options.get("max_fevals") is not None:
        v = options["max_fevals"]
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or int(v) <= 0:  # Kernel Tuner's words
            raise KTValueError(f"tune_kernel: max_fevals must be greater than zero (got {shown(v)})", hint="e.g. 100")
    if options.get("time_limit") is not None:
        v = options["time_limit"]
        ok = isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))
        if not ok or not math.isfinite(float(v)) or float(v) <= 0:
            raise KTValueError(
                f"tune_kernel: time_limit must be greater than zero (got {shown(v)})", hint="seconds, e.g. 60"
            )
    if options.get("fraction") is not None:
        v = options["fraction"]
        ok = isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))
        if not ok or not 0 < float(v) <= 1:
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
