"""The "Failures by kind" recipe (docs/queries.md, `autotune.store.query.failures_by_kind`) counts failures only:
compile_error, launch_error, wrong, timeout and crashed; `skipped` (stopped early, provably slower than the best by
more than TOL) is not a failure."""

from __future__ import annotations

import warnings
from pathlib import Path

from pg import SPACE, instances, points, record_sample

from autotune.space.instance import Instance
from autotune.store import query
from autotune.store.store import Store
from autotune.vocab import Measurement, Status

ROOT = Path(__file__).resolve().parents[1]
# a committed database with every kind of outcome: early stops, compile and launch errors
CONVOLUTION = ROOT / "results/bench/compile_bound_whole_h100/convolution.sqlite.xz"


def _record_every_status(url: str) -> None:
    """The sample sweep of tests/pg.py (one `wrong`) plus one more instance per status that is not ok, at the fp64
    point."""
    with Store.open(url) as store:
        rec = record_sample(store, finish=False)
        outcomes = [s for s in Status if s is not Status.OK]
        more = [
            Instance.of(SPACE, {"DIM_X": 4 * (i + 1), "DIM_Y": 2, "SCALE": 0.5, "ALG": "a"})
            for i in range(len(outcomes))
        ]
        store.upsert_instances(more)
        ms = [
            Measurement(inst.id, points()[0], status, median_ms=9.0 if status is Status.SKIPPED else None, error=None)
            for inst, status in zip(more, outcomes, strict=True)
        ]
        store.record(rec.sweep_id, rec.space_id, ms)
        store.finish_sweep(rec.sweep_id, "done")
    assert {i.id for i in more}.isdisjoint(i.id for i in instances())


def test_failures_leave_out_early_stops(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'every_status.sqlite'}"
    _record_every_status(url)
    counts = dict(query.failures_by_kind(url)[["status", "count"]].values.tolist())
    assert counts == {"compile_error": 1, "launch_error": 1, "wrong": 2, "timeout": 1, "crashed": 1}
    assert set(query.run_query(url, "SELECT status FROM measurements").status) >= {"ok", "skipped"}


def test_failures_on_a_committed_database() -> None:
    """A committed sweep with 4,102 early stops: none of them is counted."""
    with warnings.catch_warnings():  # an older schema is read through its migrated copy
        warnings.simplefilter("ignore")
        statuses = query.run_query(str(CONVOLUTION), "SELECT status, COUNT(*) AS n FROM measurements GROUP BY status")
        failures = query.failures_by_kind(str(CONVOLUTION))
    assert dict(statuses.values.tolist())["skipped"] == 4102
    assert failures[["status", "count"]].values.tolist() == [["compile_error", 2510], ["launch_error", 540]]
