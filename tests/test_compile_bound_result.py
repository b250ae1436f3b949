"""The committed whole-space run of the compile-bound convolution (results/bench/compile_bound_whole_h100/, issue 31),
replayed on a CPU: the database holds every configuration of the script's space exactly once, its calls add up to
the whole space without a gap, each call's sweep fits in the call's recorded time, and `--report` prints the
figure the PROVENANCE quotes."""

from __future__ import annotations

import csv
import importlib.util
import itertools
import json
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest

from autotune.store.packing import unpack

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "results" / "bench" / "compile_bound_whole_h100"


def _script(name: str = "bench_compile_bound"):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> sqlite3.Connection:
    plain = tmp_path_factory.mktemp("cb") / "convolution.sqlite"
    unpack(RESULT / "convolution.sqlite.xz", plain)
    return sqlite3.connect(plain)


def _calls() -> list[dict]:
    return list(csv.DictReader((RESULT / "calls.csv").open()))


def test_every_configuration_of_the_space_is_recorded_once(db) -> None:
    mod = _script()
    p = mod.tune_params()
    space = set()
    for values in itertools.product(*p.values()):
        c = dict(zip(p, values, strict=True))
        if all(eval(r, {}, dict(c)) for r in mod.RESTRICTIONS):  # noqa: S307 - the script's own expressions
            space.add(tuple(sorted(c.items())))
    assert len(space) == mod.space_size() == 7296
    recorded = [
        tuple(sorted((k, v) for k, v in json.loads(params).items() if k in p))
        for (params,) in db.execute("SELECT i.params FROM measurements m JOIN instances i ON i.id = m.instance_id")
    ]
    assert len(recorded) == len(set(recorded)) == 7296
    assert set(recorded) == space


def test_the_calls_cover_the_space_without_a_gap_within_the_hour() -> None:
    calls = _calls()
    assert int(calls[0]["done_before"]) == 0 and int(calls[-1]["done_after"]) == 7296
    for a, b in itertools.pairwise(calls):
        assert a["done_after"] == b["done_before"]
    assert {c["gpu"] for c in calls} == {"NVIDIA H100 80GB HBM3"} and {c["cores"] for c in calls} == {"16"}
    assert sum(float(c["call_s"]) for c in calls) <= 3600


def test_each_sweep_fits_in_its_call(db) -> None:
    """One sweep per call, in order; a sweep runs inside its tune_kernel call (the call also builds the space)."""
    sweeps = db.execute("SELECT started_at, finished_at, status FROM sweeps ORDER BY id").fetchall()
    calls = _calls()
    assert len(sweeps) == len(calls)
    for (start, end, status), call in zip(sweeps, calls, strict=True):
        span = (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
        assert float(call["call_s"]) - 10 <= span <= float(call["call_s"])
        assert status == "budget" or call is calls[-1]
    per_sweep = dict(db.execute("SELECT sweep_id, count(*) FROM measurements GROUP BY sweep_id").fetchall())
    assert [per_sweep[i] for i in sorted(per_sweep)] == [int(c["done_after"]) - int(c["done_before"]) for c in calls]


def test_report_prints_the_committed_figure(capsys) -> None:
    _script().report(f"sqlite:///{RESULT / 'convolution.sqlite.xz'}", RESULT / "calls.csv")
    out = capsys.readouterr().out
    assert "recorded 7296" in out
    assert "whole space: 34.8 min of calls (target: at most 60)" in out
    assert "34.8 min" in (RESULT / "PROVENANCE.md").read_text()


def test_relative_paths_names_tune_kernels_scratch_folder_without_its_random_part() -> None:
    mod = _script("relative_result_paths")
    assert mod.relative("/tmp/kt_convolution_kernel_c0h4xxqa/space.yaml") == "kt_convolution_kernel/space.yaml"
    assert mod.relative('"check": "/tmp/kt_sum_floats_a_b1c2d3/kt_check.py:check"') == (
        '"check": "kt_sum_floats/kt_check.py:check"'
    )
    assert mod.relative("/tmp/other/space.yaml") == "/tmp/other/space.yaml"  # not tune_kernel's: left, reported
