"""A selection-model table of a kind other than GEMM validates at held-out problems, on the CPU: the softmax
example's table is rebuilt with `--structure model:0` from its recorded H100 sweep (4 tuned points) and validated at
40 problems it was never tuned on (the first rows of the example's committed validation, measured on an H100); the
replay backend answers from the committed validation database, then from the new validation database alone, byte
for byte; and the issue's figures (scripts/bench_tables.py) come out for a kind that is not built in."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from autotune.dispatch import validate as v
from autotune.dispatch.figures import validated_figures
from autotune.space.spec import load_space
from tests.support.committed import gunzip_to
from tests.support.harness import invoke_cli, load_script

ROOT = Path(__file__).resolve().parents[1]
SOFTMAX = ROOT / "examples" / "softmax"
SPACE = SOFTMAX / "space.yaml"


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`autotune ARGS` from `cwd`, in this process (the commands are what is tested, not a process's start)."""
    return invoke_cli(*args, cwd=cwd)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("softmax_model")
    gunzip_to(SOFTMAX / "results" / "softmax_h100.sqlite.xz", work / "tuning.sqlite")
    gunzip_to(SOFTMAX / "results" / "validation" / "validation.sqlite.xz", work / "recorded.sqlite")
    r = cli(work, "emit", "tuning.sqlite", "-f", "json", "--structure", "model:0", "-o", "dispatch.json")
    assert r.returncode == 0, r.stdout + r.stderr
    held = pd.read_csv(SOFTMAX / "results" / "validation" / "validation.csv")[["rows", "cols"]].head(40)
    held.to_csv(work / "points.csv", index=False)
    return work


def validate(work: Path, out: str, replay: str) -> Path:
    args = ["validate", "dispatch.json", "--db", "tuning.sqlite", "--points", "points.csv", "--space", str(SPACE)]
    r = cli(work, *args, "--pool-bk", "3", "--replay", replay, "--out", out, "--quiet")
    assert r.returncode == 0, r.stdout + r.stderr
    return work / out


def test_softmax_model_table_validates_at_held_out_problems(work: Path) -> None:
    table = v.read_table(work / "dispatch.json")
    assert table.data["structure"]["mode"] == "model" and table.data.get("model")
    kind = load_space(SPACE).kind
    tuned = v.tuned_keys(table, kind)
    out = validate(work, "out1", "recorded.sqlite")
    frame = pd.read_csv(out / "validation.csv", keep_default_na=False, na_values=[""])
    assert len(frame) == 40 and frame["table_ms"].notna().all() and frame["baseline_ms"].notna().all()
    for r in frame.itertuples():
        assert ("fp32", "", int(r.rows), int(r.cols)) not in tuned  # held out: never tuned
        assert r.table_choice == table.answer(kind.point("fp32", "", {"rows": int(r.rows), "cols": int(r.cols)}))
        assert r.loss_vs_best == pytest.approx(max(0.0, 1 - r.best_ms / r.table_ms), abs=1e-8)
    summary = json.loads((out / "validation_summary.json").read_text())
    assert summary["provenance"]["kind"] == "softmax" and summary["summary"][-1]["measured"] == 40
    again = validate(work, "out2", str(out / "validation.sqlite"))
    assert (again / "validation.csv").read_bytes() == (out / "validation.csv").read_bytes()
    figs = validated_figures(work / "dispatch.json", out, spaces=(SPACE,))
    assert figs.problems == 40 and figs.not_measured == 0 and figs.kernels == len(table.kernels)
    assert figs.oracle_worst <= figs.worst + 1e-12


def test_bench_tables_names_the_space_of_a_kind_that_is_not_built_in(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """scripts/bench_tables.py (its main, in this process) names --space for a kind that is not built in."""
    out = validate(work, "out3", "recorded.sqlite")
    monkeypatch.chdir(work)
    main = load_script("bench_tables").main
    capsys.readouterr()
    main(["dispatch.json", str(out)])
    stdout = capsys.readouterr().out
    assert "not built in" in stdout and "--space" in stdout
    code = main(["dispatch.json", str(out), "--space", str(SPACE)])
    stdout = capsys.readouterr().out
    assert code == 0 and "40 held-out problems" in stdout, stdout
