"""The results database -> Kernel Tuner caches (the way in: `autotune.interop.kt_store`).

`export_cache`: one space's measurements at one test point on one device as a `KTCache` (an imported entry's
`time` as the cache had it, a measurement of ours its median; then `kerneltuner.write_cache` writes a file Kernel
Tuner's reader and simulation mode accept, and `write_t4` its T4 results file). `keys_and_times`: what a round trip
through both must reproduce.
"""

from __future__ import annotations

import json
import math
from typing import Any

import yaml

from autotune import yamlfile
from autotune.errors import UserError
from autotune.interop.kerneltuner import KTCache, KTRecord, config_key
from autotune.interop.kt_store import MARK, TO_STATUS
from autotune.store.engine import shown
from autotune.store.store import Store
from autotune.vocab import Status

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
    from sqlalchemy import select

    from autotune.store.schema import Device, InstanceRow, MeasurementRow, Point, SpaceVersion

    device_id = store.device_id(device)
    with store.session() as s:
        spaces = (
            s.execute(select(SpaceVersion.yaml_text).where(SpaceVersion.name == space).order_by(SpaceVersion.id.desc()))
            .scalars()
            .all()
        )
        if not spaces:
            raise UserError(f"no space {space!r} in {shown(store.url)}", hint="name a space that was swept into it")
        rows = s.execute(
            select(MeasurementRow, InstanceRow.params, Point)
            .join(InstanceRow, InstanceRow.id == MeasurementRow.instance_id)
            .join(Point, Point.id == MeasurementRow.point_id)
            .where(InstanceRow.space == space, MeasurementRow.device_id == device_id)
            .order_by(MeasurementRow.id)
        ).all()
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
        doc = yamlfile.safe_load(spaces[0])
    except yaml.YAMLError as exc:
        raise UserError(f"the recorded space file of {space} is not YAML it can read: {exc}") from None
    if not isinstance(doc, dict):
        raise UserError(f"the recorded space file of {space} is not a mapping")
    tune_params = {k: list(v) if isinstance(v, list) else v for k, v in (doc.get("parameters") or {}).items()}
    keys = tuple(tune_params)
    records, header, sweeps = [], {}, set()
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
        records.append(
            KTRecord(
                {k: params[k] for k in keys},
                kt if not ok else "ok",
                (recorded if _positive(recorded) else m.median_ms) if ok else None,
                tuple(m.times_ms or ()) if ok else (),
                extra,
            )
        )
        header = {"problem_size": tuple(v for _, v in tp.sizes)}
    kernel_name = (doc.get("kernel") or {}).get("name") or (doc.get("kernel") or {}).get("template") or space
    if "description" in doc and str(doc["description"]).startswith("imported from a Kernel Tuner cache of "):
        kernel_name = str(doc["description"]).split(" of ", 1)[1].rsplit(" on ", 1)[0]
    sizes = header.get("problem_size", ())
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
    from sqlalchemy import select

    from autotune.store.schema import Sweep

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
    chosen = found.pop() if len(found) == 1 else None
    if chosen is None:
        return None
    ps = json.loads(chosen)
    return tuple(ps) if isinstance(ps, list) else ps


def keys_and_times(cache: KTCache) -> dict[str, tuple[str, float | None]]:
    """{config key: (status, time)}: what a round trip must reproduce."""
    return {config_key(r.params, cache.tune_params_keys): (r.status, r.time_ms) for r in cache.records}
