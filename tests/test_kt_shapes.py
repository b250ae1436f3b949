"""Kernel Tuner caches of every shape import and replay (issue 57): a `problem_size` that is a string (Kernel Tuner
writes `"num_blocks"` where the grid is a tuning parameter, as in its reduction example) or a list holding one, and
tunable parameters that are not all numbers (strings, booleans). Each cache is written as Kernel Tuner 1.5 writes
one (`process_cache`'s header, then one `store_cache` line per configuration, closed by `close_cache`), imported
through the real command line into a real database, exported back, and searched by the benchmark's replay path
(scripts/search_pairs.py: the strategies ask, the recorded measurements answer)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autotune.interop.kerneltuner import config_key, read_cache
from autotune.interop.kt_export import keys_and_times

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import search_pairs  # noqa: E402

TUNE_PARAMS: dict[str, list[Any]] = {
    "block_size_x": [32, 64, 128, 256, 512, 1024],
    "vector": [1, 2, 4],
    "num_blocks": [32, 64, 128, 256, 512, 1024],
    "use_shuffle": [True, False],
    "loop": ["unrolled", "plain"],
}


def kt_cache(path: Path, problem_size: Any) -> tuple[Path, dict[str, float | None]]:
    """A reduction's cache (432 configurations) as Kernel Tuner writes it; returns it and {key: time or None}."""
    header = {
        "device_name": "NVIDIA H100 80GB HBM3",
        "kernel_name": "sum_floats",
        "problem_size": problem_size,
        "tune_params_keys": list(TUNE_PARAMS),
        "tune_params": TUNE_PARAMS,
        "objective": "time",
        "cache": {},
    }
    text = json.dumps(header, indent="")[:-3]  # process_cache: all but the closing "}\n}"
    expected: dict[str, float | None] = {}
    keys = list(TUNE_PARAMS)
    grid = np.array(np.meshgrid(*[range(len(v)) for v in TUNE_PARAMS.values()], indexing="ij")).reshape(5, -1).T
    for n, idx in enumerate(grid):
        params = {k: TUNE_PARAMS[k][i] for k, i in zip(keys, idx, strict=True)}
        key = config_key(params, keys)
        entry: dict[str, Any] = dict(params)
        if params["block_size_x"] * params["vector"] > 2048:  # too much shared memory: Kernel Tuner's failure
            entry["__error__"] = "CompilationFailedConfig"
            expected[key] = None
        else:
            t = (
                0.2
                + 0.03 * (math.log2(params["block_size_x"]) - 8) ** 2
                + 0.02 * (math.log2(params["num_blocks"]) - 8) ** 2
                + 0.05 * (params["vector"] == 1)
                + (0.04 if params["use_shuffle"] else 0.0)
                + (0.0 if params["loop"] == "unrolled" else 0.03)
                + 1e-5 * n  # every configuration its own time
            )
            times = [round(t * f, 6) for f in (0.99, 1.0, 1.01)]
            entry.update(time=float(np.mean(times)), times=times, compile_time=412.5, verification_time=0)
            expected[key] = entry["time"]
        entry.update(benchmark_time=3.1, strategy_time=0, framework_time=1.2, timestamp="2026-01-01 10:00:00+00:00")
        text += "\n" + json.dumps({key: entry})[1:-1] + ","  # store_cache
    path.write_text(text[:-1] + "}\n}")  # close_cache
    return path, expected


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


@pytest.mark.parametrize(
    ("problem_size", "point"),
    [("num_blocks", "kerneltuner:fp32:-:1"), (["num_blocks", 1], "kerneltuner:fp32:-:1x1")],
)
def test_a_string_problem_size_and_boolean_parameters_import_and_export(
    tmp_path: Path, problem_size: Any, point: str
) -> None:
    cache, expected = kt_cache(tmp_path / "reduction.json", problem_size)
    db = tmp_path / "kt.sqlite"
    r = cli("import", "kerneltuner", str(cache), "--db", str(db))
    assert r.returncode == 0, r.stderr
    failed = sum(t is None for t in expected.values())
    assert f"imported {len(expected)} configurations ({failed} failed)" in " ".join(r.stdout.split())
    assert point in r.stdout and "problem_size num_blocks" in r.stdout
    space = (tmp_path / "reduction.space.yaml").read_text()
    assert "- 'True'" in space and "- unrolled" in space  # booleans as the text of their key, strings as they are
    out = tmp_path / "back.json"
    r = cli("export", "kerneltuner", str(db), "--space", "sum_floats", "--out", str(out))
    assert r.returncode == 0, r.stderr
    back = read_cache(out)
    assert back.problem_size == (tuple(problem_size) if isinstance(problem_size, list) else problem_size)
    assert keys_and_times(back) == keys_and_times(read_cache(cache))  # the same keys, statuses and times
    assert {k: t for k, (_, t) in keys_and_times(back).items()} == expected


def test_such_a_cache_is_searched_by_the_replay_path(tmp_path: Path) -> None:
    cache, expected = kt_cache(tmp_path / "reduction_H100.json", "num_blocks")
    (pair,) = search_pairs.load_sources([str(cache)], tmp_path)
    assert (pair.space, pair.device, pair.point.key) == ("reduction", "H100", "kerneltuner:fp32:-:1")
    assert len(pair.instances) == len(expected)
    true_best = min(t for t in expected.values() if t is not None)
    assert pair.true_best == pytest.approx(true_best, rel=1e-9)  # the median of times equals their mean here
    assert {type(i.param_dict["use_shuffle"]) for i in pair.instances} == {str}
    for strategy in ("hybrid", "random"):
        got = search_pairs.replay(pair, strategy, 60, seed=3)
        ids = [i.id for _, i in got.measured]
        assert len(got.trace) == 60 and len(set(ids)) == len(ids)  # 60 distinct proposals, none repeated
        assert np.all(np.diff(got.trace[np.isfinite(got.trace)]) <= 0) and got.trace[-1] >= pair.true_best
    whole = search_pairs.replay(pair, "hybrid", len(pair.instances), seed=0)
    assert whole.trace[-1] == pytest.approx(true_best, rel=1e-9)  # the whole space: its best is found


def test_a_cache_pair_is_timed_by_kernel_tuners_time(tmp_path: Path) -> None:
    """The replay path reads a cache's `time` (Kernel Tuner's mean of `times`, what its simulation mode reads), not
    the import's median of `times`: both tools are scored on one statistic (tests/data/kerneltuner: Kernel Tuner
    1.5.0's own cache writer; there the two differ)."""
    path = ROOT / "tests/data/kerneltuner/matmul_cache.json"
    (pair,) = search_pairs.load_sources([str(path)], tmp_path)
    cache = json.loads(path.read_text())["cache"]
    want = {k: e["time"] for k, e in cache.items() if "__error__" not in e}
    got = {
        config_key(i.param_dict, ("block_size_x", "block_size_y", "tile_size_x", "layout")): t
        for i, t in zip(pair.instances, pair.times, strict=True)
        if not math.isnan(t)
    }
    assert got == pytest.approx(want)
    assert any(e["time"] != pytest.approx(float(np.median(e["times"]))) for e in cache.values() if "times" in e)
