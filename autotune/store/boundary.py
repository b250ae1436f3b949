"""What may enter the store as `ok`: a measurement whose status is ok must carry a finite, positive median and
finite, non-negative repetition times and percentiles; anything else is stored as `crashed` with the reason, so no
path (a GPU backend, replay, an import, a third-party executor) puts a bad number in as a good one."""

from __future__ import annotations

import math
from dataclasses import replace

from autotune.vocab import Measurement, Status


def checked(m: Measurement) -> Measurement:
    """The measurement as it may be stored. `crashed`, not `wrong`: `wrong` says the kernel's output failed
    verification, which is not known here; the measurement itself broke."""
    if Status(m.status) != Status.OK:
        return m
    why = _why_not_ok(m)
    if why is None:
        return m
    error = f"{why}; not stored as ok"
    return replace(m, status=Status.CRASHED, error=f"{m.error}: {error}" if m.error else error)


def _why_not_ok(m: Measurement) -> str | None:
    if m.median_ms is None:
        return "no median time"
    if not (_time(m.median_ms) and m.median_ms > 0):
        return f"median time {m.median_ms!r} ms is not a positive finite number"
    named = [("a repetition's", t) for t in m.times_ms] + [
        (name, v)
        for name, v in (("p20", m.p20_ms), ("p80", m.p80_ms), ("min", m.min_ms), ("max", m.max_ms))
        if v is not None
    ]
    bad = next(((name, v) for name, v in named if not _time(v)), None)
    return f"{bad[0]} time {bad[1]!r} ms is not a finite number >= 0" if bad else None


def _time(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
