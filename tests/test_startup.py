"""Start-up: the sweep records and says how long after its start the first measurement came."""

import time

from autotune.sweep.runner import run_sweep
from autotune.store.store import Store
from tests.support.formula_backend import FormulaBackend
from tests.test_runner import Quiet, config


class SlowStart(FormulaBackend):
    """The formula backend whose first measurement comes `delay` seconds after `run` is first called."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay, self.started = delay, False

    def run(self, jobs):
        if not self.started:
            self.started = True
            time.sleep(self.delay)
        return super().run(jobs)


def test_the_sweep_records_and_notes_its_time_to_the_first_measurement(tmp_path):
    cfg = config(tmp_path, f"sqlite:///{tmp_path}/r.sqlite")
    rep = Quiet()
    with Store.open(cfg.database) as store:
        summary = run_sweep(cfg, store, SlowStart(0.3), rep)
    assert summary.measured == 90
    assert 0.3 <= summary.first_measurement_s < summary.seconds
    notes = [n for n in rep.notes if n.startswith("first measurement")]
    assert notes == [f"first measurement {summary.first_measurement_s:.1f} s after the sweep's start"]
