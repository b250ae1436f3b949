"""TOL and the other fractions the command line takes (`--tol`, `--tols`, `--roofline-tol`, a structure's MARGIN):
checked by autotune.untrusted.fraction."""

from __future__ import annotations

import math
from typing import Any

from autotune.untrusted import fraction, fractions


def tol_callback(ctx: Any, param: Any, value: float | None) -> float | None:
    """The typer callback of every option that takes one fraction: the value checked (None stays None)."""
    return None if value is None else fraction(value, param.opts[0])


def tols_callback(ctx: Any, param: Any, value: str) -> str:
    """The typer callback of an option that takes comma-separated fractions: each checked, the text kept."""
    fractions(value, param.opts[0])
    return value


def pct(x: Any) -> str:
    """A fraction printed as a percentage with two decimals ("" for none or NaN)."""
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.2f}%"
