"""A sweep's measurements at one point as Kernel Tuner's result dicts and env (`autotune.interop.tune_kernel`).

One dict per measured configuration of the call's space, in the order measured: the parameters, then `time` (ms:
the median of `times`; replayed from a Kernel Tuner cache, the cache's own `time`, its mean), `times`, `compile_time` (ms), `verification_time`, `benchmark_time` (ms: the sum of the timed launches),
`strategy_time`, `framework_time` (0: not measured per configuration), `timestamp` (UTC). A failure keeps the
parameters, the times and `__error__`: Kernel Tuner's marker (its own `ErrorConfig` classes where the script imported
`kernel_tuner.util`, else the same names as strings). A configuration stopped early (slower than the best) keeps the times
of the repetitions it ran. A configuration a replay never recorded is left out; one replayed from a Kernel Tuner cache keeps the cache's
timings and timestamp.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from sqlalchemy import select

from autotune.interop.kt_entries import MAX_TIME_MS, judged
from autotune.space.instance import Instance
from autotune.space.spec import Space
from autotune.store.schema import InstanceRow, MeasurementRow, Point
from autotune.store.store import Store
from autotune.vocab import DeviceInfo, Status, TestPoint

TIMINGS = ("compile_time", "verification_time", "benchmark_time")
NOT_RECORDED = "not recorded"  # autotune.sweep.backends.replay.NOT_RECORDED (a replay of a partial cache)


def kt_marker(name: str) -> Any:
    """Kernel Tuner's failure marker `name`: its `ErrorConfig` class where the script has imported Kernel Tuner's
    `kernel_tuner.util` already (`isinstance` against it holds), else the string (equal to `str()` of Kernel Tuner's).
    Kernel Tuner is never imported for a marker: its import took 4.6 s of a matrix multiply's call on an H100 host
    with failed compiles (the script's configurations, measured in 5.2 s)."""
    util = sys.modules.get("kernel_tuner.util")
    marker = getattr(util, name, None) if util is not None else None
    return marker() if isinstance(marker, type) else name


def collect_results(
    store: Store,
    space: Space,
    point: TestPoint,
    device_uuid: str,
    keys: list[str],
    *,
    same_model: bool = False,
    planned: set[Instance] | None = None,
) -> list[dict[str, Any]]:
    """Kernel Tuner's `results` at `point` from the GPU `device_uuid`; with `same_model`, also from every other
    recorded GPU of its model (what a call resumed on another card of a cluster or lent pool skipped, as Kernel
    Tuner's cache resumes on any device of the same name), each configuration once, this GPU's measurement first.
    `planned`: the configurations of the call's space (its tune_params values and restrictions); another recorded in
    the database (an earlier call's, with other values) is never returned."""
    me = store.device_id(device_uuid)
    devices = store.same_model(me) if same_model else [me]
    with store.session() as s:
        rows = s.execute(
            select(MeasurementRow, InstanceRow.params, Point)
            .join(InstanceRow, InstanceRow.id == MeasurementRow.instance_id)
            .join(Point, Point.id == MeasurementRow.point_id)
            .where(InstanceRow.space == space.name, MeasurementRow.device_id.in_(devices))
            .order_by(MeasurementRow.id)
        ).all()
    rank = {d: i for i, d in enumerate(devices)}
    chosen: dict[str, Any] = {}  # instance id -> its measurement on the most preferred GPU
    for m, _, p in rows:
        held = chosen.get(m.instance_id)
        if p.point() == point and (held is None or rank[m.device_id] < rank[held.device_id]):
            chosen[m.instance_id] = m
    keep = {id(m) for m in chosen.values()}
    out = []
    for m, params, _ in rows:
        if id(m) not in keep or any(k not in params for k in keys):
            continue
        if planned is not None and Instance.of(space.name, {k: params[k] for k in keys}) not in planned:
            continue
        status = Status(m.status)
        times = [float(t) for t in (m.times_ms or [])]
        if status == Status.SKIPPED and (m.median_ms is None or (m.error or "") == NOT_RECORDED):
            continue
        r: dict[str, Any] = {k: params[k] for k in keys}
        if status in (Status.OK, Status.SKIPPED):
            r["time"] = float(m.median_ms)
            r["times"] = times
        else:
            # a compile error is Kernel Tuner's CompilationFailedConfig; any other failure its RuntimeFailedConfig
            failed = "CompilationFailedConfig" if status == Status.COMPILE_ERROR else "RuntimeFailedConfig"
            r["__error__"] = kt_marker(failed)
        r["compile_time"] = 1000 * float(m.compile_s or 0.0)
        r["verification_time"] = 0
        r["benchmark_time"] = float(sum(times))
        r["strategy_time"] = 0
        r["framework_time"] = 0
        r["timestamp"] = str(m.measured_at)
        if (m.log or "").startswith("{"):  # replayed from a Kernel Tuner cache: its own fields, as recorded
            recorded = json.loads(m.log)
            # (a database is data: only numbers of ms, and a timestamp's text, are taken from it)
            r.update({k: float(v) for k, v in recorded.items() if k in TIMINGS and judged(v, 0, MAX_TIME_MS)})
            if isinstance(recorded.get("timestamp"), str):
                r["timestamp"] = recorded["timestamp"][:64]
            if "time" in r and judged(recorded.get("time"), 0, MAX_TIME_MS):  # Kernel Tuner's time (the mean)
                r["time"] = float(recorded["time"])
        out.append(r)
    return out


def environment(
    info: DeviceInfo, iterations: int, compiler_options: list[str], results: list[dict[str, Any]]
) -> dict[str, Any]:
    """Kernel Tuner's env keys (cupy backend) from the sweep's device, with the totals of `get_total_timings`."""
    return {
        "device_name": info.name,
        "uuid": info.uuid,
        "compute_capability": str(info.cc),
        "cuda_version": info.cuda_runtime,
        "driver": info.driver,
        "nvrtc": info.nvrtc,
        "cupy": info.cupy,
        "iterations": iterations,
        "compiler_options": list(compiler_options),
        "total_compile_time": sum(r["compile_time"] for r in results),
        "total_verification_time": 0,
        "total_benchmark_time": sum(r["benchmark_time"] for r in results),
        "total_strategy_time": 0,
    }
