"""`brute`: every instance, in the order the space generates them (at most `budget` of them)."""

from __future__ import annotations

from typing import Sequence

from autotune.space.instance import Instance
from autotune.sweep.strategies.base import Strategy, check_n
from autotune.vocab import Measurement


class BruteForce(Strategy):
    """Every instance, in the order given (the first `budget` without a random order)."""

    streams = True  # nothing told changes what comes next

    def __init__(self, instances: Sequence[Instance], budget: int | None = None, seed: int = 0) -> None:
        self._todo = list(instances)[:budget] if budget is not None else list(instances)
        self._next = 0

    def ask(self, n: int) -> list[Instance]:
        check_n(n)
        out = self._todo[self._next : self._next + n]
        self._next += len(out)
        return out

    def tell(self, instance: Instance, results: Sequence[Measurement]) -> None:
        pass
