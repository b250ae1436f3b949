"""A Kernel Tuner cache's contents judged before any of it is stored (`autotune.interop.kt_store`), and a cache
judged against the `tune_kernel` call that replays it (`simulation_mode`).

Every number an entry holds is read by `autotune.untrusted.number` (one reader of untrusted numbers): a parameter
value, `time`, each of `times`, and Kernel Tuner's timings (`compile_time`, `verification_time`, `benchmark_time`,
`strategy_time`, `framework_time`). A `time` that is not a positive finite number of ms below `MAX_TIME_MS`, or
`times` that are not such numbers, make that entry a failure with its reason (`time_problem`: the import lists
them, the value as the cache writes it); any other number that is not one, or a parameter value that is not a number, a boolean or a short string, is one
UserError naming the file, the entry and the field (`check_entries`), before anything is stored.

`check_call` is Kernel Tuner's `process_cache` check (`kernel_tuner/util.py`), with its words: a cache of another
kernel, another problem size or other tunable parameters (or the same in another order) is refused.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from autotune.errors import UserError
from autotune.interop.kerneltuner import KTCache, KTRecord, config_key
from autotune.interop.kt_args import KTValueError
from autotune.interop.kt_format import is_number
from autotune.untrusted import number

MAX_TIME_MS = 1e9  # about 11.6 days: a time above it is not one kernel launch's
TIMINGS = ("compile_time", "verification_time", "benchmark_time", "strategy_time", "framework_time")
MAX_PARAM_TEXT = 256  # characters of a string parameter value
HINT = "Kernel Tuner writes these as numbers of milliseconds; correct the entry or remove it from the cache"


def judged(value: Any, lo: float, hi: float) -> bool:
    """Whether `value` (read from a cache or a measurement's log) is a number in [lo, hi], as
    `autotune.untrusted.number` reads it."""
    if not is_number(value):
        return False
    try:
        number(value, name="value", lo=lo, hi=hi)
    except UserError:
        return False
    return True


def _json(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else f"{text[:24]}... ({len(text)} characters)"


def time_problem(r: KTRecord) -> str | None:
    """Why an ok record's time cannot be stored as a measurement (None: it can): Kernel Tuner's `time` must be
    a positive finite number of ms (below MAX_TIME_MS), and `times`, where present, a list of such numbers (0
    allowed). The reason shows the value as the cache writes it (`time is NaN`)."""
    if r.status != "ok":
        return None
    if r.time_ms is None and "time" not in r.extra:
        return "no time"
    t = r.time_ms if r.time_ms is not None else r.extra["time"]
    if not judged(t, 0, MAX_TIME_MS) or t <= 0:
        return f"time is {_json(t)}"
    if "times" in r.extra:
        return f"times is {_json(r.extra['times'])}, not a list of numbers"
    for x in r.times_ms:
        if not judged(x, 0, MAX_TIME_MS):
            return f"times holds {_json(x)}"
    return None


def check_entries(cache: KTCache, path: Path) -> None:
    """Every parameter value and timing field of every entry, each a UserError naming the file and the entry."""
    for r in cache.records:
        key = config_key(r.params, cache.tune_params_keys)
        shown = repr(key) if len(key) <= 60 else f"{key[:40]!r}..."
        for name, v in r.params.items():
            if (isinstance(v, str) and len(v) <= MAX_PARAM_TEXT) or isinstance(v, bool):
                continue  # a boolean is stored as its text ("True": kt_store.text_params)
            if not judged(v, -(2**63 - 1), 2**63 - 1):
                raise UserError(
                    f"cache entry {shown}: {name} is {_json(v)}: a parameter value is a number, a boolean or a short string",
                    file=path,
                    hint="give the cache a tune_kernel call wrote, or correct the entry",
                )
        for name in TIMINGS:
            if name in r.extra and not judged(r.extra[name], 0, MAX_TIME_MS):
                raise UserError(
                    f"cache entry {shown}: {name} is {_json(r.extra[name])}, not a number of ms from 0 to "
                    f"{MAX_TIME_MS:g}",
                    file=path,
                    hint=HINT,
                )


def _sizes(ps: Any) -> list[Any]:
    return list(ps) if isinstance(ps, (list, tuple)) else [ps]


def _same_sizes(cached: Any, given: Any) -> bool:
    """Kernel Tuner's `check_matching_problem_size`: as many entries, each equal (numbers by value)."""
    a, b = _sizes(cached), _sizes(given)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if is_number(x) and is_number(y):
            if not (math.isfinite(float(x)) if isinstance(x, float) else True) or x != y:
                return False
        elif x != y or type(x) is not type(y):
            return False
    return True


def check_call(cache: KTCache, path: Path, kernel_name: str, problem_size: Any, keys: list[str]) -> None:
    """Kernel Tuner's checks of a cache against the call that loads it (its device check is skipped in simulation
    mode, as Kernel Tuner's: the cache's device is the simulated one)."""
    if cache.kernel_name != kernel_name:
        raise KTValueError(
            "Cannot load cache which contains results for different kernel "
            f"(cache: {cache.kernel_name[:80]}, actual: {kernel_name})",
            file=path,
            hint="give the cache of this kernel, or the kernel_name the cache was written for",
        )
    if cache.problem_size is not None and not _same_sizes(cache.problem_size, problem_size):
        shown = json.dumps(cache.problem_size, default=str)[:80]  # as the cache has it, as Kernel Tuner shows it
        raise KTValueError(
            "Cannot load cache which contains results for different problem_size, "
            f"cache: {shown}, requested: {str(problem_size)[:80]}",
            file=path,
            hint="give the problem_size the cache was tuned at, or the cache of this problem size",
        )
    cached = list(cache.tune_params_keys)
    if cached != keys:
        if sorted(cached) == sorted(keys):
            raise KTValueError(
                "All tunable parameters are present, but the order is wrong. This is not possible because the order "
                "must be preserved to lookup the correct configuration in the cache. "
                f"Cache has order: {cached}, tuning_options has: {keys}",
                file=path,
                hint=f"give tune_params in the cache's order: {', '.join(cached)}",
            )
        missing = [k for k in keys if k not in cached]
        raise KTValueError(
            "Cannot load cache which contains results obtained with different tunable parameters. "
            f"Cache has: {cached[:20]}, tuning_options has: {keys}",
            file=path,
            hint=(
                f"the cache lacks {', '.join(missing)}: give the cache of this call's parameters"
                if missing
                else "give tune_params with the cache's parameters"
            ),
        )
