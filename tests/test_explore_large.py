"""The issue's performance figures for `autotune explore` on a database of 10^6 measurements (a committed
database's measurements replayed onto 73x its test points, `autotune.explore.replicate`): written in under 30 s,
under 20 MB. About a minute on a 2-core machine, so it runs when AUTOTUNE_EXPLORE_LARGE=1 (not in CI's default run).
The report is made by one thread: its CPU time is what it takes on an idle machine, and is what is checked (the wall
clock of a machine shared with other work is printed beside it)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.support.harness import ROOT

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("AUTOTUNE_EXPLORE_LARGE"), reason="set AUTOTUNE_EXPLORE_LARGE=1 (about a minute)"
    ),
]


def test_a_million_measurements_report(tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    from autotune.explore.replicate import replicate
    from autotune.explore.report import build

    n = replicate(str(ROOT / "results" / "tc_final_h100" / "tc_final_h100.sqlite.xz"), tmp_path / "big.sqlite", 72)
    assert n >= 10**6
    start, cpu = time.perf_counter(), time.process_time()
    built = build(str(tmp_path / "big.sqlite"))
    html = built.page.render()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    (tmp_path / "big.html").write_text(html)
    size = len(html.encode())
    print(
        f"{n:,} measurements: {cpu:.1f} s CPU, {seconds:.1f} s wall (load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores), {size / 1e6:.1f} MB"
    )
    assert cpu < 30 and size < 20e6
