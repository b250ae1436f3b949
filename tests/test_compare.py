"""`autotune compare`: best time per group of instances at each test point, on real SQLite databases
(one built through the Store API, and the recorded H100 sweep)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from pg import device_info
from typer.testing import CliRunner

from autotune.problems.gemm import gemm_point
from autotune.cli.main import app
from autotune.analysis.compare import compare, groups, summarize
from autotune.errors import UserError
from autotune.space.instance import Instance
from autotune.vocab import Measurement, Status, TestPoint
from autotune.store.query import run_query
from autotune.store.store import SpaceRecord, Store, StoreError, SweepStart
from tests.support.committed import committed

RECORDED = committed("default")  # results/default/default.sqlite.xz, read as it is
SIZES = (4, 8, 16)
INSTANCES = {  # key -> (space, parameters)
    "a1": ("gemm_test", {"NSG": 1, "ALG": "x"}),
    "b1": ("gemm_test", {"NSG": 1, "ALG": "y"}),
    "a2": ("gemm_test", {"NSG": 2, "ALG": "x"}),
    "a4": ("gemm_test", {"NSG": 4, "ALG": "x"}),
    "b4": ("gemm_test", {"NSG": 4, "ALG": "y"}),
    "o1": ("gemm_other", {"BLK": 8}),  # no NSG
}
OK, SKIP, WRONG, FAIL = "ok", "skipped", "wrong", "compile_error"
TIMES_A = {  # (instance, size) -> (status, median ms) on the main GPU
    ("a1", 4): (SKIP, 3.0),
    ("b1", 4): (SKIP, 3.5),
    ("a2", 4): (OK, 1.5),
    ("a4", 4): (OK, 1.0),
    ("b4", 4): (OK, 1.2),
    ("o1", 4): (OK, 0.9),
    ("a1", 8): (OK, 2.5),
    ("b1", 8): (SKIP, 2.2),
    ("a2", 8): (OK, 2.0),
    ("a4", 8): (WRONG, 0.1),
    ("b4", 8): (OK, 3.0),
    ("o1", 8): (OK, 4.0),
    ("a1", 16): (OK, 4.0),
    ("b1", 16): (OK, 4.4),
    ("a2", 16): (OK, 6.0),
    ("a4", 16): (OK, 5.0),
    ("b4", 16): (FAIL, None),
}
CUBLAS_A = {4: 2.0, 8: 1.0}  # none at 16
TIMES_B = {("a4", 4): (OK, 0.01)}  # a second, faster GPU with fewer measurements
CUBLAS_B = {4: 0.5}


def point(size: int) -> TestPoint:
    return gemm_point("fp64", "NN", size, size, size, 1000)


def instance(key: str) -> Instance:
    space, params = INSTANCES[key]
    return Instance.of(space, params)


def record(store: Store, uuid: str, name: str, times: dict, cublas: dict) -> None:
    info = device_info(uuid, name)
    dev = store.upsert_device(info)
    sw = store.upsert_software(info, "0.1.0", "abc123")
    store.upsert_instances(instance(k) for k in INSTANCES)
    sweep = store.begin_sweep(
        SweepStart("compare", "name: compare\n", dev, sw, info, scalars={"alpha": 1.0, "beta": 0.0}, reps=20)
    )
    for space in ("gemm_test", "gemm_other"):
        space_id = store.upsert_space(
            SpaceRecord(space, f"spaces/{space}.yaml", f"name: {space}\n", "kernels_src/x.cuh", "// kernel")
        )
        ms = [
            Measurement(
                instance(key).id,
                point(size),
                Status(status),
                median_ms=t,
                p20_ms=t,
                p80_ms=t,
                reps=5 if status == SKIP else 20,
                times_ms=[t] if t else [],
            )
            for (key, size), (status, t) in times.items()
            if INSTANCES[key][0] == space
        ]
        store.record(sweep, space_id, ms)
    for size, t in cublas.items():
        store.record_baseline(sweep, Measurement("cublas", point(size), Status.OK, median_ms=t, reps=20, times_ms=[t]))
    store.finish_sweep(sweep, "done")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "results.sqlite"
    with Store.open(str(path)) as store:
        record(store, "GPU-A", "Main GPU", TIMES_A, CUBLAS_A)
        record(store, "GPU-B", "Other GPU", TIMES_B, CUBLAS_B)
    return path


def load(db: Path, device: str = "GPU-A") -> tuple[pd.DataFrame, pd.DataFrame]:
    with Store.open(str(db), create=False, readonly=True) as store:
        frame = store.measurements(device=device)
        library = store.baselines(device=device)
    return frame, library[library["status"] == "ok"]


def by_size(result: pd.DataFrame) -> dict[int, dict]:
    return {int(r["m"]): r for r in result.to_dict("records")}


def test_best_group_slowdowns_skipped_and_cublas(db: Path) -> None:
    frame, cublas = load(db)
    result = compare(frame, "NSG", library=cublas)
    assert groups(result) == ["NSG=1", "NSG=2", "NSG=4"]
    assert list(result["m"]) == [4, 8, 16]
    r = by_size(result)
    # 4: NSG=1 has only skipped measurements (3.0 and 3.5): reported with the flag, never the best
    assert r[4]["best"] == "NSG=4" and r[4]["best_ms"] == 1.0
    assert (r[4]["NSG=1"], r[4]["NSG=1 skipped"], r[4]["NSG=1 slowdown"]) == (3.0, True, 3.0)
    assert (r[4]["NSG=2"], r[4]["NSG=2 skipped"], r[4]["NSG=2 slowdown"]) == (1.5, False, 1.5)
    # 8: NSG=4's wrong result (0.1 ms) never counts; NSG=1's skipped 2.2 beats its ok 2.5
    assert r[8]["best"] == "NSG=2" and r[8]["best_ms"] == 2.0
    assert r[8]["NSG=4"] == 3.0 and r[8]["NSG=4 slowdown"] == 1.5
    assert r[8]["NSG=1"] == 2.2 and r[8]["NSG=1 skipped"] and r[8]["NSG=1 slowdown"] == pytest.approx(1.1)
    # 16: the compile error leaves NSG=4 with its other instance
    assert r[16]["best"] == "NSG=1" and r[16]["NSG=4 slowdown"] == 1.25 and r[16]["NSG=2 slowdown"] == 1.5
    # cuBLAS of the same GPU only (the other GPU's 0.5 ms at size 4 is not used); none at 16
    assert r[4]["cublas_ms"] == 2.0 and r[4]["speedup_vs_cublas"] == 2.0
    assert r[8]["speedup_vs_cublas"] == 0.5 and math.isnan(r[16]["cublas_ms"])
    assert result.attrs["without_by"] == 1  # o1 (gemm_other) has no NSG
    slow = result[[f"{g} slowdown" for g in groups(result)]]
    assert (slow.min(axis=1) == 1.0).all() and (slow.stack() >= 1.0).all()


def test_summary_per_group(db: Path) -> None:
    frame, cublas = load(db)
    summary = summarize(compare(frame, "NSG", library=cublas)).set_index("group")
    assert summary["best_at"].to_dict() == {"NSG=1": 1, "NSG=2": 1, "NSG=4": 1}
    assert summary.loc["NSG=1", "geomean_slowdown"] == pytest.approx((3.0 * 1.1 * 1.0) ** (1 / 3))
    assert summary.loc["NSG=4", "geomean_slowdown"] == pytest.approx((1.0 * 1.5 * 1.25) ** (1 / 3))
    assert summary.loc["NSG=1", "skipped_points"] == 2 and summary.loc["NSG=2", "skipped_points"] == 0
    assert summary.loc["NSG=1", "worst_slowdown"] == 3.0
    assert summary.loc["NSG=4", "wins"] == "fp64 NN 4x4x4" and summary.loc["NSG=1", "wins"] == "fp64 NN 16x16x16"


def test_by_space_and_runs_of_wins(db: Path) -> None:
    frame, _ = load(db)
    result = compare(frame, "space")
    assert groups(result) == ["space=gemm_other", "space=gemm_test"]
    assert list(result["best"]) == ["space=gemm_other", "space=gemm_test", "space=gemm_test"]
    assert math.isnan(result["space=gemm_other"][2])  # not measured at 16
    summary = summarize(result).set_index("group")
    assert summary.loc["space=gemm_test", "wins"] == "fp64 NN 8x8x8..16x16x16"
    assert summary.loc["space=gemm_other", "points"] == 2


def test_space_and_where_filters(db: Path) -> None:
    frame, _ = load(db)
    only = compare(frame, "BLK", space="gemm_other")
    assert groups(only) == ["BLK=8"] and list(only["m"]) == [4, 8]
    r = by_size(compare(frame, "NSG", where="ALG == 'y'"))
    assert r[4]["best"] == "NSG=4" and r[4]["NSG=4"] == 1.2
    # the filter left out every ok instance faster than b1's skipped 2.2: the best is that estimate, flagged
    assert r[8]["best"] == "NSG=1" and r[8]["NSG=1 skipped"] and r[8]["NSG=4 slowdown"] == pytest.approx(3.0 / 2.2)
    assert r[16]["best"] == "NSG=1" and math.isnan(r[16]["NSG=4"])
    assert by_size(compare(frame, "NSG", where="NSG >= 2 and ALG in ['x']"))[8]["best"] == "NSG=2"


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(by="NOPE"), ["--by", "'NOPE'", "NSG", "ALG"]),
        (dict(by="NSG", space="gemm_other"), ["--by", "'NSG'", "of space 'gemm_other'", "BLK"]),
        (dict(by="NSG", space="nope"), ["--space", "'nope'", "gemm_test"]),
        (dict(by="NSG", where="NSG > 100"), ["no verified", "--where 'NSG > 100'"]),
        (dict(by="NSG", where="FOO == 1"), ["--where", "unknown name 'FOO'", "names: ALG, BLK, NSG"]),
        (dict(by="NSG", where="__import__('os')"), ["--where", "not allowed"]),
    ],
)
def test_mistakes_are_user_errors(db: Path, kwargs: dict, words: list[str]) -> None:
    frame, _ = load(db)
    with pytest.raises(UserError) as err:
        compare(frame, **kwargs)
    text = str(err.value)
    assert all(w in text for w in words), text
    assert err.value.hint


def cli(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["compare", *map(str, args)])


def test_cli_default_gpu_csv_and_summary(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "nsg.csv"
    r = cli(db, "--by", "NSG", "--csv", out)
    assert r.exit_code == 0, r.output
    assert "Main GPU" in r.stdout and "Other GPU" not in r.stdout.split("\n")[0]
    assert "NSG=4: best at 1/3 points" in r.stdout and "wins at fp64 NN 4x4x4" in r.stdout
    assert "left out: 1 instances without the parameter NSG" in r.stdout
    assert "one of 2 in the database" in r.stdout
    csv = pd.read_csv(out)
    assert list(csv["best"]) == ["NSG=4", "NSG=2", "NSG=1"] and list(csv["best_ms"]) == [1.0, 2.0, 4.0]
    assert list(csv["NSG=1 skipped"]) == [True, True, False]


def test_cli_device_choice_and_markdown(db: Path) -> None:
    r = cli(db, "--by", "NSG", "--device", "Other GPU", "--markdown")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[2].startswith("| precision | shape | size | batch | NSG=4 | best |")
    assert lines[4] == "| fp64 | NN | 4x4x4 | 1000 | 0.01 (1.00x) | NSG=4 | 0.5 | 50.00x |"
    assert cli(db, "--by", "NSG", "--device", "GPU-B").exit_code == 0


def test_cli_marks_skipped_times(db: Path) -> None:
    r = cli(db, "--by", "NSG", "--markdown")
    row8 = next(line for line in r.stdout.splitlines() if line.startswith("| fp64 | NN | 8x8x8 |"))
    assert "2.2\u2020 (1.10x)" in row8 and "3 (1.50x)" in row8


@pytest.mark.parametrize(
    "args, words",
    [
        (["--by", "NOPE"], ["results.sqlite", "--by: no parameter 'NOPE'", "what to do"]),
        (["--by", "NSG", "--space", "nope"], ["results.sqlite", "--space", "'nope'"]),
        (["--by", "NSG", "--where", "NSG > 100"], ["results.sqlite", "no verified"]),
        (["--by", "NSG", "--device", "RTX"], ["no device matches RTX", "Main GPU"]),
    ],
)
def test_cli_errors_exit_2(db: Path, args: list[str], words: list[str]) -> None:
    r = cli(db, *args)
    assert r.exit_code == 2, r.output
    assert all(w in r.stderr for w in words), r.stderr
    assert "Traceback" not in r.output


def test_cli_missing_and_empty_databases(tmp_path: Path) -> None:
    r = cli(tmp_path / "none.sqlite", "--by", "NSG")
    assert r.exit_code == 2 and f"no SQLite database at {tmp_path / 'none.sqlite'}" in r.stderr
    assert not (tmp_path / "none.sqlite").exists()
    Store.open(str(tmp_path / "empty.sqlite")).close()
    r = cli(tmp_path / "empty.sqlite", "--by", "NSG")
    assert r.exit_code == 2 and "no measurements in" in r.stderr and "empty.sqlite" in r.stderr
    with pytest.raises(StoreError, match="no SQLite database"):
        Store.open(str(tmp_path / "none.sqlite"), create=False, readonly=True)


def test_help_has_an_example() -> None:
    r = CliRunner().invoke(app, ["compare", "--help"])
    assert r.exit_code == 0 and "--by" in r.stdout and "Example" in r.stdout and "--where" in r.stdout


def test_recorded_h100_by_nsg(tmp_path: Path) -> None:
    out = tmp_path / "nsg.csv"
    r = cli(RECORDED, "--by", "NSG", "--csv", out)
    assert r.exit_code == 0, r.output
    assert "NVIDIA H100 80GB HBM3" in r.stdout and "NSG=8: best at 4/12 points" in r.stdout
    result = pd.read_csv(out)
    labels = ["NSG=1", "NSG=2", "NSG=4", "NSG=8"]
    assert len(result) == 12 and [c for c in result.columns if c in labels] == labels
    assert (result[labels].min(axis=1) == result["best_ms"]).all()
    assert (result[[f"{g} slowdown" for g in labels]].min(axis=1) == 1.0).all()
    # without a filter the best is always a full (ok) time: skipped ones are slower than the sweep's best
    assert not any(result.loc[i, f"{result['best'][i]} skipped"] for i in range(len(result)))
    # against SQL over the same file: the best ok and skipped medians of NSG=8 and NSG=1 at fp64 4x4x4
    sql = (
        "SELECT ip.int_value AS nsg, m.status, MIN(m.median_ms) AS ms FROM measurements m "
        "JOIN instance_params ip ON ip.instance_id = m.instance_id AND ip.name = 'NSG' "
        "JOIN points_gemm p ON p.id = m.point_id WHERE p.precision = 'fp64' AND p.m = 4 "
        "AND m.status IN ('ok', 'skipped') GROUP BY ip.int_value, m.status"
    )
    ref = run_query(f"sqlite:///{RECORDED}", sql).set_index(["nsg", "status"])["ms"]
    row = result[(result["precision"] == "fp64") & (result["m"] == 4)].iloc[0]
    assert row["best"] == "NSG=8" and row["NSG=8"] == pytest.approx(ref[(8, "ok")], rel=1e-5)
    assert (1, "ok") not in ref.index and row["NSG=1 skipped"]
    assert row["NSG=1"] == pytest.approx(ref[(1, "skipped")], rel=1e-5)
    assert row["speedup_vs_cublas"] == pytest.approx(row["cublas_ms"] / row["best_ms"], rel=1e-5)
