"""TOL and the other fractions the command line takes (`--tol`, `--tols`, `--roofline-tol`, a structure's MARGIN):
one check and one message for all of them. The common mistake is a percent where a fraction goes (`--tol 5`)."""

from __future__ import annotations

from typing import Any

from autotune import untrusted
from autotune.errors import UserError

MESSAGE = "TOL is a fraction: 0.05 = 5%"


def fraction(value: object, option: str) -> float:
    """`value` (a number or its text) as a fraction in [0, 1); otherwise one UserError naming `option`."""
    try:
        got = untrusted.number(value, name=option, lo=0.0, hi=1.0)
        if got < 1:
            return float(got)
    except UserError:
        got = None
    shown = f"{value:g}" if isinstance(value, float) else str(value)[: untrusted.MAX_TEXT]
    percent = got if got is not None else _as_percent(value)
    hint = (
        f"write {percent / 100:g} for {percent:g}%"
        if percent is not None and 1 <= percent <= 100
        else "write a number from 0 up to (not including) 1, e.g. 0.05 for 5%"
    )
    raise UserError(f"{option} {shown}: {MESSAGE}", hint=hint)


def _as_percent(value: object) -> float | None:
    """`value` read as a number where it is one (the figure the user perhaps meant as a percent), else None."""
    try:
        return untrusted.number(value, name="")
    except UserError:
        return None


def fractions(text: str, option: str) -> list[float]:
    """Comma-separated fractions (`--tols 0,0.05,0.1`), each checked by `fraction`."""
    return [fraction(x, option) for x in text.split(",") if x.strip()]


def tol_callback(ctx: Any, param: Any, value: float | None) -> float | None:
    """The typer callback of every option that takes one fraction: the value checked (None stays None)."""
    return None if value is None else fraction(value, param.opts[0])


def tols_callback(ctx: Any, param: Any, value: str) -> str:
    """The typer callback of an option that takes comma-separated fractions: each checked, the text kept."""
    fractions(value, param.opts[0])
    return value
