"""The runner's batches (tune_kernel's throughput on large spaces): a strategy whose order ignores results (brute,
random) is asked for twice as many instances each batch after the first (256, 512, ... up to MAX_ASK_BATCH), so the
compile pipeline drains less often; the same instances are measured in the same order. Adaptive strategies keep
ASK_BATCH."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterator, Sequence

import pytest

from autotune.store.store import Store
from autotune.sweep.backends.base import Job
from autotune.sweep.runner import ASK_BATCH, MAX_ASK_BATCH, fixed_order, next_ask, run_sweep
from autotune.sweep.strategies import make_strategy
from autotune.sweep.strategies.brute import BruteForce
from autotune.vocab import Measurement
from tests.support.formula_backend import FormulaBackend
from tests.test_runner import SPACE, Quiet, config


class Batches(FormulaBackend):
    """FormulaBackend that records the size of every batch the runner hands it."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def run(self, jobs: Sequence[Job]) -> Iterator[Measurement]:
        self.sizes.append(len(jobs))
        return super().run(jobs)


class Adaptive(BruteForce):
    def tell(self, instance, results) -> None:  # noqa: ANN001 - a strategy that learns from results
        pass


def test_only_strategies_that_ignore_results_get_growing_batches() -> None:
    assert fixed_order(make_strategy("brute", [], None, 0)) and fixed_order(make_strategy("random", [], None, 0))
    assert not fixed_order(Adaptive([]))
    assert next_ask(BruteForce([]), ASK_BATCH) == 2 * ASK_BATCH
    assert next_ask(BruteForce([]), MAX_ASK_BATCH) == MAX_ASK_BATCH
    assert next_ask(Adaptive([]), ASK_BATCH) == ASK_BATCH


def _sweep(folder: Path, strategy: str) -> tuple[list[int], list[str]]:
    """A sweep of 1,200 instances (test_runner's space with a spare parameter of 80 values): the batch sizes the
    backend got and the (instance) order it measured in."""
    folder.mkdir()
    db = f"sqlite:///{folder}/r.sqlite"
    cfg = dataclasses.replace(config(folder, db), strategy=strategy, seed=5)
    spare = "  SPARE: [" + ", ".join(map(str, range(80))) + "]\n"
    (folder / "naive_test.yaml").write_text(
        SPACE.replace("  BLOCK_Y: [1, 2, 4, 8]\n", "  BLOCK_Y: [1, 2, 4, 8]\n" + spare)
    )
    backend = Batches()
    with Store.open(db) as store:
        run_sweep(cfg, store, backend, Quiet())
    return backend.sizes, list(dict.fromkeys(iid for iid, _ in backend.calls))


def test_a_sweep_asks_growing_batches_and_measures_the_same_instances_in_the_same_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import autotune.sweep.runner as runner

    for strategy in ("brute", "random"):
        sizes, order = _sweep(tmp_path / strategy, strategy)
        assert sizes == [ASK_BATCH, 2 * ASK_BATCH, 1200 - 3 * ASK_BATCH], sizes
        monkeypatch.setattr(runner, "MAX_ASK_BATCH", ASK_BATCH)  # batches of ASK_BATCH: what the runner did before
        fixed, fixed_order_ = _sweep(tmp_path / f"{strategy}_fixed", strategy)
        monkeypatch.undo()
        assert fixed == [ASK_BATCH] * 4 + [1200 - 4 * ASK_BATCH], fixed
        assert order == fixed_order_ and len(order) == 1200
