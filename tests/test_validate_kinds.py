"""`autotune validate` for kinds other than GEMM, end to end without a GPU: a table made by `autotune report` from
an example's recorded H100 sweep is validated at the recording's own points (the replay backend answers from
it), with one CSV column per size of the kind; plus the held-out problems of such a kind and the candidates a
sweep can measure."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from autotune.dispatch import validate as v
from autotune.problems.gemm import GEMM, gemm_point
from autotune.space.spec import load_space
from autotune.store.store import Store
from autotune.sweep.workloads.workload import SizeRule
from tests.support.committed import gunzip_to
from tests.support.harness import invoke_cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`autotune ARGS` from `cwd`, in this process (the commands are what is tested, not a process's start)."""
    return invoke_cli(*args, cwd=cwd)


@pytest.fixture(scope="module")
def stencil(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """recording.sqlite (the stencil example's H100 sweep), rep/dispatch.json made from it by `autotune report`,
    points.csv: the recording's test points (ny, nx)."""
    work = tmp_path_factory.mktemp("stencil")
    rec = gunzip_to(EXAMPLES / "stencil" / "results" / "stencil_h100.sqlite.xz", work / "recording.sqlite")
    r = cli(work, "report", str(rec), "--tols", "0.05", "--out", "rep")  # one TOL: tol_table.csv is not read
    assert r.returncode == 0, r.stdout + r.stderr
    with Store.open(f"sqlite:///{rec}", create=False, readonly=True) as store:
        pts = store.measurements()[["ny", "nx"]].drop_duplicates().astype(int)
    pts.sort_values(["ny", "nx"]).to_csv(work / "points.csv", index=False)
    return work


def run_validate(work: Path, out: str, replay: Path, *extra: str) -> Path:
    r = cli(
        work,
        "validate",
        "rep/dispatch.json",
        "--db",
        "recording.sqlite",
        "--points",
        "points.csv",
        "--space",
        str(EXAMPLES / "stencil" / "space.yaml"),
        "--pool-bk",
        "3",
        "--replay",
        str(replay),
        "--out",
        out,
        "--quiet",
        *extra,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "convolution5x5" in r.stdout and "all" in r.stdout
    return work / out


def test_stencil_table_validated_at_the_recorded_points(stencil: Path) -> None:
    out = run_validate(stencil, "out1", stencil / "recording.sqlite")
    header = (out / "validation.csv").read_text().splitlines()[0]
    assert header == (
        "kind,precision,shape,ny,nx,table_choice,table_ms,best_choice,best_ms,best_roofline_frac,"
        "baseline_ms,loss_vs_best,speedup_vs_baseline"
    )
    frame = pd.read_csv(out / "validation.csv", keep_default_na=False, na_values=[""])
    want = pd.read_csv(stencil / "points.csv")
    assert frame[["ny", "nx"]].values.tolist() == want.values.tolist()
    assert (frame["kind"] == "convolution5x5").all() and (frame["precision"] == "fp32").all()
    table = v.read_table(stencil / "rep" / "dispatch.json")
    kind = load_space(EXAMPLES / "stencil" / "space.yaml").kind
    assert v.table_kind(table, [EXAMPLES / "stencil" / "space.yaml"]).name == kind.name
    cfg = yaml.safe_load((out / "validate_sweep.yaml").read_text())
    candidates = {i for e in cfg["spaces"] for i in e["instances"]}
    assert {k["instance_id"] for k in table.kernels} <= candidates and len(candidates) > len(table.kernels)
    # every figure is the recording's: the table's kernel, the fastest candidate, the baseline (the kind's library)
    with Store.open(f"sqlite:///{stencil / 'recording.sqlite'}", create=False, readonly=True) as store:
        ms, base = store.measurements(), store.baselines()
    ms = ms[(ms["status"] == "ok") & ms["instance_id"].isin(candidates)]
    for r in frame.itertuples():
        here = ms[(ms["ny"] == r.ny) & (ms["nx"] == r.nx)]
        answer = table.answer(kind.point("fp32", "", {"ny": int(r.ny), "nx": int(r.nx)}))
        assert r.table_choice == answer
        assert r.table_ms == pytest.approx(here[here["instance_id"] == answer]["median_ms"].item(), rel=1e-8)
        b = base[(base["ny"] == r.ny) & (base["nx"] == r.nx)]["median_ms"].item()
        assert r.baseline_ms == pytest.approx(b, rel=1e-8)
        best = here.sort_values("median_ms").iloc[0]
        assert (r.best_choice, r.best_ms) == (best["instance_id"], pytest.approx(min(best["median_ms"], b), rel=1e-8))
        assert r.loss_vs_best == pytest.approx(1 - r.best_ms / r.table_ms, abs=1e-8)
        assert r.speedup_vs_baseline == pytest.approx(b / r.table_ms, rel=1e-8) and r.speedup_vs_baseline > 1
    summary = json.loads((out / "validation_summary.json").read_text())
    assert summary["provenance"]["kind"] == "convolution5x5" and summary["summary"][-1]["problems"] == len(frame)
    # the validation database alone answers the same, byte for byte
    again = run_validate(stencil, "out2", out / "validation.sqlite")
    assert (again / "validation.csv").read_bytes() == (out / "validation.csv").read_bytes()


def test_stencil_random_problems_within_the_tuned_range(stencil: Path) -> None:
    table = v.read_table(stencil / "rep" / "dispatch.json")
    kind = load_space(EXAMPLES / "stencil" / "space.yaml").kind
    rule = v.derived_rule(table, kind, None)
    assert rule.describe(kind) == "every size given"
    pts = v.random_points(table, kind, 7, 3, rule)
    assert pts == v.random_points(table, kind, 7, 3, rule) and len(set(pts)) == 7
    bounds = v.table_bounds(table, kind, "fp32", "")
    tuned = v.tuned_keys(table, kind)
    for p in pts:
        assert p.kind == "convolution5x5" and set(p.dims) == {"ny", "nx"}
        assert all(bounds[n][0] <= p.dims[n] <= bounds[n][1] for n in ("ny", "nx"))
        assert ("fp32", "", p.dims["ny"], p.dims["nx"]) not in tuned
    (stencil / "p.yaml").write_text("- {ny: 100, nx: 200}\n- {precision: fp32, ny: 7, nx: 9}\n")
    assert [p.dims for p in v.read_points(stencil / "p.yaml", kind, rule)] == [
        {"ny": 100, "nx": 200},
        {"ny": 7, "nx": 9},
    ]
    (stencil / "bad.csv").write_text("ny,nx,m\n1,2,3\n")
    with pytest.raises(v.UserError, match="bad.csv:1: CSV header ny,nx,m: unknown columns m"):
        v.read_points(stencil / "bad.csv", kind, rule)
    (stencil / "bad.yaml").write_text("- {ny: 1, nx: 2}\n- {ny: 1, nx: 2, batch: 4}\n")
    with pytest.raises(v.UserError, match="bad.yaml:2: unknown key 'batch'"):
        v.read_points(stencil / "bad.yaml", kind, rule)


def test_a_family_that_accepts_no_held_out_problem_is_left_out() -> None:
    """tsm2 takes only N <= 16 and batch 1; gemm_batched_simt takes any GEMM: at 64x64x64 problems the tsm2
    instances are left out (the sweep would refuse them as 'not in the space'), so is an fp64 instance at fp32
    problems; nothing measurable at all is a UserError."""
    cands = v.Candidates(
        {"gemm_batched_simt": ("a", "b"), "tsm2": ("t",)},
        {"gemm_batched_simt": "gemm_batched_simt", "tsm2": "tsm2"},
        precisions={"a": frozenset({"fp32"}), "b": frozenset({"fp64"}), "t": frozenset({"fp32"})},
    )
    big = [gemm_point("fp32", "NN", 64, 64, 64, 10)]
    kept = v.measurable(cands, big)
    assert kept.by_space == {"gemm_batched_simt": ("a",)} and set(kept.refs) == {"gemm_batched_simt"}
    thin = [gemm_point("fp32", "NN", 64, 8, 64, 1)]
    assert v.measurable(cands, thin).by_space == {"gemm_batched_simt": ("a",), "tsm2": ("t",)}
    with pytest.raises(v.UserError, match="no candidate instance can be measured"):
        v.measurable(cands, [gemm_point("fp16", "NN", 64, 64, 64, 1)])


def test_gemm_keeps_its_columns_and_batch_rule() -> None:
    assert v.csv_columns(GEMM)[:7] == ["kind", "precision", "shape", "m", "n", "k", "batch"]
    rule = v.DerivedRule(SizeRule(budget_bytes=10**6), "given")
    p = rule.point(GEMM, "fp32", "NN", {"m": 10, "n": 10, "k": 10})
    assert p.batch == math.ceil(10**6 / (4 * 300))
    assert rule.describe(GEMM) == "1,000,000 bytes per problem (given)"


def test_a_table_of_the_retired_per_kind_format_is_refused_with_a_hint(tmp_path: Path) -> None:
    from autotune.dispatch.validate_table import read_table
    from autotune.errors import UserError

    old = tmp_path / "dispatch.json"
    old.write_text('{"format": "autotune-dispatch-kind", "version": 1, "kind": "transpose", "points": []}')
    with pytest.raises(UserError, match="retired per-kind format") as err:
        read_table(old)
    assert "autotune report" in (err.value.hint or "")
