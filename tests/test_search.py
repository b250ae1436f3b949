"""Model-based search (issue 33): the valid-set map, Optuna studies in the sweep's database, stop rules, the
strategy config keys, and each strategy end to end on a small recorded space through the replay backend."""

from __future__ import annotations

import dataclasses
import importlib.util
from collections import Counter
from pathlib import Path

import optuna
import pytest
from hypothesis import given, settings, strategies as st

from autotune.errors import ConfigError
from autotune.space.instance import Instance
from autotune.store.store import Store
from autotune.sweep.backends.replay import ReplayBackend
from autotune.sweep.config import load_config, parse_config
from autotune.sweep.runner import run_sweep, study_name
from autotune.sweep.strategies.auto import Auto
from autotune.sweep.strategies.hybrid import HybridSearch
from autotune.sweep.strategies.optuna_search import TPESearch
from autotune.sweep.strategies.options import SearchOptions, StopRule
from autotune.sweep.strategies.validset import ValidSet
from autotune.testing.strategies import POINT, made_up_instances, made_up_results
from autotune.vocab import Measurement, Status
from tests.support.committed import plain_bytes

ROOT = Path(__file__).resolve().parent.parent
TRANSPOSE = ROOT / "examples" / "transpose"
AVAILABLE = (
    ["brute", "random", "tpe", "hybrid", "auto"]
    + (["gp"] if importlib.util.find_spec("torch") else [])
    + (["cmaes"] if importlib.util.find_spec("cmaes") else [])
)


def ok(inst: Instance, ms: float) -> list[Measurement]:
    return [Measurement(inst.id, POINT, Status.OK, median_ms=ms, reps=3, times_ms=[ms] * 3)]


# ------------------------------------------------------------------------------------------------ valid set
@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 64), st.integers(0, 20), st.sampled_from("abz")), min_size=1, max_size=60))
def test_every_proposal_lands_on_a_distinct_valid_instance(proposals: list) -> None:
    valid = ValidSet(made_up_instances(30))
    rows = [valid.take_nearest({"X": x, "Y": y, "MODE": m}) for x, y, m in proposals]
    taken = [r for r in rows if r is not None]
    assert len(taken) == len(set(taken)) == min(len(proposals), 30)
    assert all(r is None for r in rows[30:])


def test_a_valid_proposal_maps_onto_itself_and_a_gap_onto_its_neighbour() -> None:
    insts = [Instance.of("s", {"T": t, "V": v}) for t in (8, 16, 64, 128) for v in ("x", "y")]
    valid = ValidSet(insts)
    assert valid.distributions["T"].log  # powers of two: a log scale
    assert insts[valid.take_nearest({"T": 16, "V": "y"})].param_dict == {"T": 16, "V": "y"}
    # 32 is not in the space: on a log scale 16 and 64 are equally near; 16 is taken, so 64
    assert insts[valid.take_nearest({"T": 32, "V": "y"})].param_dict == {"T": 64, "V": "y"}


# ------------------------------------------------------------------------------------------------ Optuna strategies
def test_failures_are_failed_trials_and_early_stops_keep_their_time() -> None:
    s = TPESearch(made_up_instances(12), 3, 0, batch=3)
    a, b, c = s.ask(3)
    s.tell(a, ok(a, 1.5))
    s.tell(b, [Measurement(b.id, POINT, Status.SKIPPED, median_ms=4.0, reps=2)])  # early stop
    s.tell(c, [Measurement(c.id, POINT, Status.COMPILE_ERROR, error="no")])
    states = [(t.user_attrs["instance_id"], t.state, t.value) for t in s.study.trials]
    assert states == [
        (a.id, optuna.trial.TrialState.COMPLETE, 1.5),
        (b.id, optuna.trial.TrialState.COMPLETE, 4.0),
        (c.id, optuna.trial.TrialState.FAIL, None),
    ]
    assert s.ask(3) == []  # budget spent
    with pytest.raises(ValueError):
        s.tell(a, ok(a, 1.0))


def test_trial_params_are_the_measured_instance() -> None:
    insts = made_up_instances(48)
    s = TPESearch(insts, 20, 3, batch=2, startup=2)
    while asked := s.ask(2):
        for inst in asked:
            s.tell(inst, made_up_results(inst))
    by_id = {i.id: i for i in insts}
    for t in s.study.trials:
        assert t.params == by_id[t.user_attrs["instance_id"]].param_dict
    assert len(s.study.trials) == 20


def test_study_in_sqlite_loads_and_a_resumed_strategy_continues_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'studies.sqlite'}"
    insts = made_up_instances(40)
    first = TPESearch(insts, 10, 0, study=(url, "s1"), batch=2)
    asked = first.ask(2) + first.ask(2)  # the second batch is never told: a sweep that died
    for inst in asked[:2]:
        first.tell(inst, made_up_results(inst))
    again = TPESearch(insts, 10, 0, study=(url, "s1"), batch=4)
    rest = [i for _ in range(5) for i in again.ask(4) if not again.tell(i, made_up_results(i))]
    assert not set(rest) & set(asked), "a resumed study proposed an instance of its earlier trials"
    assert len(rest) == 10 - 4  # the earlier trials count toward the budget, the two left running included
    study = optuna.load_study(storage=url, study_name="s1")
    states = Counter(t.state for t in study.trials)
    assert states[optuna.trial.TrialState.RUNNING] == 0 and len(study.trials) == 10


def test_transfer_instances_are_measured_first() -> None:
    insts = made_up_instances(40)
    start = [insts[17], insts[3]]
    s = TPESearch(insts, 6, 0, start=start, batch=3)
    assert s.ask(3)[:2] == start


def test_auto_says_which_and_why() -> None:
    insts = made_up_instances(40)
    assert Auto(insts, None, 0).reason.startswith("auto: brute (no budget")
    assert Auto(insts, 40, 0).reason.startswith("auto: brute (the budget of 40 covers all 40")
    picked = Auto(insts, 10, 0)
    assert isinstance(picked.chosen, HybridSearch) and picked.reason.startswith("auto: hybrid (40 instances, budget 10")


def test_stop_rule_patience_and_roofline() -> None:
    insts = made_up_instances(3)
    rule = StopRule(SearchOptions(patience=2), None)
    rule.tell(ok(insts[0], 2.0))
    rule.tell(ok(insts[1], 3.0))
    assert not rule.done
    rule.tell([Measurement(insts[2].id, POINT, Status.WRONG)])
    assert rule.done and "patience" in (rule.reason or "")
    roof = StopRule(SearchOptions(roofline_tol=0.1), roofline_ms=0.9)
    roof.tell(ok(insts[0], 1.01))  # 0.891 of the roofline
    assert not roof.done
    roof.tell(ok(insts[1], 0.99))  # 0.909
    assert roof.done and "roofline" in (roof.reason or "")


# ------------------------------------------------------------------------------------------------ config
def test_strategy_mapping_in_the_config() -> None:
    text = (
        (TRANSPOSE / "sweep.yaml").read_text()
        + "strategy: {name: tpe, budget: 12, patience: 5, roofline_tol: 0.05, transfer: 2, studies: memory, batch: 2}\n"
    )
    cfg = parse_config(text, file=TRANSPOSE / "sweep.yaml")
    assert cfg.strategy == "tpe"
    assert cfg.search == SearchOptions(12, 5, 0.05, 2, "memory", (("batch", 2),))
    assert (
        parse_config(
            (TRANSPOSE / "sweep.yaml").read_text() + "strategy: random\n", file=TRANSPOSE / "sweep.yaml"
        ).search
        == SearchOptions()
    )
    for bad, match in [
        ("{name: tpe, budget: 0}", "integer >= 1"),
        ("{budget: 3}", "needs `name:`"),
        ("{name: tpe, patiense: 3}", "did you mean `patience`"),
        ("{name: tpe, roofline_tol: 1.5}", "outside"),
        ("{name: nope}", "unknown strategy"),
    ]:
        with pytest.raises(ConfigError, match=match):
            parse_config((TRANSPOSE / "sweep.yaml").read_text() + f"strategy: {bad}\n", file=TRANSPOSE / "sweep.yaml")


# ------------------------------------------------------------------------------------------------ end to end
class Quiet:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def start(self, total_pairs: int, already_done: int) -> None:
        pass

    def measured(self, m: Measurement, best_ms: float | None) -> None:
        pass

    def note(self, text: str) -> None:
        self.notes.append(text)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("rec") / "transpose.sqlite"
    path.write_bytes(plain_bytes(TRANSPOSE / "results" / "transpose_h100.sqlite.xz"))
    return f"sqlite:///{path}"


@pytest.mark.parametrize("name", AVAILABLE)
def test_each_strategy_on_a_recorded_space(name: str, recorded: str, tmp_path: Path) -> None:
    """CI: each strategy sweeps the recorded transpose space (52 instances, 3 points) with a budget of 12 per point."""
    url = f"sqlite:///{tmp_path / 'mine.sqlite'}"
    cfg = dataclasses.replace(
        load_config(TRANSPOSE / "sweep.yaml"), database=url, strategy=name, seed=1, search=SearchOptions(budget=12)
    )
    backend = ReplayBackend(recorded)
    reporter = Quiet()
    try:
        with Store.open(url) as store:
            summary = run_sweep(cfg, store, backend, reporter)
            m = store.measurements()
    finally:
        backend.close()
    assert summary.status == "done"
    per_point = m.groupby(["rows", "cols"]).instance_id.nunique()
    assert len(per_point) == 3 and (per_point == 12).all(), per_point
    assert len(m) == 36  # each instance measured at its point only
    if name in ("tpe", "hybrid", "gp", "cmaes", "auto"):
        uuid = backend.device_info().uuid
        for p in cfg.points:
            study = optuna.load_study(storage=url, study_name=study_name(cfg, "transpose_tiled", p, uuid))
            assert len(study.trials) == 12
    if name == "auto":
        assert any("auto: hybrid" in n for n in reporter.notes)


def test_tpe_sweep_resumes_its_study(recorded: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mine.sqlite'}"
    cfg = dataclasses.replace(
        load_config(TRANSPOSE / "sweep.yaml"), database=url, strategy="tpe", search=SearchOptions(budget=5)
    )
    for budget in (5, 9):
        backend = ReplayBackend(recorded)
        uuid = backend.device_info().uuid
        try:
            with Store.open(url) as store:
                run_sweep(dataclasses.replace(cfg, search=SearchOptions(budget=budget)), store, backend, Quiet())
                m = store.measurements()
        finally:
            backend.close()
    assert len(m) == 27 and not m.duplicated(["instance_id", "rows", "cols"]).any()
    study = optuna.load_study(storage=url, study_name=study_name(cfg, "transpose_tiled", cfg.points[0], uuid))
    assert len(study.trials) == 9 and all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)


def test_patience_stops_a_point_early(recorded: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mine.sqlite'}"
    cfg = dataclasses.replace(
        load_config(TRANSPOSE / "sweep.yaml"), database=url, strategy="random", search=SearchOptions(patience=3)
    )
    backend = ReplayBackend(recorded)
    reporter = Quiet()
    try:
        with Store.open(url) as store:
            run_sweep(cfg, store, backend, reporter)
            m = store.measurements()
    finally:
        backend.close()
    stops = [n for n in reporter.notes if "patience" in n]
    assert len(stops) == 3 and len(m) < 3 * 52


def test_a_search_learns_what_earlier_runs_measured(recorded: str, tmp_path: Path) -> None:
    """On a database where every pair is measured already (a resumed sweep, or Kernel Tuner's simulation mode on an
    imported cache), a model-based search is told each proposal's recorded result: its trials complete with the
    recorded medians instead of failing, and nothing is measured again."""
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(Path(recorded.removeprefix("sqlite:///")).read_bytes())
    url = f"sqlite:///{copy}"
    from autotune.store.migrate import upgrade

    upgrade(url)  # the committed recording is an older schema: a sweep writes only to the current one
    cfg = dataclasses.replace(
        load_config(TRANSPOSE / "sweep.yaml"), database=url, strategy="tpe", seed=3, search=SearchOptions(budget=6)
    )
    backend = ReplayBackend(recorded)
    uuid = backend.device_info().uuid
    try:
        with Store.open(url) as store:
            before = store.measurements(uuid)
            run_sweep(cfg, store, backend, Quiet())
            after = store.measurements(uuid)
    finally:
        backend.close()
    assert len(after) == len(before)  # nothing measured twice
    study = optuna.load_study(storage=url, study_name=study_name(cfg, "transpose_tiled", cfg.points[0], uuid))
    assert len(study.trials) == 6
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials), [t.state for t in study.trials]
    sizes = dict(cfg.points[0].sizes)
    at_point = before[(before["rows"] == sizes["rows"]) & (before["cols"] == sizes["cols"])]
    assert len(at_point) > 6
    assert {round(t.value, 9) for t in study.trials} <= set(at_point["median_ms"].round(9))
