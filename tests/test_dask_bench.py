"""scripts/bench_dask.py on replay workers (no GPU): every variant measures the same pairs, the runs alternate, and
the summary pairs each Dask run with the single-process run of its repeat."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parent.parent


def _bench(monkeypatch: pytest.MonkeyPatch) -> object:
    spec = importlib.util.spec_from_file_location("bench_dask", ROOT / "scripts" / "bench_dask.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_dask", module)  # (dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def test_the_variants_alternate_and_measure_the_same_pairs(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autotune.store.packing import unpack

    # the workers (spawned: they get this sys.path) unpickle the script's replay factory by its module's name (run
    # as a script, it goes by value)
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))

    db = tmp_path / "rec.sqlite"
    unpack(ROOT / "examples" / "transpose" / "results" / "transpose_h100.sqlite.xz", db)
    bench = _bench(monkeypatch)
    runs = bench.main(  # type: ignore[attr-defined]
        [
            str(ROOT / "examples" / "transpose" / "sweep.yaml"),
            "--replay",
            f"sqlite:///{db}",
            "--workers",
            "1:1",
            "--repeat",
            "2",
            "--baseline-delay",
            "0.01",
            "--out",
            str(tmp_path / "out"),
            "--json",
            str(tmp_path / "bench.json"),
        ]
    )
    assert [r["name"] for r in runs] == ["one process", "dask 1:1", "one process", "dask 1:1"]
    assert {r["pairs"] for r in runs} == {156} and {r["status"] for r in runs} == {"done"}
    assert all(r["chunks"] == 1 for r in runs if r["name"] == "dask 1:1")  # one batch, one chunk per worker
    for r in runs:
        assert r["results_s"] + r["baseline_s"] + r["client_s"] == pytest.approx(r["seconds"])
        assert 0 < r["sweep_row_s"] < r["seconds"] and r["baseline_s"] >= 0.03  # 3 points x 10 ms
    rows = {row["name"]: row for row in bench.summarize(runs)}  # type: ignore[attr-defined]
    ratios = [d["seconds"] / o["seconds"] for o, d in zip(runs[::2], runs[1::2], strict=True)]
    assert rows["dask 1:1"]["vs_single"] == pytest.approx(sum(ratios) / 2)  # the median of two
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("dask 1:1")

    # scripts/scaleout_report.py on that bench: the JSON and plot of issue 59 (a replay: every winner the same)
    spec = importlib.util.spec_from_file_location("scaleout_report", ROOT / "scripts" / "scaleout_report.py")
    assert spec is not None and spec.loader is not None
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    out, png = tmp_path / "scaleout.json", tmp_path / "scaleout.png"
    args = [str(tmp_path / "bench.json"), "--dbs", str(tmp_path / "out"), "--kind", "replay", "--out", str(out)]
    data = report.main([*args, "--plot", str(png)])  # type: ignore[attr-defined]
    assert json.loads(out.read_text()) == data and png.read_bytes()[:4] == b"\x89PNG"
    got = {r["variant"]: r for r in data["rows"]}
    assert set(got) == {"one process", "dask 1:1"} and got["one process"]["speedup"] == 1.0
    assert got["dask 1:1"]["speedup"] == pytest.approx(rows["dask 1:1"]["pairs_s"] / rows["one process"]["pairs_s"])
    assert got["one process"]["predicted_speedup"] == 1.0 and got["dask 1:1"]["predicted_speedup"] > 0
    for r in data["rows"]:
        assert r["winners"]["points"] == r["winners"]["same_winner"] == 3, r
        assert r["measurements"] == 156 and r["model_error"] is not None
