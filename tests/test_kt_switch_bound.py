"""scripts/kt_switch_bound.py: the compile-bound ceiling of a capped benchmark case, on a run whose numbers are known
by construction, and on the committed kt7 run (the convolution's 10x is out of reach on its host)."""

from __future__ import annotations

import importlib.util
import json
import lzma
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("kt_switch_bound", ROOT / "scripts" / "kt_switch_bound.py")
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
bound, load, main = _module.bound, _module.load, _module.main


def _case(compile_ms: list[float], space: int, configs: int | None = None) -> dict:
    return {
        "runs": {
            "ours": {
                "configs": configs if configs is not None else len(compile_ms),
                "space_size": space,
                "process_wall_s": 12.0,
                "timeline": {"backend.first_submit": 1.0, "call.sweep_done": 11.0},
            },
            "kt": {"configs": 2, "process_wall_s": 10.0},
        },
        "results": {"ours": [{"compile_ms": c} for c in compile_ms], "kt": [{}, {}]},
    }


def test_the_bound_of_a_capped_case() -> None:
    b = bound(_case([1000, 1000, 2000, 2000], space=1000), workers=2, tail=2)
    assert b is not None
    # capacity 2 x 10 s = 20 s, 6 s compiled; the rest at 2 s each: 4 + 7 configurations
    assert b["busy"] == pytest.approx(0.3) and b["bound"] == pytest.approx(11.0)
    kt_rate = 2 / 10.0
    assert b["ratio"] == pytest.approx(4 / 12.0 / kt_rate) and b["ratio_max"] == pytest.approx(11 / 12.0 / kt_rate)
    assert b["target"] == 10.0 and b["needed"] == pytest.approx(10 * kt_rate * 12.0)
    small = bound(_case([1000, 1000, 2000, 2000], space=40), workers=2, tail=2)
    assert small is not None and small["target"] == 3.0


def test_a_complete_case_or_one_without_compile_times_has_no_bound() -> None:
    assert bound(_case([1000, 1000], space=2), workers=2, tail=2) is None
    assert bound(_case([], space=1000, configs=5), workers=2, tail=2) is None


def test_the_committed_kt7_convolution_cannot_reach_10x_on_its_host(capsys, tmp_path) -> None:
    path = ROOT / "results/bench/kt_switch_h100_kt7.json.xz"
    data = load(path)
    b = bound(data["cases"]["convolution"], workers=15, tail=10)
    assert b is not None and b["ratio"] <= b["ratio_max"] < b["target"] and b["bound"] < b["needed"]
    assert main([str(path)]) == 0
    assert "convolution" in capsys.readouterr().out
    plain = tmp_path / "run.json"
    plain.write_text(json.dumps(json.loads(lzma.decompress(path.read_bytes()))))
    assert load(plain)["cases"].keys() == data["cases"].keys()
    (tmp_path / "other.json").write_text("{}")
    with pytest.raises(SystemExit, match="not a bench_kt_switch.py JSON"):
        load(tmp_path / "other.json")


def test_the_split_of_the_compile_processes_time() -> None:
    """Two processes over the span 1..11 s (capacity 20 s): A ready at 1.5 s, B spawned at 3 s (the pool grew), ready
    at 4 s; A compiles 1.5-5.5 (ok) and 6-11.5 (cancelled at the end: cut to 11), B waits 4-4.5 (later), compiles
    5-9 (error) and 9-10 (killed: B is gone from 10 s, its replacement never ready)."""
    case = _case([1000], space=1000)
    case["runs"]["ours"]["compile_profile"] = {
        "starts": [[1, 0.5, 1.5], [2, 3.0, 4.0], [3, 10.0, None]],  # 3: B's replacement, never ready
        "calls": [
            [1.5, 5.5, 1, "ok"],
            [6.0, 11.5, 1, "cancelled"],
            [4.0, 4.5, 2, "later"],
            [5.0, 9.0, 2, "error"],
            [9.0, 10.0, 2, "killed"],
        ],
    }
    sh = _module.split(case, workers=2)
    assert sh is not None
    # absent: B before 3 s (2 s); starting: A 1-1.5, B 3-4, its replacement 10-11; compiling 4 + 4; deferred 0.5;
    # cut 5 + 1; idle: A 5.5-6, B 4.5-5 -> 1.0
    expected = {"absent": 2.0, "starting": 2.5, "compiling": 8.0, "deferred": 0.5, "cut": 6.0, "idle": 1.0}
    assert sh == pytest.approx({k: v / 20 for k, v in expected.items()})
    assert _module.split(_case([1000], space=1000), workers=2) is None  # no profile: no split


def test_the_runs_own_compile_processes_count() -> None:
    run_workers = _module.run_workers
    assert run_workers({"host_cpus": 16}) == 15  # GpuBackend's default
    assert run_workers({"host_cpus": 16, "autotune_env": {"AUTOTUNE_COMPILE_WORKERS": "24"}}) == 24
    assert run_workers({"host_cpus": 16, "autotune_env": {"AUTOTUNE_COMPILE_WORKERS": "x"}}) == 15
    assert run_workers({}) == 1


def test_a_run_of_ours_alone_is_bounded_against_kernel_tuners_run_beside_it(capsys) -> None:
    """The committed H200 pair: the full run (twins off) and ours alone with twins on, one machine, one call."""
    full = ROOT / "results/bench/kt_switch_h200_kt10_convolution.json.xz"
    alone = ROOT / "results/bench/kt_switch_h200_kt10_twins_convolution_ours.json.xz"
    assert main([str(alone)]) == 0 and "no case of ours" in capsys.readouterr().out
    assert main([str(alone), "--kt-from", str(full)]) == 0
    out = capsys.readouterr().out
    assert "Kernel Tuner's run of 1 case(s)" in out and "convolution" in out and "deferred" in out
    data, other = load(alone), load(full)
    assert _module.borrow_kt(data, other) == 1 and _module.borrow_kt(data, other) == 0  # only where none
    b = bound(data["cases"]["convolution"], workers=15, tail=10)
    assert b is not None and b["measured"] == 111 and b["ratio"] <= b["ratio_max"]
