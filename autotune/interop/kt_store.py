"""Kernel Tuner caches -> the results database.

`import_cache`: one Kernel Tuner cache (a kernel on one device at one problem size) becomes a sweep of a results
database: every configuration an instance (parameters as in the cache's `tune_params_keys`), its `times` the
repetitions and the measurement's median, p20, p80, min and max theirs (Kernel Tuner's `time` is their mean: it is
kept exactly in the measurement's `log`, not as the median; a cache without `times` has only `time`, which then
stands for the median), failures as failures (Kernel Tuner's own failure word kept in `error`, so an export writes
it back), other recorded fields (compile_time, metrics, timestamp) in the `log` as JSON. Every number is judged
before anything is stored (below). Without a space file, a space is written
from the cache's `tune_params` (parameters only, no kernel binding: the cache does not say how to launch it).
The test point is of kind `kerneltuner`, with the sizes `size_x, size_y, size_z` of Kernel Tuner's problem_size
(or a point of the given space's kind, when the kind accepts those sizes: `ProblemKind.point`).

A cache's contents are judged before any of it is stored: every number an entry holds is read by
`autotune.untrusted.number` (one reader of untrusted numbers): a parameter value, `time`, each of `times`, and Kernel
Tuner's timings (`compile_time`, `verification_time`, `benchmark_time`, `strategy_time`, `framework_time`). A `time`
that is not a positive finite number of ms below `MAX_TIME_MS`, or `times` that are not such numbers, make that entry
a failure with its reason (`time_problem`: the import lists them, the value as the cache writes it); any other number
that is not one, or a parameter value that is not a number, a boolean or a short string, is one UserError naming the
file, the entry and the field (`check_entries`), before anything is stored.

`check_call` judges a cache against the `tune_kernel` call that replays it (`simulation_mode`): Kernel Tuner's
`process_cache` check (`kernel_tuner/util.py`), with its words: a cache of another kernel, another problem size or
other tunable parameters (or the same in another order) is refused.

The way back, a database's measurements as a cache: `autotune.interop.kt_export`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from autotune.errors import UserError
from autotune.interop.kerneltuner import CacheFormatError, CacheLimitError, KTCache, KTRecord, config_key, read_cache
from autotune.interop.kt_args import KTValueError
from autotune.interop.kt_format import is_number
from autotune.outfiles import write_file
from autotune.space.instance import Instance
from autotune.space.spec import Space, load_space
from autotune.store.schema import SpaceRecord, SweepStart
from autotune.store.store import Store
from autotune.sweep.timing import summarize
from autotune.sweep.workloads.workload_limits import limit
from autotune.untrusted import number
from autotune.vocab import ELEM_BYTES, MAX_SIZE, TIME_STATS, DeviceInfo, Measurement, Status, TestPoint

KIND = "kerneltuner"
SIZE_NAMES = ("size_x", "size_y", "size_z")
TO_STATUS = {
    "ok": Status.OK,
    "compile_error": Status.COMPILE_ERROR,
    "launch_error": Status.LAUNCH_ERROR,
    "invalid": Status.LAUNCH_ERROR,
    "wrong": Status.WRONG,
    "error": Status.CRASHED,
}
MARK = "kerneltuner:"  # error text prefix that keeps Kernel Tuner's own status through a round trip
# The limits an imported cache is checked against before the work: its file size (checked before the file is read)
# and its number of entries (counted while parsing, before any is built or stored). Each is a command-line knob of
# `autotune import kerneltuner` with an environment default, named in the error.
MAX_CACHE_MB = 256  # a file's size; a cache's entries take ~5x that in memory once parsed
MAX_CACHE_ENTRIES = 500_000  # configurations of one cache (a brute-force run of a large space holds ~10^5)
CACHE_MB_ENV, CACHE_ENTRIES_ENV = "AUTOTUNE_MAX_CACHE_MB", "AUTOTUNE_MAX_CACHE_ENTRIES"
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


@dataclass(frozen=True)
class Imported:
    sweep_id: int
    space: str
    space_file: Path | None  # written when no space was given
    point: TestPoint
    records: int
    failures: int
    dropped_entries: int  # a truncated last entry of an unterminated cache
    rejected: tuple[tuple[str, str], ...] = ()  # (config key, why): ok in the cache, stored as failures
    skipped: int = 0  # configurations already measured at this point on this device (an earlier import)
    excluded: int = 0  # configurations `keep` left out (outside tune_kernel's space)
    named_sizes: tuple[str, ...] = ()  # problem_size entries that are expressions (their axis's size is 1)


def _problem_sizes(cache: KTCache, path: Path) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Kernel Tuner's problem_size as 1 to 3 sizes, and its entries that are strings. A string entry is an
    expression of the tunable parameters (Kernel Tuner writes `"num_blocks"` where the grid is a tuning parameter;
    `"callable"` for a function): the grid follows the configuration, the problem's own size is not in the cache, so
    that axis's size is 1 (as tune_kernel's space folder has it). Refuses (never guesses) anything else."""
    ps = cache.problem_size
    sizes = ps if isinstance(ps, (tuple, list)) else (ps,)
    ok = 1 <= len(sizes) <= len(SIZE_NAMES) and all(
        (isinstance(s, int) and not isinstance(s, bool) and 1 <= s <= MAX_SIZE)
        or (isinstance(s, str) and 0 < len(s.strip()) <= MAX_PARAM_TEXT)
        for s in sizes
    )
    if not ok:
        shown = json.dumps(list(ps) if isinstance(ps, tuple) else ps, default=str)[:80]
        raise UserError(
            f"the cache's problem_size {shown} is not 1 to 3 positive integers or expressions: the test point of its "
            "measurements is unknown",
            file=path,
            hint='set "problem_size" in the cache\'s header to the sizes the kernel was tuned at, e.g. [4096, 4096]',
        )
    return tuple(s if isinstance(s, int) else 1 for s in sizes), tuple(s for s in sizes if isinstance(s, str))


def text_params(cache: KTCache) -> frozenset[str]:
    """The tunable parameters with a value that is not a number (a string, a boolean) in `tune_params` or an entry:
    a space file holds numbers or strings, one type per parameter, so every value of these is stored as the text
    Kernel Tuner's cache key writes for it (`str(value)`: True -> "True"); the configuration keys stay the same."""
    out = set()
    for k in cache.tune_params_keys:
        values = [*(cache.tune_params.get(k) or ()), *(r.params[k] for r in cache.records)]
        if any(isinstance(v, (str, bool)) for v in values):
            out.add(k)
    return frozenset(out)


def space_value(value: Any, text: bool) -> Any:
    """A cache's parameter value as the space holds it (`text_params`)."""
    return value if not text or isinstance(value, str) else str(value)


def space_yaml(cache: KTCache, name: str, precision: str = "fp32", size_names: tuple[str, ...] = SIZE_NAMES) -> str:
    """A space file for the cache's tuning parameters (no constraints: the cache only recorded what it tried), its
    test points of the recorded kind `kerneltuner` (`autotune.problems.recorded`: `autotune sweep --replay` runs on
    it; nothing is measured on a GPU until the space is given a kernel binding and arguments)."""
    text = text_params(cache)
    params = {}
    for k in cache.tune_params_keys:
        values = cache.tune_params.get(k) or sorted({r.params[k] for r in cache.records}, key=str)
        params[k] = list(dict.fromkeys(space_value(v, k in text) for v in values))
    doc = {
        "name": name,
        "description": f"imported from a Kernel Tuner cache of {cache.kernel_name} on {cache.device_name}",
        "parameters": params,
        "problem": {"name": KIND, "sizes": list(size_names), "precisions": [precision], "recorded": True},
    }
    block = [k for k in ("block_size_x", "block_size_y", "block_size_z") if k in cache.tune_params_keys]
    block_text = ", ".join(block + ["1"] * (3 - len(block)))
    return yaml.safe_dump(doc, sort_keys=False) + (
        "# To sweep this kernel here, add its binding (docs/kinds.md); `semantics: kerneltuner` gives Kernel Tuner's\n"
        "# implicit block-size restriction and loop_unroll_factor_* parameters:\n"
        "# kernel:\n"
        "#   source: KERNEL.cu\n"
        f"#   name: {cache.kernel_name if re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', str(cache.kernel_name)) else 'KERNEL'}\n"
        "#   semantics: kerneltuner\n"
        f"#   block: [{block_text}]\n"
        "#   grid: [...]\n"
    )


def _point(space: Space, precision: str, sizes: tuple[int, ...]) -> TestPoint:
    """The cache's problem as a point of the space's kind when the kind accepts it (as many sizes, in the kind's
    order, with no variant), else a point of kind `kerneltuner` (a kind with variants has no point without one)."""
    names = space.kind.size_names
    if len(sizes) == len(names):
        try:
            return space.kind.point(precision, "", dict(zip(names, sizes, strict=True)))
        except ValueError:
            pass
    return TestPoint(KIND, precision, "", tuple(zip(SIZE_NAMES[: len(sizes)], sizes, strict=True)))


def limit_hint(exc: CacheLimitError) -> str:
    """What to do about a cache above a limit: the knob, with the value that admits it."""
    if exc.what == "bytes":
        option, env, value = "--max-cache-mb", CACHE_MB_ENV, -(-exc.count // 2**20)
    else:
        option, env, value = "--max-entries", CACHE_ENTRIES_ENV, exc.count
    return (
        f"import a smaller cache, or raise the limit: {option} {value} (autotune import kerneltuner) or {env}={value}"
    )


def load_cache(path: Path, *, max_mb: int | None = None, max_entries: int | None = None) -> KTCache:
    """The cache at `path`, read within the limits and judged entry by entry (`check_entries`): one
    UserError naming the file (and the entry) for anything that is not a Kernel Tuner cache."""
    try:
        # `max_mb` MB, else AUTOTUNE_MAX_CACHE_MB, else 256 MB; `max_entries`, else AUTOTUNE_MAX_CACHE_ENTRIES, else 500,000
        max_bytes = limit(max_mb, CACHE_MB_ENV, MAX_CACHE_MB) * 2**20
        max_count = limit(max_entries, CACHE_ENTRIES_ENV, MAX_CACHE_ENTRIES)
        cache = read_cache(path, max_bytes=max_bytes, max_entries=max_count)
    except CacheLimitError as exc:
        raise UserError(str(exc), hint=limit_hint(exc)) from None
    except (CacheFormatError, OSError) as exc:
        raise UserError(str(exc), hint="give a cache file that Kernel Tuner wrote (cache=... in tune_kernel)") from None
    check_entries(cache, path)
    return cache


def import_cache(
    path: Path,
    store: Store,
    space: Space | None = None,
    space_out: Path | None = None,
    precision: str = "fp32",
    *,
    max_mb: int | None = None,
    max_entries: int | None = None,
) -> Imported:
    """`load_cache`, then `store_cache` (see the module docstring). An unknown `precision` is a UserError before the
    cache is read; a cache without a single configuration one before anything is written."""
    if precision not in ELEM_BYTES:
        raise UserError(
            f"unknown precision {precision!r} (--precision)",
            hint=f"give one of {', '.join(ELEM_BYTES)} (the precision the kernel was tuned at)",
        )
    cache = load_cache(path, max_mb=max_mb, max_entries=max_entries)
    if not cache.records:
        cut = " (its only entry was cut off mid-way)" if cache.dropped_entries else ""
        raise UserError(
            f'the cache holds no results: its "cache" object has no configuration{cut}; nothing to import',
            file=path,
            hint="give the cache file of a tune_kernel run that measured at least one configuration",
        )
    return store_cache(cache, path, store, space, space_out, precision)


def store_cache(
    cache: KTCache,
    path: Path,
    store: Store,
    space: Space | None = None,
    space_out: Path | None = None,
    precision: str = "fp32",
    *,
    sizes: dict[str, int] | None = None,
    keep: Callable[[Instance], bool] | None = None,
) -> Imported:
    """`cache` (read from `path`) stored as one sweep. `sizes`: the test point's sizes (default: the cache's
    problem_size); `keep`: which configurations are stored (default: all; tune_kernel's simulation mode keeps those
    of the call's space: its tune_params values and restrictions)."""
    if space is None:
        space, space_out = _written_space(cache, path, space_out, precision, sizes)
    missing = [k for k in cache.tune_params_keys if k not in space.param_names]
    if missing:
        raise UserError(
            f"{path}: the cache's parameters {', '.join(missing)} are not parameters of space {space.name}",
            hint="give the space the kernel was tuned with, or none to create one",
        )
    named: tuple[str, ...] = ()
    if sizes is None:
        numbers, named = _problem_sizes(cache, path)
        point = _point(space, precision, numbers)
    else:
        point = space.kind.point(precision, "", sizes)
    info = _device_info(cache)
    device_id = store.upsert_device(info)
    software_id = store.upsert_software(info, "kerneltuner-import", None)
    sweep_id = store.begin_sweep(
        SweepStart(f"import:{path.name}", json.dumps(_header(cache), default=str), device_id, software_id, info, {}, 0)
    )
    status = "failed"
    records, instances = _kept(cache, space, keep)
    try:
        space_id = store.upsert_space(_space_record(space, point.kind))
        store.upsert_instances(instances)
        done = store.done_pairs(device_id)
        rows = [
            _measurement(inst, point, r)
            for inst, r in zip(instances, records, strict=True)
            if (inst.id, point) not in done
        ]
        for start in range(0, len(rows), 1000):
            store.record(sweep_id, space_id, rows[start : start + 1000])
        status = "done"
    finally:
        store.finish_sweep(sweep_id, status)
    rejected = tuple(
        (config_key(r.params, cache.tune_params_keys), why) for r in records if (why := time_problem(r)) is not None
    )
    failures = sum(r.status != "ok" for r in records) + len(rejected)
    return Imported(
        sweep_id,
        space.name,
        space_out,
        point,
        len(records),
        failures,
        cache.dropped_entries,
        rejected,
        len(instances) - len(rows),
        len(cache.records) - len(records),
        named,
    )


def _written_space(
    cache: KTCache, path: Path, space_out: Path | None, precision: str, sizes: dict[str, int] | None
) -> tuple[Space, Path]:
    """A space made from the cache's parameters, written to `space_out` (default: beside the cache) and loaded."""
    name = "".join(c if c.isalnum() else "_" for c in cache.kernel_name)[:64] or "kernel"
    name = name if name[0].isalpha() else f"k_{name}"
    space_out = space_out or path.with_suffix(".space.yaml")
    names = SIZE_NAMES[: len(_problem_sizes(cache, path)[0])] if sizes is None else tuple(sizes)
    write_file(space_out, space_yaml(cache, name, precision, names))
    return load_space(space_out), space_out


def _device_info(cache: KTCache) -> DeviceInfo:
    """The device the cache names, marked as imported (nothing else about it is known)."""
    return DeviceInfo(
        name=cache.device_name,
        uuid=f"{MARK}{cache.device_name}",
        sm_count=0,
        cc=0,
        sm_clock_mhz=None,
        mem_clock_mhz=None,
        l2_bytes=0,
        copy_bandwidth=0.0,
        driver="",
        cuda_runtime="",
        nvrtc="",
        cupy="",
    )


def _header(cache: KTCache) -> dict[str, Any]:
    """The cache's header, kept as the import sweep's config."""
    return {
        "device_name": cache.device_name,
        "kernel_name": cache.kernel_name,
        "problem_size": cache.problem_size,
        "tune_params_keys": list(cache.tune_params_keys),
        "objective": cache.objective,
        **cache.header_extra,
    }


def _kept(
    cache: KTCache, space: Space, keep: Callable[[Instance], bool] | None
) -> tuple[tuple[KTRecord, ...], list[Instance]]:
    """The cache's records and their instances, those `keep` keeps (all without it)."""
    text = text_params(cache)
    pairs = [
        (r, Instance.of(space.name, {k: space_value(r.params[k], k in text) for k in cache.tune_params_keys}))
        for r in cache.records
    ]
    pairs = [(r, inst) for r, inst in pairs if keep is None or keep(inst)]
    return tuple(r for r, _ in pairs), [inst for _, inst in pairs]


def _space_record(space: Space, kind: str) -> SpaceRecord:
    """The space as the store keeps it: its file and its kernel's source."""
    return SpaceRecord(
        name=space.name,
        yaml_path=str(space.path),
        yaml_text=space.path.read_text(),
        source_path=space.kernel.source if space.kernel else "",
        kind=kind,
        source_text=space.kernel.source_path.read_text() if space.kernel else "",
    )


def _measurement(inst: Instance, point: TestPoint, r: KTRecord) -> Measurement:
    """An ok record: its median and statistics those of `times` (Kernel Tuner's `time` is their mean, kept in the
    log as `time` for an export and a replay); without `times`, `time` is the only figure and stands for the median.
    Anything else: a failure with Kernel Tuner's word."""
    why = time_problem(r)
    if why is not None:  # not a time: a failure (Kernel Tuner's "error"), its number kept in the log
        extra = {**r.extra, **({"time": r.time_ms} if r.time_ms is not None else {})}
        if r.times_ms:
            extra["times"] = list(r.times_ms)
        return Measurement(
            inst.id, point, Status.CRASHED, error=f"{MARK}error: {why}", log=json.dumps(extra, default=str)
        )
    status = TO_STATUS[r.status]
    ok = status == Status.OK
    extra = {"time": r.time_ms, **r.extra} if ok else r.extra
    m = Measurement(
        inst.id,
        point,
        status,
        reps=len(r.times_ms),
        times_ms=list(r.times_ms),
        log=json.dumps(extra, default=str) if extra else None,
    )
    if ok and r.times_ms:
        stats = summarize(list(r.times_ms))
        for name in TIME_STATS:
            setattr(m, name, getattr(stats, name))
    elif ok:
        m.median_ms = m.min_ms = m.max_ms = r.time_ms
    else:
        m.error = f"{MARK}{r.status}"
    return m
