"""The strategy conformance suite (autotune.testing.strategies) on the built-in strategies, by class and by
name, and on strategies that break a clause (the suite must catch them); the lazy name table."""

from __future__ import annotations

import importlib.util
from typing import Sequence

import pytest

from autotune.errors import UserError
from autotune.space.instance import Instance
from autotune.sweep.strategies import STRATEGIES, make_strategy, strategy_names
from autotune.sweep.strategies.brute import BruteForce
from autotune.sweep.strategies.optuna_search import CmaEsSearch, GPSearch, TPESearch
from autotune.sweep.strategies.random import RandomSample
from autotune.testing.strategies import StrategyConformance, made_up_instances


class TestBruteForce(StrategyConformance):
    factory = BruteForce


class TestRandomSample(StrategyConformance):
    factory = RandomSample


class TestRandomByName(StrategyConformance):
    @staticmethod
    def factory(instances: Sequence[Instance], budget: int | None, seed: int):  # type: ignore[no-untyped-def]
        return make_strategy("random", instances, budget, seed)


class TestBruteByModuleAndClass(StrategyConformance):
    @staticmethod
    def factory(instances: Sequence[Instance], budget: int | None, seed: int):  # type: ignore[no-untyped-def]
        return make_strategy("autotune.sweep.strategies.brute:BruteForce", instances, budget, seed)


class TestTPE(StrategyConformance):
    factory = TPESearch


class TestTPEOneAtATime(StrategyConformance):
    @staticmethod
    def factory(instances: Sequence[Instance], budget: int | None, seed: int):  # type: ignore[no-untyped-def]
        return TPESearch(instances, budget, seed, batch=1, startup=2)


class TestAutoByName(StrategyConformance):
    @staticmethod
    def factory(instances: Sequence[Instance], budget: int | None, seed: int):  # type: ignore[no-untyped-def]
        return make_strategy("auto", instances, budget, seed)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="gp needs torch (not installed)")
class TestGP(StrategyConformance):
    factory = GPSearch


@pytest.mark.skipif(importlib.util.find_spec("cmaes") is None, reason="cmaes needs the cmaes package (not installed)")
class TestCmaEs(StrategyConformance):
    factory = CmaEsSearch


class Repeating(BruteForce):
    """Breaks the contract: proposes its first instance again in every batch."""

    def ask(self, n: int) -> list[Instance]:
        out = super().ask(n)
        return out + self._todo[:1] if out else out


class OverBudget(BruteForce):
    """Breaks the contract: ignores the budget."""

    def __init__(self, instances: Sequence[Instance], budget: int | None = None, seed: int = 0) -> None:
        super().__init__(instances, None, seed)


class Unseeded(RandomSample):
    """Breaks the contract: a different order every time."""

    def __init__(self, instances: Sequence[Instance], budget: int | None = None, seed: int = 0) -> None:
        import random

        super().__init__(instances, budget, random.randrange(1 << 30))


@pytest.mark.parametrize(
    "broken, check, args",
    [
        (Repeating, "test_never_repeats_and_honours_n", (3,)),
        (OverBudget, "test_honours_the_budget", (7,)),
        (Unseeded, "test_deterministic_under_a_seed", ()),
    ],
)
def test_the_suite_catches_a_broken_strategy(broken: type, check: str, args: tuple) -> None:
    suite = type("Suite", (StrategyConformance,), {"factory": broken})()
    with pytest.raises(AssertionError):
        getattr(suite, check)(*args)


def test_names_load_lazily_and_unknown_names_say_what_exists() -> None:
    assert set(STRATEGIES) <= set(strategy_names()) and {"brute", "random"} <= set(STRATEGIES)
    assert all(":" in target for target in STRATEGIES.values())
    s = make_strategy("random", made_up_instances(10), 3, 1)
    assert isinstance(s, RandomSample) and len(s.ask(10)) == 3
    with pytest.raises(UserError, match="unknown search strategy 'no_such_strategy'") as err:
        make_strategy("no_such_strategy", [], None, 0)
    assert "brute" in (err.value.hint or "")
    with pytest.raises(UserError, match="cannot load search strategy"):
        make_strategy("no_such_module_xyz:Thing", [], None, 0)
    with pytest.raises(UserError, match="has no ask/tell"):
        make_strategy("autotune.space.instance:Instance", [], None, 0)
