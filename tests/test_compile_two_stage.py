"""scripts/two_stage_compile.py's report, from stage files written here (the stages themselves need a GPU)."""

from __future__ import annotations

import importlib.util
import itertools
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("two_stage_compile", ROOT / "scripts" / "two_stage_compile.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def _rows(mod, time_of, fail=()):
    p = mod.tune_params()
    rows = []
    for values in itertools.product(*(p[k] for k in mod.KEYS)):
        c = dict(zip(mod.KEYS, values, strict=True))
        if c["block_size_x"] * c["block_size_y"] > 1024:
            continue
        key = tuple(values)
        t = None if key in fail else time_of(c)
        rows.append({"params": c, "time_ms": t, "error": None if t else "CompilationFailedConfig", "compile_s": 1.0})
    return rows


def _write(work: Path, stage: str, rows: list) -> None:
    (work / f"{stage}.json").write_text(json.dumps({"stage": stage, "call_s": 1.0, "limit_s": 9.0, "rows": rows}))


def test_space_is_kernel_tuners_1080():
    assert _script().space_size() == 1080


def test_screen_that_keeps_the_order_keeps_the_best(tmp_path):
    mod = _script()

    def full(c):
        return 1.0 + c["block_size_x"] / 100 + c["tile_size_x"] / 7 + c["block_size_y"] / 1000 + c["use_padding"] / 3

    _write(tmp_path, "full", _rows(mod, full))
    _write(tmp_path, "fast", _rows(mod, lambda c: 2 * full(c)))  # slower, same order
    r = mod.analyze(tmp_path)
    assert r["space"] == 1080 and r["full"]["complete"] and r["both_timed"] == 1080
    assert abs(r["spearman_kernel_time"] - 1.0) < 1e-9
    assert r["full_best_rank_in_fast"] == 1
    assert all(t["keeps_best"] and t["picked_over_best"] == 1.0 for t in r["tops"])
    assert r["tops"][0]["instances"] == 54 and r["tops"][0]["compile_s_two_stage"] == 1080 + 54
    assert (tmp_path / "two_stage.csv").read_text().count("\n") == 1081


def test_screen_that_misorders_the_best_loses_it(tmp_path):
    mod = _script()

    def full(c):
        return (
            1.0
            + c["block_size_x"] / 100
            + c["tile_size_x"] / 7
            + c["tile_size_y"] / 13
            + c["block_size_y"] / 1000
            + (c["use_padding"] / 17 + c["read_only"] / 19)
        )

    best = min(_rows(mod, full), key=lambda r: r["time_ms"])["params"]

    def fast(c):  # the full build's best looks slowest in the fast build
        return 100.0 if c == best else full(c)

    _write(tmp_path, "full", _rows(mod, full))
    _write(tmp_path, "fast", _rows(mod, fast, ()))
    r = mod.analyze(tmp_path)
    assert r["full_best_rank_in_fast"] == 1080
    assert not any(t["keeps_best"] for t in r["tops"])
    assert all(t["picked_over_best"] > 1.0 for t in r["tops"])


def test_fast_build_failure_is_counted(tmp_path):
    mod = _script()
    rows = _rows(mod, lambda c: 1.0 + c["block_size_x"])
    key = tuple(rows[0]["params"][k] for k in mod.KEYS)
    _write(tmp_path, "full", rows)
    _write(tmp_path, "fast", _rows(mod, lambda c: 1.0 + c["block_size_x"], fail={key}))
    r = mod.analyze(tmp_path)
    assert r["fast_fails_full_ok"] == 1 and r["fast"]["failed"] == 1
