"""Regenerate the Kernel Tuner cache fixtures in this folder with Kernel Tuner's own cache-writing code.

Run once by hand in a throwaway environment that has Kernel Tuner (the tests do not need it)::

    python3 -m venv .venv-kt && .venv-kt/bin/pip install kernel_tuner
    .venv-kt/bin/python tests/data/kerneltuner/generate_fixtures.py

The header comes from ``kernel_tuner.util.process_cache``, each configuration from
``kernel_tuner.util.store_cache`` (fed the dicts Kernel Tuner's sequential runner feeds it) and the closed
file from ``kernel_tuner.util.close_cache``.  Timings are synthetic but deterministic.
"""

from __future__ import annotations

import random
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

from kernel_tuner import util

HERE = Path(__file__).resolve().parent
TUNE_PARAMS = {
    "block_size_x": [32, 64, 128, 256],
    "block_size_y": [1, 2, 4],
    "tile_size_x": [1, 2],
    "layout": ["row", "col"],
}
PROBLEM = [4096, 4096]


def _result(params: dict, i: int, rng: random.Random, legacy: bool) -> dict:
    """A result dict as kernel_tuner.core.DeviceInterface.compile_and_benchmark returns it, plus metrics."""
    err_key = "time" if legacy else "__error__"  # Kernel Tuner <= 1.3 put the error under the objective
    threads = params["block_size_x"] * params["block_size_y"]
    out = dict(params)
    if threads > 512:  # create_kernel_instance refuses: more threads than the device allows
        out[err_key] = util.InvalidConfig()
        out.update(compile_time=0, verification_time=0, benchmark_time=0)
    elif params["block_size_x"] == 32 and params["block_size_y"] == 4 and params["layout"] == "col":
        out[err_key] = util.CompilationFailedConfig()  # "uses too much shared data"
        out.update(compile_time=round(rng.uniform(300, 500), 9), verification_time=0, benchmark_time=0)
    elif threads == 512 and params["tile_size_x"] == 2:
        out[err_key] = util.RuntimeFailedConfig()  # "too many resources requested for launch"
        out.update(compile_time=round(rng.uniform(300, 500), 9), verification_time=0, benchmark_time=0)
    else:
        base = 2.0 / (1 + 0.4 * params["tile_size_x"]) * (1.15 if params["layout"] == "col" else 1.0)
        base *= 1 + abs(threads - 256) / 512
        times = [base * rng.uniform(0.97, 1.08) for _ in range(7)]
        out["time"] = sum(times) / len(times)
        out["times"] = times
        out["compile_time"] = rng.uniform(300, 500)
        out["verification_time"] = 0
        out["benchmark_time"] = sum(times) + rng.uniform(0.5, 1.5)
        out["GFLOP/s"] = 2 * PROBLEM[0] * PROBLEM[1] * 64 / (out["time"] / 1e3) / 1e9
    t0 = datetime(2026, 3, 2, 14, 5, 17, 120034, tzinfo=UTC)
    out["timestamp"] = str(t0 + timedelta(seconds=1.7 * i))
    return out


def write(path: Path, legacy: bool, n: int | None = None) -> None:
    path.unlink(missing_ok=True)
    tuning_options = SimpleNamespace(tune_params=TUNE_PARAMS, simulation_mode=False, objective="time")
    kernel_options = SimpleNamespace(kernel_name="matmul_tiled", problem_size=PROBLEM)
    runner = SimpleNamespace(get_device_info=lambda: SimpleNamespace(name="NVIDIA A100-PCIE-40GB"))
    cache = util.process_cache(str(path), kernel_options, tuning_options, runner)
    rng = random.Random(20260302)
    keys = list(TUNE_PARAMS)
    elements = [
        (x, y, t, lay)
        for x in TUNE_PARAMS["block_size_x"]
        for y in TUNE_PARAMS["block_size_y"]
        for t in TUNE_PARAMS["tile_size_x"]
        for lay in TUNE_PARAMS["layout"]
    ]
    rng.shuffle(elements)  # a strategy visits the space in its own order
    for i, element in enumerate(elements[:n]):
        x_int = ",".join([str(v) for v in element])  # the runners' key
        util.store_cache(x_int, _result(dict(zip(keys, element, strict=True)), i, rng, legacy), str(path), cache)


def main() -> None:
    open_path = HERE / "matmul_cache_open.json"
    write(open_path, legacy=False)  # a run killed after its last configuration: ends in "},"
    closed = HERE / "matmul_cache.json"
    shutil.copyfile(open_path, closed)
    util.close_cache(str(closed))
    text = open_path.read_text()
    last = text.rstrip(",").rfind("\n")
    cut = HERE / "matmul_cache_cut.json"  # killed while writing the last entry: its text stops midway
    cut.write_text(text[: last + (len(text) - last) // 2])
    legacy = HERE / "matmul_cache_kt13.json"
    write(legacy, legacy=True)
    util.close_cache(str(legacy))
    write(HERE / "matmul_cache_fresh.json", legacy=False, n=0)  # header only: nothing measured yet


if __name__ == "__main__":
    main()
