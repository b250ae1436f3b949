"""Committed sweep configs that name instances by a where-filter keep what they say they keep: each profile
config one instance at its points, and tsm2_h100 the analytical model's picks and the paper's configuration."""

from __future__ import annotations

import pytest

from autotune.problems.gemm import tsm2_check
from autotune.sweep.config import load_config
from autotune.devices import profile
from autotune.paths import CONFIGS_DIR
from autotune.sweep.runner import plan_sweep
from autotune.problems.gemm.tsm2_model import choose_tsm2

PROFILES = sorted((CONFIGS_DIR / "profile").glob("*.yaml"))


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
def test_profile_config_selects_one_instance_at_each_of_its_points(path) -> None:
    cfg = load_config(path)
    plans = plan_sweep(cfg)
    assert len(plans) == 1 and len(plans[0].work) == 1
    (points,) = plans[0].work.values()
    assert sorted(points) == sorted(cfg.points)


def test_tsm2_config_measures_the_model_picks_and_the_paper_configuration() -> None:
    cfg = load_config(CONFIGS_DIR / "tsm2_h100.yaml")
    picks_plan, paper_plan, _sample = plan_sweep(cfg)
    measured = {
        (p.precision, p.n): {
            tuple(inst.param_dict[k] for k in tsm2_check.PARAMS) for inst, pts in picks_plan.work.items() if p in pts
        }
        for p in cfg.points
    }
    for p in cfg.points:
        for bw in (2.9e12, 3.0e12, 3.1e12):  # the picks hold over the measured bandwidths of an H100
            dev = tsm2_check.model_device(profile("H100"), p.precision, bw, 1.98e9)
            pick = tsm2_check.pick_params(choose_tsm2(dev, p.m, p.n, p.k, p.precision))
            assert tuple(pick[k] for k in tsm2_check.PARAMS) in measured[(p.precision, p.n)]
        paper = tsm2_check.paper_params(p.n)
        assert any(
            inst.param_dict == {**inst.param_dict, **paper} and p in pts for inst, pts in paper_plan.work.items()
        )


def test_wgmma_config_plans_every_serving_instance_and_the_older_best() -> None:
    """configs/wgmma_h100.yaml: every hgemm_wgmma_tc instance (H100 profile, soft constraints on) that serves one of
    its points, each at the points it serves, and the 18 older instances it names (none missing)."""
    from autotune.space.spec import load_space

    cfg = load_config(CONFIGS_DIR / "wgmma_h100.yaml")
    plans = {p.space.name: p for p in plan_sweep(cfg)}
    assert {name: len(p.work) for name, p in plans.items() if name != "hgemm_wgmma_tc"} == {
        "hgemm_flat_tc": 9,
        "hgemm_mma": 2,
        "hgemm_ring_tc": 7,
    }
    space = load_space("hgemm_wgmma_tc")
    work = plans["hgemm_wgmma_tc"].work
    assert work and all(space.serves(inst.param_dict, p) for inst, pts in work.items() for p in pts)
    assert all(any(p in pts for pts in work.values()) for p in cfg.points)  # every size has wgmma candidates
    assert {inst.param_dict["SWZ"] for inst in work} == {0, 1} and {inst.param_dict["BM"] for inst in work} == {64, 128}


def test_wgmma_flat_config_plans_the_whole_space_at_the_unaligned_losses() -> None:
    """configs/wgmma_flat_h100.yaml: every hgemm_wgmma_flat_tc instance (H100 profile, soft constraints on) that serves
    one of its points, each at the points it serves; the points are the 16 fp16 sizes, none a multiple of 8, among
    the 26 where the best committed kernel was slower than cuBLAS (scripts/kernel_status.py after
    results/wgmma_h100), and every one has candidates with both tile-set counts."""
    from autotune.space.spec import load_space

    cfg = load_config(CONFIGS_DIR / "wgmma_flat_h100.yaml")
    (plan,) = plan_sweep(cfg)
    space = load_space("hgemm_wgmma_flat_tc")
    assert plan.space.name == space.name and cfg.strategy == "brute" and cfg.budget_s == 300
    sizes = sorted(p.n for p in cfg.points)
    assert sizes == [98, 100, 102, 106, 108, 110, 113, 114, 115, 116, 117, 118, 121, 122, 124, 126]
    assert all(p.m == p.n == p.k and p.shape == "NN" and p.precision == "fp16" for p in cfg.points)
    assert all(space.serves(inst.param_dict, p) for inst, pts in plan.work.items() for p in pts)
    for p in cfg.points:
        assert {inst.param_dict["TILES"] for inst, pts in plan.work.items() if p in pts} == {1, 2}
    assert len(plan.work) == 364


def test_wgmma_ks128_config_plans_only_ks128_at_every_point() -> None:
    """configs/wgmma_ks128_h100.yaml: only KS = 128 instances of both wgmma spaces (H100 profile, `two_blocks` off:
    at n > 96 every KS = 128 instance has one block per SM), each at the points it serves; hgemm_wgmma_tc has
    candidates at all 22 sizes, hgemm_wgmma_flat_tc at the 12 that are not multiples of 8 (it serves only those)."""
    from autotune.space.spec import load_space

    cfg = load_config(CONFIGS_DIR / "wgmma_ks128_h100.yaml")
    plans = {p.space.name: p for p in plan_sweep(cfg)}
    assert set(plans) == {"hgemm_wgmma_tc", "hgemm_wgmma_flat_tc"} and cfg.strategy == "brute"
    assert len(cfg.points) == 22 and all(p.m == p.n == p.k and p.shape == "NN" for p in cfg.points)
    for name, plan in plans.items():
        space = load_space(name)
        assert all(inst.param_dict["KS"] == 128 for inst in plan.work)
        assert all(space.serves(inst.param_dict, p) for inst, pts in plan.work.items() for p in pts)
        wanted = [p for p in cfg.points if name == "hgemm_wgmma_tc" or p.n % 8]
        assert all(any(p in pts for pts in plan.work.values()) for p in wanted), name
    pairs = {name: sum(len(pts) for pts in plan.work.values()) for name, plan in plans.items()}
    assert pairs == {"hgemm_wgmma_tc": 388, "hgemm_wgmma_flat_tc": 72}
