"""The scaling model (`autotune.sweep.scaling`, pure) and its script on a recorded sweep database."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from autotune.sweep.scaling import Cluster, Split, fit_chunk_s, fit_gpu_s_per_pair, predict, record_s_per_pair, speedups

ROOT = Path(__file__).resolve().parent.parent
SPLIT = Split(pairs=1000, kernels=100, compile_cpu_s=0.0, gpu_s_per_pair=0.02, record_s_per_pair=0.001, start_s=1.0)


def test_one_process_records_between_measurements() -> None:
    p = predict(SPLIT, Cluster(dask=False))
    assert p.wall_s == pytest.approx(1.0 + 1000 * 0.021) and p.bound == "gpu"


def test_gpus_divide_the_timing_until_the_single_writer_caps_it() -> None:
    table = speedups(SPLIT, [1, 2, 64], [0], Cluster())
    assert table[(2, 0)] == pytest.approx(2 * table[(1, 0)], rel=0.05)
    assert predict(SPLIT, Cluster(gpus=64)).bound == "record"
    assert table[(64, 0)] < 0.021 / 0.001 + 1  # at most (gpu + record) / record over one process


def test_compile_nodes_set_the_pace_of_a_cold_sweep() -> None:
    cold = replace(SPLIT, kernels=1000, compile_cpu_s=1000.0)  # 1 s a kernel
    assert predict(cold, Cluster(gpus=8)).bound == "compile"
    # each chunk a GPU worker compiles itself waits for its first kernel: 16 chunks x 1 s over 8 GPUs
    warm, cluster = replace(cold, compile_cpu_s=0.0), Cluster(gpus=8)
    assert predict(cold, cluster).gpu_s - predict(warm, cluster).gpu_s == pytest.approx(16 * 1.0 / 8)
    # one process: one kernel's compile before the first timing
    assert predict(cold, Cluster(dask=False)).wall_s == pytest.approx(1.0 + 1.0 + 1000 / 15)
    one_node, eight = predict(cold, Cluster(gpus=8, compile_nodes=1)), predict(cold, Cluster(gpus=8, compile_nodes=8))
    assert one_node.compile_s == pytest.approx(8 * eight.compile_s)


def test_fits_reproduce_the_walls_they_come_from() -> None:
    t = fit_gpu_s_per_pair(wall_s=22.0, start_s=1.0, pairs=1000, record_s_per_pair=0.001)
    assert t == pytest.approx(0.02)
    cluster = Cluster(gpus=1, batches=4)
    chunk = fit_chunk_s(SPLIT, cluster, wall_s=25.0)
    assert predict(replace(SPLIT, chunk_s=chunk), cluster).wall_s == pytest.approx(25.0)
    assert record_s_per_pair([0.0, 0.001, 0.002, 5.0, 5.0015, 5.003]) == pytest.approx(0.0015)


def test_the_script_reads_a_recorded_sweep(tmp_path: Path) -> None:
    from autotune.store.packing import unpack

    db = tmp_path / "transpose.sqlite"
    unpack(ROOT / "examples" / "transpose" / "results" / "transpose_h100.sqlite.xz", db)
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "scaling_model.py"), "--one", str(db), "--record-s", "0.001"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert "156 pairs" in out.stdout and "predicted speed-up" in out.stdout
    rows = [ln.split() for ln in out.stdout.splitlines() if ln.strip().startswith(("1 ", "64 "))]
    assert len(rows) == 2 and float(rows[1][1]) > float(rows[0][1])
