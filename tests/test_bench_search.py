"""scripts/bench_search.py on a tiny Kernel Tuner cache (seconds), its pair sources and the methodology score."""

from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import search_pairs  # noqa: E402
import search_score  # noqa: E402

from tests.support.harness import KT_PYTHON  # noqa: E402


def tiny_cache(path: Path, failed: int = 3) -> Path:
    """A Kernel Tuner cache of 6 x 5 x 2 configurations, a smooth bowl, the first `failed` compile failures."""
    keys = ["block_size_x", "tile", "flag"]
    cache = {}
    for i, (bx, t, f) in enumerate(
        (bx, t, f) for bx in (16, 32, 64, 128, 256, 512) for t in (1, 2, 3, 4, 5) for f in (0, 1)
    ):
        e = {"block_size_x": bx, "tile": t, "flag": f}
        if i < failed:
            e["__error__"] = "CompilationFailedConfig"
        else:
            e["time"] = 1.0 + (np.log2(bx) - 6) ** 2 * 0.1 + (t - 3) ** 2 * 0.05 + 0.2 * f
        cache[f"{bx},{t},{f}"] = e
    doc = {
        "device_name": "Tiny GPU",
        "kernel_name": "tiny",
        "problem_size": [1024],
        "tune_params_keys": keys,
        "tune_params": {"block_size_x": [16, 32, 64, 128, 256, 512], "tile": [1, 2, 3, 4, 5], "flag": [0, 1]},
        "objective": "time",
        "cache": cache,
    }
    path.write_text(json.dumps(doc))
    return path


def test_a_cache_source_is_one_pair_of_every_configuration(tmp_path: Path) -> None:
    cache = tiny_cache(tmp_path / "tiny_T1.json")
    pairs = search_pairs.load_sources([str(cache)], tmp_path)
    assert len(pairs) == 1
    p = pairs[0]
    assert (p.space, p.device) == ("tiny", "T1")
    assert len(p.instances) == 60 and int(np.isnan(p.times).sum()) == 3  # failures are failures
    assert p.true_best == pytest.approx(1.0)
    assert p.kt_cache(tmp_path) == cache  # a cache pair is simulated on its own file


def test_a_database_pair_is_exactly_the_recorded_instances_and_exports_to_kernel_tuner(tmp_path: Path) -> None:
    cache = tiny_cache(tmp_path / "tiny_T1.json")
    (p,) = search_pairs.load_sources([str(cache)], tmp_path)
    (q,) = search_pairs.load_sources([p.db], tmp_path)  # the imported database as a database source
    assert {i.id for i in q.instances} == {i.id for i in p.instances}
    exported = json.loads(q.kt_cache(tmp_path).read_text())
    assert len(exported["cache"]) == 60


def test_bench_search_end_to_end_writes_every_budget(tmp_path: Path) -> None:
    cache = tiny_cache(tmp_path / "tiny_T1.json")
    out = tmp_path / "search.csv"
    kt = (
        ["--kt-seeds", "2", "--kt-strategies", "random_sample,greedy_ils", "--kt-python", str(KT_PYTHON)]
        if KT_PYTHON.exists()
        else ["--kt-seeds", "0"]
    )
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_search.py"),
            "--source",
            str(cache),
            "--min-size",
            "10",
            "--seeds",
            "2",
            "--strategies",
            "tpe,random",
            "--fractions",
            "0.1,0.5",
            "--out",
            str(out),
            "--no-plot",
            *kt,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert res.returncode == 0, res.stderr[-2000:]
    rows = list(csv.DictReader(out.open()))
    ours = [r for r in rows if r["tool"] == "autotune"]
    assert {(r["strategy"], r["evals"]) for r in ours} == {(s, e) for s in ("tpe", "random") for e in ("6", "30")}
    assert all(float(r["best_ms"]) >= float(r["true_best_ms"]) for r in rows)
    assert "| autotune | tpe |" in res.stdout
    pairs = list(csv.DictReader((tmp_path / "search.pairs.csv").open()))  # every pair on its own too
    assert {(r["strategy"], r["evals"], r["seeds"]) for r in pairs if r["tool"] == "autotune"} == {
        (s, e, "2") for s in ("tpe", "random") for e in ("6", "30")
    }
    if KT_PYTHON.exists():
        assert {r["strategy"] for r in rows if r["tool"] == "kerneltuner"} == {"random_sample", "greedy_ils"}


def test_methodology_score_is_one_for_the_oracle_and_negative_for_the_worst() -> None:
    rng = np.random.default_rng(0)
    dist = np.sort(rng.lognormal(0, 0.5, 2000))
    width = 400
    oracle = np.full((5, width), dist[0])
    worst = np.full((5, width), dist[-1])
    assert search_score.score([search_score.pair_score(oracle, dist)]) == pytest.approx(1.0)
    assert search_score.score([search_score.pair_score(worst, dist)]) < 0


def test_methodology_score_of_random_search_is_near_zero() -> None:
    rng = np.random.default_rng(1)
    dist = rng.lognormal(0, 0.5, 3000)
    traces = np.array([np.minimum.accumulate(rng.permutation(dist)) for _ in range(200)])
    assert abs(search_score.score([search_score.pair_score(traces, dist)])) < 0.1


@pytest.mark.skipif(importlib.util.find_spec("kernel_tuner") is not None, reason="runs in the main venv only")
def test_kt_driver_drops_copied_parameters() -> None:
    import kt_simulate

    doc = {
        "tune_params_keys": ["a", "a_copy", "b", "c1", "c2"],
        "cache": {
            f"{a},{a},{b},7,7": {"a": a, "a_copy": a, "b": b, "c1": 7, "c2": 7, "time": 1.0}
            for a in (1, 2)
            for b in (3, 4)
        },
    }
    out, keep = kt_simulate.reduced(doc)
    assert keep == ["a", "b", "c1", "c2"]  # a copy of a varying parameter goes; equal constants stay
    assert set(out["cache"]) == {f"{a},{b},7,7" for a in (1, 2) for b in (3, 4)}


def test_jobs_with_a_deadline_merge_into_one_csv_plot_and_provenance(tmp_path: Path) -> None:
    """Two jobs (other seeds) and one started past its deadline merge into one CSV, a summary and the provenance."""
    cache = tiny_cache(tmp_path / "tiny_T1.json")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "1"}
    jobs = tmp_path / "jobs"
    base = [
        sys.executable,
        str(ROOT / "scripts" / "bench_search.py"),
        "--source",
        str(cache),
        "--min-size",
        "10",
        "--strategies",
        "hybrid,random",
        "--fractions",
        "0.1,0.5",
        "--no-plot",
        "--kt-seeds",
        "0",
        "--seeds",
        "2",
    ]
    for first in (0, 2):
        res = subprocess.run(
            base + ["--first-seed", str(first), "--out", str(jobs / f"ours_{first}.csv")],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert res.returncode == 0, res.stderr[-2000:]
    late = subprocess.run(
        base + ["--deadline", "1", "--out", str(jobs / "late.csv")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert late.returncode == 0 and not (jobs / "late.csv").exists()
    (jobs / "host.txt").write_text("test host\n")
    prov = tmp_path / "PROV.md"
    prov.write_text("# head\n<!-- measured:begin -->\nold\n<!-- measured:end -->\ntail\n")
    out = tmp_path / "res" / "search.csv.gz"
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_search.py"),
            "--source",
            str(cache),
            "--min-size",
            "10",
            "--fractions",
            "0.1,0.5",
            "--merge",
            str(jobs),
            "--out",
            str(out),
            "--provenance",
            str(prov),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    import gzip

    rows = list(csv.DictReader(gzip.open(out, "rt")))
    assert {(r["strategy"], r["seed"]) for r in rows} == {(s, str(k)) for s in ("hybrid", "random") for k in range(4)}
    assert len(rows) == 2 * 4 * 2  # strategies x seeds x budgets
    text = prov.read_text()
    assert text.startswith("# head\n") and text.endswith("tail\n") and "old" not in text
    assert "| autotune | hybrid |" in text and "test host" in text and "1 pairs, 4 seeds" in text
    assert (tmp_path / "res" / "search.png").exists() and (tmp_path / "res" / "search.summary.md").exists()


def test_merge_reads_scores_back_from_an_earlier_summary(tmp_path: Path) -> None:
    """--scores-from: the score column of a summary written by --merge, per (tool, strategy); '-' is no score."""
    import bench_search

    table = bench_search.summary(
        [("kerneltuner", "pso", "s", "p", 0, 100, b, 1.5, 1.0, "d") for b in (1, 2, 5, 10, 20)],
        {("kerneltuner", "pso"): 0.113},
        {("kerneltuner", "pso"): "1 pairs, 1 seeds"},
    )
    path = tmp_path / "summary.md"
    path.write_text(table + "\n| autotune | tpe | 0.1 / 0.2 | - | - | - | - | - | 22 pairs, 10 seeds |\n")
    assert bench_search.scores_of_summary(path) == {("kerneltuner", "pso"): 0.113}


def test_replay_stops_at_the_target_and_is_a_prefix_of_the_full_run(tmp_path: Path) -> None:
    """search_pairs.replay, shared by bench_search.py and bench_search_transfer.py: `until_ms` cuts the same run."""
    (p,) = search_pairs.load_sources([str(tiny_cache(tmp_path / "tiny_T1.json"))], tmp_path)
    full = search_pairs.replay(p, "hybrid", 60, 3)
    assert len(full.trace) == 60 and full.trace[-1] == pytest.approx(p.true_best)  # the whole space: its best
    assert len(full.measured) == 57  # the three failures are not verified instances
    target = p.true_best * 1.05
    cut = search_pairs.replay(p, "hybrid", 60, 3, until_ms=target)
    n = int(np.argmax(full.trace <= target)) + 1  # the first evaluation within 5%
    assert len(cut.trace) == n and np.array_equal(cut.trace, full.trace[:n])
    ranked = full.ranked()
    assert [m for m, _ in sorted(full.measured, key=lambda x: x[0])][0] == pytest.approx(p.true_best)
    started = search_pairs.replay(p, "hybrid", 5, 3, start=ranked[:2])  # transfer: the start instances first
    assert started.trace[0] == pytest.approx(p.true_best)
    with pytest.raises(SystemExit, match="takes no options"):
        search_pairs.replay(p, "random", 5, 0, start=ranked[:1])


@pytest.mark.skipif(not KT_PYTHON.exists(), reason="needs Kernel Tuner (AUTOTUNE_KT_PYTHON or .venv-kt)")
def test_kt_fast_mode_changes_no_decision(tmp_path: Path) -> None:
    """kt_simulate.py --fast (cache parsed once, no eager debug formatting) against Kernel Tuner untouched: the same
    configurations in the same order for every strategy and seed, on two caches in one process (diff_evo is left
    out: its Latin hypercube start is not reproducible from the seed either way)."""
    caches = [str(tiny_cache(tmp_path / "a_T1.json")), str(tiny_cache(tmp_path / "b_T2.json", failed=7))]
    strategies = "genetic_algorithm,simulated_annealing,pso,firefly_algorithm,greedy_ils,mls,basinhopping"
    got = {}
    for mode in ("--fast", "--no-fast"):
        out = tmp_path / f"{mode}.json"
        res = subprocess.run(
            [str(KT_PYTHON), str(ROOT / "scripts" / "kt_simulate.py"), *caches, "--strategies", strategies]
            + ["--seeds", "0-1", "--max-fevals", "20,30", mode, "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert res.returncode == 0, res.stderr[-2000:]
        got[mode] = json.loads(out.read_text())["caches"]
    fast, slow = got["--fast"], got["--no-fast"]
    assert len(fast[0]["patched"]) == 2 and slow[0]["patched"] == []
    assert [c["max_fevals"] for c in fast] == [20, 30]
    for f, s in zip(fast, slow, strict=True):
        assert not f["failed"] and set(f["runs"]) == set(strategies.split(","))
        for strategy, runs in f["runs"].items():
            for seed, run in runs.items():
                assert run["order"] == s["runs"][strategy][seed]["order"], (strategy, seed)
                assert len(run["order"]) <= f["max_fevals"]


def test_per_pair_figures_rank_the_strategies_and_name_the_worst_pair(tmp_path: Path) -> None:
    """search_report: per pair and budget, median / p90 over seeds and the rank among the pair's strategies (equal
    figures share a rank); the worst pair is the one with the highest p90, which pooling over pairs hides."""
    import search_report

    rows = []
    for seed in range(10):  # pair A (100 instances): s1 always 0, s2 0.1; pair B: s1 0.5 in one seed of ten, s2 0.2
        rows += [
            ("autotune", "s1", "A", "p", seed, 100, 5, 1.0, 1.0, "d"),
            ("kt", "s2", "A", "p", seed, 100, 5, 1.1, 1.0, "d"),
        ]
        rows += [
            ("autotune", "s1", "B", "p", seed, 200, 10, 3.0 if seed == 9 else 2.0, 2.0, "d"),
            ("kt", "s2", "B", "p", seed, 200, 10, 2.4, 2.0, "d"),
            ("autotune", "s3", "B", "p", seed, 200, 10, 2.4, 2.0, "d"),
        ]
    rows.append(("autotune", "s1", "A", "p", 0, 100, 7, 1.0, 1.0, "d"))  # 7 evaluations: no budget of the list
    table = search_report.per_pair(rows, [0.05])
    got = {
        (r["space"], r["strategy"]): (r["seeds"], round(r["median"], 4), round(r["p90"], 4), r["rank"]) for r in table
    }
    assert got == {
        ("A", "s1"): (10, 0.0, 0.0, 1),
        ("A", "s2"): (10, 0.1, 0.1, 2),
        ("B", "s1"): (10, 0.0, 0.05, 1),  # p90 between the 9th and 10th seed: 0.05
        ("B", "s2"): (10, 0.2, 0.2, 2),
        ("B", "s3"): (10, 0.2, 0.2, 2),  # the same figures: the same rank
    }
    (s1,) = [s for s in search_report.worst_pairs(table) if s["strategy"] == "s1"]
    assert s1["worst"]["space"] == "B" and s1["pairs"] == 2 and s1["first"] == 2
    merged, replaced, changed = search_report.overlay(
        rows, [("kt", "s2", "A", "p", 0, 100, 5, 1.1, 1.0, "d"), ("kt", "s2", "A", "p", 1, 100, 5, 1.3, 1.0, "d")]
    )
    assert (len(merged), replaced, changed) == (len(rows), 2, 1)
    out = tmp_path / "run" / "search.csv"
    out.parent.mkdir()
    with out.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            ["tool", "strategy", "space", "point", "seed", "space_size", "evals", "best_ms", "true_best_ms", "device"]
        )
        w.writerows(rows)
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_search.py"),
            "--per-pair",
            str(out),
            "--fractions",
            "0.05",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert res.returncode == 0, res.stderr[-2000:]
    written = list(csv.DictReader((tmp_path / "run" / "search.pairs.csv").open()))
    assert len(written) == 5 and {r["rank"] for r in written if r["space"] == "B" and r["strategy"] != "s1"} == {"2"}
    assert "| 5% | autotune | s1 | 2 |" in res.stdout and "B d p: 0.0000 / 0.0500" in res.stdout
    assert (tmp_path / "run" / "search.pairs.png").stat().st_size > 1000
