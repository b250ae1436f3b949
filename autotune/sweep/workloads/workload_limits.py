"""Limits a workload is checked against before anything is built: how many problems it may hold (ranges are
counted from their bounds, CSV files by their lines, `validate --points` files too) and how many (instance, point)
pairs a sweep config written for it may plan. Each limit is a command-line knob with an environment default, named
in the error."""

from __future__ import annotations

import math
from pathlib import Path

from autotune import untrusted
from autotune.errors import ConfigError

MAX_PROBLEMS = 200_000  # problems of one workload (the examples hold 59,582 and 54,872); ~30 s to read as a CSV
MAX_PAIRS = 1_000_000  # (instance, point) pairs `workload config` writes without --force
PROBLEMS_ENV, PAIRS_ENV = "AUTOTUNE_MAX_PROBLEMS", "AUTOTUNE_MAX_PAIRS"
PROBLEMS_KNOB = f"--max-problems N (autotune workload, autotune validate) or {PROBLEMS_ENV}=N (every command)"


def limit(given: int | None, env: str, default: int) -> int:
    """`given`, else the environment variable `env`, else `default`: a whole number of at least 1 (read by
    autotune.untrusted: a bad value is one error naming the variable)."""
    if given is not None:
        return int(untrusted.number(given, name=env, integer=True, lo=1))
    return int(untrusted.env_number(env, default, integer=True, lo=1, example=str(default)) or default)


def max_problems(given: int | None = None) -> int:
    return limit(given, PROBLEMS_ENV, MAX_PROBLEMS)


def problems_error(count: int, cap: int, file: Path, line: int | None, what: str) -> ConfigError:
    return ConfigError(
        f"{what} {count:,} problems, above the limit of {cap:,}",
        file=file,
        line=line,
        hint="narrow the ranges (a larger step, pow2) or sample the problems, or raise the limit: "
        + PROBLEMS_KNOB.replace("N", str(count), 1),
    )


def range_count(bounds: list[tuple[int, int, int]]) -> int:
    """Combinations of inclusive ranges (start, stop, step), computed without listing them."""
    return math.prod(max(0, (b - a) // s + 1) for a, b, s in bounds)


def csv_rows(path: Path) -> int:
    """Lines of a file after the first (an upper bound on its data rows), counted in binary chunks."""
    lines, last = 0, b"\n"
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return max(0, lines + (last != b"\n") - 1)
