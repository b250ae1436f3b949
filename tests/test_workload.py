"""Workloads (autotune/sweep/workloads/workload.py and workload_files.py, `autotune workload`): parsing YAML and CSV with file:line errors, choosing
the tuned points, weights per tuned point, the generated sweep config, and the instance pool of a database."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import autotune.sweep.config as sweep_config
from autotune.cli.main import app
from autotune.errors import ConfigError
from autotune.paths import CONFIGS_DIR, ROOT
from autotune.problems.gemm import gemm_point
from autotune.problems.gemm.batch import batch_for_bytes
from autotune.sweep.config import parse_config
from autotune.sweep.workloads.workload import (
    ConfigKeys,
    choose_points,
    coverage,
    point_weights_frame,
    pool_from_db,
    sweep_config_text,
    weights,
)
from autotune.sweep.workloads.workload_files import load_workload
from tests.support.committed import committed

YAML = """\
kind: gemm
batch: {bytes: 1MB}
problems:
  - {precision: fp16, shape: NN, m: 40, n: 72, k: 56, weight: 3}
  - {precision: fp16, m: 40, n: 72, k: 56}
  - {precision: fp32, shape: NT, m: 8, n: 8, k: 8, batch: 7, weight: 0.5}
  - {precision: fp32, shape: NT, m: 8, n: 8, k: 16, batch: {bytes: 2MB}}
ranges:
  - precisions: [fp16]
    shapes: [NN]
    sizes: {m: {from: 8, to: 64, step: 8}, n: [8, 16, 72], k: {pow2: [16, 64]}}
    weight: 2
"""


def write(tmp_path, text, name="w.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def error(tmp_path, text, name="w.yaml") -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_workload(write(tmp_path, text, name))
    return info.value


def test_yaml_problems_and_ranges_with_defaults_and_duplicate_weights_adding_up(tmp_path) -> None:
    wl = load_workload(write(tmp_path, YAML))
    w = dict(wl.problems)
    assert wl.kind == "gemm" and len(wl.problems) == 8 * 3 * 3 + 3  # 40x72x56 is not in the range
    big = gemm_point("fp16", "NN", 40, 72, 56, batch_for_bytes(10**6, "fp16", 40, 72, 56))
    assert w[big] == 4.0  # 3 + the default weight 1 (shape defaults to NN, batch to the file's rule)
    assert w[gemm_point("fp32", "NT", 8, 8, 8, 7)] == 0.5
    assert w[gemm_point("fp32", "NT", 8, 8, 16, batch_for_bytes(2 * 10**6, "fp32", 8, 8, 16))] == 1.0
    assert w[wl.point("fp16", "NN", {"m": 64, "n": 16, "k": 32})] == 2.0
    assert wl.total_weight == pytest.approx(4 + 0.5 + 1 + 2 * 72)
    assert wl.bounds("fp16", "NN") == {"m": (8, 64), "n": (8, 72), "k": (16, 64)}
    assert wl.bounds("fp32", "NT") == {"m": (8, 8), "n": (8, 8), "k": (8, 16)}
    with pytest.raises(ValueError, match="no fp64"):
        wl.bounds("fp64", "NN")
    assert wl.point("fp16", "NN", {"m": 40, "n": 72, "k": 56}) == big


def test_default_batch_is_500mb_and_a_range_adds_to_a_listed_problem(tmp_path) -> None:
    wl = load_workload(
        write(
            tmp_path,
            "problems: [{precision: fp64, m: 4, n: 4, k: 4, weight: 2}]\n"
            "ranges: [{precisions: [fp64], sizes: {m: 4, n: 4, k: [4, 8]}}]\n",
        )
    )
    assert dict(wl.problems) == {
        gemm_point("fp64", "NN", 4, 4, 4, batch_for_bytes(500 * 10**6, "fp64", 4, 4, 4)): 3.0,
        gemm_point("fp64", "NN", 4, 4, 8, batch_for_bytes(500 * 10**6, "fp64", 4, 4, 8)): 1.0,
    }


def test_csv_with_and_without_optional_columns(tmp_path) -> None:
    wl = load_workload(
        write(
            tmp_path,
            "# logged on 2024-05-01\nprecision,shape,m,n,k,batch,weight\n"
            "fp32,NN,8,16,32,100,2\nfp32,,8,16,32,100,\n\nfp64,TN,4,4,4,,1.5\n",
            "w.csv",
        )
    )
    assert dict(wl.problems) == {
        gemm_point("fp32", "NN", 8, 16, 32, 100): 3.0,
        gemm_point("fp64", "TN", 4, 4, 4, batch_for_bytes(500 * 10**6, "fp64", 4, 4, 4)): 1.5,
    }
    wl = load_workload(write(tmp_path, "m,n,k,precision\n2,3,4,fp16\n", "v.csv"))
    assert [p.key for p, _ in wl.problems] == [f"gemm:fp16:NN:2x3x4x{batch_for_bytes(500 * 10**6, 'fp16', 2, 3, 4)}"]


@pytest.mark.parametrize(
    "text, line, words",
    [
        (
            "problems:\n  - {precision: fp16, m: 8, n: 8, k: 8}\n  - {precision: fp16, m: 8, n: 8, k: 8, weight: 0}\n",
            3,
            "weight 0 is not above 0",
        ),
        ("problems:\n  - {precision: fp16, m: 8, n: 2.5, k: 8}\n", 2, "integer >= 1"),
        ("problems:\n  - {precision: fp16, m: 0, n: 2, k: 8}\n", 2, "integer >= 1"),
        ("problems:\n  - {precision: fp8, m: 8, n: 8, k: 8}\n", 2, "unknown precision 'fp8'"),
        ("problems:\n  - {precision: fp16, m: 8, n: 8}\n", 2, "misses k"),
        ("problems:\n  - {precision: fp16, m: 8, n: 8, k: 8, wieght: 2}\n", 2, "unknown key `wieght`"),
        ("batch: {bytes: 500MB}\n\nranges:\n  - {precisions: [fp16], sizes: {m: 8, n: 8}}\n", 4, "miss k"),
        ("ranges:\n  - {precisions: [fp16], sizes: {m: {from: 9, to: 8}, n: 8, k: 8}}\n", 2, "empty range"),
        ("batch: {bytes: lots}\nproblems: []\n", 1, "cannot read a size in bytes"),
        ("kind: softmax\nproblems: []\n", 1, "not built in"),
        ("problems:\n  - {precision: fp16, m: 8, n: 8, k: 8, batch: {byte: 1MB}}\n", 2, "unknown key `byte`"),
        ("problems:\n  - {precision: fp16, m: 8, n: 8, k: 8, batch: 3000000000}\n", 2, "above 2^31 - 1"),
        ("kind: gemm\n", 1, "needs `problems:` and/or `ranges:`"),
        ("- 1\n", 1, "a workload is a mapping"),
    ],
)
def test_yaml_mistakes_name_the_line_and_what_to_do(tmp_path, text, line, words) -> None:
    exc = error(tmp_path, text)
    assert exc.line == line and words in exc.message and exc.hint, str(exc)
    assert str(exc).startswith(f"{tmp_path / 'w.yaml'}:{line}: ") or str(exc).startswith(
        f"{(tmp_path / 'w.yaml').resolve()}:{line}: "
    )


@pytest.mark.parametrize(
    "text, line, words",
    [
        ("precision,m,n,k\nfp16,8,8,8\nfp16,8,x,8\n", 3, "n = 'x' is not an integer >= 1"),
        ("precision,m,n,k\nfp16,8,8,8\n\nfp16,8,0,8\n", 4, "n = '0' is not an integer >= 1"),
        ("precision,m,n,k,weight\nfp16,8,8,8,-1\n", 2, "weight -1 is not above 0"),
        ("precision,m,n,k,weight\nfp16,8,8,8,heavy\n", 2, "not a number"),
        ("precision,m,n,k\nfp16,8,8\n", 2, "3 cells, the header has 4"),
        ("precision,shape,m,n,k\nfp16,XX,8,8,8\n", 2, "unknown shape 'XX'"),
        ("precision,m,n,kk\nfp16,8,8,8\n", 1, "unknown columns kk; missing k"),
        ("precision,m,n,k\nfp16,8,,8\n", 2, "misses n"),
        ("precision,m,n,k\n", 1, "no problems"),
        ("# from the logs\n\nprecision,m,n,k\n# a comment\nfp16,8,8,8\nfp16,8,8,-8\n", 6, "is not an integer >= 1"),
        ("# header on line 2\nprecision,m,n,k,k\n", 2, "a column appears twice"),
    ],
)
def test_csv_mistakes_name_the_row_line(tmp_path, text, line, words) -> None:
    exc = error(tmp_path, text, "w.csv")
    assert exc.line == line and words in exc.message and exc.hint, str(exc)


def test_missing_file_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="no workload file"):
        load_workload(tmp_path / "nothing.yaml")


def grid_workload(tmp_path, weight_line=""):
    return load_workload(
        write(
            tmp_path,
            "ranges:\n  - precisions: [fp32, fp64]\n    sizes: {m: {from: 2, to: 40, "
            "step: 2}, n: {pow2: [1, 64]}, k: [3, 5, 7, 100]}\n" + weight_line,
        )
    )


def test_choose_points_covers_the_corners_is_deterministic_and_counts(tmp_path) -> None:
    wl = grid_workload(tmp_path)
    tuned = choose_points(wl, 10)
    assert tuned == choose_points(grid_workload(tmp_path), 10)
    assert len(tuned) == 20 and len(set(tuned)) == 20
    for prec in ("fp32", "fp64"):
        mine = [(p.m, p.n, p.k) for p in tuned if p.precision == prec]
        assert mine[:2] == [(2, 1, 3), (40, 64, 100)]  # the all-min and all-max corners first
        assert all(p in dict(wl.problems) for p in tuned)
    # farther-first: more points never make the coverage worse
    worst = [max(d for _, d in coverage(wl, choose_points(wl, n)).values()) for n in (2, 5, 10, 40)]
    assert worst == sorted(worst, reverse=True) and worst[-1] < worst[0]
    # a group with at most per_group problems is taken whole
    small = load_workload(write(tmp_path, "ranges: [{precisions: [fp16], sizes: {m: [1, 2], n: 3, k: [4, 5]}}]\n"))
    assert sorted(choose_points(small, 4)) == sorted(p for p, _ in small.problems)


def test_choose_points_keeps_included_points_and_counts_them(tmp_path) -> None:
    wl = grid_workload(tmp_path)
    extra = [wl.point("fp32", "NN", {"m": 3, "n": 3, "k": 3}), gemm_point("fp16", "TT", 8, 8, 8, 1)]
    tuned = choose_points(wl, 6, extra)
    assert tuned[0] == extra[0] and tuned[-1] == extra[1]
    assert sum(p.precision == "fp32" for p in tuned) == 6 and sum(p.precision == "fp64" for p in tuned) == 6


def test_heaviest_problem_is_chosen_after_the_corners(tmp_path) -> None:
    wl = load_workload(
        write(
            tmp_path,
            "problems: [{precision: fp32, m: 4, n: 4, k: 4, weight: 50}]\n"
            "ranges: [{precisions: [fp32], sizes: {m: [1, 2, 4, 8, 16], n: [1, 16], "
            "k: [1, 16]}}]\n",
        )
    )
    assert [(p.m, p.n, p.k) for p in choose_points(wl, 3)] == [(1, 1, 1), (16, 16, 16), (4, 4, 4)]
    # then the farthest from those three (log2 distance 5: 2x1x16, 2x16x1, 8x1x16, 8x16x1; weights all 1):
    # the smallest sizes
    assert [(p.m, p.n, p.k) for p in choose_points(wl, 4)][3] == (2, 1, 16)


def test_weights_go_to_the_nearest_tuned_point_and_keep_the_total(tmp_path) -> None:
    wl = grid_workload(tmp_path, "    weight: 0.25\n")
    tuned = choose_points(wl, 7)
    w, unassigned = weights(wl, tuned)
    assert set(w) == set(tuned) and unassigned == 0.0
    assert sum(w.values()) == pytest.approx(wl.total_weight)
    only32 = [p for p in tuned if p.precision == "fp32"]
    w32, unassigned = weights(wl, only32 + [gemm_point("fp16", "NN", 2, 2, 2, 1)])
    assert unassigned == pytest.approx(wl.total_weight / 2) and sum(w32.values()) == pytest.approx(wl.total_weight / 2)
    # by hand: two tuned points; a problem midway goes to the earlier one
    two = load_workload(
        write(
            tmp_path,
            "problems: [{precision: fp32, m: 1, n: 1, k: 1, batch: 1}, {precision: fp32,"
            " m: 2, n: 1, k: 1, batch: 1, weight: 2}, {precision: fp32, m: 4, n: 1, k: 1, "
            "batch: 1, weight: 4}]\n",
        )
    )
    a, c = gemm_point("fp32", "NN", 1, 1, 1, 1), gemm_point("fp32", "NN", 4, 1, 1, 1)
    assert weights(two, [c, a]) == ({c: 6.0, a: 1.0}, 0.0)
    assert weights(two, [a, c]) == ({a: 3.0, c: 4.0}, 0.0)


def test_point_weights_frame(tmp_path) -> None:
    wl = grid_workload(tmp_path)
    tuned = choose_points(wl, 5)
    w, _ = weights(wl, tuned)
    frame = pd.DataFrame(
        [{"precision": p.precision, "shape": p.shape, **p.dims} for p in tuned]
        + [{"precision": "fp16", "shape": "NN", "m": 2, "n": 2, "k": 2, "batch": 1}]
    )
    got = point_weights_frame(wl, frame)
    assert isinstance(got, np.ndarray) and got.tolist() == [w[p] for p in tuned] + [0.0]
    assert point_weights_frame(wl, frame.drop(columns="batch"))[:-1].tolist() == [w[p] for p in tuned]


def test_sweep_config_round_trips_through_the_config_parser(tmp_path) -> None:
    wl = load_workload(write(tmp_path, YAML))
    tuned = choose_points(wl, 5)
    text = sweep_config_text(
        wl, tuned, ["gemm_batched_simt", "gemm_small_simt"], "wl_test", ConfigKeys(repetitions=7, tol=0.1, bk=4)
    )
    assert text.startswith("# Generated from the workload")
    cfg = parse_config(text, tmp_path / "wl_test.yaml")
    assert sorted(cfg.points) == sorted(tuned) and len(cfg.points) == len(tuned)
    assert (cfg.name, cfg.repetitions, cfg.tol, cfg.bk) == ("wl_test", 7, 0.1, 4)
    assert [s.ref for s in cfg.spaces] == ["gemm_batched_simt", "gemm_small_simt"]


def test_non_gemm_workload_names_its_kind_by_a_space_file(tmp_path) -> None:
    space = ROOT / "examples" / "transpose" / "space.yaml"
    wl = load_workload(
        write(
            tmp_path,
            f"space: {space}\nproblems:\n  - {{rows: 4096, cols: 4096, weight: 2}}\n"
            "ranges: [{sizes: {rows: [1000, 4000], cols: {pow2: [1024, 4096]}}}]\n",
        )
    )
    assert wl.kind == "transpose" and wl.table_sizes == ("rows", "cols") and len(wl.problems) == 7
    assert wl.bounds("fp32", "") == {"rows": (1000, 4096), "cols": (1024, 4096)}
    tuned = choose_points(wl, 3)
    cfg = parse_config(sweep_config_text(wl, tuned, [str(space)], "tr"), tmp_path / "tr.yaml")
    assert sorted(cfg.points) == sorted(tuned)
    exc = error(tmp_path, f"kind: softmax\nspace: {space}\nproblems: [{{rows: 1, cols: 1}}]\n")
    assert exc.line == 1 and "solves 'transpose', not 'softmax'" in exc.message
    csv = load_workload(write(tmp_path, "rows,cols,weight\n8,8,1\n8,8,2\n", "t.csv"), space=space)
    assert [(p.dims, w) for p, w in csv.problems] == [({"rows": 8, "cols": 8}, 3.0)]


def test_sweep_config_text_writes_the_new_runner_keys(tmp_path) -> None:
    wl = grid_workload(tmp_path)
    tuned = choose_points(wl, 3)
    text = sweep_config_text(
        wl,
        tuned,
        ["gemm_batched_simt", "gemm_small_simt"],
        "x",
        ConfigKeys(share=4, measure_valid=True, pool={"gemm_batched_simt": ["a1", "b2"]}),
    )
    data = yaml.safe_load(text)
    assert data["share"] == 4
    assert data["spaces"] == [
        {"space": "gemm_batched_simt", "instances": ["a1", "b2"], "measure": "valid"},
        {"space": "gemm_small_simt", "measure": "valid"},
    ]
    # one entry per tuned point, in the form every kind's points take (the GEMM-only triples form is gone)
    assert len(data["points"]) == len(tuned)
    assert all(
        set(g) == {"kind", "precisions", "shapes", "sizes"} and set(g["sizes"]) == {"m", "n", "k", "batch"}
        for g in data["points"]
    )


@pytest.mark.skipif(
    "share" not in sweep_config.TOP_KEYS,
    reason="the sweep config does not know share/instances/measure yet (coming on main)",
)
def test_sweep_config_with_the_new_runner_keys_parses(tmp_path) -> None:
    wl = grid_workload(tmp_path)
    tuned = choose_points(wl, 3)
    text = sweep_config_text(
        wl,
        tuned,
        ["gemm_batched_simt"],
        "x",
        ConfigKeys(share=4, measure_valid=True, pool={"gemm_batched_simt": ["00000000000000a1", "00000000000000b2"]}),
    )
    cfg = parse_config(text, tmp_path / "x.yaml")
    assert sorted(cfg.points) == sorted(tuned) and cfg.share == 4
    assert cfg.spaces[0].measure == "valid" and cfg.spaces[0].instances == ("00000000000000a1", "00000000000000b2")


def test_pool_from_a_results_database() -> None:
    db = committed("square_h100")  # .sqlite.xz: read through its decompressed copy
    pool = pool_from_db(str(db), 1)
    from autotune.store.store import Store

    with Store.open(f"sqlite:///{db}", create=False, readonly=True) as store:
        f = store.measurements()
    ok = f[f["status"] == "ok"].sort_values(["median_ms", "instance_id"])
    best = ok.groupby(["device", "precision", "shape", "m", "n", "k", "batch"]).head(1)
    assert pool == {s: sorted(set(g)) for s, g in best.groupby("space")["instance_id"]}
    wider = pool_from_db(f"sqlite:///{db}", 5)
    assert set(wider) == set(pool) and all(set(pool[s]) < set(wider[s]) for s in pool)


def test_example_workloads_load_and_choose_quickly() -> None:
    for name, groups in (("fp16_h100", 1), ("small_h100", 2)):
        start = time.perf_counter()
        wl = load_workload(CONFIGS_DIR / "workloads" / f"{name}.yaml")
        tuned = choose_points(wl, 24)
        assert time.perf_counter() - start < 10
        assert len(wl.groups) == groups and len(tuned) == 24 * groups
        assert len(wl.problems) == groups * 31**3  # 8..128 step 4 and 2..32: 31 sizes each


def test_cli_show_and_config(tmp_path) -> None:
    wl = write(tmp_path, YAML)
    r = CliRunner().invoke(app, ["workload", "show", str(wl)])
    assert r.exit_code == 0, r.output
    assert "fp16" in r.output and "8..64" in r.output and "149.5" in r.output
    out = tmp_path / "sub" / "gen.yaml"
    r = CliRunner().invoke(
        app,
        [
            "workload",
            "config",
            str(wl),
            "--space",
            "gemm_batched_simt",
            "--space",
            str(ROOT / "spaces" / "gemm_small_simt.yaml"),
            "--tuned-points",
            "4",
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "largest log2 distance" in r.output and f"wrote {out}" in r.output.replace("\n", "")
    cfg = sweep_config.load_config(out)
    assert cfg.name == "gen" and len(cfg.points) == 4 + 2  # fp32 NT has only 2 problems
    bad = write(tmp_path, "problems:\n  - {precision: fp16, m: 8, n: 8, k: 8, weight: -2}\n", "bad.yaml")
    r = CliRunner().invoke(
        app, ["workload", "config", str(bad), "--space", "gemm_batched_simt", "--out", str(tmp_path / "x.yaml")]
    )
    assert r.exit_code == 2 and f"{bad.resolve()}:2: weight -2 is not above 0" in r.output
    for cmd in (["workload", "--help"], ["workload", "config", "--help"]):
        r = CliRunner().invoke(app, cmd)
        assert r.exit_code == 0 and ("--share" in r.output or "show" in r.output)


EXAMPLES = ROOT / "examples"


def test_stencil_workload_yaml_and_csv_over_its_own_sizes(tmp_path) -> None:
    """A kind defined in a space file (convolution5x5, sizes ny, nx): YAML problems and ranges, CSV rows,
    distances over its sizes, a generated sweep config that parses, and its mistakes by line."""
    space = EXAMPLES / "stencil" / "space.yaml"
    wl = load_workload(
        write(
            tmp_path,
            f"space: {space}\nproblems:\n  - {{ny: 4096, nx: 4096, weight: 5}}\n"
            "ranges:\n  - {sizes: {ny: [1000, 2000, 4000], nx: {pow2: [1024, 4096]}}}\n",
        )
    )
    assert wl.kind == "convolution5x5" and wl.table_sizes == ("ny", "nx") and wl.tie_sizes == ()
    assert len(wl.problems) == 1 + 3 * 3 and wl.total_weight == 5 + 9
    assert wl.bounds("fp32", "") == {"ny": (1000, 4096), "nx": (1024, 4096)}
    assert wl.point("fp32", "", {"ny": 8, "nx": 9}).dims == {"ny": 8, "nx": 9}
    tuned = choose_points(wl, 3)
    assert [p.dims for p in tuned[:2]] == [{"ny": 1000, "nx": 1024}, {"ny": 4096, "nx": 4096}]  # the corners
    w, unassigned = weights(wl, tuned)
    assert unassigned == 0 and sum(w.values()) == pytest.approx(wl.total_weight)
    # the heaviest problem is a corner: its own weight plus its nearest neighbours'
    assert w[wl.point("fp32", "", {"ny": 4096, "nx": 4096})] >= 5
    cfg = parse_config(sweep_config_text(wl, tuned, [str(space)], "conv"), tmp_path / "conv.yaml")
    assert sorted(cfg.points) == sorted(tuned)
    frame = pd.DataFrame([{"kind": p.kind, "precision": p.precision, "shape": p.shape, **p.dims} for p in tuned])
    assert point_weights_frame(wl, frame).tolist() == [w[p] for p in tuned]
    csv = load_workload(write(tmp_path, "# ny first\nny,nx,weight\n64,32,1\n64,32,2\n128,32,\n", "c.csv"), space=space)
    assert [(p.dims, wt) for p, wt in csv.problems] == [({"ny": 64, "nx": 32}, 3.0), ({"ny": 128, "nx": 32}, 1.0)]
    assert coverage(csv, [csv.problems[0][0]]) == {("fp32", ""): (1, 1.0)}
    for text, line, words in (
        (f"space: {space}\nbatch: 7\nproblems: [{{ny: 1, nx: 1}}]\n", 2, "unknown key `batch`"),
        (f"space: {space}\nproblems:\n  - {{ny: 8}}\n", 3, "misses nx"),
        (f"space: {space}\nproblems:\n  - {{ny: 8, nx: 8, m: 8}}\n", 3, "unknown key `m`"),
        (f"space: {space}\nranges:\n  - {{sizes: {{ny: 8}}}}\n", 3, "miss nx"),
    ):
        exc = error(tmp_path, text)
        assert exc.line == line and words in exc.message and exc.hint, str(exc)
    with pytest.raises(ConfigError, match="missing nx"):
        load_workload(write(tmp_path, "ny,weight\n8,1\n", "d.csv"), space=space)


@pytest.mark.parametrize("example, kind", [("transpose", "transpose"), ("softmax", "softmax")])
def test_example_kinds_workloads_show_and_config(tmp_path, example, kind) -> None:
    space = EXAMPLES / example / "space.yaml"
    wl = write(
        tmp_path,
        f"space: {space}\nranges: [{{sizes: {{rows: {{pow2: [1024, 16384]}}, "
        "cols: {pow2: [1024, 8192]}}, weight: 2}]\n",
    )
    r = CliRunner().invoke(app, ["workload", "show", str(wl)])
    assert r.exit_code == 0, r.output
    assert kind in r.output and "1024..16384" in r.output and "1024..8192" in r.output and "40" in r.output
    out = tmp_path / "gen.yaml"
    r = CliRunner().invoke(
        app, ["workload", "config", str(wl), "--space", str(space), "--tuned-points", "5", "--out", str(out)]
    )
    assert r.exit_code == 0, r.output
    cfg = sweep_config.load_config(out)
    assert len(cfg.points) == 5 and {p.kind for p in cfg.points} == {kind}
    assert {"rows": 1024, "cols": 1024} in [p.dims for p in cfg.points]
