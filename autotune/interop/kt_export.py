"""The results database -> Kernel Tuner (the way in: `autotune.interop.kt_store`): caches and a call's results.

`export_cache`: one space's measurements at one test point on one device as a `KTCache` (an imported entry's
`time` as the cache had it, a measurement of ours its median; then `kerneltuner.write_cache` writes a file Kernel
Tuner's reader and simulation mode accept, and `write_t4` its T4 results file). `keys_and_times`: what a round trip
through both must reproduce.

`collect_results` and `environment`: a sweep's measurements at one point as Kernel Tuner's result dicts and env
(`autotune.interop.tune_kernel`). One dict per measured configuration of the call's space, in the order measured: the
parameters, then `time` (ms: the median of `times`; replayed from a Kernel Tuner cache, the cache's own `time`, its
mean), `times`, `compile_time` (ms), `verification_time`, `benchmark_time` (ms: the sum of the timed launches),
`strategy_time`, `framework_time` (0: not measured per configuration), `timestamp` (UTC). A failure keeps the
parameters, the times and `__error__`: Kernel Tuner's marker (its own `ErrorConfig` classes where the script imported
`kernel_tuner.util`, else the same names as strings). A configuration stopped early (slower than the best) keeps the
times of the repetitions it ran. A configuration a replay never recorded is left out; one replayed from a Kernel Tuner
cache keeps the cache's timings and timestamp.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import yaml
from sqlalchemy import select

from autotune import yamlfile
from autotune.errors import UserError
from autotune.interop.kerneltuner import KTCache, KTRecord, config_key
from autotune.interop.kt_store import MARK, MAX_TIME_MS, TO_STATUS, judged
from autotune.space.instance import Instance
from autotune.space.spec import Space
from autotune.store.engine import shown
from autotune.store.schema import Device, InstanceRow, MeasurementRow, Point, SpaceVersion, Sweep
from autotune.store.store import Store
from autotune.vocab import DeviceInfo, Status, TestPoint

FROM_STATUS = {
    Status.OK: "ok",
    Status.SKIPPED: "ok",
    Status.COMPILE_ERROR: "compile_error",
    Status.LAUNCH_ERROR: "launch_error",
    Status.WRONG: "wrong",
    Status.TIMEOUT: "error",
    Status.CRASHED: "error",
}


def _positive(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def export_cache(store: Store, space: str, device: str | None = None, point: str | None = None) -> KTCache:
    """One space's measurements at one test point (`point`: its key, needed when there are several) on one device
    as a Kernel Tuner cache. Parameters and their values come from the stored space file."""
    device_id = store.device_id(device)
    with store.session() as s:
        newest = select(SpaceVersion.yaml_text).where(SpaceVersion.name == space).order_by(SpaceVersion.id.desc())
        space_text = s.execute(newest).scalars().first()
        if space_text is None:
            raise UserError(f"no space {space!r} in {shown(store.url)}", hint="name a space that was swept into it")
        rows = _measurements(s, space, [device_id])
        device_name = s.get(Device, device_id).name  # type: ignore[union-attr]
    points = sorted({p.point().key for _, _, p in rows})
    if point is None and len(points) > 1:
        raise UserError(
            f"space {space} was measured at {len(points)} test points; a cache holds one",
            hint=f"add --point with one of: {', '.join(points[:8])}",
        )
    key = point or (points[0] if points else None)
    if key not in points:
        raise UserError(f"no measurements of {space} at {key}", hint=f"points: {', '.join(points[:8]) or 'none'}")
    try:
        doc = yamlfile.safe_load(space_text)
    except yaml.YAMLError as exc:
        raise UserError(f"the recorded space file of {space} is not YAML it can read: {exc}") from None
    if not isinstance(doc, dict):
        raise UserError(f"the recorded space file of {space} is not a mapping")
    tune_params = {k: list(v) if isinstance(v, list) else v for k, v in (doc.get("parameters") or {}).items()}
    keys = tuple(tune_params)
    records, sizes, sweeps = [], (), set()
    for m, params, p in rows:
        tp = p.point()
        if tp.key != key:
            continue
        sweeps.add(m.sweep_id)
        params = json.loads(params) if isinstance(params, str) else params
        extra = json.loads(m.log) if m.log and m.log.startswith("{") else {}
        st = Status(m.status)
        kt = m.error[len(MARK) :].split(":", 1)[0] if (m.error or "").startswith(MARK) else FROM_STATUS[st]
        kt = kt if kt in TO_STATUS else FROM_STATUS[st]
        ok = kt == "ok" and _positive(m.median_ms)
        kt = "error" if kt == "ok" and not ok else kt  # a stored ok without a usable time (older databases)
        # an imported cache's own `time` (Kernel Tuner's mean of `times`) goes back as it was; else the median
        recorded = extra.pop("time", None) if ok else None
        time_ms = (recorded if _positive(recorded) else m.median_ms) if ok else None
        records.append(
            KTRecord({k: params[k] for k in keys}, kt, time_ms, tuple(m.times_ms or ()) if ok else (), extra)
        )
        sizes = tuple(v for _, v in tp.sizes)
    kernel_name = (doc.get("kernel") or {}).get("name") or (doc.get("kernel") or {}).get("template") or space
    if "description" in doc and str(doc["description"]).startswith("imported from a Kernel Tuner cache of "):
        kernel_name = str(doc["description"]).split(" of ", 1)[1].rsplit(" on ", 1)[0]
    problem_size = _imported_expression(store, sweeps) or (sizes if len(sizes) != 1 else sizes[0])
    return KTCache(
        device_name=device_name.removeprefix(MARK),
        kernel_name=kernel_name,
        problem_size=problem_size,
        tune_params_keys=keys,
        tune_params=tune_params,
        objective="time",
        records=tuple(records),
    )


def _imported_expression(store: Store, sweeps: set[int]) -> tuple[Any, ...] | str | None:
    """The problem_size of the imported caches these measurements came from, where it held an expression (a
    string entry: the point has size 1 there) and every one of them had the same; else None (the point's sizes)."""
    with store.session() as s:
        texts = s.execute(select(Sweep.config_name, Sweep.config_text).where(Sweep.id.in_(sorted(sweeps)))).all()
    found: set[str | None] = set()
    for name, text in texts:
        try:
            ps = json.loads(text).get("problem_size") if name.startswith("import:") else None
        except (ValueError, AttributeError):
            ps = None
        entries = ps if isinstance(ps, list) else [ps]
        found.add(json.dumps(ps) if any(isinstance(e, str) for e in entries) else None)
    if len(found) != 1 or (chosen := found.pop()) is None:
        return None
    ps = json.loads(chosen)
    return tuple(ps) if isinstance(ps, list) else ps


def keys_and_times(cache: KTCache) -> dict[str, tuple[str, float | None]]:
    """{config key: (status, time)}: what a round trip must reproduce."""
    return {config_key(r.params, cache.tune_params_keys): (r.status, r.time_ms) for r in cache.records}


def _measurements(s: Any, space: str, devices: list[int]) -> list[Any]:
    """(measurement, its instance's params, its point) of `space` on `devices`, in the order measured."""
    return list(
        s.execute(
            select(MeasurementRow, InstanceRow.params, Point)
            .join(InstanceRow, InstanceRow.id == MeasurementRow.instance_id)
            .join(Point, Point.id == MeasurementRow.point_id)
            .where(InstanceRow.space == space, MeasurementRow.device_id.in_(devices))
            .order_by(MeasurementRow.id)
        ).all()
    )


# ------------------------------------------------------------------------------------------------ tune_kernel's results

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
        rows = _measurements(s, space.name, devices)
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
