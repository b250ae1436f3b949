"""Dispatch table: JSON round trip, lookup rules (exact, regions, ranked fallback, validity, generic), device warning."""

from __future__ import annotations

import json
import math
import random
import warnings

import numpy as np
import pandas as pd
import pytest

from autotune.dispatch.table import (
    Answers,
    DispatchTable,
    GenericKernel,
    KernelInfo,
    Provenance,
    build_table,
    load_table,
)
from autotune.dispatch.features import ilog2_fx
from autotune.dispatch.runtime import validity_bounds
from autotune.analysis.setcover import select
from autotune.analysis.winners import Criteria, perf_matrix, winners, with_point_key
from autotune.problems.gemm.synthetic import synthetic_measurements

SIZES = [(m, n, k) for m in (4, 16, 64) for n in (4, 16, 64) for k in (8, 32)]


@pytest.fixture(scope="module")
def built():
    df = synthetic_measurements(200, SIZES, precisions=("fp64", "fp16"), shapes=("NN", "TN"), seed=11)
    w = winners(perf_matrix(df), Criteria(bk=10, tol=0.05))
    sel = select(w, "exact")
    table = build_table(
        w, sel, Provenance(device="NVIDIA H100 80GB HBM3", sweep_ids=("3", "4"), software={"cuda_runtime": "13.0"})
    )
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


def test_compressed_tables_load_and_a_broken_one_names_its_file(built, tmp_path):
    import gzip
    import lzma

    from autotune.errors import UserError

    table = built[2]
    text = table.to_json().encode()
    (tmp_path / "dispatch.json.gz").write_bytes(gzip.compress(text))
    (tmp_path / "dispatch.json.xz").write_bytes(lzma.compress(text))
    for name in ("dispatch.json.gz", "dispatch.json.xz"):
        assert load_table(tmp_path / name).data == json.loads(text)
    (tmp_path / "broken.json.gz").write_bytes(text)  # plain JSON under a .gz name
    with pytest.raises(UserError, match="not a gzip file") as err:
        load_table(tmp_path / "broken.json.gz")
    assert "broken.json.gz" in str(err.value)


def test_version_is_checked():
    with pytest.raises(ValueError, match="version"):
        DispatchTable({"format": "autotune-dispatch", "version": 99})


def test_every_tuned_point_gets_its_assigned_kernel(built):
    w, sel, table = built
    for p in table.data["points"]:
        idx = table.lookup_index(p["precision"], p["shape"], *p["sizes"].values())
        assert idx == table.lookup(p["precision"], p["shape"], p["sizes"])
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
        inside = (
            (pts["precision"] == r["precision"])
            & (pts["shape"] == r["shape"])
            & pts["m"].between(*r["bounds"]["m"])
            & pts["n"].between(*r["bounds"]["n"])
            & pts["k"].between(*r["bounds"]["k"])
        )
        assert inside.sum() >= 2
        assert (w.loss[inside.to_numpy(), col] <= 0.05 + 1e-9).all()


def test_untuned_precision_or_shape_gets_the_fallback(built):
    w, sel, table = built
    assert table.data["fallback"] == "library"
    assert table.lookup_index("fp32", "NN", 16, 16, 16, 100) == -2
    rec = table.answer("fp64", "TT", {"m": 16, "n": 16, "k": 16, "batch": 100})
    assert rec["library"] == table.library and rec["instance_id"] is None and not rec["generic"]
    naive = build_table(
        w, sel, Provenance(device="x"), Answers(generic=GenericKernel(space="the_generic_space"), fallback="naive")
    )
    assert naive.lookup_index("fp32", "NN", 16, 16, 16, 100) == -1
    rec = naive.answer("fp64", "TT", {"m": 16, "n": 16, "k": 16, "batch": 100})
    assert rec["generic"] and rec["space"] == "the_generic_space"
    with pytest.raises(ValueError, match="fallback"):
        build_table(w, sel, Provenance(device="x"), Answers(fallback="cutlass"))
    with pytest.raises(ValueError, match="generic"):  # no generic kernel: it cannot be the fallback
        build_table(w, sel, Provenance(device="x"), Answers(fallback="naive"))
    with pytest.raises(ValueError, match="sizes"):  # a mapping must name exactly the kind's sizes
        table.lookup("fp64", "NN", {"m": 16, "n": 16, "k": 16})


def test_no_library_and_no_generic_answers_none(built):
    """A kind without a library or a generic kernel: the fallback is NONE (-4) where nothing is valid."""
    from autotune.dispatch.runtime import NONE

    w, sel, _ = built
    table = build_table(w, sel, Provenance(device="x"), library=None)
    assert table.data["fallback"] == "none" and table.library is None and table.fallback == NONE
    assert table.lookup_index("fp32", "NN", 16, 16, 16, 100) == NONE
    assert table.record(NONE, "fp32", "NN")["none"]
    with pytest.raises(ValueError, match="library"):
        build_table(w, sel, Provenance(device="x"), Answers(fallback="library"), library=None)


def _two_point_table(valid_a=(), valid_b=(), fallback="naive", library_ms=None):
    rows = []
    for iid, s, ms in [("a", 8, 1.0), ("a", 64, 3.0), ("b", 8, 3.0), ("b", 64, 1.0)]:
        rows.append(
            {
                "instance_id": iid,
                "precision": "fp32",
                "shape": "NN",
                "m": s,
                "n": s,
                "k": s,
                "batch": 10,
                "status": "ok",
                "median_ms": ms,
                "p20_ms": ms,
                "p80_ms": ms,
            }
        )
    w = winners(perf_matrix(with_point_key(pd.DataFrame(rows))), Criteria(bk=10, tol=0.0))
    sel = select(w, "exact")
    info = {
        ("a", "fp32", "NN"): KernelInfo(space="s", name="a", valid=tuple(valid_a)),
        ("b", "fp32", "NN"): KernelInfo(space="s", name="b", valid=tuple(valid_b)),
    }
    lib = None if library_ms is None else np.asarray(library_ms, dtype=float)
    return build_table(w, sel, Provenance(device="H100"), Answers(info, lib, fallback, GenericKernel(space="naive")))


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
    # at a tuned point the measurement stands in for the predicates: b was verified and timed at 64^3
    assert ids[table.lookup_index("fp32", "NN", 64, 64, 64, 10)] == "b"
    # off the tuned points, nothing valid: the fallback
    only_b = _two_point_table(valid_a=[("min_batch", 100)], valid_b=[("max_k", 32)])
    assert only_b.lookup_index("fp32", "NN", 64, 64, 40, 10) == -1


def test_unknown_predicate_is_refused():
    with pytest.raises(ValueError, match="predicate"):
        _two_point_table(valid_a=[("m_aligned_to", 8)])
    names = ["m", "n", "k", "batch"]
    assert validity_bounds([{"m_multiple_of": 4}, {"m_multiple_of": 6}, {"max_k": 9}, {"max_k": 5}], names)[0][0] == 12
    with pytest.raises(ValueError, match="predicate"):  # a predicate over a size the kind does not have
        validity_bounds([{"max_rows": 4}], names)
    assert validity_bounds([{"max_rows": 4}, {"cols_multiple_of": 2}], ["rows", "cols"]) == (
        [1, 2],
        [1, 1],
        [4, 1 << 62],
    )


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


@pytest.mark.parametrize(
    "args",
    [
        ("bf16", "NN", 4, 4, 4, 1),
        ("fp64", "NX", 4, 4, 4, 1),
        (None, "NN", 4, 4, 4, 1),
        ("fp64", "NN", 4.0, 4, 4, 1),
        ("fp64", "NN", 4, True, 4, 1),
        ("fp64", "NN", 4, 4, "4", 1),
        ("fp64", "NN", 4, 4, 4, -3),
        ("fp64", "NN", 4, 4, 4, 2**31),
        ("fp64", "NN", 4, 4, 4, 1.5),
    ],
)
def test_invalid_input_is_a_value_error(built, args):
    _, _, table = built
    with pytest.raises(ValueError):
        table.lookup_index(*args)


def test_numpy_integers_are_accepted(built):
    _, _, table = built
    assert table.lookup_index("fp64", "NN", np.int64(4), np.int32(4), 8, 1000) == table.lookup_index(
        "fp64", "NN", 4, 4, 8, 1000
    )


def test_library_answers_where_it_is_faster():
    # points 8 (a: 1 ms) and 64 (b: 1 ms); the library takes 0.5 ms at 8 and 2 ms at 64
    table = _two_point_table(library_ms=[0.5, 2.0], fallback="library")
    ids = [k["instance_id"] for k in table.data["kernels"]]
    assert table.lookup_index("fp32", "NN", 8, 8, 8, 10) == -2
    assert ids[table.lookup_index("fp32", "NN", 64, 64, 64, 10)] == "b"
    assert table.provenance["library_points"] == 1
    assert table.provenance["answer_worst_loss"] == 0.0
    p8 = next(p for p in table.data["points"] if p["sizes"]["m"] == 8)
    assert p8["ranked"][0] == -2 and p8["library_ms"] == 0.5
    # near 8 the nearest tuned point answers with the library
    assert table.lookup_index("fp32", "NN", 9, 9, 9, 10) == -2
    # a kernel whose predicates fail everywhere but at 64 leaves the library as the answer elsewhere
    only = _two_point_table(
        valid_a=[("min_batch", 100)], valid_b=[("min_m", 64)], library_ms=[0.5, 2.0], fallback="library"
    )
    assert only.lookup_index("fp32", "NN", 20, 20, 20, 10) == -2


def test_tuned_only_kernel_answers_only_at_its_tuned_points():
    rows = []
    for iid, s, ms in [("a", 8, 1.0), ("a", 64, 3.0), ("b", 8, 3.0), ("b", 64, 1.0)]:
        rows.append(
            {
                "instance_id": iid,
                "precision": "fp32",
                "shape": "NN",
                "m": s,
                "n": s,
                "k": s,
                "batch": 10,
                "status": "ok",
                "median_ms": ms,
                "p20_ms": ms,
                "p80_ms": ms,
            }
        )
    w = winners(perf_matrix(with_point_key(pd.DataFrame(rows))), Criteria(bk=10, tol=0.0))
    info = {
        ("a", "fp32", "NN"): KernelInfo(space="s", name="a", tuned_only=True),
        ("b", "fp32", "NN"): KernelInfo(space="s", name="b"),
    }
    table = build_table(w, select(w, "exact"), Provenance(device="H100"), Answers(kernel_info=info))
    ids = [k["instance_id"] for k in table.data["kernels"]]
    assert ids[table.lookup_index("fp32", "NN", 8, 8, 8, 10)] == "a"
    assert ids[table.lookup_index("fp32", "NN", 9, 9, 9, 10)] == "b"  # a is not valid off its tuned points


def _legacy(table: DispatchTable, version: int) -> dict:
    """The table as a version 1 or 2 file wrote it: sizes at the top of each point, regions over m, n, k."""
    data = json.loads(table.to_json())
    for key in ("kind", "size_names", "table_sizes", "precisions", "shapes"):
        data.pop(key)
    data["version"] = version
    data["points"] = [{**{k: v for k, v in p.items() if k != "sizes"}, **p["sizes"]} for p in data["points"]]
    data["regions"] = [
        {"precision": r["precision"], "shape": r["shape"], **r["bounds"], "kernel": r["kernel"]}
        for r in data["regions"]
    ]
    return data


def test_version_1_tables_still_load_with_the_naive_fallback():
    table = _two_point_table()
    data = _legacy(table, 1)
    for key in ("library", "fallback"):
        data.pop(key)
    old = DispatchTable(data)
    assert old.version_read == 1 and old.kind == table.kind and old.size_names == ("m", "n", "k", "batch")
    assert old.lookup_index("fp16", "NN", 8, 8, 8, 1) == -1


def test_version_2_tables_answer_as_version_3(built):
    _, _, table = built
    old = DispatchTable(_legacy(table, 2))
    assert old.version_read == 2 and old.table_sizes == ("m", "n", "k")
    rng = np.random.default_rng(2)
    for _ in range(300):
        q = ("fp64", "TN", *(int(x) for x in rng.integers(1, 100, 3)), int(rng.choice([1, 1000])))
        assert old.lookup_index(*q) == table.lookup_index(*q)


def test_regions_are_blocked_by_a_point_where_everything_failed():
    rows = []
    for s, ms in [(8, 1.0), (16, None), (32, 1.0)]:
        rows.append(
            {
                "instance_id": "a",
                "precision": "fp64",
                "shape": "NN",
                "m": s,
                "n": s,
                "k": s,
                "batch": 1,
                "status": "ok" if ms else "launch_error",
                "median_ms": ms,
                "p20_ms": ms,
                "p80_ms": ms,
            }
        )
    w = winners(perf_matrix(with_point_key(pd.DataFrame(rows))), Criteria(bk=10, tol=0.0))
    table = build_table(w, select(w, "exact"), Provenance(device="x"))
    assert table.data["regions"] == []
    assert np.isnan(select(w, "greedy").loss[1])


def test_cost_mode_prices_each_valid_answer_at_its_nearest_measurement():
    """Rule 4': kernel A (max_m 16) measured only at 8^3, B everywhere, the library everywhere."""
    from autotune.dispatch.runtime import LIBRARY, Lookup

    def point(n, costs):
        return {
            "precision": "fp32",
            "shape": "NN",
            "sizes": {"m": n, "n": n, "k": n, "batch": 100},
            "ranked": [],
            "costs": costs,
        }

    table = {
        "size_names": ["m", "n", "k", "batch"],
        "table_sizes": ["m", "n", "k"],
        "precisions": ["fp32"],
        "shapes": ["NN"],
        "kernels": [{"valid": [{"max_m": 16}]}, {"valid": []}],
        "regions": [],
        "fallback": "library",
        "points": [point(8, [[LIBRARY, 300], [0, 100], [1, 200]]), point(64, [[LIBRARY, 100], [1, 150]])],
        "structure": {"mode": "cost", "library_margin": 0.0, "reach": 1.0},
    }
    ask = lambda n, t=table: Lookup(t).index("fp32", "NN", (n, n, n, 100))  # noqa: E731
    assert ask(10) == 0  # A is valid and cheapest at its nearest measurement (8^3)
    assert ask(20) == 1  # A is not valid (m > 16); B at 8^3 (200) beats the library at 8^3 (300)
    assert ask(40) == LIBRARY  # nearest is 64^3: the library (100) beats B (150)
    margin = {**table, "structure": {"mode": "cost", "library_margin": 0.6, "reach": 1.0}}
    assert ask(12, margin) == 0 and ask(20, margin) == LIBRARY  # 100 * 1.6 < 300, but 200 * 1.6 > 300
    far = {**table, "structure": {"mode": "cost", "library_margin": 0.0, "reach": 0.0}}
    assert ask(40, far) == LIBRARY and ask(20, far) == 1
