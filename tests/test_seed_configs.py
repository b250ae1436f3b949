"""The seed experiments' configs (configs/seeds/, issue 56) load with the config loader and plan at least one
(instance, test point) pair for every space they name; planning only, no sweep runs."""

from __future__ import annotations

import pytest

from autotune.paths import CONFIGS_DIR
from autotune.sweep.config import load_config
from autotune.sweep.runner import plan_sweep

SEED_CONFIGS = sorted((CONFIGS_DIR / "seeds").glob("*.yaml"))


def test_there_are_seed_configs() -> None:
    assert len(SEED_CONFIGS) >= 6


@pytest.mark.parametrize("path", SEED_CONFIGS, ids=[p.stem for p in SEED_CONFIGS])
def test_seed_config_loads_and_plans_every_space(path) -> None:
    cfg = load_config(path)
    assert cfg.points
    plans = plan_sweep(cfg)
    assert len(plans) == len(cfg.spaces)
    for plan in plans:
        assert plan.pairs >= 1, f"{path.name}: space {plan.space.name} plans no pair"
        assert plan.limit(cfg) is None, f"{path.name}: space {plan.space.name} is not swept whole"


@pytest.mark.parametrize("path", [p for p in SEED_CONFIGS if p.stem.endswith("_search")], ids=lambda p: p.stem)
def test_a_searched_seed_experiment_has_its_brute_force_check_on_a_subset_of_its_points(path) -> None:
    """Issue 56: a search strategy only where its result is checked against brute force on a subset of points."""
    search = load_config(path)
    check_path = path.with_name(path.stem.removesuffix("_search") + "_check.yaml")
    assert check_path.exists(), f"{path.name} has no {check_path.name}"
    check = load_config(check_path)
    assert search.strategy != "brute" and check.strategy == "brute"
    assert [s.ref for s in check.spaces] == [s.ref for s in search.spaces]
    assert set(check.points) < set(search.points)


def test_the_search_at_the_checked_points_runs_the_searchs_strategy_at_exactly_those_points() -> None:
    """magma_batched_search8.yaml is the search of magma_batched_search.yaml at magma_batched_check.yaml's points."""
    seeds = CONFIGS_DIR / "seeds"
    search8, search, check = (load_config(seeds / f"magma_batched_{n}.yaml") for n in ("search8", "search", "check"))
    assert set(search8.points) == set(check.points)
    assert (search8.strategy, search8.search) == (search.strategy, search.search) and search8.strategy != "brute"
    assert [s.ref for s in search8.spaces] == [s.ref for s in search.spaces]
