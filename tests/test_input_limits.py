"""Limits checked before work for every input that scales, the knob named in the error."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.errors import ConfigError
from autotune.sweep.workloads.workload_files import load_workload

FIVE_RANGES = """kind: gemm
ranges:
  - precisions: [fp32]
    shapes: [NN]
    sizes: {m: {from: 1, to: 100000}, n: {from: 1, to: 100000}, k: {from: 1, to: 100000}}
"""


def test_huge_ranges_refused_at_once(tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(FIVE_RANGES)
    start = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        load_workload(f)
    assert time.perf_counter() - start < 1.0
    assert err.value.line == 3 and "1,000,000,000,000,000 problems" in err.value.message
    assert "--max-problems" in str(err.value) and "AUTOTUNE_MAX_PROBLEMS" in str(err.value)


def test_range_limit_is_a_knob(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(
        "ranges:\n  - precisions: [fp32]\n    sizes: {m: [8, 16], n: {from: 8, to: 64, step: 8}, k: {pow2: [2, 16]}}\n"
    )  # 2 * 8 * 4 = 64 problems
    assert len(load_workload(f, limit=64).problems) == 64
    with pytest.raises(ConfigError, match="64 problems, above the limit of 63"):
        load_workload(f, limit=63)
    monkeypatch.setenv("AUTOTUNE_MAX_PROBLEMS", "10")
    r = CliRunner().invoke(app, ["workload", "show", str(f)])
    assert r.exit_code == 2 and "above the limit of 10" in r.output
    r = CliRunner().invoke(app, ["workload", "show", str(f), "--max-problems", "64"])
    assert r.exit_code == 0, r.output


def test_csv_rows_refused_before_reading(tmp_path: Path) -> None:
    f = tmp_path / "w.csv"
    f.write_text("precision,shape,m,n,k,weight\n" + "fp32,NN,8,8,8,1\n" * 5)
    assert len(load_workload(f, limit=5).problems) == 1
    r = CliRunner().invoke(app, ["workload", "show", str(f), "--max-problems", "4"])
    assert r.exit_code == 2 and "5 problems" in r.output and "--max-problems" in r.output


RECURSIVE = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT * FROM c"


def _empty_db(tmp_path: Path) -> str:
    from autotune.store.store import Store

    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    with Store.open(url):
        pass
    return url


def test_query_time_limit_names_the_knob(tmp_path: Path) -> None:
    url = _empty_db(tmp_path)
    start = time.perf_counter()
    r = CliRunner().invoke(
        app,
        ["query", "--db", url, "--timeout", "0.5", RECURSIVE.replace("FROM c)", "FROM c) SELECT count(*) FROM c --")],
    )
    assert r.exit_code == 2 and "time limit of 0.5 s" in r.output and "--timeout" in r.output, r.output
    assert time.perf_counter() - start < 10


def test_query_prints_at_most_max_rows(tmp_path: Path) -> None:
    url = _empty_db(tmp_path)
    r = CliRunner().invoke(app, ["query", "--db", url, "--max-rows", "3", RECURSIVE])
    assert r.exit_code == 0 and r.stdout.split() == ["x", "1", "2", "3"], r.output
    assert "--max-rows" in r.output


@pytest.mark.parametrize("fmt", ["table", "csv"])
def test_query_bounds_the_bytes_it_prints(tmp_path: Path, fmt: str) -> None:
    """--max-rows did not bound bytes: one 20 MB value (or a table padding every row to it) was printed whole."""
    from tests.support.harness import invoke_cli as run_cli

    url = _empty_db(tmp_path)
    huge = "SELECT 1 AS id, hex(randomblob(10000000)) AS blob UNION ALL SELECT 2, 'small'"
    r = run_cli("query", "--db", url, "-f", fmt, "--max-bytes", "100000", huge, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.encode()) <= 100_000 and r.stdout.endswith("\n"), len(r.stdout)
    assert "…" in r.stdout and "small" in r.stdout, r.stdout[-200:]  # the long value cut, the next row kept
    assert "1 values cut" in r.stderr and "--max-bytes" in r.stderr
    many = RECURSIVE.replace("SELECT * FROM c", "SELECT x, hex(zeroblob(1000)) AS y FROM c")  # 2,000 bytes a row
    r = run_cli("query", "--db", url, "-f", fmt, "--max-rows", "1000", "--max-bytes", "50000", many, cwd=tmp_path)
    assert r.returncode == 0 and 40_000 < len(r.stdout.encode()) <= 50_000, (len(r.stdout), r.stderr)
    assert "more rows left out" in r.stderr
    nulls = RECURSIVE.replace("SELECT * FROM c", "SELECT x, NULL AS y FROM c LIMIT 30")  # no length: not "too long"
    r = run_cli("query", "--db", url, "-f", fmt, nulls, cwd=tmp_path)
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 31 and "note" not in r.stderr, r.stderr
    r = run_cli("query", "--db", url, "-f", fmt, "SELECT 1 AS a, 'x' AS b", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.split() == (["a", "b", "1", "x"] if fmt == "table" else ["a,b", "1,x"])
    assert "note" not in r.stderr


def test_workload_config_refuses_too_many_pairs(tmp_path: Path) -> None:
    wl = tmp_path / "w.yaml"
    wl.write_text("ranges:\n  - precisions: [fp32]\n    sizes: {m: [8, 16], n: [8], k: [8]}\n")
    out = tmp_path / "s.yaml"
    args = ["workload", "config", str(wl), "--space", "gemm_naive", "--out", str(out)]
    r = CliRunner().invoke(app, [*args, "--max-pairs", "1"])
    assert r.exit_code == 2 and "above the limit of 1;" in r.output and "--force" in r.output, r.output
    assert "--max-pairs" in r.output and not out.exists()
    r = CliRunner().invoke(app, [*args, "--max-pairs", "1", "--force"])
    assert r.exit_code == 0 and "(instance, point) pairs" in r.output and out.exists(), r.output


@pytest.mark.parametrize("fmt", ["table", "csv"])
def test_query_prints_columns_that_share_a_name(tmp_path: Path, fmt: str) -> None:
    """SQL may name two columns alike (`SELECT p.n, COUNT(*) n`): the byte bound read columns by name and got a
    frame for each (AttributeError traceback, seen on a seed sweep's database); a long value of one is still cut."""
    url = _empty_db(tmp_path)
    r = CliRunner().invoke(app, ["query", "--db", url, "-f", fmt, "SELECT 16 AS n, 1280 AS n, 15 AS ok"])
    assert r.exit_code == 0, r.output
    assert r.stdout.split() == (["n", "n", "ok", "16", "1280", "15"] if fmt == "table" else ["n,n,ok", "16,1280,15"])
    long = "SELECT 1 AS n, hex(zeroblob(100000)) AS n"
    r = CliRunner().invoke(app, ["query", "--db", url, "-f", fmt, "--max-bytes", "10000", long])
    assert r.exit_code == 0 and len(r.stdout.encode()) <= 10_000 and "…" in r.stdout, r.output[-300:]
