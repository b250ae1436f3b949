"""The fast lookup (issue 55 item 3) answers as the integer definition does: `ilog2_fx` equals the loop the C++
header runs on every x up to 2**17 and on random x up to 2**62, and the generated header (g++ -O2) and the generated
module (`python -I -S`) agree on every one of thousands of random problems per structure
(scripts/bench_lookup.py, the benchmark that times them)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from autotune.dispatch.features import _ilog2_loop, ilog2_fx
from tests.support.harness import load_script

ROOT = Path(__file__).resolve().parents[1]
bench = load_script("bench_lookup")


def test_ilog2_fx_is_the_integer_loop() -> None:
    assert [ilog2_fx(x) for x in range(1, 1 << 17)] == [_ilog2_loop(x) for x in range(1, 1 << 17)]
    rng = random.Random(55)
    xs = [rng.randrange(1, 1 << rng.randrange(1, 63)) for _ in range(50_000)] + [(1 << 62) - 1, (1 << 31) - 1]
    assert [ilog2_fx(x) for x in xs] == [_ilog2_loop(x) for x in xs]


@pytest.mark.parametrize(
    "table",
    [
        "results/small_tables_h100/model/dispatch.json",  # model
        "results/tc_final_h100/dispatch.json",  # cost
        "results/tables5_h100/softmax/active/seed/dispatch.json",  # nearest
        "results/fp16_tables_h100/dispatch.json",  # regions
    ],
)
def test_cpp_and_python_lookups_agree_on_random_problems(tmp_path: Path, table: str) -> None:
    if shutil.which("g++") is None:
        pytest.skip("g++ not found")
    report = bench.bench_table(ROOT / table, 3000, 7, tmp_path, "g++", 2)
    assert report["queries"] == 3000
    assert report["agree"] == 3000
    assert report["cpp"]["p50_us"] > 0 and report["python"]["p50_us"] > 0
    assert report["cpp"]["clock_ns"] >= 0 and report["python"]["clock_ns"] >= 0  # the clocks' own cost
    for side in ("cpp", "python"):  # per problem the fastest of 2 passes: no slower than the last pass alone
        assert 0 < report[f"{side}_best_of_passes"]["p50_us"] <= report[side]["p50_us"]
