"""`auto`: picks a strategy from the space's size and the budget, and says which and why.

Rules, in order:
  - no budget, or a budget that covers the space: `brute` (every instance is measured anyway, in order);
  - otherwise `hybrid` (surrogate + local search on the valid set): on the development runs of the search
    benchmark (seeds >= 100 of 8 complete spaces: GEMM, batched GEMM, convolution, dedispersion; budgets of 1 to
    20% of each space; results/bench/SEARCH_PROVENANCE.md) it had the lowest median gap to each space's best at
    1, 2 and 5% against Kernel Tuner's strongest strategies and reached the optimum (median 0) at 10 and 20%, with
    any parameter types, and a proposal stays under 50 ms of CPU on 10^6 instances. The reported run's figures
    are in docs/search.md.
`tpe`, `gp` and `cmaes` are never picked: `tpe` trailed on the earlier benchmark (convolution, batched GEMM), and
`gp` and `cmaes` were not benchmarked (they need torch / the cmaes package; name them to use them).
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
    return HybridSearch, (
        f"auto: hybrid ({n:,} instances, budget {budget:,} = {budget / n:.1%} of the space: "
        "surrogate model + local search around the best instances; docs/search.md)"
    )


class Auto(Strategy):
    """Delegates to the strategy `pick` chooses; `reason` says which and why (the runner prints it)."""

    model_based: ClassVar[bool] = True

    def __init__(self, instances: Sequence[Instance], budget: int | None = None, seed: int = 0, **options: Any) -> None:
        cls, self.reason = pick(len(instances), budget)
        self.chosen: Strategy = (
            cls(instances, budget, seed, **options)
            if getattr(cls, "model_based", False)
            else cls(instances, budget, seed)
        )

    def ask(self, n: int) -> list[Instance]:
        return self.chosen.ask(n)

    def tell(self, instance: Instance, results: Sequence[Measurement]) -> None:
        self.chosen.tell(instance, results)
