"""GPU tier (`autotune.sweep.compile.twins`): a configuration whose defines give the program of one compiling now waits for it,
with the real NVRTC. The transpose example gains a parameter its code never reads (three values): a sweep of its 12
configurations (4 programs) through the real GpuBackend verifies all 12 and leaves no lock; compile_batch defers a
twin while its program's lock is held by a live process; the first compile takes over a dead holder's lock and marks
the program done; the twin then compiles without a lock, and NVRTC serves it faster than the first compile."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune.sweep.compile import nvrtc as comp
from autotune.sweep.compile.nvrtc import CompileRequest, compile_batch, compile_batch_deferring
from autotune.sweep.compile.twins import Later, twin_key
from tests.support.gpu_sweep import gpu_sweep

pytestmark = pytest.mark.gpu
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def twin_space(tmp_path: Path) -> Path:
    folder = tmp_path / "transpose"
    shutil.copytree(EXAMPLES / "transpose", folder)
    space = folder / "space.yaml"
    text = space.read_text()
    for old, new in [
        (
            "defines: [block_size_x, block_size_y, TILE_DIM, PAD]",
            "defines: [block_size_x, block_size_y, TILE_DIM, PAD, UNUSED]",
        ),
        ("  block_size_x: [8, 16, 32, 64]", "  block_size_x: [32]"),
        ("  block_size_y: [1, 2, 4, 8, 16, 32]", "  block_size_y: [4, 8]"),
        ("  TILE_DIM: [16, 32, 64]", "  TILE_DIM: [32]\n  UNUSED: [0, 1, 2]"),
    ]:
        assert old in text, old
        text = text.replace(old, new)
    space.write_text(text)
    assert "UNUSED" not in (folder / "transpose.cu").read_text()
    return space


@pytest.fixture(autouse=True)
def twins_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune.sweep.compile import twins

    monkeypatch.setenv(twins.TWINS_ENV, "1")  # (the default, whatever the caller's environment says; inherited)


def test_a_sweep_compiles_each_distinct_program_once(tmp_path: Path) -> None:
    store = gpu_sweep(tmp_path, twin_space(tmp_path), "[{sizes: {rows: 333, cols: 1001}}]")
    frame = store.measurements()
    assert len(frame) == 12 and set(frame.status) == {"ok"}, frame[["instance", "status", "error"]]
    assert (tmp_path / "cache" / "twins").is_dir()  # keys were taken
    assert not list((tmp_path / "cache" / "twins").glob("*/*.lock"))  # every claim released
    assert len(list((tmp_path / "cache" / "twins").glob("*/*.done"))) == 4  # block_size_y x PAD: 4 programs


def test_a_twin_waits_for_its_programs_compile_and_nvrtc_serves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autotune.sweep.compile import twins

    monkeypatch.setattr(twins, "POLICY", twins.TwinPolicy())  # (this process's own looks are not in question here)
    space = twin_space(tmp_path)
    src = space.parent / "transpose.cu"

    run = time.time_ns()  # a define of this run alone: the first compile is cold in every cache (a warm machine's
    # CuPy/NVRTC cache held an earlier run's program: first 16 ms, twin 18 ms)

    def request(unused: int, pad: int) -> CompileRequest:
        defines = {"block_size_x": 32, "block_size_y": 8, "TILE_DIM": 32, "PAD": pad, "UNUSED": unused, "RUN": run}
        options = ("-std=c++17", *(f"-D{k}={v}" for k, v in defines.items()))
        return CompileRequest(src, ("transpose_kernel",), 90, options=options)

    cache = tmp_path / "cache"
    includes = (src.parent, *map(Path, comp._toolkit_includes(comp.cuda_include_dir())))
    options = (*request(2, 1).options, *(f"--include-path={d}" for d in includes))
    key = twin_key(src.read_text(), ("transpose_kernel",), options, 90)
    assert key is not None
    lock_dir = cache / "twins" / key[:2]
    lock_dir.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:  # "another process" compiles the program: a twin of it is deferred (so the key above is the compile's)
        (lock_dir / f"{key}.lock").write_text(f"{holder.pid} {socket.gethostname()} {time.time()}")
        later = compile_batch_deferring(request(2, 1), cache)
        assert isinstance(later, Later)
    finally:
        holder.kill()
        holder.wait()
    # a transpose compiles in about as long as cpp takes in this (large) process: the policy could stop looking
    monkeypatch.setattr(twins, "POLICY", twins.TwinPolicy())
    (first,) = compile_batch(request(0, 1), cache)  # takes over the dead holder's lock, compiles, marks it done
    assert (lock_dir / f"{key}.done").exists() and not list(lock_dir.glob("*.lock"))
    monkeypatch.setattr(twins, "POLICY", twins.TwinPolicy())
    (twin,) = later.fn(*later.args)  # done now: compiles at once, without a lock
    monkeypatch.setattr(twins, "POLICY", twins.TwinPolicy())
    (other,) = compile_batch(request(0, 0), cache)  # another program
    assert first.ok and twin.ok and other.ok and not twin.cached
    assert not list((cache / "twins").glob("*/*.lock"))  # every lock released
    assert len(list((cache / "twins").glob("*/*.done"))) == 2  # two programs
    assert twin.lowered_name == first.lowered_name
    # (no timing assertion: a transpose compiles cold in ~20 ms, so first vs twin was noise: 20 ms vs 23 ms on an H100
    # whose tier ran two halves at once)
