"""A problem kind of recorded measurements only: what `autotune import kerneltuner` writes into the space file of a
cache it imports (`problem: {name: kerneltuner, sizes: [size_x, size_y], recorded: true}`).

A Kernel Tuner cache records the times of a kernel's configurations at one problem size, not how to launch the
kernel or what its arguments are. The imported space therefore says which test points its measurements belong to
(the kind's name and size names, so a sweep config can name them: `sizes: {size_x: 4096, size_y: 4096}`), and
`autotune sweep --replay DB` (any strategy) runs on it, but nothing can be measured on a GPU: `allocate` refuses
with what to do (add a kernel binding and a `problem:` section with the kernel's arguments, docs/kinds.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.errors import SpaceError, UserError
from autotune.problems.base import ProblemData, ProblemKind, Scalars
from autotune.vocab import TestPoint

KEYS = ("name", "sizes", "precisions", "recorded")


@dataclass(frozen=True, eq=True)
class RecordedKind(ProblemKind):
    """Test points of a name and sizes, no data: replay only (module docstring)."""

    name: str
    size_names: tuple[str, ...]
    precisions: tuple[str, ...] = ("fp32",)

    def bytes_moved(self, point: TestPoint, scalars: Scalars) -> int:
        return 0  # unknown: the cache recorded times only (no GB/s, no roofline)

    def check_limits(self, point: TestPoint) -> None:
        return None  # the sizes are labels of the recorded point, not sizes a kernel is launched with

    def allocate(self, point: TestPoint, convention: str, scalars: Scalars, l2_bytes: int, seed: int) -> ProblemData:
        raise UserError(
            f"problem kind {self.name!r} holds recorded measurements only (an imported Kernel Tuner cache): "
            "nothing to measure on a GPU",
            hint="replay it (autotune sweep CONFIG --replay DB, DB the database the cache was imported into), or "
            "give the space a kernel binding and a problem: section with the kernel's arguments (docs/kinds.md)",
        )

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "recorded": True}


def load_recorded(d: dict[str, Any], path: Path, line: int | None) -> RecordedKind:
    """`problem: {name: NAME, sizes: [..], precisions: [..], recorded: true}` (SpaceError naming file and line)."""

    def fail(message: str) -> SpaceError:
        return SpaceError(
            f"problem: {message}",
            file=path,
            line=line,
            hint="a recorded kind is {name: NAME, sizes: [NAME, ...], precisions: [fp32], recorded: true}",
        )

    extra = sorted(set(d) - set(KEYS))
    if extra:
        raise fail(f"a kind of recorded measurements takes no {', '.join(extra)} (no kernel is launched)")
    name, sizes, precisions = d.get("name"), d.get("sizes"), d.get("precisions", ["fp32"])
    if not isinstance(name, str) or not name.isidentifier():
        raise fail("`name:` must be an identifier")
    names = isinstance(sizes, list) and all(isinstance(s, str) and s.isidentifier() for s in sizes)
    if not (names and sizes and len(set(sizes)) == len(sizes)):
        raise fail("`sizes:` must be a list of distinct size names")
    if not (isinstance(precisions, list) and precisions and all(isinstance(p, str) and p for p in precisions)):
        raise fail("`precisions:` must be a list of precision names")
    return RecordedKind(name, tuple(sizes), tuple(dict.fromkeys(precisions)))
