"""Winners: pivoting, BK, TOL boundary, tie rule, failures; and the leave-one-out loss."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from autotune.dispatch.loo import leave_one_out
from autotune.analysis.winners import Criteria, perf_matrix, winners, winners_frame, with_point_key
from autotune.problems.gemm.synthetic import synthetic_measurements


def frame(times: dict[tuple[str, int], float | None], spread: float = 0.0, batch: int = 100) -> pd.DataFrame:
    """Rows from {(instance, square size): median ms or None (failed)}; fp64 NN."""
    rows = []
    for (iid, s), ms in times.items():
        rows.append(
            {
                "instance_id": iid,
                "precision": "fp64",
                "shape": "NN",
                "m": s,
                "n": s,
                "k": s,
                "batch": batch,
                "status": "ok" if ms is not None else "wrong",
                "median_ms": ms,
                "p20_ms": None if ms is None else ms * (1 - spread),
                "p80_ms": None if ms is None else ms * (1 + spread),
            }
        )
    return with_point_key(pd.DataFrame(rows))


def test_pivot_keeps_only_verified_times_and_all_points():
    df = frame({("a", 8): 1.0, ("b", 8): None, ("a", 16): None, ("b", 16): None})
    m = perf_matrix(df)
    assert list(m.instances) == ["a", "b"]
    assert list(m.points["m"]) == [8, 16]  # the all-failed point is kept
    assert m.median[0, 0] == 1.0 and np.isnan(m.median[0, 1]) and np.isnan(m.median[1]).all()
    w = winners(m, Criteria(bk=10, tol=0.0))
    assert list(w.uncovered) == [1]


def test_point_key_is_derived_and_duplicates_take_the_median():
    df = frame({("a", 8): 1.0})
    df = pd.concat([df, df.assign(median_ms=3.0), df.assign(median_ms=2.0)]).drop(columns="point_key")
    m = perf_matrix(df)
    assert m.points["point_key"].tolist() == ["fp64:NN:8x8x8:b100"]
    assert m.median[0, 0] == 2.0


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match="median_ms"):
        perf_matrix(frame({("a", 8): 1.0}).drop(columns="median_ms"))


def test_tol_boundary_is_inclusive_and_loss_is_a_performance_share():
    tol = 0.10
    best = 1.0
    df = frame({("a", 8): best, ("b", 8): best / (1 - tol), ("c", 8): best / (1 - tol) * 1.001})
    w = winners(perf_matrix(df), Criteria(bk=10, tol=tol))
    assert w.accepted[0].tolist() == [True, True, False]
    assert w.loss[0, 1] == pytest.approx(tol)
    assert w.loss[0, 0] == 0.0


def test_bk_limits_the_candidates_even_within_tol():
    df = frame({(f"i{j}", 8): 1.0 + 0.001 * j for j in range(6)})
    w = winners(perf_matrix(df), Criteria(bk=3, tol=0.5))
    assert w.accepted[0].sum() == 3
    assert w.rank[0].tolist() == [1, 2, 3, 4, 5, 6]
    assert len(winners_frame(w)) == 3


def test_rank_ties_go_to_smaller_spread_then_id():
    df = frame({("b", 8): 1.0, ("a", 8): 1.0, ("c", 8): 1.0})
    df.loc[df["instance_id"] == "c", "p80_ms"] = 0.999  # same median, tighter upper percentile
    w = winners(perf_matrix(df), Criteria(bk=1, tol=0.0))
    assert w.matrix.instances[w.rank[0] == 1].tolist() == ["c"]
    assert w.rank[0, list(w.matrix.instances).index("a")] == 2


def test_failed_instance_never_wins_even_if_its_time_is_smaller():
    df = frame({("a", 8): 2.0, ("b", 8): 1.0})
    df.loc[df["instance_id"] == "b", "status"] = "wrong"
    w = winners(perf_matrix(df), Criteria(bk=10, tol=0.0))
    assert w.best_ms[0] == 2.0
    assert w.accepted[0].tolist() == [True, False]


def test_spread_rule_accepts_overlapping_intervals_only_when_enabled():
    df = frame({("a", 8): 1.00, ("b", 8): 1.03, ("c", 8): 1.30}, spread=0.02)
    m = perf_matrix(df)
    strict = winners(m, Criteria(bk=10, tol=0.0))
    tied = winners(m, Criteria(bk=10, tol=0.0, spread_ties=True))
    assert strict.accepted[0].tolist() == [True, False, False]
    assert tied.accepted[0].tolist() == [True, True, False]  # 1.03 * 0.98 <= 1.00 * 1.02
    assert tied.tied[0].tolist() == [True, True, False]


def test_synthetic_sweep_is_deterministic_and_recorded_like():
    a = synthetic_measurements(50, [(8, 8, 8), (16, 16, 16)], seed=3)
    b = synthetic_measurements(50, [(8, 8, 8), (16, 16, 16)], seed=3)
    pd.testing.assert_frame_equal(a, b)
    ok = a[a["status"] == "ok"]
    assert (a["status"] != "ok").any() and (ok["p20_ms"] <= ok["median_ms"]).all()
    assert ok["median_ms"].notna().all() and a.loc[a["status"] != "ok", "median_ms"].isna().all()


def test_leave_one_out_uses_the_table_built_without_the_point():
    # a is best at 8 and 32; b only at 16 where a is 25% slower. Holding out 16, the table built from
    # {8, 32} is {a}, so the held-out loss at 16 is a's measured loss there: 1 - 1.0 / 1.25 = 0.2.
    df = frame({("a", 8): 1.0, ("a", 16): 1.25, ("a", 32): 1.0, ("b", 8): 2.0, ("b", 16): 1.0, ("b", 32): 2.0})
    res = leave_one_out(perf_matrix(df), Criteria(bk=10, tol=0.0), "exact")
    row = res.frame.set_index("m").loc[16]
    assert row["instance_id"] == "a" and row["interior"]
    assert row["loss"] == pytest.approx(0.2)
    assert not res.frame.set_index("m").loc[8, "interior"]
    assert res.worst_loss == pytest.approx(0.2)  # over interior points only


def test_leave_one_out_leaves_an_unmeasured_answer_unknown():
    df = frame({("a", 8): 1.0, ("a", 16): None, ("a", 32): 1.0, ("b", 8): 2.0, ("b", 16): 1.0, ("b", 32): 2.0})
    res = leave_one_out(perf_matrix(df), Criteria(bk=10, tol=0.0), "greedy")
    row = res.frame.set_index("m").loc[16]
    assert not row["measured"] and math.isnan(row["loss"])  # a was never timed at 16: no made-up 1.0
    assert res.measured == 0 and res.total == 1 and res.measured_text == "0/1"
    assert math.isnan(res.worst_loss)
