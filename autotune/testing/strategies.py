"""A conformance suite for search strategies (`autotune.sweep.strategies.base.Strategy`).

Subclass it in a test module, with a name pytest collects, and say how to build the strategy:
```
from autotune.testing.strategies import StrategyConformance

class TestMyStrategy(StrategyConformance):
    factory = staticmethod(MyStrategy)   # called as factory(instances, budget, seed)
```
Each `test_*` method checks one clause of the contract in `Strategy`'s docstrings, driving the strategy the way
the runner does (`drive`) over instances of a made-up space and measurements made up from them (some of
them failures). Override `instances` or `results` to drive it over your own.
"""

from __future__ import annotations

import zlib
from typing import Callable, ClassVar, Sequence

import pytest

from autotune.space.instance import Instance
from autotune.sweep.strategies.base import Strategy
from autotune.vocab import Measurement, Status, TestPoint

Factory = Callable[[Sequence[Instance], "int | None", int], Strategy]
POINT = TestPoint("conformance", "fp32", "", (("n", 1 << 20),))
FAILURES = (Status.COMPILE_ERROR, Status.LAUNCH_ERROR, Status.WRONG, Status.TIMEOUT, Status.CRASHED, Status.SKIPPED)


def made_up_instances(count: int = 48) -> list[Instance]:
    """`count` instances of a made-up space with two integer parameters and one string parameter."""
    return [Instance.of("conformance", {"X": 1 << (i % 6), "Y": i // 6, "MODE": "ab"[i % 2]}) for i in range(count)]


def made_up_results(instance: Instance, point: TestPoint = POINT) -> list[Measurement]:
    """A deterministic outcome per instance: about one in four fails (each failure status in turn), the rest are
    verified with a time that depends on the parameters."""
    h = zlib.crc32(instance.id.encode())
    if h % 4 == 0:
        status = FAILURES[(h >> 2) % len(FAILURES)]
        return [Measurement(instance.id, point, status, error=f"made up {status.value}")]
    ms = 0.01 + (h % 1000) / 1e4
    return [
        Measurement(
            instance.id,
            point,
            Status.OK,
            median_ms=ms,
            p20_ms=ms,
            p80_ms=ms,
            min_ms=ms,
            max_ms=ms,
            reps=3,
            times_ms=[ms] * 3,
            max_rel_err=0.0,
        )
    ]


def drive(
    strategy: Strategy, n: int, results: Callable[[Instance], list[Measurement]], max_rounds: int
) -> list[list[Instance]]:
    """Ask/tell like the runner until `ask` returns an empty list; the batches asked, in order. Fails when the
    strategy is still proposing after `max_rounds` asks."""
    batches: list[list[Instance]] = []
    for _ in range(max_rounds):
        asked = strategy.ask(n)
        if not asked:
            return batches
        batches.append(list(asked))
        for inst in asked:
            strategy.tell(inst, results(inst))
    raise AssertionError(f"the strategy still proposes instances after {max_rounds} asks of {n}")


class StrategyConformance:
    """The checks; see the module docstring. Set `factory` in the subclass."""

    factory: ClassVar[Factory]
    seeds: ClassVar[tuple[int, ...]] = (0, 7)

    def instances(self) -> list[Instance]:
        return made_up_instances()

    def results(self, instance: Instance) -> list[Measurement]:
        return made_up_results(instance)

    def make(self, budget: int | None = None, seed: int = 0, instances: Sequence[Instance] | None = None) -> Strategy:
        return type(self).factory(list(self.instances() if instances is None else instances), budget, seed)

    def run_all(self, strategy: Strategy, n: int) -> list[list[Instance]]:
        return drive(strategy, n, self.results, max_rounds=len(self.instances()) + 2)

    # ---------------------------------------------------------------- the contract
    def test_is_a_strategy(self) -> None:
        s = self.make()
        assert callable(getattr(s, "ask", None)) and callable(getattr(s, "tell", None))

    @pytest.mark.parametrize("budget", [None, 5])
    def test_ask_returns_only_given_instances(self, budget: int | None) -> None:
        given = set(self.instances())
        for batch in self.run_all(self.make(budget), 4):
            assert all(isinstance(i, Instance) for i in batch)
            assert set(batch) <= given, "ask proposed an instance it was not given"

    @pytest.mark.parametrize("n", [1, 3, 10])
    def test_never_repeats_and_honours_n(self, n: int) -> None:
        batches = self.run_all(self.make(), n)
        flat = [i for b in batches for i in b]
        assert len(flat) == len(set(flat)), "an instance was proposed twice"
        assert all(1 <= len(b) <= n for b in batches), f"a batch is empty before the end or larger than n = {n}"

    @pytest.mark.parametrize("budget", [0, 1, 7, 1000])
    def test_honours_the_budget(self, budget: int) -> None:
        flat = [i for b in self.run_all(self.make(budget), 3) for i in b]
        assert len(flat) <= min(budget, len(self.instances())), f"{len(flat)} instances proposed, budget {budget}"

    def test_empty_when_done_and_stays_empty(self) -> None:
        s = self.make(budget=4)
        self.run_all(s, 2)
        assert s.ask(2) == [] and s.ask(5) == [], "ask proposes again after it said it was done"

    def test_no_instances_means_done(self) -> None:
        assert self.make(instances=[]).ask(4) == []

    def test_deterministic_under_a_seed(self) -> None:
        for seed in self.seeds:
            first = self.run_all(self.make(budget=10, seed=seed), 3)
            again = self.run_all(self.make(budget=10, seed=seed), 3)
            assert first == again, f"two runs with seed {seed} and the same results proposed differently"

    def test_a_streaming_strategy_ignores_what_it_is_told(self) -> None:
        """`Strategy.streams` promises proposals that never depend on results: the runner asks for growing batches
        and may ask before it told. Asked all at once, untold, such a strategy proposes what it proposes in
        batches of 3 with every result told."""
        for seed in self.seeds:
            s = self.make(budget=20, seed=seed)
            if not getattr(s, "streams", False):
                return
            told = [i for b in self.run_all(s, 3) for i in b]
            untold = self.make(budget=20, seed=seed).ask(len(self.instances()) + 1)
            assert untold == told, f"seed {seed}: streams is set, but the proposals changed with what it was told"

    def test_tell_accepts_failures_and_empty_results(self) -> None:
        s = self.make()
        asked = s.ask(len(FAILURES) + 2)
        assert asked
        for i, inst in enumerate(asked):
            if i < len(FAILURES):
                s.tell(inst, [Measurement(inst.id, POINT, FAILURES[i], error="failed on purpose")])
            else:
                s.tell(inst, [])  # measured by an earlier run of a resumed sweep
        rest = [i for b in self.run_all(s, 4) for i in b]
        assert not set(rest) & set(asked), "a told instance was proposed again"

    def test_ask_refuses_n_below_one(self) -> None:
        with pytest.raises(ValueError):
            self.make().ask(0)

    def test_does_not_modify_the_instances(self) -> None:
        given = self.instances()
        copy = list(given)
        self.run_all(type(self).factory(given, None, 0), 5)
        assert given == copy
