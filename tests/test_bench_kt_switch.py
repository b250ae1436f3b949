"""scripts/bench_kt_switch.py without a GPU: the comparison of two runs, Kernel Tuner's cache read after a stop, the
screening verdict, and --dry-run (both tools' search spaces from Kernel Tuner's own unchanged example scripts have
the same size; needs a Python with Kernel Tuner 1.5 and autotune's dependencies: AUTOTUNE_KT_PYTHON)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.harness import KT_PYTHON

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "bench_kt_switch.py"
spec = importlib.util.spec_from_file_location("bench_kt_switch", SCRIPT)
bench = importlib.util.module_from_spec(spec)
sys.modules["bench_kt_switch"] = bench  # its dataclasses look their module up
spec.loader.exec_module(bench)


def _run(side: str, times: dict[int, float | None], wall: float, first: float = 1.0, space: int = 4):
    r = bench.Run("k", side, process_wall_s=wall, call_wall_s=wall - 1, space_size=space)
    r.results = [
        {
            "params": {"b": b},
            "time": t,
            "error": None if t else "CompilationFailedConfig",
            "timestamp": None,
            "compile_ms": 500.0,
        }
        for b, t in times.items()
    ]
    r.configs, r.ok = len(times), sum(1 for t in times.values() if t)
    r.configs_per_s = r.configs / wall
    ok = {b: t for b, t in times.items() if t}
    r.best_config, r.best_time_ms = {"b": min(ok, key=ok.get)}, min(ok.values())
    r.first_measurement_process_s = first
    return r


def test_the_comparison_joins_the_same_configurations_and_checks_the_targets() -> None:
    kt = _run("kt", {32: 2.0, 64: 1.0, 128: None}, wall=30.0)
    ours = _run("ours", {32: 1.9, 64: 1.01, 128: None, 256: 3.0}, wall=2.0)
    row, same = bench.compare("k", kt, ours)
    assert [s["p_b"] for s in same] == [32, 64] and same[0]["ratio"] == pytest.approx(0.95)
    assert row["ratio"] == pytest.approx((4 / 2.0) / (3 / 30.0)) and row["target"] == 3.0 and row["ratio_ok"]
    assert row["best_ratio"] == pytest.approx(1.01) and row["best_ok"]  # within the 2% noise margin
    assert row["kt_time_of_ours_best_ms"] == 1.0 and row["ours_complete"] and not row["kt_complete"]
    slow = _run("ours", {32: 1.9, 64: 1.1}, wall=25.0, space=600)
    row, _ = bench.compare("k", kt, slow)
    assert row["target"] == 10.0 and not row["ratio_ok"] and not row["best_ok"]
    assert "met on every case: NO" in bench.table([row]) and "k" in bench.table([row]).splitlines()[2]


def test_screening_says_whether_a_two_stage_compile_keeps_the_winner() -> None:
    full = _run("ours", {32: 2.0, 64: 1.0, 128: 1.5}, wall=10.0)
    same = bench.screening(full, _run("ours", {32: 4.0, 64: 2.0, 128: 3.5}, wall=5.0))
    assert same["screen_same_best"] and same["two_stage_loss"] == 0.0 and same["full_best_rank_in_screen"] == 1
    other = bench.screening(full, _run("ours", {32: 4.0, 64: 3.0, 128: 2.0}, wall=5.0))
    assert not other["screen_same_best"] and other["two_stage_loss"] == pytest.approx(0.5)
    assert other["full_best_rank_in_screen"] == 2


def test_kernel_tuners_cache_left_open_by_a_stop_is_read() -> None:
    keys, results = bench.kt_cache_results(ROOT / "tests" / "data" / "kerneltuner" / "matmul_cache_open.json", None)
    assert keys[:2] == ["block_size_x", "block_size_y"] and len(results) == 48
    assert sum(1 for r in results if r["time"] is None) == 10 and all(r["params"] for r in results)


@pytest.mark.skipif(not KT_PYTHON.exists(), reason=f"no Kernel Tuner Python at {KT_PYTHON} (AUTOTUNE_KT_PYTHON)")
def test_dry_run_builds_the_same_space_as_kernel_tuner(tmp_path: Path) -> None:
    out = subprocess.run(
        [str(KT_PYTHON), str(SCRIPT), "--dry-run", "--cases", "stencil,expdist", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert any(ln.startswith("stencil") and "Kernel Tuner     31  ours     31  same" in ln for ln in lines), lines
    assert any(ln.startswith("expdist") and "Kernel Tuner    640  ours    640  same" in ln for ln in lines), lines


def test_help_explains_the_benchmark() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--dry-run" in out.stdout and "--compile-modes" in out.stdout


def test_the_same_work_figure_times_kernel_tuners_configurations_on_both_sides() -> None:
    """ratio_same_work: Kernel Tuner's process seconds to its last configuration over ours to the same ones (a side
    that went further into a space is not charged for the configurations the other never reached)."""
    from datetime import datetime, timezone

    def stamped(side: str, done_at: dict[int, float], spawn: float) -> bench.Run:
        r = _run(side, {b: 1.0 for b in done_at}, wall=30.0)
        for x in r.results:
            x["timestamp"] = datetime.fromtimestamp(spawn + done_at[x["params"]["b"]], timezone.utc).isoformat()
        r.spawn_epoch = spawn
        return r

    kt = stamped("kt", {32: 10.0, 64: 20.0}, spawn=1000.0)
    ours = stamped("ours", {32: 3.0, 64: 4.0, 128: 9.0}, spawn=5000.0)
    assert bench.done_by(kt, {(("b", 32.0),), (("b", 64.0),)}) == pytest.approx(20.0)
    row, _ = bench.compare("k", kt, ours)
    assert row["kt_set_kt_s"] == pytest.approx(20.0) and row["kt_set_ours_s"] == pytest.approx(4.0)
    assert row["ratio_same_work"] == pytest.approx(5.0)
    missing = stamped("ours", {32: 3.0}, spawn=5000.0)  # ours never measured 64: no figure
    assert bench.compare("k", kt, missing)[0]["ratio_same_work"] is None


def test_the_provenance_names_the_autotune_switches_the_runs_inherit() -> None:
    env = {"AUTOTUNE_COMPILE_TWINS": "1", "AUTOTUNE_GIT_COMMIT": "abc", "PATH": "/bin", "AUTOTUNE_COMPILE_NICE": "0"}
    assert bench.settings(env) == {"AUTOTUNE_COMPILE_NICE": "0", "AUTOTUNE_COMPILE_TWINS": "1"}
