"""`auto`: picks a strategy from the space's size and the budget, and says which and why.

Rules, in order:
  - no budget, or a budget that covers the space: `brute` (every instance is measured anyway, in order);
  - otherwise `hybrid` (surrogate + local search on the valid set): on the search benchmark (18 complete spaces of
    GEMM, batched GEMM, convolution and dedispersion, budgets of 1 to 20% of each space; docs/search.md,
    results/bench/SEARCH_PROVENANCE.md) it is the strategy of ours closest to each space's best at every budget,
    whatever the parameter types, and a proposal stays cheap on 10^6 instances.
`tpe`, `gp` and `cmaes` are never picked: `tpe` trails `hybrid` on that benchmark at every budget, and `gp` and
`cmaes` were not benchmarked (they need torch / the cmaes package; name them to use them).
"""
from __future__ import annotations

from typing import Any, ClassVar, Sequence

from autotune.space.instance import Instance
from autotune.sweep.strategies.base import Strategy
from autotune.sweep.strategies.brute import BruteForce
from autotune.sweep.strategies.hybrid import HybridSearch
from autotune.vocab import Measurement


def pick(n: int, budget: int | None) -> tuple[type[Strategy], str]:
    """The strategy class for a space of `n` instances and this budget, and one line that says why."""
    if budget is None:
        return BruteForce, f"auto: brute (no budget: every one of the {n:,} instances)"
    if budget >= n:
        return BruteForce, f"auto: brute (the budget of {budget:,} covers all {n:,} instances)"
    return HybridSearch, (f"auto: hybrid ({n:,} instances, budget {budget:,} = {budget / n:.1%} of the space: "
                          "surrogate + local search, the search benchmark's best at every budget, docs/search.md)")


class Auto(Strategy):
    """Delegates to the strategy `pick` chooses; `reason` says which and why (the runner prints it)."""

    model_based: ClassVar[bool] = True

    def __init__(self, instances: Sequence[Instance], budget: int | None = None, seed: int = 0,
                 **options: Any) -> None:
        cls, self.reason = pick(len(instances), budget)
        self.chosen: Strategy = cls(instances, budget, seed, **options) if getattr(cls, "model_based", False) \
            else cls(instances, budget, seed)

    def ask(self, n: int) -> list[Instance]:
        return self.chosen.ask(n)

    def tell(self, instance: Instance, results: Sequence[Measurement]) -> None:
        self.chosen.tell(instance, results)
