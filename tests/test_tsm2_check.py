"""The TSM2 model against a sweep (autotune/problems/gemm/tsm2_check.py, `autotune model`): on a results database written
through the Store API, on the space generator, and on the recorded H100 sweep results/tsm2_h100."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from pg import device_info
from typer.testing import CliRunner

from autotune.problems.gemm import gemm_point, tsm2_check
from autotune.cli.main import app
from autotune.sweep.config import parse_config
from autotune.devices import profile
from autotune.errors import UserError
from autotune.space.generator import generate, where
from autotune.space.instance import Instance
from autotune.vocab import Measurement, Status
from autotune.space.spec import load_space
from autotune.store.store import SpaceRecord, Store, SweepStart
from autotune.problems.gemm.tsm2_model import choose_tsm2
from tests.support.committed import committed

RECORDED = committed("tsm2_h100")  # results/tsm2_h100/tsm2_h100.sqlite.xz
M = 20480
BW, CLOCK = 2.98e12, 1.98e9


def devices() -> dict:
    return {p: tsm2_check.model_device(profile("H100"), p, BW, CLOCK) for p in ("fp64", "fp32")}


def pick(prec: str, n: int) -> dict[str, int]:
    return tsm2_check.pick_params(choose_tsm2(devices()[prec], M, n, M, prec))


def test_where_expr_keeps_exactly_the_picks_in_the_space() -> None:
    picks = {p: [pick(p, n) for n in (2, 4, 8, 16)] + [tsm2_check.paper_params(8)] for p in ("fp64", "fp32")}
    expr = tsm2_check.where_expr(picks["fp64"] + picks["fp32"])
    every = {tuple(p[k] for k in tsm2_check.PARAMS) for ps in picks.values() for p in ps}
    for prec in ("fp64", "fp32"):
        g = generate(load_space("tsm2"), profile("H100"), prec, soft=False)
        kept = g.frame[where(g, expr)]
        found = {tuple(int(r[k]) for k in tsm2_check.PARAMS) for r in kept.to_dict("records")}
        # each precision's own picks pass the hard constraints; the filter keeps nothing else
        assert {tuple(p[k] for k in tsm2_check.PARAMS) for p in picks[prec]} <= found <= every
    with pytest.raises(UserError):
        tsm2_check.where_expr([])


def test_model_device_scales_peak_with_the_measured_sm_count() -> None:
    full = tsm2_check.model_device(profile("H100"), "fp64", BW, CLOCK)
    small = tsm2_check.model_device(profile("H100"), "fp64", BW, CLOCK, sm_count=66)
    assert (small.sm_count, small.bandwidth) == (66, BW)
    assert small.peak_flops == pytest.approx(full.peak_flops / 2)
    assert tsm2_check.model_device(profile("H100"), "fp64", BW, CLOCK, sm_count=132) == full


def test_labels_round_trip_and_short_form_names_what_differs_from_the_paper() -> None:
    params = {"T1": 32, "T2": 8, "T3": 4, "KS": 4, "RPT": 2, "BPF": 0, "AST": 3}
    assert tsm2_check.parse_label(tsm2_check.label(params)) == params
    assert tsm2_check.short(params) == "32/8/4/4 RPT=2 BPF=0 AST=3"
    assert tsm2_check.short(tsm2_check.paper_params(16)) == "128/16/4/1"


def write_db(path: Path, n: int, times: dict[str, tuple[dict, str, float]], cublas_ms: float) -> None:
    """A tsm2 sweep of one fp64 point: key -> (parameters, status, median ms)."""
    info = device_info()
    point = gemm_point("fp64", "NN", M, n, M, 1)
    with Store.open(str(path)) as store:
        dev = store.upsert_device(info)
        sw = store.upsert_software(info, "0.1.0", "abc123")
        inst = {key: Instance.of("tsm2", params) for key, (params, _, _) in times.items()}
        store.upsert_instances(inst.values())
        sweep = store.begin_sweep(
            SweepStart("tsm2", "name: tsm2\n", dev, sw, info, scalars={"alpha": 1.0, "beta": 0.0}, reps=20)
        )
        space_id = store.upsert_space(
            SpaceRecord("tsm2", "spaces/tsm2.yaml", "name: tsm2\n", "kernels_src/tsm2.cuh", "//")
        )
        store.record(
            sweep,
            space_id,
            [
                Measurement(
                    inst[key].id,
                    point,
                    Status(status),
                    median_ms=t,
                    p20_ms=t,
                    p80_ms=t,
                    reps=20 if status == "ok" else 5,
                    times_ms=[t] if t else [],
                )
                for key, (_, status, t) in times.items()
            ],
        )
        store.record_baseline(
            sweep, Measurement("cublas", point, Status.OK, median_ms=cublas_ms, reps=20, times_ms=[cublas_ms])
        )
        store.finish_sweep(sweep, "done")


def load(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    with Store.open(str(path), create=False, readonly=True) as store:
        frame = store.measurements()
        cublas = pd.DataFrame(
            [
                (p.precision, p.shape, p.m, p.n, p.k, p.batch, ms)
                for p, ms in store.baseline_times(store.device_id(device_info().uuid)).items()
            ],
            columns=["precision", "shape", "m", "n", "k", "batch", "cublas_ms"],
        )
    return frame, cublas


def test_compare_reports_pick_paper_best_and_cublas(tmp_path: Path) -> None:
    model = pick("fp64", 8)
    other = {**model, "RPT": 2, "BPF": 0}
    wrong = {**model, "T3": 1 if model["T3"] != 1 else 2}
    times = {
        "pick": (model, "ok", 1.5),
        "paper": (tsm2_check.paper_params(8), "skipped", 3.0),
        "best": (other, "ok", 1.2),
        "wrong": (wrong, "wrong", 0.5),
    }  # a wrong result is never the best
    db = tmp_path / "t.sqlite"
    write_db(db, 8, times, cublas_ms=1.3)
    result = tsm2_check.compare(*load(db), devices())
    assert len(result) == 1
    r = result.iloc[0]
    assert (r["precision"], r["n"], r["bound"]) == ("fp64", 8, "memory")
    assert tsm2_check.parse_label(r["pick"]) == model and tsm2_check.parse_label(r["best"]) == other
    assert (r["pick_ms"], r["best_ms"], r["paper_ms"]) == (1.5, 1.2, 3.0)
    assert not r["pick_skipped"] and r["paper_skipped"]
    assert r["pick_vs_best"] == pytest.approx(1.25) and r["paper_vs_best"] == pytest.approx(2.5)
    assert r["best_vs_cublas"] == pytest.approx(1.3 / 1.2)
    # the store's roofline fractions (bytes over measured bandwidth) go with the times
    assert r["pick_frac"] / r["best_frac"] == pytest.approx(1.2 / 1.5)


def test_compare_marks_an_unmeasured_pick_and_refuses_a_database_without_tsm2(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    write_db(db, 4, {"x": ({"T1": 64, "T2": 4, "T3": 16, "KS": 1, "RPT": 4, "BPF": 0, "AST": 2}, "ok", 2.0)}, 1.0)
    r = tsm2_check.compare(*load(db), devices()).iloc[0]
    assert math.isnan(r["pick_ms"]) and math.isnan(r["pick_vs_best"]) and math.isnan(r["paper_ms"])
    frame, cublas = load(db)
    with pytest.raises(UserError, match="tsm2"):
        tsm2_check.compare(frame.assign(space="gemm_other"), cublas, devices())


def test_cli_on_the_recorded_h100_sweep(tmp_path: Path) -> None:
    out = tmp_path / "cmp.csv"
    res = CliRunner().invoke(app, ["model", "tsm2", str(RECORDED), "--csv", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    table = pd.read_csv(out)
    assert sorted(zip(table["precision"], table["n"], strict=True)) == [
        (p, n) for p in ("fp32", "fp64") for n in (2, 4, 8, 16)
    ]
    # the sweep measured every pick (configs/tsm2_h100.yaml carries the filter), and nothing beats the best
    assert table["pick_ms"].notna().all() and table["paper_ms"].notna().all()
    assert (table["pick_vs_best"] >= 1).all() and (table["paper_vs_best"] >= 1).all()
    # the fp64 problem is named (a console made earlier in the process may be narrower than COLUMNS and wrap the
    # cell at its space)
    assert "20480x16x20480" in res.output and "fp64" in res.output


def test_cli_where_filter_is_a_valid_config_filter() -> None:
    res = CliRunner().invoke(app, ["model", "tsm2-where", "--n", "2,16", "--precisions", "fp64", "--paper"])
    assert res.exit_code == 0, res.output
    expr = res.output.strip().splitlines()[-1]
    assert expr.count("(T1 == ") == 4  # two picks, two paper configurations
    cfg = parse_config(
        'name: t\nspaces:\n  - {space: tsm2, where: "' + expr + '"}\npoints:\n  - {precisions: [fp64], '
        "sizes: {triples: [[20480, 2, 20480]]}, batch: 1}\n"
    )
    assert cfg.spaces[0].where == expr
    bad = CliRunner().invoke(app, ["model", "tsm2-where", "--n", "2,x"])
    assert bad.exit_code == 2 and "--n" in bad.output
