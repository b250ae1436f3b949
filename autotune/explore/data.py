"""Reading a results database for the explorer: measurements as compact frames, instances and points apart.

`Store.measurements` joins every measurement with its point's sizes and its instance's parameters (a JSON parse per
row); for a database of 10^6 measurements the explorer reads the three tables apart instead, through the schema's
models, and joins them with integer codes in pandas: measurements (point, instance, status, times, figures),
instances (space, parameters: parsed once per instance) and test points (sizes through `reads.size_columns`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sqlalchemy import select

from autotune.store import reads
from autotune.store.schema import BaselineRow, Device, InstanceRow, MeasurementRow, Point, Sweep
from autotune.store.store import Store


@dataclass
class Results:
    """One results database, read for the explorer."""

    source: str  # as the user gave it
    measurements: pd.DataFrame  # point_id, instance_id, device_id, sweep_id, status, median_ms, ... (one row each)
    points: pd.DataFrame  # indexed by point id: kind, precision, shape, key (TestPoint.key), sizes..., flops
    instances: pd.DataFrame  # indexed by instance id: space, name
    params: dict[str, pd.DataFrame]  # space -> parameters of its instances (indexed by instance id)
    devices: pd.DataFrame  # indexed by device id: name, uuid
    sweeps: pd.DataFrame  # id, config_name, started_at, finished_at, status, device_id
    baselines: pd.DataFrame  # point_id, device_id, library, status, median_ms, roofline_frac, gflops
    size_names: list[str]


MEASURED = (
    "point_id",
    "instance_id",
    "device_id",
    "sweep_id",
    "status",
    "median_ms",
    "gflops",
    "roofline_frac",
    "compile_s",
    "reps",
)


def load(source: str) -> Results:
    """Read the database at `source` (a path, a packed `.sqlite.xz`, a `.sqlite.gz`, or a URL) read-only."""
    from autotune.store.engine import database_url

    url = database_url(source)
    with Store.open(url, create=False, readonly=True) as store:
        with store.engine.connect() as conn:
            m = MeasurementRow
            meas = _fetch(conn, select(*[getattr(m, c) for c in MEASURED]).order_by(m.id), list(MEASURED))
            for c in ("median_ms", "gflops", "roofline_frac", "compile_s"):
                meas[c] = pd.to_numeric(meas[c], errors="coerce").astype("float64")
            meas["status"] = meas["status"].astype("category")
            instances = _frame(conn, InstanceRow, ("id", "space", "name", "params")).set_index("id")
            p = Point
            point_rows = conn.execute(select(p.id, p.kind, p.precision, p.shape, p.sizes)).all()
            devices = _frame(conn, Device, ("id", "name", "uuid")).set_index("id")
            sweeps = _frame(conn, Sweep, ("id", "config_name", "started_at", "finished_at", "status", "device_id"))
            base = _frame(
                conn,
                BaselineRow,
                ("point_id", "device_id", "library", "status", "median_ms", "roofline_frac", "gflops"),
            )
    params = {  # in order of first appearance
        space: pd.DataFrame([_as_dict(x) for x in g["params"]], index=g.index.rename(None))
        for space, g in instances.groupby("space", sort=False)
    }
    instances = instances.drop(columns="params")
    points = pd.DataFrame(point_rows, columns=["id", "kind", "precision", "shape", "sizes"])
    keys = [Point(kind=r[1], precision=r[2], shape=r[3], sizes=r[4]).point().key for r in point_rows]
    points = reads.size_columns(points)
    points["key"] = keys
    points = points.set_index("id")
    size_names = [c for c in points.columns if c not in ("kind", "precision", "shape", "key")]
    return Results(source, meas, points, instances, params, devices, sweeps, base, size_names)


def _frame(conn, model: type, columns: tuple[str, ...]) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    """The `columns` of a table, as a frame."""
    return pd.DataFrame(conn.execute(select(*[getattr(model, c) for c in columns])).all(), columns=list(columns))


def _fetch(conn, stmt, columns: list[str]) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    """A large SELECT through the DB-API cursor (plain tuples: about twice as fast as SQLAlchemy rows for 10^6
    rows); the statement is built from the schema's models and compiled for the connection's dialect."""
    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True})
    cur = conn.connection.driver_connection.cursor()
    try:
        cur.execute(str(compiled))
        return pd.DataFrame.from_records(cur.fetchall(), columns=columns)
    finally:
        cur.close()


def _as_dict(value: object) -> dict:
    return json.loads(value) if isinstance(value, str) else dict(value or {})  # type: ignore[call-overload]


def ok_frame(r: Results) -> pd.DataFrame:
    """The verified measurements with a time, with `space` and `slowdown` (time / the best time of any space at the
    same point and device) added."""
    ok = r.measurements[(r.measurements["status"] == "ok") & (r.measurements["median_ms"] > 0)].copy()
    ok["space"] = r.instances["space"].reindex(ok["instance_id"].to_numpy()).to_numpy()
    best = ok.groupby(["device_id", "point_id"])["median_ms"].transform("min")
    ok["slowdown"] = ok["median_ms"] / best
    return ok


def numeric_codes(values: pd.Series) -> tuple[np.ndarray, list | None]:
    """Numbers as they are; anything else as codes 0..n-1 with the labels (for axes of parameter values)."""
    num = pd.to_numeric(values, errors="coerce")
    if num.notna().all():
        return num.to_numpy(dtype=float), None
    labels = sorted({str(v) for v in values}, key=str)
    index = {v: i for i, v in enumerate(labels)}
    return np.array([index[str(v)] for v in values], dtype=float), labels
