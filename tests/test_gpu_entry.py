"""The GPU worker's entry (autotune/sweep/backends/gpu_entry.py, issue 31 item 6): importing it loads neither NumPy nor
the engine (so `autotune.kernel_tuner`'s import spawns the worker first), and a worker spawned by it is adopted by a
GpuBackend, which then serves as if it had spawned it."""

from __future__ import annotations

import functools
import multiprocessing as mp
import subprocess
import sys
import time

import pytest

from autotune.sweep.backends import local
from autotune.sweep.backends.gpu_entry import spawn_worker
from tests.support.fake_gpu_worker import INFO, fake_gpu_main


def test_the_entry_imports_the_standard_library_alone() -> None:
    code = (
        "import sys, autotune.sweep.backends.gpu_entry, autotune.sweep.compile.spawning\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'cupy', 'yaml', 'sqlalchemy')"
        " or m.startswith('autotune.') and m not in ('autotune.sweep', 'autotune.sweep.backends',"
        " 'autotune.sweep.backends.gpu_entry', 'autotune.sweep.compile', 'autotune.sweep.compile.spawning')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def test_a_spawned_worker_is_adopted_and_serves(tmp_path) -> None:
    fake = functools.partial(fake_gpu_main, faults={}, trace=str(tmp_path / "trace.txt"))
    spawned_at = time.monotonic()
    proc, conn = spawn_worker(mp.get_context("spawn"), 0, False, fake)
    with local.GpuBackend(local.LocalOptions(cache_dir=tmp_path / "cache", compile_workers=1)) as backend:
        backend.adopt_worker(proc, conn, spawned_at)
        with pytest.raises(RuntimeError, match="has a GPU worker already"):
            backend.adopt_worker(proc, conn, spawned_at)
        backend.start()  # the compile pool only: the worker is there
        assert backend._proc is proc
        backend.ready()
        assert backend.device_info() == INFO
        assert backend.timeline["worker_spawned"] < backend.timeline["worker_ready"]
    assert not proc.is_alive()  # closed with the backend
