"""The store's DataFrame reads: measurements and baseline times with one column per size of the kinds present.

A frame of a GEMM database has the columns m, n, k, batch after `shape`; a stencil's has ny, nx; a database holding
several kinds has the size names of each (in the order the rows bring them), empty where a row's kind has no such
size. The sizes come from each point's canonical `sizes` JSON (parsed once per distinct point).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from autotune.store.schema import BaselineRow, Device, InstanceRow, MeasurementRow, Point
from autotune.vocab import RECORDED_AS_GIVEN, TIME_STATS

if TYPE_CHECKING:  # pandas is imported where a frame is made: a sweep (the store's import) never needs it
    import pandas as pd

RESULT_COLUMNS = (  # a measurement row's results: all but its log (long text, read where a row is shown)
    "status",
    *TIME_STATS,
    "reps",
    "gflops",
    "gbs",
    "roofline_frac",
    *(name for name in RECORDED_AS_GIVEN if name != "log"),
    "sweep_id",
)
# the fixed columns of Store.measurements(); the size columns of the kinds present come after `shape`, and a
# parameter named like any column (fixed or size) becomes param_NAME
MEASUREMENT_COLUMNS = ("device", "space", "instance_id", "instance", "kind", "precision", "shape", *RESULT_COLUMNS)
BASELINE_RESULTS = ("library", "status", "median_ms", "p20_ms", "p80_ms", "roofline_frac", "gflops", "gbs", "error")


def measurements(engine: Engine, device: str | None = None, space: str | None = None) -> pd.DataFrame:
    """See `Store.measurements`."""
    import pandas as pd

    m, p, i, d = MeasurementRow, Point, InstanceRow, Device
    cols: list[Any] = [d.name.label("device"), i.space, m.instance_id, i.name.label("instance")]
    cols += [p.kind, p.precision, p.shape, p.sizes, *(getattr(m, c) for c in RESULT_COLUMNS), i.params]
    q = select(*cols).join(p, p.id == m.point_id).join(i, i.id == m.instance_id).join(d, d.id == m.device_id)
    if device is not None:
        q = q.where((d.name == device) | (d.uuid == device))
    if space is not None:
        q = q.where(i.space == space)
    with engine.connect() as conn:
        frame = pd.DataFrame(conn.execute(q.order_by(m.id)).mappings().all(), columns=[c.key for c in cols])
    frame = size_columns(frame)
    params = pd.DataFrame([_as_dict(x) for x in frame.pop("params")], index=frame.index)
    params.columns = [c if c not in frame.columns else f"param_{c}" for c in params.columns]
    return pd.concat([frame, params], axis=1)


def baselines(engine: Engine, device: str | None = None) -> pd.DataFrame:
    """See `Store.baselines`."""
    import pandas as pd

    b, p, d = BaselineRow, Point, Device
    cols = [d.name.label("device"), p.kind, p.precision, p.shape, p.sizes, *(getattr(b, c) for c in BASELINE_RESULTS)]
    q = select(*cols).join(p, p.id == b.point_id).join(d, d.id == b.device_id)
    if device is not None:
        q = q.where((d.name == device) | (d.uuid == device))
    with engine.connect() as conn:
        result = conn.execute(q.order_by(b.id))
        frame = pd.DataFrame(result.mappings().all(), columns=list(result.keys()))
    return size_columns(frame)


def size_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """Replace the `sizes` JSON column by one column per size name, after `shape`, in the kinds' order (a size named
    like a fixed column, e.g. `status`, is the column size_NAME)."""
    parsed: dict[str, dict] = {}
    sizes = [parsed.get(x) or parsed.setdefault(x, json.loads(x)) for x in frame.pop("sizes")]
    names = list(dict.fromkeys(n for d in parsed.values() for n in d))
    at = frame.columns.get_loc("shape") + 1
    for offset, name in enumerate(names):
        column = name if name not in frame.columns else f"size_{name}"
        frame.insert(at + offset, column, [d.get(name) for d in sizes])
    return frame


def _as_dict(value: object) -> dict:
    return json.loads(value) if isinstance(value, str) else dict(value or {})  # type: ignore[call-overload]
