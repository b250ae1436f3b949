"""Search strategies (ask/tell, `base.Strategy`), loaded lazily by name.

`STRATEGIES` maps a built-in name to "module:Class"; installed packages add theirs in the entry-point group
`autotune.strategies` (name = "package.module:Class"); a sweep config may also name "module:Class" directly.
A strategy's module is imported only when a sweep chooses it, so an optional dependency (Optuna for a
model-based sampler) costs nothing to the others.
"""

from __future__ import annotations

from typing import Any, Sequence

from autotune.errors import UserError
from autotune.space.instance import Instance
from autotune.sweep.registry import load, registered
from autotune.sweep.strategies.base import Strategy

ENTRY_POINT_GROUP = "autotune.strategies"
STRATEGIES: dict[str, str] = {
    "brute": "autotune.sweep.strategies.brute:BruteForce",
    "random": "autotune.sweep.strategies.random:RandomSample",
    "tpe": "autotune.sweep.strategies.optuna_search:TPESearch",
    "gp": "autotune.sweep.strategies.optuna_search:GPSearch",
    "cmaes": "autotune.sweep.strategies.optuna_search:CmaEsSearch",
    "hybrid": "autotune.sweep.strategies.hybrid:HybridSearch",
    "auto": "autotune.sweep.strategies.auto:Auto",
}

__all__ = [
    "ENTRY_POINT_GROUP",
    "STRATEGIES",
    "Strategy",
    "make_strategy",
    "strategy_class",
    "strategy_names",
    "known_strategy",
]


def strategy_names() -> dict[str, str]:
    """Every strategy a config may name: the built-ins, then installed entry points (name -> "module:Class")."""
    return registered(STRATEGIES, ENTRY_POINT_GROUP)


def known_strategy(name: str) -> bool:
    """Whether `name` is a registered strategy or a "module:Class" reference (not imported here)."""
    return name in STRATEGIES or ":" in name or name in strategy_names()


def strategy_class(name: str) -> type:
    """The class registered as `name` (or given as "module:Class"), imported only now. UserError when the name or
    its class cannot be found (`autotune.sweep.registry.load`), or it has no ask/tell."""
    cls = load(name, STRATEGIES, ENTRY_POINT_GROUP, "search strategy", "Class")
    if not all(callable(getattr(cls, m, None)) for m in ("ask", "tell")):
        raise UserError(
            f"search strategy {name!r} has no ask/tell", hint="subclass autotune.sweep.strategies.base.Strategy"
        )
    return cls


def make_strategy(
    name: str, instances: Sequence[Instance], budget: int | None = None, seed: int = 0, **options: Any
) -> Strategy:
    """The strategy `name`, constructed as `cls(instances, budget, seed, **options)` (options only when given:
    the model-based strategies take them, `Strategy.model_based`). UserError as `strategy_class`."""
    return strategy_class(name)(instances, budget, seed, **options)
