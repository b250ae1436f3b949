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
