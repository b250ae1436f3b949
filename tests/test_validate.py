"""`autotune validate TABLE` end to end without a GPU: a table made from part of the recorded H100 sweep
(results/default: square fp64/fp32 sizes 4, 12, 24 kept, 8, 16, 32 held out) is validated at the held-out sizes
with the replay backend answering from the full recording; then again from the validation database alone."""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.dispatch import validate as v
from autotune.problems.gemm.batch import batch_for_bytes
from autotune.sweep.workloads.workload import SizeRule
from autotune.problems.gemm import GEMM, gemm_point
from tests.support.committed import committed, gunzip_to, read_only
from tests.support.harness import invoke_cli

RECORDED = committed("default")  # results/default/default.sqlite.xz, read as it is
HELD_OUT = (8, 16, 32)


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`autotune ARGS` from `cwd`, in this process (the commands are what is tested, not a process's start)."""
    return invoke_cli(*args, cwd=cwd)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tuning.sqlite (the recording without the held-out sizes), table.json made from it, points.csv."""
    work = tmp_path_factory.mktemp("validate")
    tuning = work / "tuning.sqlite"
    gunzip_to(RECORDED, tuning)
    r = cli(work, "db", "upgrade", str(tuning))
    assert r.returncode == 0, r.stderr
    with sqlite3.connect(tuning) as c:
        ids = ",".join(str(i) for (i,) in c.execute(f"SELECT id FROM points_gemm WHERE m IN {HELD_OUT}"))
        for t in ("measurements", "baselines", "inflight", "point_sizes"):
            c.execute(f"DELETE FROM {t} WHERE point_id IN ({ids})")
        c.execute(f"DELETE FROM test_points WHERE id IN ({ids})")
    r = cli(work, "emit", str(tuning), "--format", "json", "-o", "table.json")
    assert r.returncode == 0, r.stderr
    (work / "points.csv").write_text(
        "precision,shape,m,n,k\n" + "".join(f"{p},NN,{s},{s},{s}\n" for p in ("fp64", "fp32") for s in HELD_OUT)
    )
    return work


@pytest.fixture(scope="module")
def validated(tuned: Path) -> Path:
    r = cli(
        tuned,
        "validate",
        "table.json",
        "--db",
        "tuning.sqlite",
        "--points",
        "points.csv",
        "--pool-bk",
        "3",
        "--replay",
        str(RECORDED),
        "--out",
        "out1",
        "--quiet",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all" in r.stdout and "median" in r.stdout  # the summary table comes last
    return tuned / "out1"


def test_validation_csv_against_the_table_and_the_recording(tuned: Path, validated: Path) -> None:
    text = (validated / "validation.csv").read_text()
    assert (
        text.splitlines()[0]
        == ",".join(v.csv_columns(GEMM))
        == (
            "kind,precision,shape,m,n,k,batch,table_choice,"
            "table_ms,best_choice,best_ms,best_roofline_frac,"
            "baseline_ms,loss_vs_best,speedup_vs_baseline"
        )
    )
    frame = pd.read_csv(validated / "validation.csv", keep_default_na=False, na_values=[""])
    assert len(frame) == 6 and set(frame["m"]) == set(HELD_OUT)
    assert (frame["kind"] == "gemm").all()
    # the batches follow the tuned points' rule (100 MB), as the recording's own points did
    rec = pd.read_sql("SELECT precision, m, batch FROM points_gemm", sqlite3.connect(read_only(RECORDED)))
    for r in frame.itertuples():
        assert r.batch == rec[(rec.precision == r.precision) & (rec.m == r.m)].batch.item()
    table = v.read_table(tuned / "table.json")
    for r in frame.itertuples():
        assert r.table_choice == table.answer(
            gemm_point(r.precision, r.shape, int(r.m), int(r.n), int(r.k), int(r.batch))
        )
    loss = frame["loss_vs_best"].dropna()
    assert len(loss) >= 4 and (loss >= 0).all() and (loss < 1).all()
    known = frame.dropna(subset=["table_ms", "best_ms"])
    assert (known["best_ms"] <= known["table_ms"] * (1 + 1e-9)).all()
    assert ((1 - known["best_ms"] / known["table_ms"]).clip(lower=0) - known["loss_vs_best"]).abs().max() < 1e-6
    both = frame.dropna(subset=["table_ms", "baseline_ms"])
    assert ((both["baseline_ms"] / both["table_ms"]) - both["speedup_vs_baseline"]).abs().max() < 1e-6
    lib = frame[frame["table_choice"] == "library"]
    assert (lib["table_ms"] == lib["baseline_ms"]).all()
    # the best is the fastest verified candidate or the library, from the recording
    with sqlite3.connect(read_only(RECORDED)) as c:
        for r in frame.dropna(subset=["best_ms"]).itertuples():
            if r.best_choice == "library":
                assert r.best_ms == pytest.approx(r.baseline_ms)
                continue
            (ms,) = c.execute(
                "SELECT m.median_ms FROM measurements m JOIN points_gemm p ON p.id = m.point_id "
                "WHERE m.instance_id = ? AND p.precision = ? AND p.m = ? AND m.status = 'ok'",
                (r.best_choice, r.precision, int(r.m)),
            ).fetchone()
            assert ms == pytest.approx(r.best_ms, rel=1e-8)
            assert math.isnan(r.baseline_ms) or r.best_ms <= r.baseline_ms
    # the measuring was a sweep of the candidates where they are valid
    cfg = yaml.safe_load((validated / "validate_sweep.yaml").read_text())
    entries = cfg["spaces"]
    assert all(e["measure"] == "valid" and e["instances"] for e in entries)
    ids = {i for e in entries for i in e["instances"]}
    assert {k["instance_id"] for k in table.kernels} <= ids
    assert len(cfg["points"]) == 6 and all(set(g["sizes"]) == {"m", "n", "k", "batch"} for g in cfg["points"])
    summary = json.loads((validated / "validation_summary.json").read_text())
    assert summary["summary"][-1]["group"] == "all" and summary["summary"][-1]["problems"] == 6
    assert summary["provenance"]["table_device"] == table.provenance["device"]
    assert (validated / "validation.png").stat().st_size > 1000


def test_rerun_from_the_validation_database_is_byte_identical(tuned: Path, validated: Path) -> None:
    r = cli(
        tuned,
        "validate",
        "table.json",
        "--db",
        "tuning.sqlite",
        "--points",
        "points.csv",
        "--pool-bk",
        "3",
        "--replay",
        str(validated / "validation.sqlite"),
        "--out",
        "out2",
        "--quiet",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tuned / "out2" / "validation.csv").read_bytes() == (validated / "validation.csv").read_bytes()


def test_random_problems_are_held_out_seeded_and_split_over_the_groups(tuned: Path) -> None:
    table = v.read_table(tuned / "table.json")
    rule = v.derived_rule(table, GEMM, None)
    assert rule.rule.budget_bytes == 100_000_000 and rule.rule.fixed == () and rule.source == "inferred"
    pts = v.random_points(table, GEMM, 9, 5, rule)
    assert pts == v.random_points(table, GEMM, 9, 5, rule) and pts != v.random_points(table, GEMM, 9, 6, rule)
    assert [p.precision for p in pts].count("fp64") == 5 and [p.precision for p in pts].count("fp32") == 4
    tuned_pts = v.tuned_keys(table, GEMM)
    for p in pts:
        assert 4 <= p.m <= 24 and 4 <= p.n <= 24 and 4 <= p.k <= 24
        assert (p.precision, p.shape, p.m, p.n, p.k) not in tuned_pts
        assert p.batch == batch_for_bytes(100_000_000, p.precision, p.m, p.n, p.k)
    assert len(set(pts)) == len(pts)
    assert any(len({p.m, p.n, p.k}) > 1 for p in pts)  # dimensions drawn independently

    class Workload:  # the autotune.sweep.workloads.workload.Workload API
        def bounds(self, precision: str, shape: str) -> dict[str, tuple[int, int]]:
            return {"m": (100, 200), "n": (1, 3), "k": (7, 7)}

        def point(self, precision: str, shape: str, sizes: dict[str, int]):
            return gemm_point(precision, shape, sizes["m"], sizes["n"], sizes["k"], 10)

    w = v.random_points(table, GEMM, 4, 0, rule, Workload())
    assert all(100 <= p.m <= 200 and 1 <= p.n <= 3 and p.k == 7 and p.batch == 10 for p in w)
    assert all(p.batch != 10 for p in v.random_points(table, GEMM, 4, 0, rule, Workload(), rule_given=True))
    with pytest.raises(v.UserError, match="cannot draw"):  # 4..24 has fewer than 100,000 free problems... per group
        v.random_points(
            table,
            GEMM,
            4,
            0,
            rule,
            type("W", (), {"bounds": lambda s, p, sh: {"m": (4, 4), "n": (4, 4), "k": (4, 4)}})(),
        )


def test_batch_rule_given_and_parsed(tuned: Path) -> None:
    table = v.read_table(tuned / "table.json")
    given = v.derived_rule(table, GEMM, "1KB")
    assert given.point(GEMM, "fp64", "NN", {"m": 2, "n": 2, "k": 2}).batch == math.ceil(1000 / (8 * 12))
    with pytest.raises(v.UserError, match="bytes"):
        v.derived_rule(table, GEMM, "lots")
    data = json.loads((tuned / "table.json").read_text())
    for p in data["points"]:
        (p["sizes"] if "sizes" in p else p)["batch"] = 7  # version 3 points keep their sizes apart
    (tuned / "seven.json").write_text(json.dumps(data))
    assert v.derived_rule(v.read_table(tuned / "seven.json"), GEMM, None).rule.fixed == (("batch", 7),)


def invoke(cwd: Path, *args: str):
    import os

    here = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(app, list(args))
    finally:
        os.chdir(here)


def test_errors_name_the_file_and_line(tuned: Path, tmp_path: Path) -> None:
    r = invoke(tuned, "validate", "nope.json", "--points", "points.csv")
    assert r.exit_code == 2 and "no dispatch table nope.json" in r.output and "Traceback" not in r.output
    (tmp_path / "bad.csv").write_text("precision,shape,m,n,k\nfp32,NN,8,8,8\nfp32,NN,8,x,8\n")
    r = invoke(tuned, "validate", "table.json", "--points", str(tmp_path / "bad.csv"))
    assert (
        r.exit_code == 2 and f"{tmp_path / 'bad.csv'}:3:" in r.output and "size n = 'x' is not an integer" in r.output
    )
    (tmp_path / "bad.yaml").write_text(
        "- {precision: fp32, shape: NN, m: 8, n: 8, k: 8}\n- {precision: fp8, shape: NN, m: 8, n: 8, k: 8}\n"
    )
    r = invoke(tuned, "validate", "table.json", "--points", str(tmp_path / "bad.yaml"))
    assert r.exit_code == 2 and f"{tmp_path / 'bad.yaml'}:2:" in r.output and "fp8" in r.output
    r = invoke(tuned, "validate", "table.json")
    assert r.exit_code == 2 and "--points FILE or --random N" in r.output
    data = json.loads((tuned / "table.json").read_text())
    data["points"], data["regions"] = [], []  # no tuned points: no ranges to draw from
    (tmp_path / "bare.json").write_text(json.dumps(data))
    r = invoke(tuned, "validate", str(tmp_path / "bare.json"), "--random", "4")
    assert r.exit_code == 2 and "no ranges to draw" in r.output and "--workload" in r.output
    (tmp_path / "other.json").write_text(json.dumps({"format": "autotune-dispatch", "version": 99}))
    r = invoke(tuned, "validate", str(tmp_path / "other.json"), "--random", "4")
    assert r.exit_code == 2 and "version 99" in r.output and "Traceback" not in r.output


def test_the_generic_kernel_is_measured_where_the_table_answers_with_it(tuned: Path) -> None:
    data = json.loads((tuned / "table.json").read_text())
    data["fallback"] = "naive"
    for k in data["kernels"]:
        k["valid"] = [{"max_m": 2}]  # valid nowhere held out: the table falls back to gemm_naive
    for p in data["points"]:
        for key in ("ranked", "near"):  # no library answer at a neighbour either
            if key in p:
                p[key] = [c for c in p[key] if c >= 0]
    if data.get("model"):  # nor a predicted one (structure "model", which leave-one-out may choose)
        data["model"]["library"] = {}
    (tuned / "naive.json").write_text(json.dumps(data))
    r = cli(
        tuned,
        "validate",
        "naive.json",
        "--points",
        "points.csv",
        "--pool-bk",
        "0",
        "--replay",
        str(RECORDED),
        "--out",
        "out_naive",
        "--quiet",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    frame = pd.read_csv(tuned / "out_naive" / "validation.csv", keep_default_na=False, na_values=[""])
    assert (frame["table_choice"] == "generic").all()
    assert frame["table_ms"].isna().all()  # the recording never measured gemm_naive: not measured, not a loss of 1
    cfg = yaml.safe_load((tuned / "out_naive" / "validate_sweep.yaml").read_text())
    naive = [e for e in cfg["spaces"] if e["space"] == "gemm_naive"]
    assert len(naive) == 1 and len(naive[0]["instances"]) == 1


def test_spaces_resolve_by_name_else_by_the_recorded_file(tmp_path: Path) -> None:
    assert v.space_refs(["gemm_batched_simt"], {}) == {"gemm_batched_simt": "gemm_batched_simt"}
    mine = tmp_path / "mine.yaml"
    mine.write_text("name: mine\n")
    assert v.space_refs(["mine"], {"mine": str(mine)}) == {"mine": str(mine.resolve())}
    with pytest.raises(v.UserError, match="no space file for space 'gone'"):
        v.space_refs(["gone"], {"gone": str(tmp_path / "gone.yaml")})
    stencil = Path(__file__).resolve().parents[1] / "examples" / "stencil" / "space.yaml"
    assert v.space_refs(["convolution_5x5"], {"convolution_5x5": "/elsewhere/space.yaml"}, [stencil]) == {
        "convolution_5x5": str(stencil)
    }  # --space wins over a recorded file that is gone


def test_points_files_csv_and_yaml(tmp_path: Path) -> None:
    rule = v.DerivedRule(SizeRule(budget_bytes=1000))

    def batch(precision: str, m: int, n: int, k: int) -> int:
        return batch_for_bytes(1000, precision, m, n, k)

    (tmp_path / "p.csv").write_text(
        "m,n,k,precision,shape,batch\n# a comment\n24,20,7,fp32,NT,5\n3,4,5,fp64,NN,\n24,20,7,fp32,NT,5\n"
    )
    got = v.read_points(tmp_path / "p.csv", GEMM, rule)
    assert got == [gemm_point("fp32", "NT", 24, 20, 7, 5), gemm_point("fp64", "NN", 3, 4, 5, batch("fp64", 3, 4, 5))]
    (tmp_path / "p.yaml").write_text(
        "- {precision: fp16, shape: TT, m: 24, n: 20, k: 7}\n"
        "- {precision: fp32, shape: NN, m: 2, n: 2, k: 2, batch: 3}\n"
    )
    got = v.read_points(tmp_path / "p.yaml", GEMM, rule)
    assert got == [gemm_point("fp16", "TT", 24, 20, 7, batch("fp16", 24, 20, 7)), gemm_point("fp32", "NN", 2, 2, 2, 3)]
    (tmp_path / "short.csv").write_text("precision,shape,m,n,k\nfp32,NN,8,8\n")
    with pytest.raises(v.UserError, match="short.csv:2: 4 cells, the header has 5"):
        v.read_points(tmp_path / "short.csv", GEMM, rule)
    (tmp_path / "head.csv").write_text("precision,shape,m,n\nfp32,NN,8,8\n")
    with pytest.raises(v.UserError, match="head.csv:1: CSV header precision,shape,m,n: missing k"):
        v.read_points(tmp_path / "head.csv", GEMM, rule)
