"""Dispatch table: JSON round trip, lookup rules (exact, regions, ranked fallback, validity, generic), device warning."""
from __future__ import annotations

import json
import math
import random
import warnings

import numpy as np
import pandas as pd
import pytest

from autotune.dispatch.table import DispatchTable, KernelInfo, Provenance, build_table, load_table
from autotune.dispatch.runtime import ilog2_fx, validity_bounds
from autotune.analysis.setcover import select
from autotune.analysis.winners import Criteria, perf_matrix, synthetic_measurements, winners, with_point_key

SIZES = [(m, n, k) for m in (4, 16, 64) for n in (4, 16, 64) for k in (8, 32)]


@pytest.fixture(scope="module")
def built():
    df = synthetic_measurements(200, SIZES, precisions=("fp64", "fp16"), shapes=("NN", "TN"), seed=11)
    w = winners(perf_matrix(df), Criteria(bk=10, tol=0.05))
    sel = select(w, "exact")
    table = build_table(w, sel, Provenance(device="NVIDIA H100 80GB HBM3", sweep_ids=("3", "4"),
                                           software={"cuda_runtime": "13.0"}))
    return w, sel, table


def test_json_round_trip_keeps_provenance(built, tmp_path):
    w, sel, table = built
    path = table.save(tmp_path / "dispatch.json")
    again = load_table(path)
    assert again.data == json.loads(table.to_json())
    prov = again.provenance
    assert prov["device"] == "NVIDIA H100 80GB HBM3" and prov["sweep_ids"] == ["3", "4"]
    assert prov["bk"] == 10 and prov["tol"] == 0.05 and prov["method"] == "exact" and prov["optimal"]
    assert prov["kernels"] == sel.n_kernels == len(again.data["kernels"])
    assert prov["worst_loss"] == pytest.approx(sel.worst_loss) and prov["worst_loss"] <= 0.05 + 1e-9


def test_version_is_checked():
    with pytest.raises(ValueError, match="version"):
        DispatchTable({"format": "autotune-dispatch", "version": 99})


def test_every_tuned_point_gets_its_assigned_kernel(built):
    w, sel, table = built
    for p in table.data["points"]:
        idx = table.lookup_index(p["precision"], p["shape"], p["m"], p["n"], p["k"], p["batch"])
        assert idx == p["kernel"] == p["ranked"][0]
        kern = table.data["kernels"][idx]
        row = w.matrix.points.index[w.matrix.points["point_key"] == p["point_key"]][0]
        col = list(w.matrix.instances).index(kern["instance_id"])
        assert w.loss[row, col] <= 0.05 + 1e-9


def test_regions_hold_only_points_within_tol(built):
    w, sel, table = built
    pts = w.matrix.points
    assert table.data["regions"], "the synthetic sweep should merge some neighbours"
    for r in table.data["regions"]:
        kern = table.data["kernels"][r["kernel"]]
        col = list(w.matrix.instances).index(kern["instance_id"])
        inside = ((pts["precision"] == r["precision"]) & (pts["shape"] == r["shape"])
                  & pts["m"].between(*r["m"]) & pts["n"].between(*r["n"]) & pts["k"].between(*r["k"]))
        assert inside.sum() >= 2
        assert (w.loss[inside.to_numpy(), col] <= 0.05 + 1e-9).all()


def test_untuned_precision_or_shape_gets_the_generic_kernel(built):
    _, _, table = built
    assert table.lookup_index("fp32", "NN", 16, 16, 16, 100) == -1
    rec = table.lookup("fp64", "TT", 16, 16, 16, 100)
    assert rec["generic"] and rec["space"] == "gemm_naive"


def _two_point_table(valid_a=(), valid_b=()):
    rows = []
    for iid, s, ms in [("a", 8, 1.0), ("a", 64, 3.0), ("b", 8, 3.0), ("b", 64, 1.0)]:
        rows.append({"instance_id": iid, "precision": "fp32", "shape": "NN", "m": s, "n": s, "k": s, "batch": 10,
                     "status": "ok", "median_ms": ms, "p20_ms": ms, "p80_ms": ms})
    w = winners(perf_matrix(with_point_key(pd.DataFrame(rows))), Criteria(bk=10, tol=0.0))
    sel = select(w, "exact")
    info = {("a", "fp32", "NN"): KernelInfo(space="s", name="a", valid=tuple(valid_a)),
            ("b", "fp32", "NN"): KernelInfo(space="s", name="b", valid=tuple(valid_b))}
    return build_table(w, sel, Provenance(device="H100"), info)


def test_nearest_tuned_point_by_log_ratio():
    table = _two_point_table()
    ids = [k["instance_id"] for k in table.data["kernels"]]
    assert not table.data["regions"]  # a and b each lose 67% at the other point: nothing merges
    assert ids[table.lookup_index("fp32", "NN", 12, 12, 12, 10)] == "a"  # log2 distance 1.75 vs 7.25
    assert ids[table.lookup_index("fp32", "NN", 40, 40, 40, 10)] == "b"
    assert ids[table.lookup_index("fp32", "NN", 8, 8, 64, 10)] == "a"  # 3 vs 6
    assert ids[table.lookup_index("fp32", "NN", 1000, 1000, 1000, 1)] == "b"


def test_validity_predicates_steer_the_fallback():
    table = _two_point_table(valid_a=[("m_multiple_of", 8)], valid_b=[("max_k", 32)])
    ids = [k["instance_id"] for k in table.data["kernels"]]
    assert ids[table.lookup_index("fp32", "NN", 16, 16, 16, 10)] == "a"
    # m = 12 breaks a's predicate: the next tuned point (64) offers b, valid since k <= 32
    assert ids[table.lookup_index("fp32", "NN", 12, 12, 12, 10)] == "b"
    # neither holds: the generic kernel
    assert table.lookup_index("fp32", "NN", 12, 12, 40, 10) == -1
    # at a tuned point the ranked list goes on past an invalid assigned kernel (b: k = 64 > 32) ...
    assert ids[table.lookup_index("fp32", "NN", 64, 64, 64, 10)] == "a"
    # ... and ends with the generic kernel when none of the point's kernels is valid
    assert table.lookup_index("fp32", "NN", 64, 64, 64, 10) != -1
    only_b = _two_point_table(valid_a=[("min_batch", 100)], valid_b=[("max_k", 32)])
    assert only_b.lookup_index("fp32", "NN", 64, 64, 64, 10) == -1


def test_unknown_predicate_is_refused():
    with pytest.raises(ValueError, match="predicate"):
        _two_point_table(valid_a=[("m_aligned_to", 8)])
    assert validity_bounds([{"m_multiple_of": 4}, {"m_multiple_of": 6}, {"max_k": 9}, {"max_k": 5}])[0][0] == 12


def test_device_mismatch_warns_once_and_match_is_silent():
    table = _two_point_table()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table.lookup_index("fp32", "NN", 8, 8, 8, 10, device="h100")
    with pytest.warns(UserWarning, match="tuned on 'H100'"):
        table.lookup_index("fp32", "NN", 8, 8, 8, 10, device="NVIDIA H200")


def test_ilog2_fx_is_floor_of_log2_in_fixed_point():
    rng = random.Random(5)
    for x in [1, 2, 3, 7, 8, 1000, 2**31 - 1, 2**40 + 12345] + [rng.randrange(1, 2**50) for _ in range(500)]:
        exact = math.log2(x) * 65536
        assert exact - 1.001 <= ilog2_fx(x) <= exact + 1e-6


def test_sizes_below_one_are_refused(built):
    _, _, table = built
    with pytest.raises(ValueError):
        table.lookup_index("fp64", "NN", 0, 4, 4, 1)


def test_regions_are_blocked_by_a_point_where_everything_failed():
    rows = []
    for s, ms in [(8, 1.0), (16, None), (32, 1.0)]:
        rows.append({"instance_id": "a", "precision": "fp64", "shape": "NN", "m": s, "n": s, "k": s, "batch": 1,
                     "status": "ok" if ms else "launch_error", "median_ms": ms, "p20_ms": ms, "p80_ms": ms})
    w = winners(perf_matrix(with_point_key(pd.DataFrame(rows))), Criteria(bk=10, tol=0.0))
    table = build_table(w, select(w, "exact"), Provenance(device="x"))
    assert table.data["regions"] == []
    assert np.isnan(select(w, "greedy").loss[1])
