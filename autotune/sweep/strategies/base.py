"""The search-strategy interface: which instance the runner measures next, on ask/tell.

A strategy sees the instances of one space (after its constraints and the config's `where:`) and what each
measured; never the GPU, the database or the worker processes. So a model-based sampler (Optuna's TPE, a
Bayesian optimizer) plugs in without touching the runner, and every strategy is tested without a GPU
(`autotune.testing.strategies`, on recorded measurements through the replay backend).

How the runner drives one (`autotune.sweep.runner`), in one of two modes:

Per space (brute and random without per-point options: the default, unchanged): one strategy per space of the
config; each asked instance is measured at every test point it serves, so it is compiled once for all of them.
```
strategy = make_strategy(name, instances, max_instances, seed)   # one per space of the config
while (asked := strategy.ask(256)):
    ...measure `asked` on their test points...
    strategy.tell(instance, measurements)                 # once per asked instance, in any order
```
Per point (a model-based strategy, `model_based = True`: tpe, hybrid, gp, cmaes, auto; or any strategy when the config
gives a per-point `budget`, `patience` or `roofline_tol`, `options.SearchOptions`): one strategy per (space,
test point), over the instances that serve that point, each asked instance measured at that point only, with
`budget` = the evaluations of that point (`--budget N`). Why per point: the best instance differs from point to
point, a model of one point's times is what TPE or a GP fits, and the issue's measure (evaluations to reach the
point's best) is per point. A model-based strategy is built as
`cls(instances, budget, seed, study=(url, name), start=[...], **sampler options)`: `study` is the Optuna study
kept in the sweep's database (one per config, space, point and GPU: a resumed sweep continues it), `start` the
best instances of neighbouring points (transfer, `SearchOptions.transfer`). The runner stops a point early by
`options.StopRule` (K evaluations without improvement, or the best within a tolerance of the kind's roofline).
Points are searched in the config's order.

Built-ins: `brute` (`BruteForce`), `random` (`RandomSample`), `hybrid` (`hybrid.HybridSearch`), `tpe`, `gp` (needs torch), `cmaes` (needs the
cmaes package) (`optuna_search`), `auto` (`auto.Auto`), loaded by name from
`autotune.sweep.strategies.STRATEGIES` or the `autotune.strategies` entry-point group.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Sequence

from autotune.space.instance import Instance
from autotune.vocab import Measurement


class Strategy(ABC):
    """Base class of every search strategy (built-in or third-party).

    Constructor, called once per space of a sweep as `cls(instances, budget, seed)`:
        instances: every instance the runner may measure, each once, in the order the space generates them.
            A resumed sweep passes the same instances (those already measured included), so a seeded
            strategy proposes the same ones again; the runner skips the pairs already in the database.
        budget: at most this many distinct instances are proposed over the strategy's life (None: no limit;
            `max_instances` of the config).
        seed: the only source of randomness; the same (instances, budget, seed) and the same told results
            give the same proposals.
    A strategy keeps what it needs of `instances`; it must not modify the sequence.
    `model_based`: True for a strategy searched per test point that takes the keyword options above.
    `streams`: True for a strategy whose proposals never depend on what it is told (brute force, a random
    sample): the runner then asks for ever larger batches (ASK_BATCH, 4x, 16x, ...), so that compiles stream
    without the pause at the end of each batch (where the pool drains its slowest compiles while cores idle).
    """

    model_based: ClassVar[bool] = False
    streams: ClassVar[bool] = False

    @abstractmethod
    def __init__(self, instances: Sequence[Instance], budget: int | None = None, seed: int = 0) -> None:
        """See the class docstring."""

    @abstractmethod
    def ask(self, n: int) -> list[Instance]:
        """Instances to measure next.

        Args:
            n: the most instances the runner takes now (>= 1).

        Returns:
            Between 1 and `n` instances of the constructor's `instances`, none proposed before (over the
            strategy's whole life), and in total never more than `budget`. An empty list means the strategy
            is done: the runner stops asking, and a later `ask` also returns an empty list. A strategy that
            waits on results it was not told yet returns what it can: asking again after `tell` must not
            be needed for progress (the runner tells every asked instance before it asks again).

        Raises:
            ValueError: `n` < 1.
        """

    @abstractmethod
    def tell(self, instance: Instance, results: Sequence[Measurement]) -> None:
        """What an instance proposed by `ask` measured.

        Args:
            instance: an instance returned by an earlier `ask`; told once.
            results: one Measurement per test point the instance was measured on in this run, failures
                included (`Status.COMPILE_ERROR`, `WRONG`, `TIMEOUT`, ... are data, not exceptions); an empty
                sequence when every pair of the instance was measured by an earlier run (a resumed sweep).

        Raises:
            Nothing for a failed measurement. A strategy may raise ValueError for an instance it never proposed.
        """

    def close(self) -> None:  # noqa: B027 (optional: most strategies hold nothing)
        """Release what the strategy holds outside the process (a study's database connections); the runner calls
        it once it asks no more. The default holds nothing."""


def check_n(n: int) -> None:
    """The ValueError `ask` raises for a batch size below 1."""
    if n < 1:
        raise ValueError(f"ask(n) needs n >= 1, got {n}")
