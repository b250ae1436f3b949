"""Where an instance is measured: `serves` (default), `measure: valid`, named `instances:`, and the sharing
phase (`share: N`: the BK-best instances of each point also at up to N nearby points where they are valid)."""

import textwrap

import pytest

from autotune.errors import UserError
from autotune.store.store import Store
from autotune.sweep.config import parse_config
from autotune.sweep.runner import plan_sweep, run_sweep
from tests.support.formula_backend import FormulaBackend

SPACE = textwrap.dedent("""\
    name: bounded_test
    kernel:
      source: gemm_naive.cuh
      template: autotune::gemm_naive
      template_args: [T, S, TRANS_A, TRANS_B, BLOCK_X, BLOCK_Y]
      convention: strided
      block: [BLOCK_X, BLOCK_Y, 1]
      grid: ["ceil(M / BLOCK_X)", "ceil(N / BLOCK_Y)", "min(batch, 65535)"]
      problems: {precisions: [fp32], shapes: [NN]}
      serves: "BM == M"
      valid: "M <= BM"
    parameters:
      BM: [8, 16, 24, 32]
      BLOCK_X: [8, 16]
      BLOCK_Y: [1, 2]
    """)


def cfg(tmp_path, extra="", entry="", space=SPACE):
    (tmp_path / "bounded_test.yaml").write_text(space)
    text = (
        textwrap.dedent(f"""\
        name: t
        spaces: [{{space: bounded_test.yaml{entry}}}]
        points: {{precisions: [fp32], sizes: {{square: [8, 16, 24, 32]}}, batch: 10}}
        database: sqlite:///{tmp_path}/r.sqlite
        repetitions: 3
        bk: 2
        """)
        + extra
    )
    return parse_config(text, file=tmp_path / "t.yaml")


class Quiet:
    def __init__(self):
        self.starts, self.notes = [], []

    def start(self, total, done):
        self.starts.append((total, done))

    def measured(self, m, best):
        pass

    def note(self, text):
        self.notes.append(text)


def sizes(plan):
    return {inst.param_dict["BM"]: sorted(p.m for p in pts) for inst, pts in plan.work.items()}


def test_serves_measures_each_bound_at_its_own_size_and_valid_at_every_size_up_to_it(tmp_path):
    (plan,) = plan_sweep(cfg(tmp_path))
    assert sizes(plan) == {8: [8], 16: [16], 24: [24], 32: [32]}
    (plan,) = plan_sweep(cfg(tmp_path, entry=", measure: valid"))
    assert sizes(plan) == {8: [8], 16: [8, 16], 24: [8, 16, 24], 32: [8, 16, 24, 32]}
    assert len(plan.work) == 16 and plan.extra == {}


def test_named_instances_only_and_unknown_ids_are_an_error(tmp_path):
    (plan,) = plan_sweep(cfg(tmp_path))
    pick = sorted(i.id for i in plan.work)[:3]
    (named,) = plan_sweep(cfg(tmp_path, entry=f", instances: [{', '.join(pick)}]"))
    assert sorted(i.id for i in named.work) == pick
    with pytest.raises(UserError, match="1 of the named instances are not in the space"):
        plan_sweep(cfg(tmp_path, entry=f", instances: [{pick[0]}, 0123456789abcdef]"))


def test_named_instances_are_measured_whatever_the_soft_constraints_say(tmp_path):
    """A table emitted from a CSV of measurements names kernels swept with a soft constraint off; `autotune
    validate` writes them as `instances:` of an entry without that setting: they are measured all the same. The hard
    constraints still apply."""
    soft = SPACE + 'soft:\n  - {name: narrow, expr: "BLOCK_X == 8", reason: "a test soft constraint"}\n'
    (plan,) = plan_sweep(cfg(tmp_path))
    wide = sorted(i.id for i in plan.work if i.param_dict["BLOCK_X"] == 16 and i.param_dict["BLOCK_Y"] == 1)
    tall = sorted(i.id for i in plan.work if i.param_dict["BLOCK_Y"] == 2)
    (kept,) = plan_sweep(cfg(tmp_path, space=soft))
    assert not set(wide) & {i.id for i in kept.work}  # the soft constraint drops them from an unnamed entry
    c = cfg(tmp_path, entry=f", instances: [{', '.join(wide)}]", space=soft)
    (named,) = plan_sweep(c)
    assert sorted(i.id for i in named.work) == wide and len(wide) == 4
    backend = FormulaBackend()
    with Store.open(c.database) as store:
        assert run_sweep(c, store, backend, Quiet()).status == "done"
    assert sorted({iid for iid, _ in backend.calls}) == wide
    hard = soft + 'hard:\n  - {name: short, expr: "BLOCK_Y == 1", reason: "a test hard constraint"}\n'
    with pytest.raises(UserError, match="1 of the named instances are not in the space"):
        plan_sweep(cfg(tmp_path, entry=f", instances: [{wide[0]}, {tall[0]}]", space=hard))


def test_bad_measure_rule_and_instance_id_point_at_the_line(tmp_path):
    with pytest.raises(UserError, match="measure: 'everywhere' is not a rule") as e:
        cfg(tmp_path, entry=", measure: everywhere")
    assert e.value.line == 2
    with pytest.raises(UserError, match="16 hex digits"):
        cfg(tmp_path, entry=", instances: [not-an-id]")


def test_share_measures_the_bk_best_at_the_nearest_valid_points_after_the_main_phase(tmp_path):
    c = cfg(tmp_path, extra="share: 1\n")
    (plan,) = plan_sweep(c)
    # the points each instance is valid at but not measured on, nearest to its own size first
    by_bm = {inst.param_dict["BM"]: [p.m for p in plan.shared_points(inst)] for inst in plan.extra}
    assert by_bm == {16: [8], 24: [16, 8], 32: [24, 16, 8]}
    backend, quiet = FormulaBackend(), Quiet()
    with Store.open(c.database) as store:
        summary = run_sweep(c, store, backend, quiet)
    assert summary.status == "done"
    main = backend.calls[:16]
    extra = backend.calls[16:]
    assert len(main) == 16 and len(quiet.starts) == 2 and any("sharing" in n for n in quiet.notes)
    ids = {i.id: i.param_dict["BM"] for i in plan.work}
    # exactly the BK = 2 best of the bounds 16, 24, 32 (per their own point), each at its one nearest valid point
    expect = sorted((iid, ids[iid] - 8) for m in (16, 24, 32) for iid in best_main(main, m, ids))
    assert sorted((iid, p.m) for iid, p in extra) == expect
    # resuming measures nothing more
    backend2 = FormulaBackend()
    with Store.open(c.database) as store:
        run_sweep(c, store, backend2, Quiet())
    assert backend2.calls == []


def best_main(main, m, ids):
    """The ids the formula backend ranks among the 2 best verified at size m in the main phase."""
    import zlib

    at = [iid for iid, p in main if p.m == m]
    ok = [iid for iid in at if zlib.crc32(iid.encode()) % 1000 % 17 != 0]
    return sorted(ok, key=lambda i: (zlib.crc32(i.encode()) % 1000, i))[:2]


def test_sharing_report_counts_kernels_with_all_and_with_home_measurements(tmp_path):
    from autotune.analysis.winners import Criteria
    from autotune.dispatch.sharing import home_mask, kernels_with_and_without_sharing

    c = cfg(tmp_path, entry=", measure: valid")
    with Store.open(c.database) as store:
        run_sweep(c, store, FormulaBackend(), Quiet())
    with Store.open(c.database, create=False, readonly=True) as store:
        frame = store.measurements()
    from autotune.store.spaces import use_stored_spaces

    use_stored_spaces(c.database)  # the space as recorded, found by name (as report does)
    home = home_mask(frame)
    bm = frame["param_BM"] if "param_BM" in frame.columns else frame["BM"]
    assert (home == (bm.to_numpy() == frame["m"].to_numpy())).all()  # serves: BM == M
    table = kernels_with_and_without_sharing(frame, Criteria(bk=10), [0.0, 0.5], "exact")
    assert list(table["shared_measurements"]) == [int((~home).sum())] * 2 and (~home).sum() == 24
    # more candidates per point can only keep or lower the minimum kernel count at a TOL
    assert (table["kernels"] <= table["kernels_home"]).all()
    assert kernels_with_and_without_sharing(frame[home], Criteria(bk=10), [0.0], "exact") is None


def test_named_instances_valid_nowhere_are_skipped_not_an_error(tmp_path):
    (plan,) = plan_sweep(cfg(tmp_path))
    small = [i.id for i in plan.work if i.param_dict["BM"] == 8][:1]
    text = textwrap.dedent(f"""\
        spaces: [{{space: bounded_test.yaml, instances: [{small[0]}], measure: valid}},
                 {{space: bounded_test.yaml, measure: valid}}]
        points: {{precisions: [fp32], sizes: {{square: [16]}}, batch: 10}}
        """)
    plans = plan_sweep(parse_config(text, file=tmp_path / "v.yaml"))
    assert len(plans) == 1 and all(i.param_dict["BM"] >= 16 for i in plans[0].work)
    alone = (
        f"spaces: [{{space: bounded_test.yaml, instances: [{small[0]}], measure: valid}}]\n"
        "points: {precisions: [fp32], sizes: {square: [16]}, batch: 10}\n"
    )
    with pytest.raises(UserError, match="none of the named instances is valid"):
        plan_sweep(parse_config(alone, file=tmp_path / "w.yaml"))
