"""The planning path's speed-ups (issue 31, item 6) change no result: the same plan (instances, their order, their
points, sharing work), the same first batch (ids and defines), the same bound names, geometry and defines.

Each check compares with the code before them: a reference written here as that code did it (row by row, one dict
operation per pair, no memo), or digests recorded from commit 42a1959 by scripts/bench_plan_speed.py."""

from __future__ import annotations

import hashlib
import importlib.util
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

from autotune.devices import get_device
from autotune.space import spec
from autotune.space.generator import generate, serving, valid_rows
from autotune.space.instance import Instance
from autotune.space.spec import load_space, reusing_spaces
from autotune.sweep.config import load_config
from autotune.sweep.plan import SpacePlan, _kept, plan_sweep

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = [
    "examples/stencil/sweep.yaml",
    "examples/softmax/sweep.yaml",
    "examples/transpose/sweep.yaml",
    "configs/square_share_h100.yaml",  # share > 0: the sharing phase's extra points
    "configs/tsm2_n16_h100.yaml",  # several test points per instance
]


def _bench():
    spec_ = importlib.util.spec_from_file_location("bench_plan_speed", ROOT / "scripts" / "bench_plan_speed.py")
    module = importlib.util.module_from_spec(spec_)  # type: ignore[arg-type]
    sys.modules["bench_plan_speed"] = module
    spec_.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _reference_work(cfg, ref, space):
    """plan_sweep's instances and points as the code before did it: Instance.of row by row, one setdefault per
    (instance, point) pair."""
    work: dict[Instance, list] = {}
    valid: dict[Instance, list] = {}
    share = cfg.share if ref.share is None else ref.share
    for precision in dict.fromkeys(p.precision for p in cfg.points):
        points = [p for p in cfg.points if p.precision == precision and space.accepts(p)]
        if not points:
            continue
        g = generate(space, get_device(ref.device), precision, soft=ref.soft, soft_off=ref.soft_off)
        assert ref.instances is None  # (the configs used here name no instances)
        kept = _kept(g, ref.where, cfg, ref.line)  # (unchanged: the entry's `where:`)
        frame = g.frame
        instances = [
            Instance.of(space.name, dict(zip(frame.columns, row, strict=True))) for row in frame.itertuples(index=False)
        ]
        for p in points:
            ok = valid_rows(g, p) & kept if share > 0 or ref.measure == "valid" else None
            measured = ok if ref.measure == "valid" else serving(g, p) & kept
            for row in np.flatnonzero(measured):
                work.setdefault(instances[row], []).append(p)
            for row in np.flatnonzero(ok) if share > 0 else ():
                valid.setdefault(instances[row], []).append(p)
    extra = {i: tuple(q for q in pts if q not in set(work[i])) for i, pts in valid.items() if i in work}
    return {i: tuple(p) for i, p in work.items()}, {i: pts for i, pts in extra.items() if pts}


@pytest.mark.parametrize("config", CONFIGS)
def test_plan_is_the_row_by_row_plan(config):
    cfg = load_config(ROOT / config)
    plans = plan_sweep(cfg)
    assert len(plans) == len(cfg.spaces)
    for plan, ref in zip(plans, cfg.spaces, strict=True):
        work, extra = _reference_work(cfg, ref, load_space(ref.path))
        assert list(plan.work) == list(work)  # the same instances in the same order (a strategy sees this order)
        assert [i.params for i in plan.work] == [i.params for i in work]  # the same values and types
        assert [type(v) for i in plan.work for _, v in i.params] == [type(v) for i in work for _, v in i.params]
        assert plan.work == work
        assert plan.extra == extra
        assert plan.points() == sorted({p for pts in work.values() for p in pts})
        for budget in (None, 1, 3):
            per = {}
            for pts in work.values():
                for p in pts:
                    per[p] = per.get(p, 0) + 1
            assert plan.point_pairs(budget) == sum(n if budget is None else min(n, budget) for n in per.values())


def test_instances_hold_the_frames_plain_values(tmp_path):
    """generator.instances() shares (name, value) pairs: equal to Instance.of over the frame's rows, ids too, for
    ints, floats (integral ones as ints) and strings."""
    f = tmp_path / "s.yaml"
    f.write_text(
        "name: mixed\nparameters:\n  A: [1, 2, 4]\n  B: [0.5, 2.0, 3]\n  C: [x, yz]\n"
        "hard:\n  - {name: h, expr: 'A * B != 4', reason: r}\n"
    )
    space = load_space(f)
    g = generate(space, get_device("H100"), "fp32")
    frame = g.frame
    reference = [
        Instance.of(space.name, dict(zip(frame.columns, row, strict=True))) for row in frame.itertuples(index=False)
    ]
    got = g.instances()
    assert got == reference
    assert [i.params for i in got] == [i.params for i in reference]
    assert [type(v) for i in got for _, v in i.params] == [type(v) for i in reference for _, v in i.params]
    assert [i.id for i in got] == [i.id for i in reference]


def test_instance_hash_is_cached_and_not_pickled():
    a = Instance.of("s", {"x": 1, "y": "z"})
    b = Instance.of("s", {"x": 1, "y": "z"})
    assert hash(a) == hash(b) == hash(("s", (("x", 1), ("y", "z"))))
    assert "_hash" in a.__dict__
    c = pickle.loads(pickle.dumps(a))
    assert "_hash" not in c.__dict__  # str hashes differ between processes
    assert c == a and {a: 1}[c] == 1


def test_memoized_binding_equals_a_fresh_evaluation():
    """Names, geometry and defines from the memo are those a fresh Space evaluates, at several points; a pickled
    Space leaves its memo behind."""
    cfg = load_config(ROOT / "configs/tsm2_n16_h100.yaml")
    plan = plan_sweep(cfg)[0]
    space = plan.space
    fresh = load_space(space.path)
    assert fresh is not space
    pairs = [(i, p) for i, pts in list(plan.work.items())[:40] for p in pts[:6]]
    for _ in range(2):  # the second round reads the memo
        for inst, p in pairs:
            params = inst.param_dict
            assert space.geometry(params, p) == spec.Space._geometry(fresh, params, p)
            assert space.defines(params, p) == spec.Space._defines(fresh, params, p)
            assert space.template_name(params, p.precision, p.shape) == spec.Space._template_name(
                fresh, params, p.precision, p.shape
            )
    assert space.__dict__.get("_memo")
    copy = pickle.loads(pickle.dumps(space))
    assert "_memo" not in copy.__dict__ and copy.name == space.name and copy.derived == space.derived


def test_an_error_is_not_memoized(tmp_path):
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(float *y) {}\n')
    f = tmp_path / "s.yaml"
    f.write_text(
        "name: divs\nparameters:\n  D: [0, 2]\nkernel:\n  source: k.cu\n  name: k\n  defines: [D]\n"
        "  block: ['64 // D']\n  grid: [1]\n"
    )
    space = load_space(f)
    from autotune.problems.gemm import gemm_point

    point = gemm_point("fp32", "NN", 64, 64, 64, 1)
    for _ in range(2):
        with pytest.raises(spec.SpaceError, match="division by zero"):
            space.geometry({"D": 0}, point)
    assert list(space.geometry({"D": 2}, point).block) == [32, 1, 1]


def test_reusing_spaces_builds_a_file_once_per_content(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("name: one\nparameters:\n  A: [1, 2]\n")
    assert load_space(f) is not load_space(f)  # outside the block: built at each load
    with reusing_spaces():
        a = load_space(f)
        with reusing_spaces():
            assert load_space(str(f)) is a
        f.write_text("name: two\nparameters:\n  A: [1, 2]\n")  # changed bytes: built again
        b = load_space(f)
        assert b is not a and b.name == "two"
        assert load_space(f) is b
    assert load_space(f) is not b


# digests of the plan and of the first batch (ids and defines) recorded at 42a1959, before the speed-ups, by
# `python3 scripts/bench_plan_speed.py --cases sepconv reduction --repeat 1`; a change to how tune_kernel writes a
# Kernel Tuner call's space (autotune/interop/kt_space.py) may change them legitimately: record them again then
KT_DIGESTS = {
    "sepconv": ("dec34842025b5710", "7f5c323576ecafbb", 29920),
    "reduction": ("8bba5bc11afbdae4", "d89141f17d6fca7e", 2376),
}


@pytest.mark.parametrize("case", sorted(KT_DIGESTS))
def test_tune_kernel_plans_and_first_batch_are_unchanged(case, tmp_path):
    bench = _bench()
    args, kw = bench.capture_call(case, tmp_path)
    got = bench.run_kt(case, args, kw, tmp_path)
    plan_digest, batch_digest, count = KT_DIGESTS[case]
    assert sum(len(p.work) for p in got["plans"]) == count
    assert bench.plan_digest(got["plans"]) == plan_digest
    assert hashlib.sha256(repr(got["batch"]).encode()).hexdigest()[:16] == batch_digest
    assert all(isinstance(p, SpacePlan) for p in got["plans"])
