"""The sweep loop: resume after Ctrl-C and after kill -9, never measuring a pair twice."""

import dataclasses
import subprocess
import sys
import textwrap
from collections import Counter

import pytest

from autotune.problems.gemm import gemm_point
from autotune.sweep.config import parse_config
from autotune.errors import UserError
from autotune.sweep.runner import plan_sweep, run_sweep
from autotune.store.store import Store
from autotune.space.spec import load_space
from tests.support.formula_backend import FormulaBackend

SPACE = textwrap.dedent("""\
    name: naive_test
    kernel:
      source: gemm_naive.cuh
      template: autotune::gemm_naive
      template_args: [T, S, TRANS_A, TRANS_B, BLOCK_X, BLOCK_Y]
      convention: strided
      block: [BLOCK_X, BLOCK_Y, 1]
      grid: ["ceil(M / BLOCK_X)", "ceil(N / BLOCK_Y)", "min(batch, 65535)"]
      problems: {precisions: [fp64, fp32], shapes: [NN, NT]}
    parameters:
      BLOCK_X: [4, 8, 16, 32]
      BLOCK_Y: [1, 2, 4, 8]
    derived:
      threads: BLOCK_X * BLOCK_Y
    hard:
      - {name: warp, expr: "threads >= 8", reason: test}
    """)


def config(tmp_path, db):
    (tmp_path / "naive_test.yaml").write_text(SPACE)
    text = textwrap.dedent(f"""\
        name: t
        spaces: [naive_test.yaml]
        points:
          - precisions: [fp64, fp32]
            shapes: [NN]
            sizes: {{square: {{from: 8, to: 24, step: 8}}}}
            batch: 100
        database: {db}
        repetitions: 3
        """)
    return parse_config(text, file=tmp_path / "t.yaml")


class Quiet:
    def __init__(self):
        self.seen = 0
        self.notes = []

    def start(self, total, done):
        self.total, self.done = total, done

    def measured(self, m, best):
        self.seen += 1

    def note(self, text):
        self.notes.append(text)


def pairs(db):
    with Store.open(db, create=False) as s:
        frame = s.measurements()
    return frame


def test_plan_counts_instances_per_precision(tmp_path):
    cfg = config(tmp_path, f"sqlite:///{tmp_path}/r.sqlite")
    (plan,) = plan_sweep(cfg)
    space = load_space(tmp_path / "naive_test.yaml")
    assert plan.space.name == space.name == "naive_test"
    assert len(plan.work) == 15  # 16 combinations minus threads < 8 (4x1)
    assert plan.pairs == 15 * 6  # 2 precisions x 3 sizes


def test_where_keeps_only_matching_instances_and_names_the_config_line_of_a_bad_name(tmp_path):
    cfg = config(tmp_path, f"sqlite:///{tmp_path}/r.sqlite")
    text = cfg.text.replace(
        "spaces: [naive_test.yaml]", "spaces:\n  - {space: naive_test.yaml, where: 'BLOCK_X >= 16 and threads <= 64'}"
    )
    (plan,) = plan_sweep(parse_config(text, file=tmp_path / "t.yaml"))
    kept = sorted((i.param_dict["BLOCK_X"], i.param_dict["BLOCK_Y"]) for i in plan.work)
    assert kept == [(16, 1), (16, 2), (16, 4), (32, 1), (32, 2)]
    assert plan.funnel_count == {"fp64": 5, "fp32": 5}
    bad = parse_config(text.replace("threads <= 64", "WARPS <= 2"), file=tmp_path / "t.yaml")
    with pytest.raises(UserError) as err:
        plan_sweep(bad)
    assert err.value.line == 3 and "WARPS" in err.value.message and str(err.value).startswith(f"{tmp_path}/t.yaml:3:")


@pytest.mark.parametrize("entry, measured", [("", 4), (", max_instances: all", 15), (", max_instances: 2", 2)])
def test_a_space_entry_limit_overrides_the_configs(tmp_path, entry, measured):
    cfg = config(tmp_path, f"sqlite:///{tmp_path}/r.sqlite")
    text = cfg.text.replace("spaces: [naive_test.yaml]", "spaces:\n  - {space: naive_test.yaml" + entry + "}")
    cfg = parse_config(text + "strategy: random\nmax_instances: 4\n", file=tmp_path / "t.yaml")
    with Store.open(cfg.database) as store:
        summary = run_sweep(cfg, store, FormulaBackend(), Quiet())
    assert summary.status == "done"
    assert pairs(cfg.database).instance_id.nunique() == measured


def test_interrupt_then_resume_measures_every_pair_once(tmp_path):
    db = f"sqlite:///{tmp_path}/r.sqlite"
    cfg = config(tmp_path, db)
    with Store.open(db) as store:
        first = run_sweep(cfg, store, FormulaBackend(interrupt_at=20), Quiet())
    assert first.status == "interrupted" and first.measured == 19
    backend = FormulaBackend()
    rep = Quiet()
    with Store.open(db) as store:
        second = run_sweep(cfg, store, backend, rep)
    assert second.status == "done" and rep.done == 19 and second.skipped_done == 19
    frame = pairs(db)
    assert len(frame) == 90 and not frame.duplicated(["instance_id", "precision", "m"]).any()
    assert len(backend.calls) == 90 - 19
    counts = Counter(frame.status)
    assert counts["wrong"] > 0 and counts["ok"] + counts["wrong"] == 90
    # a third run has nothing left to do
    with Store.open(db) as store:
        third = run_sweep(cfg, store, FormulaBackend(), Quiet())
    assert third.measured == 0 and third.skipped_done == 90


def test_kill_9_loses_at_most_the_pair_in_flight_and_never_reruns_it(tmp_path):
    db = f"sqlite:///{tmp_path}/r.sqlite"

    config(tmp_path, db)  # writes the space file
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(__import__("pathlib").Path(__file__).parent.parent)!r})
        from tests.test_runner import config, Quiet
        from tests.support.formula_backend import FormulaBackend
        from autotune.sweep.runner import run_sweep
        from autotune.store.store import Store
        import pathlib
        cfg = config(pathlib.Path({str(tmp_path)!r}), {db!r})
        with Store.open({db!r}) as store:
            run_sweep(cfg, store, FormulaBackend(die_at=30), Quiet())
        """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert r.returncode == -9, r.stderr
    frame = pairs(db)
    assert len(frame) == 29  # everything before the pair in flight was committed
    backend = FormulaBackend()
    rep = Quiet()
    with Store.open(db) as store:
        summary = run_sweep(config(tmp_path, db), store, backend, rep)
    assert summary.status == "done" and len(summary.recovered) == 1
    crashed_id, crashed_point = summary.recovered[0]
    assert (crashed_id, crashed_point) not in backend.calls
    frame = pairs(db)
    assert len(frame) == 90 and not frame.duplicated(["instance_id", "precision", "m"]).any()
    row = frame[
        (frame.instance_id == crashed_id) & (frame.m == crashed_point.m) & (frame.precision == crashed_point.precision)
    ]
    assert list(row.status) == ["crashed"]
    assert any("crashed" in n for n in rep.notes)


def test_second_sweep_on_same_database_is_refused(tmp_path):
    from autotune.store.engine import SweepLockedError

    db = f"sqlite:///{tmp_path}/r.sqlite"
    cfg = config(tmp_path, db)

    class Nested(FormulaBackend):
        def baseline(self, kind, point, scalars, reps):
            with Store.open(db) as other:
                with pytest.raises(SweepLockedError, match="another sweep"):
                    run_sweep(cfg, other, FormulaBackend(), Quiet())
            return super().baseline(kind, point, scalars, reps)

    with Store.open(db) as store:
        assert run_sweep(cfg, store, Nested(), Quiet()).status == "done"


def test_random_strategy_with_budget(tmp_path):
    db = f"sqlite:///{tmp_path}/r.sqlite"
    cfg = dataclasses.replace(config(tmp_path, db), strategy="random", max_instances=5, seed=3)
    with Store.open(db) as store:
        s = run_sweep(cfg, store, FormulaBackend(interrupt_at=8), Quiet())
    assert s.status == "interrupted" and s.measured == 7
    with Store.open(db) as store:
        s = run_sweep(cfg, store, FormulaBackend(), Quiet())
    assert s.measured == 5 * 6 - 7  # the same 5 instances: the sample does not change on resume
    assert pairs(db).instance_id.nunique() == 5


def test_serves_assigns_each_instance_its_own_problems(tmp_path):
    text = SPACE.replace(
        "  problems: {precisions: [fp64, fp32], shapes: [NN, NT]}\n",
        '  problems: {precisions: [fp64, fp32], shapes: [NN, NT]}\n  serves: "M <= BLOCK_X * 2 and N >= BLOCK_Y"\n',
    )
    cfg = config(tmp_path, f"sqlite:///{tmp_path}/r.sqlite")
    (tmp_path / "naive_test.yaml").write_text(text)
    (plan,) = plan_sweep(cfg)
    for inst, pts in plan.work.items():
        bx, by = inst.param_dict["BLOCK_X"], inst.param_dict["BLOCK_Y"]
        assert {(p.m, p.precision) for p in pts} == {
            (m, pr) for m in (8, 16, 24) for pr in ("fp64", "fp32") if m <= 2 * bx and m >= by
        }
    assert plan.pairs < 15 * 6


def test_time_budget_stops_inside_a_batch_and_resume_finishes(tmp_path):
    """The budget counts from the sweep's start, setup included: it is long enough for a slow CI machine's setup
    (0.4 s seen) and far shorter than the 90 measurements (90 x 0.04 s)."""
    import time as _time

    class Slow(FormulaBackend):
        def run(self, jobs):
            for m in super().run(jobs):
                _time.sleep(0.04)
                yield m

    db = f"sqlite:///{tmp_path}/r.sqlite"
    cfg = dataclasses.replace(config(tmp_path, db), budget_s=1.5)
    with Store.open(db) as store:
        first = run_sweep(cfg, store, Slow(), Quiet())
    assert first.status == "budget" and 0 < first.measured < 90
    with Store.open(db) as store:
        second = run_sweep(dataclasses.replace(cfg, budget_s=None), store, FormulaBackend(), Quiet())
    assert second.status == "done" and second.measured == 90 - first.measured


def test_best_times_of_another_gpu_do_not_seed_early_stop(tmp_path):
    """A database may hold several GPUs: the early-stop rule only sees this GPU's best times."""
    from tests.support.formula_backend import INFO

    db = f"sqlite:///{tmp_path}/r.sqlite"
    cfg = config(tmp_path, db)
    with Store.open(db) as store:
        run_sweep(cfg, store, FormulaBackend(), Quiet())

    class OtherGpu(FormulaBackend):
        def __init__(self):
            super().__init__()
            self.seeded = []

        def device_info(self):
            return dataclasses.replace(INFO, uuid="GPU-other", name="other-gpu")

        def seed_best(self, point, scalars, best_ms):
            self.seeded.append(point)

    other = OtherGpu()
    with Store.open(db) as store:
        summary = run_sweep(cfg, store, other, Quiet())
    assert other.seeded == [] and summary.skipped_done == 0 and summary.measured == 90
    with Store.open(db) as store:  # resuming on the first GPU seeds from its own times
        again = FormulaBackend()
        again.seeded = []
        again.seed_best = lambda p, scalars, ms: again.seeded.append(p)
        run_sweep(cfg, store, again, Quiet())
    assert len(again.seeded) == 6


def test_the_gpu_measures_the_point_with_most_compiled_work_and_stays_on_a_tie():
    from autotune.sweep.backends.local import next_point

    a, b, c = (gemm_point("fp32", "NN", n, n, n, 100) for n in (2, 3, 4))
    assert next_point({a: [1], b: [1, 2, 3], c: [1, 2]}, None) == b
    assert next_point({a: [1, 2], b: [1, 2]}, b) == b
    assert next_point({a: [1, 2], b: [1, 2]}, a) == a
    assert next_point({a: [1], b: [1, 2]}, a) == b


@pytest.mark.parametrize(("strategy", "expected"), [("brute", [4, 16, 64]), ("hybrid", None)])
def test_a_streaming_strategy_is_asked_ever_larger_batches(tmp_path, monkeypatch, strategy, expected):
    """Brute force (Strategy.streams) is asked 4, 16, 64 ... (ASK_BATCH here 4, growth 4): fewer batch ends, where
    the compile pool drains its slowest compiles while cores idle. An adaptive strategy keeps the fixed batch."""
    import autotune.sweep.runner as runner

    asks: list[int] = []
    real = runner.make_strategy

    def recording(*args, **kwargs):  # the real strategy; only its ask sizes are noted
        made = real(*args, **kwargs)
        ask = made.ask
        made.ask = lambda n: (asks.append(n), ask(n))[1]  # type: ignore[method-assign]
        return made

    monkeypatch.setattr(runner, "make_strategy", recording)
    monkeypatch.setattr(runner, "ASK_BATCH", 4)
    cfg = config(tmp_path, f"sqlite:///{tmp_path}/r.sqlite")
    cfg = parse_config(cfg.text + f"strategy: {strategy}\n", file=tmp_path / "t.yaml")
    with Store.open(cfg.database) as store:
        summary = run_sweep(cfg, store, FormulaBackend(), Quiet())
    assert summary.status == "done" and pairs(cfg.database).instance_id.nunique() == 15
    if expected is not None:
        assert asks == expected
    else:  # searched per point: never more than the fixed batch
        assert asks and all(n <= 4 for n in asks), asks
