"""Systematic failures stop a space early.

When the first instances of a space all fail with the same compile or launch error (a header NVRTC cannot
compile, a kernel name the source lacks, a launch that always faults), measuring the rest of the space only
repeats it: 381 instances failed identically and used a whole budget where the first few already told. The
runner feeds each finished instance's measurements to a `FailureStreak`; once `limit` instances in a row, from
the space's start, failed with one error (`signature`: instance-specific numbers, names and paths normalised
away), the space stops with one line saying why, and the sweep goes on with the next space.

Resource limits (too much shared memory, too many registers or threads, out of memory) are instance-dependent
by nature: such a failure, a success, or any other status ends the streak for good, and the space runs to the end.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autotune.vocab import Measurement, Status

if TYPE_CHECKING:  # pragma: no cover
    from autotune.store.store import Store

DEFAULT_LIMIT = 8  # `stop_after_failures:` of a sweep config (0: never stop)

_RESOURCE = re.compile(
    r"too much shared|too many (resources|registers|threads)|uses too much|out of memory|"
    r"OUT_OF_RESOURCES|exceeds? (the )?(maximum|limit)|shared data|local memory|stack size",
    re.IGNORECASE,
)
_MANGLED = re.compile(r"\b_Z\w+")
_TEMPLATE = re.compile(r"\b[A-Za-z_][\w:]*<[^<>\"']*(<[^<>\"']*>[^<>\"']*)*>")
_PATH = re.compile(r"(/[\w.+-]+)+/")
_NUMBER = re.compile(r"\b0x[0-9a-fA-F]+\b|\b\d+(\.\d+)?\b")


def signature(status: str, error: str | None) -> str | None:
    """The failure with what differs between instances normalised away (mangled and template names, folders,
    numbers); None for what cannot be systematic: no failure, or a compile or launch error about resources."""
    if status not in (Status.COMPILE_ERROR.value, Status.LAUNCH_ERROR.value):
        return None
    text = (error or "").strip()
    if _RESOURCE.search(text):
        return None
    text = _MANGLED.sub("SYM", text)
    text = _TEMPLATE.sub("NAME", text)
    text = _PATH.sub("", text)
    text = _NUMBER.sub("N", text)
    return f"{status}: {' '.join(text.split())}"


def instance_signature(ms: Sequence[Measurement]) -> str | None:
    """One instance's failure when every one of its measurements failed the same way, else None."""
    sigs = {signature(Status(m.status).value, m.error) for m in ms}
    return sigs.pop() if len(sigs) == 1 and ms else None


@dataclass
class FailureStreak:
    """Instances of one space that failed the same way, counted from its start (see the module docstring)."""

    limit: int = DEFAULT_LIMIT
    signature: str | None = None
    count: int = 0
    example: str = ""  # the first such error, as recorded
    status: str = ""
    broken: bool = False

    def add(self, sig: str | None, error: str | None = None, status: str = "") -> bool:
        """Count one finished instance (`instance_signature` of its measurements); True once the space must stop."""
        if self.broken or self.limit <= 0:
            return False
        if sig is None or (self.signature is not None and sig != self.signature):
            self.broken = True
            return False
        if self.signature is None:
            self.signature, self.example, self.status = sig, (error or "").strip(), status
        self.count += 1
        return self.count >= self.limit

    def add_measurements(self, ms: Sequence[Measurement]) -> bool:
        return self.add(instance_signature(ms), ms[0].error if ms else None, Status(ms[0].status).value if ms else "")

    @property
    def stopped(self) -> bool:
        return not self.broken and self.limit > 0 and self.count >= self.limit

    def message(self, space: str, again: bool = False) -> str:
        what = "compile error" if self.status == Status.COMPILE_ERROR.value else "launch error"
        when = " (as in an earlier run of this sweep)" if again else ""
        return (
            f"space {space}: stopped{when}: its first {self.count} instances all failed with the same {what}: "
            f"{self.example[:200]}; the rest of the space is not measured (fix the kernel or the space and run "
            f"again; `stop_after_failures: 0` in the sweep config measures every instance anyway)"
        )


def earlier_streak(store: "Store", space: str, finished: set[str], limit: int) -> FailureStreak:
    """The streak of the instances of `space` an earlier run measured fully (`finished` ids), so a resumed sweep
    stops a systematically failing space again, and says so, rather than going on or stopping silently."""
    streak = FailureStreak(limit)
    if not finished or limit <= 0:
        return streak
    frame = store.measurements(space=space)
    frame = frame[frame.instance_id.isin(finished)]
    for _, rows in frame.groupby("instance_id", sort=False):
        errors = [e if isinstance(e, str) else None for e in rows.error]
        sigs = {signature(str(st), e) for st, e in zip(rows.status, errors, strict=True)}
        streak.add(sigs.pop() if len(sigs) == 1 else None, errors[0], str(rows.status.iloc[0]))
    return streak
