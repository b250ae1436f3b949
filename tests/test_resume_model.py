"""`resume: model`: a sweep stopped on one GPU resumes on another card of the same model (clusters, lent machines)
without measuring a pair twice; `resume: gpu` (the default) measures everything again on the new card."""

import dataclasses

import pytest

from autotune.errors import UserError
from autotune.store.store import Store
from autotune.sweep.config import parse_config
from autotune.sweep.runner import run_sweep
from tests.support.formula_backend import INFO, FormulaBackend
from tests.test_sharing import SPACE, Quiet


class OtherCard(FormulaBackend):
    def __init__(self, uuid: str, **kw) -> None:
        super().__init__(**kw)
        self.info = dataclasses.replace(INFO, uuid=uuid)

    def device_info(self):
        return self.info


def config(tmp_path, resume: str):
    (tmp_path / "bounded_test.yaml").write_text(SPACE)
    return parse_config(
        f"""\
spaces: [{{space: bounded_test.yaml, measure: valid}}]
points: {{precisions: [fp32], sizes: {{square: [8, 16, 24, 32]}}, batch: 10}}
database: sqlite:///{tmp_path}/r.sqlite
repetitions: 3
resume: {resume}
""",
        file=tmp_path / "t.yaml",
    )


@pytest.mark.parametrize("resume", ["model", "gpu"], ids=["resume-model", "resume-card"])
def test_resume_on_another_card_of_the_same_model(tmp_path, resume):
    cfg = config(tmp_path, resume)
    first = OtherCard("GPU-card-a", interrupt_at=15)
    with Store.open(cfg.database) as store:
        assert run_sweep(cfg, store, first, Quiet()).status == "interrupted"
    second = OtherCard("GPU-card-b")
    with Store.open(cfg.database) as store:
        assert run_sweep(cfg, store, second, Quiet()).status == "done"
    total = 40  # 16 instances: bounds 8, 16, 24, 32 measured at 1, 2, 3, 4 sizes, four of each
    done_first = len(first.calls) - 1  # the interrupted pair is not recorded
    if resume == "model":
        assert len(second.calls) == total - done_first
        assert not set(first.calls[:done_first]) & set(second.calls)
    else:
        assert len(second.calls) == total
    with Store.open(cfg.database, create=False, readonly=True) as store:
        frame = store.measurements()
    assert len(frame) == done_first + len(second.calls)


def test_bad_resume_rule_is_an_error(tmp_path):
    with pytest.raises(UserError, match="resume: 'card' is not a rule"):
        config(tmp_path, "card")


def test_kernel_tuners_results_take_every_card_of_the_model_once(tmp_path):
    """tune_kernel resumes with `resume: model` (as Kernel Tuner's cache, on any device of the same name): its
    returned results hold what the earlier card measured too, each configuration once, the later card's first."""
    from autotune.interop.kt_export import collect_results
    from autotune.space.spec import load_space

    cfg = config(tmp_path, "model")
    with Store.open(cfg.database) as store:
        run_sweep(cfg, store, OtherCard("GPU-card-a", interrupt_at=15), Quiet())
    with Store.open(cfg.database) as store:
        run_sweep(cfg, store, OtherCard("GPU-card-b"), Quiet())
    space = load_space(tmp_path / "bounded_test.yaml")
    keys = ["BM", "BLOCK_X", "BLOCK_Y"]
    with Store.open(cfg.database, create=False, readonly=True) as store:
        a, b = (store.device_id(u) for u in ("GPU-card-a", "GPU-card-b"))
        on = {d: {p for _, p in store.done_pairs(d)} for d in (a, b)}
        point = next(p for p in cfg.points if p in on[a] and p in on[b])  # measured in part on each card
        both = collect_results(store, space, point, "GPU-card-b", keys, same_model=True)
        only_b = collect_results(store, space, point, "GPU-card-b", keys)
        on_a = {i for i, p in store.done_pairs(a) if p == point}
        on_b = {i for i, p in store.done_pairs(b) if p == point}
    assert on_a and on_b and not on_a & on_b
    assert len(both) == len(on_a | on_b)
    assert len({tuple(r[k] for k in keys) for r in both}) == len(both)  # each configuration once
    assert len(only_b) == len(on_b) < len(both)
