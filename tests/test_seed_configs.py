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
