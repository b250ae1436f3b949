"""Runtime refinement (issue 32 item 3) on the CPU: the committed fp32/fp64 selection-model table refines its answers
at 50 of the 200 held-out problems of its committed H100 validation (every fourth: each takes the same path, and a
replayed timing reads every recorded point of its kernel), timing through the replay backend (the validation
database as measured, two cards of one model) what a GPU timer would have measured. Every refined answer is at least
as fast as the table's, a cached problem costs no timer call, the cache file round-trips and belongs to one table."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from autotune.dispatch import validate as v
from autotune.dispatch.refine import Refiner
from autotune.dispatch.refine_timer import backend_timer
from autotune.dispatch.runtime import LIBRARY
from autotune.problems.gemm import GEMM
from autotune.sweep.backends.replay import ReplayBackend
from tests.support.committed import gunzip_to

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "results" / "small_tables_h100" / "model"
TUNING = ROOT / "results" / "small_tables_h100" / "small_tables_h100.sqlite.xz"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    work = tmp_path_factory.mktemp("refine")
    db = gunzip_to(MODEL / "validation" / "validation.sqlite.xz", work / "validation.sqlite")
    table = json.loads((MODEL / "dispatch.json").read_text())
    frame = pd.read_csv(MODEL / "validation" / "validation.csv", keep_default_na=False, na_values=[""])
    assert len(frame) == 200
    frame = frame.iloc[::4].reset_index(drop=True)  # 50 problems of both precisions
    backend = ReplayBackend(f"sqlite:///{db}")
    times, base = v.measured(f"sqlite:///{db}", GEMM)
    yield work, table, frame, backend, times, base
    backend.close()


def problems(frame: pd.DataFrame) -> list[tuple[str, str, dict]]:
    return [(r["precision"], r["shape"], {n: int(r[n]) for n in GEMM.size_names}) for r in frame.to_dict("records")]


def ms_of(answer: int, table: dict, key: tuple, times: dict, base: dict) -> float:
    if answer == LIBRARY:
        return base.get(key, (math.nan,))[0]
    return times.get(key, {}).get(table["kernels"][answer]["instance_id"], (math.nan,))[0]


def test_refined_answers_are_never_slower_and_are_cached(setup) -> None:  # type: ignore[no-untyped-def]
    work, table, frame, backend, times, base = setup
    cache = work / "choices.json"
    refine = Refiner(table, backend_timer(backend, table, GEMM, str(TUNING), reps=10), top=3, cache_file=cache)
    within = {"table": 0, "refined": 0}
    for (precision, shape, sizes), row in zip(problems(frame), frame.to_dict("records"), strict=True):
        key = (precision, shape, *(sizes[n] for n in GEMM.size_names))
        chosen = refine.index(precision, shape, sizes)
        table_answer = refine.lookup.index(precision, shape, sizes)
        t_table, t_chosen = ms_of(table_answer, table, key, times, base), ms_of(chosen, table, key, times, base)
        assert t_table == pytest.approx(row["table_ms"], rel=1e-8)  # the timer measured what validate did
        assert t_chosen <= t_table  # the table's own answer is a candidate
        for name, t in (("table", t_table), ("refined", t_chosen)):
            within[name] += 1 - row["best_ms"] / t <= 0.10 + 1e-12
    assert refine.stats.refined == len(frame) and refine.stats.calls <= 4 * len(frame)
    assert within["refined"] >= within["table"] and within["refined"] >= 0.975 * len(frame)
    calls = refine.stats.calls
    for precision, shape, sizes in problems(frame):  # answered from the cache: no timer call
        refine.index(precision, shape, sizes)
    assert refine.stats.calls == calls and refine.stats.hits == len(frame)

    def no_timer(*_: object) -> float:
        raise AssertionError("a cached problem was timed")

    again = Refiner(table, no_timer, top=3, cache_file=cache)
    assert [again.index(*p) for p in problems(frame)] == [refine.index(*p) for p in problems(frame)]
    other = dict(table, provenance={**table["provenance"], "created_utc": "another table"})
    with pytest.warns(UserWarning, match="another table"):
        fresh = Refiner(other, lambda *a: 1.0, top=3, cache_file=cache)
    assert fresh.choices == {}


def test_candidates_and_tuned_points(setup) -> None:  # type: ignore[no-untyped-def]
    _, table, _, _, _, _ = setup
    calls: list[int] = []

    def timer(answer: int, precision: str, shape: str, sizes: dict) -> float | None:
        calls.append(answer)
        return None if answer == LIBRARY else float(answer + 1)  # the library cannot run; kernel 0 is fastest

    refine = Refiner(table, timer, top=2)
    tuned = table["points"][0]
    assert refine.index(tuned["precision"], tuned["shape"], tuned["sizes"]) == refine.lookup.index(
        tuned["precision"], tuned["shape"], tuned["sizes"]
    )
    assert calls == []  # a tuned point was measured already
    sizes = {"m": 17, "n": 9, "k": 30, "batch": 1000}
    cands = refine.candidates("fp32", "NN", refine.lookup.check("fp32", "NN", sizes))
    assert len([c for c in cands if c >= 0]) == 2 and cands[-1] == LIBRARY
    assert refine.lookup.index("fp32", "NN", sizes) in cands  # the table's own answer (here the library)
    chosen = refine.index("fp32", "NN", sizes)
    assert calls == cands and chosen == min(c for c in cands if c >= 0)
    with pytest.raises(ValueError):
        Refiner(table, timer, top=0)
