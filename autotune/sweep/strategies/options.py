"""A sweep's search options (the config's `strategy:` mapping, `--budget` and friends) and the per-point stop rule.

```
strategy: tpe                # or a mapping:
strategy:
  name: tpe                  # brute, random, tpe, hybrid, gp, cmaes, auto, an installed one or module:Class
  budget: 100                # evaluations per test point (--budget)
  patience: 30               # stop a point after 30 evaluations without a better time (--patience)
  roofline_tol: 0.05         # stop a point once its best reaches 95% of its kind's roofline (--roofline-tol)
  transfer: 3                # start each point from the 3 best instances of the nearest point searched (--transfer)
  studies: database          # keep the Optuna studies in the sweep's database (default) or `memory`
  batch: 4                   # instances proposed at once (model-based strategies)
  startup: 10                # random proposals before the model (default: budget / 5, 3..10)
```
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from autotune.vocab import Measurement, Status

STUDY_STORES = ("database", "memory")
SAMPLER_KEYS = ("batch", "startup")
ROOFLINE_BATCH = 16


@dataclass(frozen=True)
class SearchOptions:
    """Per-point search options; all None/0: the strategy runs per space as before."""

    budget: int | None = None  # evaluations per test point
    patience: int | None = None  # stop a point after this many evaluations without improvement
    roofline_tol: float | None = None  # stop a point when best time <= roofline time / (1 - roofline_tol)
    transfer: int = 0  # enqueue this many best instances of the nearest point searched before
    studies: str = "database"  # where the Optuna studies live: the sweep's database or memory
    sampler: tuple[tuple[str, int], ...] = ()  # model-based strategies' options (batch, startup)

    @property
    def per_point(self) -> bool:
        """Whether a per-point option asks every strategy to run per test point."""
        return self.budget is not None or self.patience is not None or self.roofline_tol is not None

    def sampler_options(self) -> dict[str, Any]:
        return dict(self.sampler)


class StopRule:
    """Whether one point's search is done: `patience` evaluations without a better verified time, or a best
    time within `roofline_tol` of the point's roofline time (the kind's fewest bytes at the GPU's copy
    bandwidth). The budget is the strategy's (its `ask` returns [] when spent)."""

    def __init__(self, options: SearchOptions, roofline_ms: float | None, best_ms: float | None = None) -> None:
        self.patience = options.patience
        self.target_ms = (
            roofline_ms / (1 - options.roofline_tol) if roofline_ms and options.roofline_tol is not None else None
        )
        self.best_ms = best_ms if best_ms is not None else math.inf
        self.since_best = 0
        self.reason: str | None = None

    def tell(self, results: list[Measurement]) -> None:
        times = [m.median_ms for m in results if m.status == Status.OK and m.median_ms is not None]
        if times and min(times) < self.best_ms:
            self.best_ms, self.since_best = min(times), 0
        else:
            self.since_best += 1

    def batch(self, most: int) -> int:
        """How many instances to ask for now, so that the rules act in time: never past the patience, and at most
        ROOFLINE_BATCH at a time while a roofline target is set."""
        if self.patience is not None:
            most = min(most, max(1, self.patience - self.since_best))
        return min(most, ROOFLINE_BATCH) if self.target_ms is not None else most

    @property
    def done(self) -> bool:
        if self.target_ms is not None and self.best_ms <= self.target_ms:
            self.reason = f"best {self.best_ms:.4g} ms within the roofline tolerance ({self.target_ms:.4g} ms)"
        elif self.patience is not None and self.since_best >= self.patience:
            self.reason = f"{self.since_best} evaluations without improvement (patience)"
        else:
            return False
        return True


def roofline_ms(bytes_moved: int | None, copy_bandwidth: float) -> float | None:
    """The time the point's fewest bytes take at the GPU's measured copy bandwidth (bytes/s), in ms."""
    if not bytes_moved or copy_bandwidth <= 0:
        return None
    return bytes_moved / copy_bandwidth * 1e3
