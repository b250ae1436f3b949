"""scripts/bench_compile_scaling.py's pure parts: the sample spaces (the sizes the benchmarks report), a seeded
sample, and the slowdown and effective parallelism from known compile times. The compiles themselves run on the
GPU machine (the script's own run, cited in results/bench/PROVENANCE.md)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_compile_scaling", ROOT / "scripts" / "bench_compile_scaling.py")
assert _spec is not None and _spec.loader is not None
scaling = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scaling)


def test_the_sample_spaces_have_the_benchmarks_sizes() -> None:
    bench, whole = scaling.space("bench"), scaling.space("whole")
    assert len(bench) == 1080 and len(whole) == 7296  # bench_kt_switch's convolution; bench_compile_bound's space
    assert all(c["block_size_x"] * c["block_size_y"] <= 1024 for c in bench + whole)
    assert all(c["use_padding"] == 0 or c["block_size_x"] % 32 != 0 for c in whole)
    with pytest.raises(SystemExit, match="bench or whole"):
        scaling.space("other")


def test_a_sample_is_seeded_and_distinct() -> None:
    bench = scaling.space("bench")
    a, b, c = scaling.sample(bench, 24, 0), scaling.sample(bench, 24, 0), scaling.sample(bench, 24, 1)
    assert a == b and a != c
    assert len({tuple(sorted(x.items())) for x in a}) == 24
    with pytest.raises(SystemExit, match="between 1 and"):
        scaling.sample(bench, 1081, 0)


def test_slowdown_and_effective_parallelism() -> None:
    times = {1: [1.0, 2.0, 3.0, None], 4: [2.0, 3.0, 3.0, 9.0], 8: [None, 4.0, 6.0, 1.0]}
    rows = {r["procs"]: r for r in scaling.summarize(times, {1: 6.5, 4: 4.0, 8: 7.0})}
    assert rows[1]["slowdown"] == 1.0 and rows[1]["effective"] == 1.0
    # P=4 against P=1 on the instances timed at both (the first three): 8 s over 6 s
    assert rows[4]["slowdown"] == pytest.approx(1.333, abs=1e-3) and rows[4]["effective"] == pytest.approx(3.0)
    assert rows[4]["compile_s"] == 17.0 and rows[4]["instances"] == 4
    # P=8: the second and third only, 10 s over 5 s
    assert rows[8]["slowdown"] == 2.0 and rows[8]["effective"] == 4.0
    assert scaling.summarize({8: [1.0]}, {8: 1.0})[0]["effective"] is None  # no P=1 to compare with


def test_the_requests_carry_each_configuration_as_defines() -> None:
    config = scaling.space("bench")[0]
    (req,) = scaling.requests([config], 90)
    assert req.source == scaling.KERNEL and req.name_expressions == (scaling.NAME,) and req.arch == 90
    assert {f"-D{k}={v}" for k, v in config.items()} <= set(req.options) and not req.precheck


def test_the_pool_path_runs_and_closes_without_a_compiler() -> None:
    """`ours` through a real CompilePool (spawned processes): without NVRTC here every request fails, recorded as
    a failure with no time, and the pool shuts down (the GPU machine runs the compiles)."""
    pytest.importorskip("multiprocessing")
    try:
        import cupy  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("NVRTC present: the GPU machine's run covers the compiles")
    import os

    reqs = scaling.requests(scaling.space("bench")[:2], 90)
    before = {k: os.environ.get(k) for k in ("CUDA_CACHE_PATH", "CUPY_CACHE_DIR", "AUTOTUNE_COMPILE_CACHE")}
    times, wall, failed = scaling.ours(reqs, 2)
    assert times == [None, None] and failed == 2 and wall > 0
    assert {k: os.environ.get(k) for k in before} == before  # the pool's cold caches were this call's only


def test_options_replace_the_sweeps_own() -> None:
    config = scaling.space("bench")[0]
    (req,) = scaling.requests([config], 90, ("--std=c++11",))
    assert req.options[0] == "--std=c++11" and "-std=c++17" not in req.options
    assert req.options[1:] == tuple(f"-D{k}={v}" for k, v in config.items())


def test_the_median_ratio_and_the_report_of_the_committed_run(capsys: pytest.CaptureFixture[str]) -> None:
    rows = {r["procs"]: r for r in scaling.summarize({1: [1.0, 2.0, 4.0], 2: [2.0, 2.0, 2.0]}, {1: 7.0, 2: 4.0})}
    assert rows[2]["ratio_median"] == 1.0 and rows[2]["slowdown"] == pytest.approx(6 / 7, abs=1e-3)
    assert scaling.main(["--report", str(ROOT / "results" / "bench" / "compile_scaling_h100.json.xz")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "ratio med" in out[1] and [line.split()[0] for line in out[2:7]] == ["1", "8", "15", "16", "20"]
    assert out[-1].startswith("kt/ours")
    import json
    import lzma

    saved = json.loads(lzma.decompress((ROOT / "results" / "bench" / "compile_scaling_h100.json.xz").read_bytes()))
    assert scaling.sample(scaling.space("bench"), 24, 0) == saved["configs"]  # the sample the run compiled, again


def test_cold_cache_env_names_every_compile_cache(tmp_path: Path) -> None:
    """A benchmark's cold compiles: autotune's compile cache, CuPy's and the CUDA driver's compute cache (where
    NVRTC's ptxas step is served again: 2.70 s cold, 0.21 s again on an H100 host), each under the folder given."""
    from autotune.sweep.backends.local import DEFAULT_CACHE_DIR  # noqa: F401 - the backend reads the same variable
    from autotune.sweep.compile.nvrtc import COMPILE_CACHE_ENV, cold_cache_env

    env = cold_cache_env(tmp_path)
    assert set(env) == {COMPILE_CACHE_ENV, "CUPY_CACHE_DIR", "CUDA_CACHE_PATH"}
    assert len(set(env.values())) == 3 and all(Path(v).parent == tmp_path for v in env.values())


@pytest.mark.skipif(__import__("shutil").which("cpp") is None, reason="no C preprocessor (cpp) here")
def test_twins_are_configurations_compiling_the_same_program() -> None:
    """use_padding=1 inserts no padding where block_size_x is a multiple of 32: the same program as use_padding=0;
    with block_size_x 16 and tile 1 it pads, so a different one; a differing tile is always different."""
    base = {"filter_width": 17, "filter_height": 17, "block_size_y": 2, "tile_size_y": 1, "read_only": 0}
    configs = [
        {**base, "block_size_x": 32, "tile_size_x": 1, "use_padding": 0},
        {**base, "block_size_x": 32, "tile_size_x": 1, "use_padding": 1},  # twin of the first
        {**base, "block_size_x": 16, "tile_size_x": 1, "use_padding": 0},
        {**base, "block_size_x": 16, "tile_size_x": 1, "use_padding": 1},  # padded: its own program
        {**base, "block_size_x": 32, "tile_size_x": 2, "use_padding": 0},
    ]
    assert scaling.twins(configs) == [False, True, False, False, False]
    with pytest.raises(SystemExit, match="C preprocessor"):
        scaling.twins(configs[:1], cpp="no-such-cpp-here")
