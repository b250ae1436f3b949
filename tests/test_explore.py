"""`autotune explore`, `autotune dashboard` and `autotune space diff` on committed inputs (no browser: see
tests/browser/ for the pages in Chromium)."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from tests.support.harness import ROOT, invoke_cli

pytest.importorskip("plotly")

SMALL = ROOT / "results" / "small_tables_h100"
DB = SMALL / "small_tables_h100.sqlite.xz"


def _payload(html: str) -> dict:
    found = re.search(r"<script id='explore-data' type='application/json'>(.*?)</script>", html, re.S)
    assert found
    return json.loads(found.group(1).replace("<\\/", "</"))


@pytest.fixture(scope="module")
def results_page() -> tuple[str, dict]:
    from autotune.explore.report import build

    built = build(str(SMALL))
    html = built.page.render()
    return html, _payload(html)


def test_results_page_is_self_contained(results_page: tuple[str, dict]) -> None:
    html, payload = results_page
    assert "https://" not in re.sub(r"<script>.*?</script>", "", html, flags=re.S)  # nothing outside the scripts
    assert not re.search(r"<script[^>]+src=", html)  # plotly.js is inside, not fetched
    assert "Plotly.newPlot" in html and len(html) > 3_000_000  # plotly.js embedded
    keys = {f["key"] for f in payload["figures"]}
    for key in (
        "roofline",
        "speedup",
        "param-gemm_tiny_simt",
        "parcoords-gemm_batched_simt",
        "time-points",
        "time-sweeps",
        "outcomes",
        "tol",
        "validation",
        "table-loss",
    ):
        assert key in keys
    assert any(k.startswith("importance-") for k in keys)
    assert any(k.startswith("wins-") for k in keys)
    assert set(payload["fields"]) >= {"precision", "point", "space"}


def test_results_groups_match_the_database(results_page: tuple[str, dict]) -> None:
    _, payload = results_page
    from autotune.explore.data import load

    r = load(str(DB))
    points = {g["point"] for g in payload["groups"] if "point" in g}
    assert set(r.points["key"]) <= points
    # the table's points are named like the database's (one point filter serves both); the validation's held-out
    # problems are other points
    wins = [
        t
        for f in payload["figures"]
        if f["key"].startswith("wins-")
        for t in f["data"]
        if isinstance(t["meta"]["g"], list)
    ]
    table_points = {payload["groups"][g]["point"] for t in wins for g in t["meta"]["g"]}
    # the database also holds points tuned after the table was built (results/tables2_h100: 20 added)
    assert len(table_points) == 240 and table_points <= set(r.points["key"])
    import pandas as pd

    held_out = len(pd.read_csv(SMALL / "validation" / "validation.csv"))
    assert len(points) == len(set(r.points["key"])) + held_out
    roofline = next(f for f in payload["figures"] if f["key"] == "roofline")
    best = [t for t in roofline["data"] if t["name"].endswith("(best)")]
    ok = r.measurements[r.measurements["status"] == "ok"]
    spaces = r.instances["space"].reindex(ok["instance_id"]).to_numpy()
    assert sum(len(t["y"]) for t in best) == len(set(zip(spaces, ok["point_id"], strict=True)))


def test_importance_ranks_parameters() -> None:
    from autotune.explore.data import load, ok_frame
    from autotune.explore.importance import importances

    r = load(str(DB))
    ok = ok_frame(r)
    sub = ok[ok["space"] == "gemm_tiny_simt"]
    params = r.params["gemm_tiny_simt"].reindex(sub["instance_id"].to_numpy()).reset_index(drop=True)
    found = importances(params, sub["slowdown"].to_numpy())
    assert found and found[0].evaluator == "PED-ANOVA"
    assert abs(sum(found[0].values.values()) - 1) < 1e-6
    assert set(found[0].values) <= set(params.columns)


def test_importance_order_of_tied_parameters_is_the_same_in_every_process() -> None:
    """Parameters of equal importance are listed by name: a report rebuilt from the same database draws the same
    chart whatever the process's string hashing (they were listed in set order, which PYTHONHASHSEED changes)."""
    import subprocess
    import sys

    code = (
        "from autotune.explore.importance import Importance, ranked_names\n"
        "values = {n: (0.5 if n == 'BM' else 0.0) for n in ['TM', 'TN', 'BN', 'BM', 'BK', 'SPLIT', 'VEC', 'PAD']}\n"
        "print(ranked_names([Importance('PED-ANOVA', values, 10, 10)]))\n"
    )
    orders = {
        subprocess.run(
            [sys.executable, "-c", code], env={"PYTHONHASHSEED": str(seed)}, cwd=ROOT, capture_output=True, text=True
        ).stdout
        for seed in range(6)
    }
    assert orders == {"['BM', 'BK', 'BN', 'PAD', 'SPLIT', 'TM', 'TN', 'VEC']\n"}


def test_space_page_funnel_is_the_generators() -> None:
    from autotune.devices import get_device
    from autotune.explore.page import Page
    from autotune.explore.spaces import add_space, explore_space
    from autotune.space.generator import generate
    from autotune.space.spec import load_space

    space = load_space("gemm_batched_simt")
    e = explore_space(space, get_device("H100"))
    g = generate(space, get_device("H100"))
    assert not e.sampled
    assert [(f.name, f.remaining) for f in e.funnel] == [(f.name, f.remaining) for f in g.funnel]
    page = Page("t")
    add_space(page, e)
    keys = [f.key for f in page.figures]
    assert "funnel" in keys and sum(k.startswith("values-") for k in keys) == len(space.parameters)
    assert any(k.startswith("map-") for k in keys)


def test_a_large_space_is_explored_from_a_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune.devices import get_device
    from autotune.explore import spaces
    from autotune.explore.page import Page
    from autotune.space.generator import generate
    from autotune.space.spec import load_space

    monkeypatch.setattr(spaces, "SAMPLE", 20_000)
    space = load_space("gemm_batched_simt")  # 189,689 hard survivors
    e = spaces.explore_space(space, get_device("H100"))
    assert e.sampled and len(e.rows) == 20_000
    exact = generate(space, get_device("H100")).count
    assert abs(e.funnel[-1].remaining - exact) < 0.15 * exact  # an estimate from the sample
    page = Page("t")
    spaces.add_space(page, e)
    assert any("sample of 20,000" in n for n in page.notes)


def test_cli_explore_writes_a_report(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    done = invoke_cli("explore", str(SMALL / "dispatch.json"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "table" in done.stdout and out.stat().st_size > 3_000_000
    done = invoke_cli("explore", "gemm_naive", "--out", str(tmp_path / "s.html"))
    assert done.returncode == 0, done.stderr


def test_cli_explore_bad_target(tmp_path: Path) -> None:
    done = invoke_cli("explore", str(tmp_path), "--out", str(tmp_path / "r.html"))
    assert done.returncode == 2 and "no results database" in done.stderr
    assert not (tmp_path / "r.html").exists()


def test_missing_plotly_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    from autotune.errors import UserError
    from autotune.explore.page import require_plotly

    monkeypatch.setitem(sys.modules, "plotly", None)
    with pytest.raises(UserError, match="plotly") as info:
        require_plotly()
    assert "autotune[explore]" in str(info.value)


TSM2 = ROOT / "results" / "tsm2_n16_h100" / "tsm2_n16_h100.sqlite.xz"  # the smallest committed database


def test_dashboard_studies_load_with_optuna(tmp_path: Path) -> None:
    """`autotune dashboard --no-serve` writes one Optuna study per (space, point, device) into an SQLite storage,
    each trial a measurement with its instance and status, and a second conversion adds nothing. On the sample
    sweep of tests/pg.py (6 measurements, one wrong: a FAIL trial): Optuna's SQLite storage takes ~30 ms a trial,
    so the committed database's 608 took ~15 s; test_dashboard_per_sweep converts those (in memory)."""
    import optuna
    from autotune.store.store import Store

    db = tmp_path / "sample.sqlite"
    with Store.open(str(db)) as store:
        record_sample(store)
    storage = tmp_path / "studies.sqlite3"
    done = invoke_cli("dashboard", str(db), "--storage", str(storage), "--no-serve")
    assert done.returncode == 0, done.stderr
    from autotune.explore.data import load

    r = load(str(db))
    url = f"sqlite:///{storage}"
    summaries = optuna.get_all_study_summaries(url)
    space = r.instances["space"].reindex(r.measurements["instance_id"]).to_numpy()
    assert len(summaries) == len(r.measurements.assign(space=space).groupby(["space", "point_id", "device_id"]).size())
    assert len(summaries) == 2
    total = 0
    states = []
    for summary in summaries:
        study = optuna.load_study(study_name=summary.study_name, storage=url)
        trials = study.get_trials()
        total += len(trials)
        states += [t.state.name for t in trials]
        assert trials and all(t.user_attrs["instance_id"] for t in trials)
        complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
        assert complete and all(t.user_attrs["status"] == "ok" for t in complete)
        assert study.best_trial.value == min(t.value for t in complete)
        assert study.metric_names == ["median_ms"]
    assert total == len(r.measurements) and sorted(states) == ["COMPLETE"] * 5 + ["FAIL"]
    # a second conversion into the same storage adds nothing
    again = invoke_cli("dashboard", str(db), "--storage", str(storage), "--no-serve")
    assert again.returncode == 0, again.stderr
    assert sum(s.n_trials for s in optuna.get_all_study_summaries(url)) == total


def test_dashboard_per_sweep() -> None:
    import optuna
    from autotune.explore.data import load
    from autotune.explore.studies import studies

    r = load(str(TSM2))
    storage = optuna.storages.InMemoryStorage()
    names = studies(r, storage, per="sweep")
    assert names and all(n.startswith("sweep ") for n in names)
    study = optuna.load_study(study_name=names[0], storage=storage)
    values = [t.value for t in study.get_trials() if t.state == optuna.trial.TrialState.COMPLETE]
    assert min(values) == pytest.approx(1.0)  # slowdown against the best at each point
    assert sum(len(optuna.load_study(study_name=n, storage=storage).trials) for n in names) == len(r.measurements)


def test_space_diff(tmp_path: Path) -> None:
    text = (ROOT / "spaces" / "gemm_batched_simt.yaml").read_text()
    changed = text.replace("  DIM_X: [4, 8, 16, 32]", "  DIM_X: [4, 8, 16]")
    changed = re.sub(r"\n  - \{name: nsg_small_tiles.*", "", changed)
    changed = changed.replace("source: gemm_batched.cuh", f"source: {ROOT / 'kernels_src' / 'gemm_batched.cuh'}")
    assert changed.count("DIM_X: [4, 8, 16]") == 1
    b = tmp_path / "b.yaml"
    b.write_text(changed)
    done = invoke_cli("--allow-path", str(ROOT), "space", "diff", "spaces/gemm_batched_simt.yaml", str(b))
    assert done.returncode == 1, done.stderr
    assert "DIM_X" in done.stdout and "removed 32" in done.stdout
    assert "nsg_small_tiles" in done.stdout
    assert "25,088,000" in done.stdout and "18,816,000" in done.stdout  # raw counts of A and B
    same = invoke_cli("space", "diff", "gemm_batched_simt", "spaces/gemm_batched_simt.yaml", "--no-counts")
    assert same.returncode == 0, same.stdout + same.stderr


def test_replicated_database(tmp_path: Path) -> None:
    from autotune.explore.data import load
    from autotune.explore.replicate import replicate

    source = ROOT / "results" / "tsm2_n16_h100" / "tsm2_n16_h100.sqlite.xz"
    n = replicate(str(source), tmp_path / "big.sqlite", copies=3)
    r0, r = load(str(source)), load(str(tmp_path / "big.sqlite"))
    assert n == 4 * len(r0.measurements) == len(r.measurements)
    assert len(r.points) == 4 * len(r0.points) and r.points["key"].is_unique
    with sqlite3.connect(tmp_path / "big.sqlite") as con:
        assert con.execute("SELECT value FROM schema_meta WHERE key = 'copies'").fetchone() == ("3",)


from pg import db_url, fresh_pg_url, record_sample, sqlite_url  # noqa: E402

FIXTURES = (db_url, fresh_pg_url, sqlite_url)  # pytest finds these fixtures by name in this module


def test_explore_and_studies_on_sqlite_and_postgresql(db_url: str) -> None:
    """The explorer reads through the store's engine: a PostgreSQL database works like an SQLite file (the sample
    sweep of tests/pg.py: 3 instances x 2 points, one wrong; string and float parameters)."""
    import optuna
    from autotune.explore.data import load
    from autotune.explore.report import build
    from autotune.explore.studies import studies
    from autotune.store.store import Store

    with Store.open(db_url) as store:
        record_sample(store)
    r = load(db_url)
    assert len(r.measurements) == 6 and (r.measurements["status"] == "ok").sum() == 5
    built = build(db_url)
    payload = _payload(built.page.render())
    keys = {f["key"] for f in payload["figures"]}
    assert {"roofline", "speedup", "param-gemm_test", "parcoords-gemm_test", "outcomes"} <= keys
    speed = next(f for f in payload["figures"] if f["key"] == "speedup")["data"][0]["y"]
    assert sorted(speed) == [2.0, 5.0]  # cuBLAS 2 ms and 5 ms against the best instance's 1 ms
    storage = optuna.storages.InMemoryStorage()
    names = studies(r, storage)
    assert len(names) == 2
    trials = [t for n in names for t in optuna.load_study(study_name=n, storage=storage).trials]
    assert sorted(t.state.name for t in trials) == ["COMPLETE"] * 5 + ["FAIL"]


def test_a_folder_of_several_databases_names_those_left_out(tmp_path: Path) -> None:
    from autotune.explore.report import build

    small = ROOT / "results" / "tsm2_n16_h100" / "tsm2_n16_h100.sqlite.xz"
    for name in ("a.sqlite.xz", "b.sqlite.xz"):
        (tmp_path / name).write_bytes(small.read_bytes())
    built = build(str(tmp_path))
    assert built.what.startswith("results; results of a.sqlite.xz only, not of b.sqlite.xz")


def test_table_point_keys_name_an_empty_shape_as_the_database_does() -> None:
    import pandas as pd

    from autotune.explore.page import Page
    from autotune.explore.tables import TableView
    from autotune.vocab import TestPoint

    frame = pd.read_csv(__import__("io").StringIO("precision,shape,rows,cols\nfp16,,4,2048\nfp32,NN,8,16\n"))
    view = TableView(Page("t"), {"size_names": ["rows", "cols"]}, "softmax", {}, ["rows", "cols"])
    keys = view.point_keys(frame, view.size_columns(frame))
    assert keys[0] == TestPoint("softmax", "fp16", "", (("rows", 4), ("cols", 2048))).key
    assert keys[1] == "softmax:fp32:NN:8x16"
