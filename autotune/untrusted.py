"""One reader of numbers that come from outside: environment variables, Kernel Tuner caches, results databases,
packed files, command-line text.

Such a number is checked here before anything uses it: a bool is not a number, text is at most `MAX_TEXT`
characters (a 400-digit time is refused before Python converts it), the value is finite (no `nan`, `inf`,
`1e999`), whole where a count is asked for, and within the bounds the caller gives. Anything else is a
`UserError` that names where the value came from and what to write instead; `off` words (`0`, `off`, ...) are the
caller's way of saying "no limit" and give None.
"""

from __future__ import annotations

import math
import os
from autotune.errors import UserError

MAX_TEXT = 64  # characters of a number written as text: more is not a number a user meant
MAX_WHOLE = 2**63 - 1  # a count beyond a signed 64-bit integer is not a count


def _describe(lo: float | None, hi: float | None, integer: bool) -> str:
    kind = "a whole number" if integer else "a number"
    if lo is not None and hi is not None:
        return f"{kind} from {lo:g} to {hi:g}"
    if lo is not None:
        return f"{kind} of at least {lo:g}"
    if hi is not None:
        return f"{kind} of at most {hi:g}"
    return kind


def number(
    value: object,
    *,
    name: str,
    integer: bool = False,
    lo: float | None = None,
    hi: float | None = None,
    off: tuple[str, ...] = (),
    example: str | None = None,
) -> float:
    """`value` (an int, a float or its text) as a finite number within [lo, hi] (an int when `integer`); UserError
    naming `name` (where the value came from: `AUTOTUNE_MAX_RAW`, `cache.json: "time"`) otherwise. Text in `off`
    (compared lower-case) is not accepted here: see `number_or_off`."""
    shown = repr(value)
    if len(shown) > MAX_TEXT:
        shown = f"{shown[:20]}... ({len(shown)} characters)"
    want = _describe(lo, hi, integer)
    hint = (
        f"write {want}" + (f", e.g. {example}" if example else "") + (f" (or {'/'.join(off)} for none)" if off else "")
    )
    parsed = _parsed(value, integer)
    if parsed is None or (lo is not None and parsed < lo) or (hi is not None and parsed > hi):
        raise UserError(f"{name} = {shown} is not {want}", hint=hint)
    return parsed


def _parsed(value: object, integer: bool) -> float | None:
    """`value` (an int, a float or its text) as a finite number (an int when `integer`), None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text or len(text) > MAX_TEXT:
            return None
        try:
            value = int(text) if integer and text.lstrip("+-").isdigit() else float(text)
        except ValueError:
            return None
    if isinstance(value, float):
        if not math.isfinite(value) or (integer and not value.is_integer()):
            return None
        if not integer:
            return value
        value = int(value)
    return value if abs(value) <= MAX_WHOLE else None


def number_or_off(
    value: object,
    *,
    name: str,
    off: tuple[str, ...] = ("0", "off", "none", "no", "false"),
    integer: bool = False,
    lo: float | None = None,
    hi: float | None = None,
    example: str | None = None,
) -> float | None:
    """Like `number`, but text in `off` (any case) gives None: the caller's "no limit"."""
    if isinstance(value, str) and value.strip().lower() in off:
        return None
    return number(value, name=name, integer=integer, lo=lo, hi=hi, off=off, example=example)


def env_number(
    env: str,
    default: float | None,
    *,
    integer: bool = False,
    lo: float | None = None,
    hi: float | None = None,
    off: tuple[str, ...] = (),
    example: str | None = None,
) -> float | None:
    """The environment variable `env` read by `number` (`number_or_off` when `off` words are given); `default`
    when it is unset or empty."""
    text = os.environ.get(env, "")
    if not text.strip():
        return default
    if off:
        return number_or_off(text, name=env, off=off, integer=integer, lo=lo, hi=hi, example=example)
    return number(text, name=env, integer=integer, lo=lo, hi=hi, example=example)


def numbers(values: list[object], *, name: str, lo: float | None = None, hi: float | None = None) -> list[float]:
    """Each of `values` read by `number` (`name[i]` names one in a message), with a fast path for the common case, a
    finite float within the bounds (the times of a recorded measurement: tens of thousands per database)."""
    out: list[float] = []
    for i, value in enumerate(values):
        if (
            type(value) is float
            and math.isfinite(value)
            and (lo is None or value >= lo)
            and (hi is None or value <= hi)
        ):
            out.append(value)
        else:
            out.append(number(value, name=f"{name}[{i}]", lo=lo, hi=hi))
    return out


# TOL and the other fractions (`--tol`, `--tols`, `--roofline-tol`, a structure's MARGIN, a table's recorded tol):
# one check and one message for all of them. The common mistake is a percent where a fraction goes (`--tol 5`).
MESSAGE = "TOL is a fraction: 0.05 = 5%"


def assignments(text: str, *, name: str, example: str) -> dict[str, int]:
    """Command-line text `NAME=VALUE,...` (--generic) as {NAME: whole number}: each NAME a name once, each VALUE read by
    `number`; UserError naming `name` otherwise. Blank text gives {}."""
    hint = f"write NAME=VALUE pairs joined by commas, e.g. {name} {example}"
    out: dict[str, int] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        key, eq, value = (x.strip() for x in item.partition("="))
        shown = item if len(item) <= MAX_TEXT else f"{item[:20]}... ({len(item)} characters)"
        if not eq or not key.isidentifier():
            raise UserError(f"{name} {shown!r} is not NAME=VALUE", hint=hint)
        if key in out:
            raise UserError(f"{name}: {key} is given twice", hint=hint)
        out[key] = int(number(value, name=f"{name} {key}", integer=True))
    return out


def fraction(value: object, option: str) -> float:
    """`value` (a number or its text) as a fraction in [0, 1); otherwise one UserError naming `option` (its hint reads
    a number from 1 to 100 as the percent the user perhaps meant)."""
    got = _parsed(value, False)
    if got is not None and 0 <= got < 1:
        return float(got)
    shown = f"{value:g}" if isinstance(value, float) else str(value)[:MAX_TEXT]
    hint = (
        f"write {got / 100:g} for {got:g}%"
        if got is not None and 1 <= got <= 100
        else "write a number from 0 up to (not including) 1, e.g. 0.05 for 5%"
    )
    raise UserError(f"{option} {shown}: {MESSAGE}", hint=hint)


def fractions(text: str, option: str) -> list[float]:
    """Comma-separated fractions (`--tols 0,0.05,0.1`), each checked by `fraction`."""
    return [fraction(x, option) for x in text.split(",") if x.strip()]
