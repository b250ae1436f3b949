"""`auto`: picks a strategy from the space's size, its parameter types and the budget, and says which and why.

Rules, in order:
  - no budget, or a budget that covers the space: `brute` (every instance is measured anyway, in order);
  - only numeric parameters, at most 8 of them, a budget of at most 300, torch installed: `gp` (a Gaussian
    process gets the most out of each evaluation on a small numeric space);
  - otherwise `tpe` (any parameter types, cheap per proposal at any budget).
`cmaes` is never picked: it samples categorical parameters at random and needs hundreds of evaluations.
"""
from __future__ import annotations

import importlib.util
from typing import Any, ClassVar, Sequence

from autotune.space.instance import Instance
from autotune.sweep.strategies.base import Strategy
from autotune.sweep.strategies.brute import BruteForce
from autotune.sweep.strategies.optuna_search import GPSearch, TPESearch
from autotune.sweep.strategies.validset import ValidSet
from autotune.vocab import Measurement

GP_MAX_BUDGET = 300
GP_MAX_PARAMS = 8


def pick(valid: ValidSet, budget: int | None) -> tuple[type[Strategy], str]:
    """The strategy class for this space and budget, and one line that says why."""
    n = len(valid)
    if budget is None:
        return BruteForce, f"auto: brute (no budget: every one of the {n:,} instances)"
    if budget >= n:
        return BruteForce, f"auto: brute (the budget of {budget:,} covers all {n:,} instances)"
    dists = valid.distributions
    categorical = [k for k, d in dists.items() if type(d).__name__ == "CategoricalDistribution"]
    torch = importlib.util.find_spec("torch") is not None
    if not categorical and len(dists) <= GP_MAX_PARAMS and budget <= GP_MAX_BUDGET and torch:
        return GPSearch, (f"auto: gp ({n:,} instances, {len(dists)} numeric parameters, budget {budget:,}: "
                          "a Gaussian process makes the most of few evaluations on a small numeric space)")
    why = (f"categorical parameter(s) {', '.join(categorical)}" if categorical else
           f"{len(dists)} parameters" if len(dists) > GP_MAX_PARAMS else
           f"budget {budget:,} > {GP_MAX_BUDGET}" if budget > GP_MAX_BUDGET else "torch is not installed for gp")
    return TPESearch, f"auto: tpe ({n:,} instances, budget {budget:,}; {why})"


class Auto(Strategy):
    """Delegates to the strategy `pick` chooses; `reason` says which and why (the runner prints it)."""

    model_based: ClassVar[bool] = True

    def __init__(self, instances: Sequence[Instance], budget: int | None = None, seed: int = 0,
                 **options: Any) -> None:
        valid = ValidSet(instances)
        cls, self.reason = pick(valid, budget)
        self.chosen: Strategy = cls(instances, budget, seed, **options) if getattr(cls, "model_based", False) \
            else cls(instances, budget, seed)

    def ask(self, n: int) -> list[Instance]:
        return self.chosen.ask(n)

    def tell(self, instance: Instance, results: Sequence[Measurement]) -> None:
        self.chosen.tell(instance, results)
