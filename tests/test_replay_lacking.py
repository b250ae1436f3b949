"""A search replayed on a recording that lacks pairs (a sampled one) measures only what the recording holds, says how
many pairs it lacks, and stores nothing for them: `not_recorded` is a status of its own, never `skipped` (which
means stopped early). Real replays of the committed results/default sampled down further."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from autotune.paths import ROOT
from autotune.store.store import Store
from autotune.sweep.backends.dask_executors import Relabelled
from autotune.sweep.backends.replay import ReplayBackend
from autotune.sweep.config import load_config
from autotune.sweep.runner import run_sweep
from autotune.vocab import Measurement
from tests.support.running import plain_recording

SIZES = (8, 16)  # the config's two test points: square fp32 NN
BUDGET = 6

CONFIG = f"""\
name: lacking
spaces:
  - gemm_batched_simt
points:
  - precisions: [fp32]
    shapes: [NN]
    sizes:
      square: {list(SIZES)}
    batch: {{bytes: 100MB}}
alpha: 1.0
beta: 0.0
repetitions: 20
seed: 0
tol: 0.05
"""


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """results/default (300 of the space's instances) with half of its instances' measurements gone."""
    path = plain_recording(tmp_path_factory.mktemp("lacking"))
    with sqlite3.connect(path) as c:
        ids = [i for (i,) in c.execute("select distinct instance_id from measurements order by instance_id")]
        c.executemany("delete from measurements where instance_id = ?", [(i,) for i in ids[::2]])
    return path


def held_at_the_points(db: Path) -> int:
    """(instance, point) pairs the recording holds at the config's points."""
    sizes = ",".join(str(s) for s in SIZES)
    with sqlite3.connect(db) as c:
        return c.execute(
            "select count(distinct m.instance_id || '@' || m.point_id) from measurements m join points_gemm p "
            f"on p.id = m.point_id where p.precision = 'fp32' and p.m in ({sizes})"
        ).fetchone()[0]


@pytest.mark.parametrize("strategy", ["random", "tpe"])
def test_a_search_on_a_sampled_recording_spends_its_budget_on_what_it_holds(
    strategy: str, sampled: Path, tmp_path: Path
) -> None:
    """`--strategy S --budget 6` on 2 points: 6 evaluations at each, every one a recorded measurement; the pairs the
    recording lacks are counted and said, and none is stored. Before: `done` with nearly every evaluation a
    `skipped` "not recorded" row (0 measured with tpe on results/default)."""
    config = tmp_path / "lacking.yaml"
    config.write_text(CONFIG)
    db = tmp_path / "search.sqlite"
    r = subprocess.run(
        [sys.executable, "-m", "autotune", "sweep", str(config), "--replay", str(sampled), "--db", str(db), "-q"]
        + ["--strategy", strategy, "--budget", str(BUDGET)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "sweep 1: done" in r.stdout
    with sqlite3.connect(db) as c:
        stored = c.execute("select count(*), count(distinct point_id) from measurements").fetchone()
        lacking_rows = c.execute("select count(*) from measurements where error = 'not recorded'").fetchone()[0]
        per_point = c.execute("select count(*) from measurements group by point_id").fetchall()
    assert stored == (BUDGET * len(SIZES), len(SIZES)) and per_point == [(BUDGET,)] * len(SIZES)
    assert lacking_rows == 0
    said = re.search(
        r"not in the recording: ([\d,]+) of the ([\d,]+) \(instance, test point\) pairs", " ".join(r.stdout.split())
    )
    assert said, r.stdout
    left_out, planned = (int(g.replace(",", "")) for g in said.groups())
    assert left_out > 0 and planned - left_out == held_at_the_points(sampled)
    assert f"lacks {left_out:,} of its {planned:,}" in " ".join(r.stderr.split())  # said when the sweep starts too


class Counting:
    """A reporter that keeps the notes."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def start(self, total_pairs: int, already_done: int) -> None:
        pass

    def measured(self, m: Measurement, best_ms: float | None) -> None:
        pass

    def note(self, text: str) -> None:
        self.notes.append(text)


def test_pairs_answered_not_recorded_are_counted_and_never_stored(sampled: Path, tmp_path: Path) -> None:
    """An executor that does not name the pairs it holds (a Dask worker's replay): what it answers `not recorded` is
    `not_recorded` in the summary, never a stored `skipped` row."""
    cfg_path = tmp_path / "lacking.yaml"
    cfg_path.write_text(CONFIG)
    url = f"sqlite:///{tmp_path / 'brute.sqlite'}"
    import dataclasses

    cfg = dataclasses.replace(load_config(cfg_path), database=url, strategy="brute", max_instances=40)
    replay = ReplayBackend(str(sampled))
    backend: Any = Relabelled(replay, replay.device_info())  # no `recorded_pairs`: every planned pair is asked
    try:
        with Store.open(url) as store:
            summary = run_sweep(cfg, store, backend, Counting())
    finally:
        backend.close()
    stored = sum(summary.counts.values())
    assert summary.status == "done" and summary.not_recorded > 0 and summary.left_out == 0
    with sqlite3.connect(tmp_path / "brute.sqlite") as c:
        assert c.execute("select count(*) from measurements").fetchone()[0] == stored
        assert c.execute("select count(*) from measurements where error = 'not recorded'").fetchone()[0] == 0
    assert stored + summary.not_recorded == 40 * len(SIZES)  # every pair asked: measured or not recorded
