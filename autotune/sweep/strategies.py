"""Search strategies, behind a small ask/tell interface.

The runner asks a strategy for the next instances to measure and tells it what each one measured.
A strategy never sees the GPU, the database or the worker processes, so a model-based sampler
(e.g. Optuna's TPE) fits later without touching the runner. Strategies load lazily by name.
"""
from __future__ import annotations

import importlib
from typing import Protocol, Sequence

import numpy as np

from autotune.errors import UserError
from autotune.space.instance import Instance
from autotune.vocab import Measurement


class Strategy(Protocol):
    def ask(self, n: int) -> list[Instance]:
        """Up to `n` instances to measure next; an empty list when the strategy is done."""

    def tell(self, instance: Instance, results: Sequence[Measurement]) -> None:
        """What `instance` measured on the test points it was run on (failures included)."""


class BruteForce:
    """Every instance, in the order given."""

    def __init__(self, instances: Sequence[Instance], budget: int | None = None, seed: int = 0) -> None:
        self._todo = list(instances)[:budget] if budget is not None else list(instances)
        self._next = 0

    def ask(self, n: int) -> list[Instance]:
        out = self._todo[self._next:self._next + n]
        self._next += len(out)
        return out

    def tell(self, instance: Instance, results: Sequence[Measurement]) -> None:
        pass


class RandomSample(BruteForce):
    """`budget` instances drawn without replacement (all of them without a budget), seeded."""

    def __init__(self, instances: Sequence[Instance], budget: int | None = None, seed: int = 0) -> None:
        pool = list(instances)
        order = np.random.default_rng(seed).permutation(len(pool))
        super().__init__([pool[i] for i in order], budget, seed)


STRATEGIES = {
    "brute": "autotune.sweep.strategies:BruteForce",
    "random": "autotune.sweep.strategies:RandomSample",
}


def make_strategy(name: str, instances: Sequence[Instance], budget: int | None = None, seed: int = 0) -> Strategy:
    """The strategy registered as `name` (module:class, imported only when chosen)."""
    if name not in STRATEGIES:
        raise UserError(f"unknown search strategy {name!r}", hint=f"choose one of {', '.join(STRATEGIES)}")
    module, cls = STRATEGIES[name].split(":")
    return getattr(importlib.import_module(module), cls)(instances, budget, seed)
