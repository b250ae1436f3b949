"""Compile each distinct program once at a time (`autotune.sweep.compile.twins`): a configuration whose defines give the
program of one compiling now waits for it. Here without NVRTC: the key with the real C preprocessor, the policy, the
locks with real processes, the compile pool's `Later`, and `compile_batch`'s flow with a stand-in compiler
(tests/gpu/test_twins_gpu.py runs the real NVRTC in a sweep)."""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autotune.sweep.compile import nvrtc as comp
from autotune.sweep.compile import twins
from autotune.sweep.compile.nvrtc import CompileFailed, CompileRequest, compile_batch, compile_batch_deferring
from autotune.sweep.compile.compile_pool import CompilePool
from autotune.sweep.compile.twins import Later, TwinLocks, TwinPolicy, twin_key
from tests.support.pool_calls import later_then, sleep_then

needs_cpp = pytest.mark.skipif(twins.find_cpp() is None, reason="no C preprocessor (cpp) here")
KERNEL = """#ifndef PAD
#define PAD 1
#endif
#if PAD == 1 && (TILE % 32) != 0
#define WIDTH (TILE + 1)
#else
#define WIDTH TILE
#endif
__global__ void k(float *x) { __shared__ float s[WIDTH]; s[threadIdx.x] = 0; x[0] = s[0]; }
"""


def key(pad: int, tile: int, *extra: str, names: tuple = ("k",), arch: int = 90) -> str | None:
    return twin_key(KERNEL, names, ("-std=c++17", f"-DPAD={pad}", f"-DTILE={tile}", *extra), arch)


# ----------------------------------------------------------------------------------------------------- the key
@needs_cpp
def test_the_key_is_the_preprocessed_program_and_what_else_changes_the_code() -> None:
    assert key(0, 32) == key(1, 32)  # no padding where the tile is a multiple of 32: one program
    assert key(0, 32, "-DUNUSED=3", "--include-path=/nowhere") == key(0, 32)
    assert key(0, 16) != key(1, 16)  # padding: another program
    others = {key(0, 32, "-maxrregcount=64"), key(0, 32, names=("k2",)), key(0, 32, arch=89), key(0, 64)}
    assert len(others | {key(0, 32)}) == 5


@needs_cpp
def test_no_key_without_a_preprocessor_or_where_it_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    assert twin_key("#error no\n", ("k",), ("-DA=1",), 90) is None
    assert twin_key('#include "missing.h"\n', ("k",), ("-DA=1",), 90) is None
    monkeypatch.setattr(twins, "find_cpp", lambda: None)
    assert key(0, 32) is None


def test_looking_is_on_unless_turned_off() -> None:
    assert twins.enabled({}) and twins.enabled({twins.TWINS_ENV: "1"}) and twins.enabled({twins.TWINS_ENV: " On"})
    assert not any(twins.enabled({twins.TWINS_ENV: v}) for v in ("0", "off", "No", "false"))


def test_only_macros_or_edits_can_make_twins() -> None:
    assert twins.may_have_twins(("-std=c++17", "-DA=1"), False)
    assert twins.may_have_twins(("--define-macro=A=1",), False) and twins.may_have_twins((), True)
    assert not twins.may_have_twins(("-std=c++17", "-I/x"), False)


# -------------------------------------------------------------------------------------------------- the policy
def test_the_policy_stops_looking_where_no_twin_comes_or_the_look_costs_too_much() -> None:
    p = TwinPolicy()
    for _ in range(twins.GIVE_UP_AFTER - 1):
        p.looked("a", 0.01, twin=False)
    assert p.wants("a")
    p.looked("a", 0.01, twin=False)
    assert not p.wants("a")  # no twin in GIVE_UP_AFTER looks
    for _ in range(twins.GIVE_UP_AFTER + 5):
        p.looked("b", 0.01, twin=False)
    p.looked("b", 0.01, twin=True)
    assert p.wants("b")  # twins come: keep looking
    p.looked("c", 0.01, twin=True)
    p.compiled("c", 2.5)
    assert p.wants("c")  # a look is 0.4% of a full compile
    p.compiled("d", 0.02)
    p.looked("d", 0.01, twin=True)
    assert not p.wants("d")  # a look costs half a full compile
    p.no_key("e")
    assert not p.wants("e")  # the preprocessor failed on it
    assert p.wants("never seen")


# --------------------------------------------------------------------------------------------------- the locks
def hold(locks: TwinLocks, key: str, pid: int, host: str | None = None, at: float | None = None) -> Path:
    path = locks.root / key[:2] / f"{key}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{pid} {host or socket.gethostname()} {time.time() if at is None else at}")
    return path


def test_one_process_claims_a_program_and_a_dead_holders_lock_is_taken_over(tmp_path: Path) -> None:
    locks, key = TwinLocks(tmp_path), "ab" * 32
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = hold(locks, key, holder.pid)
        assert locks.holder_alive(key) and not locks.claim(key)
        locks.release(key)  # not ours: stays
        assert lock.exists()
    finally:
        holder.kill()
        holder.wait()
    assert not locks.holder_alive(key) and locks.claim(key)  # the dead holder's lock is ours now
    assert lock.read_text().split()[0] == str(os.getpid())
    assert not TwinLocks(tmp_path).claim(key)  # held by a live process (this one)
    locks.release(key)
    assert not lock.exists() and locks.claim(key)


def test_a_lock_from_another_host_is_held_until_it_is_old(tmp_path: Path) -> None:
    locks, key = TwinLocks(tmp_path), "ef" * 32
    hold(locks, key, 1, "elsewhere.example", time.time() - 10)
    assert locks.holder_alive(key) and not locks.claim(key)
    hold(locks, key, 1, "elsewhere.example", time.time() - 7200)
    assert not locks.holder_alive(key) and locks.claim(key)


# ------------------------------------------------------------------------------------------- the pool's Later
def test_a_call_answering_later_runs_again_for_the_same_future_and_frees_its_process(tmp_path: Path) -> None:
    pool = CompilePool(1, mp.get_context("spawn"))
    try:
        t0 = time.monotonic()
        deferred = pool.submit(later_then, str(tmp_path / "n"), 3, "done", timeout_s=30)
        time.sleep(0.1)
        other = pool.submit(sleep_then, 0, "other", timeout_s=30)
        assert other.result(timeout=60) == "other" and not deferred.done()  # the one process served it meanwhile
        assert deferred.result(timeout=60) == ("done", 4)
        assert time.monotonic() - t0 >= 0.6  # three waits of 0.2 s
    finally:
        pool.shutdown()


def test_shutdown_fails_a_call_waiting_to_run_again(tmp_path: Path) -> None:
    pool = CompilePool(1, mp.get_context("spawn"))
    deferred = pool.submit(later_then, str(tmp_path / "n"), 10**6, "never")
    deadline = time.monotonic() + 60
    while not (tmp_path / "n").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.1)
    pool.shutdown()
    with pytest.raises(CompileFailed, match="cancelled"):
        deferred.result(timeout=10)


# ---------------------------------------------------------------------------- compile_batch, stand-in compiler
class StandIn:
    """nvrtc_compile's stand-in: records each build (the defines it had) and takes 0.2 s (a full build costs far
    more than the preprocessor: the policy keeps looking)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, text: str, filename: str, names: tuple, options: tuple, kind: str) -> tuple:
        with self.lock:
            self.calls.append(",".join(o[2:] for o in options if o.startswith("-D")))
        time.sleep(0.2)
        return b"cubin:" + repr(sorted(options)).encode(), {n: f"_lowered_{n}" for n in names}, ""


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> StandIn:
    s = StandIn()
    monkeypatch.setattr(comp, "nvrtc_compile", s)
    monkeypatch.setattr(comp, "nvrtc_version", lambda: (13, 0))
    monkeypatch.setattr(comp, "nvrtc_archs", lambda: (90,))
    monkeypatch.setattr(comp, "cuda_include_dir", lambda: "")
    monkeypatch.setattr(twins, "POLICY", TwinPolicy())
    monkeypatch.setenv(twins.TWINS_ENV, "1")
    return s


@pytest.fixture
def src(tmp_path: Path) -> Path:
    path = tmp_path / "kernel.cu"
    path.write_text(KERNEL)
    return path


def request(src: Path, pad: int, tile: int) -> CompileRequest:
    return CompileRequest(src, ("k",), 90, options=("-std=c++17", f"-DPAD={pad}", f"-DTILE={tile}"))


def lock_of(cache: Path, src: Path, pad: int, tile: int) -> str:
    k = twin_key(KERNEL, ("k",), ("-std=c++17", f"-DPAD={pad}", f"-DTILE={tile}", f"--include-path={src.parent}"), 90)
    assert k is not None
    return k


@needs_cpp
def test_a_twin_waits_for_its_program_compiling_elsewhere_then_compiles(
    standin: StandIn, src: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    locks = TwinLocks(cache / "twins")
    k = lock_of(cache, src, 0, 32)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        hold(locks, k, holder.pid)  # PAD=0 TILE=32 compiles in another process
        later = compile_batch_deferring(request(src, 1, 32), cache)  # its twin
        assert isinstance(later, Later) and later.after_s == twins.FIRST_WAIT_S and later.args[2] == k
        again = later.fn(*later.args)
        assert isinstance(again, Later) and again.after_s == 2 * twins.FIRST_WAIT_S
        (other,) = compile_batch_deferring(request(src, 1, 16), cache)  # another program: no wait
        assert other.ok and standin.calls == ["PAD=1,TILE=16"]
    finally:
        holder.kill()
        holder.wait()
    (twin,) = again.fn(*again.args)  # the holder is gone: it compiles
    assert twin.ok and standin.calls == ["PAD=1,TILE=16", "PAD=1,TILE=32"]
    assert not list((cache / "twins").glob("*/*.lock"))  # every claim released


@needs_cpp
def test_without_a_pool_a_twin_waits_in_its_process(standin: StandIn, src: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    locks = TwinLocks(cache / "twins")
    path = hold(locks, lock_of(cache, src, 0, 32), os.getpid())  # "another" compile, released in 0.6 s

    def release() -> None:
        time.sleep(0.6)
        path.unlink()

    t = threading.Thread(target=release)
    t.start()
    t0 = time.monotonic()
    (twin,) = compile_batch(request(src, 1, 32), cache)
    t.join()
    assert twin.ok and time.monotonic() - t0 >= 0.6 and standin.calls == ["PAD=1,TILE=32"]


@needs_cpp
def test_twins_off_or_no_macros_never_look(
    standin: StandIn, src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compile_batch(CompileRequest(src, ("k<1>", "k<2>"), 90), tmp_path / "a")
    assert not (tmp_path / "a" / "twins").exists()
    compile_batch(request(src, 0, 32), tmp_path / "b")
    assert (tmp_path / "b" / "twins").is_dir()
    monkeypatch.setenv(twins.TWINS_ENV, "0")  # turned off
    compile_batch(request(src, 0, 32), tmp_path / "c")
    assert not (tmp_path / "c" / "twins").exists() and len(standin.calls) == 3
    monkeypatch.delenv(twins.TWINS_ENV)  # the default: on
    compile_batch(request(src, 0, 32), tmp_path / "d")
    assert (tmp_path / "d" / "twins").is_dir() and len(standin.calls) == 4


@needs_cpp
def test_twins_of_a_finished_program_compile_side_by_side_in_the_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twelve configurations of one program (UNUSED changes nothing) through the sweep's pool of 4 processes, each
    build 0.3 s: the first compiles alone, the others wait for it, then compile 4 at a time (about 1.3 s in all;
    one after the other they took 12 x 0.3 s and more)."""
    import functools

    from tests.support.pool_calls import install_standin_compiler

    src = tmp_path / "kernel.cu"
    src.write_text(KERNEL)
    monkeypatch.setenv(twins.TWINS_ENV, "1")  # (the pool's processes inherit it)
    pool = CompilePool(4, mp.get_context("spawn"), initializer=functools.partial(install_standin_compiler, 0.3))
    try:
        deadline = time.monotonic() + 60
        while not all(w.ready for w in pool._workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        reqs = [
            CompileRequest(src, ("k",), 90, options=("-std=c++17", "-DPAD=0", "-DTILE=32", f"-DUNUSED={i}"))
            for i in range(12)
        ]
        t0 = time.monotonic()
        results = [
            f.result(timeout=60) for f in [pool.submit(compile_batch_deferring, r, tmp_path / "c") for r in reqs]
        ]
        took = time.monotonic() - t0
    finally:
        pool.shutdown()
    assert all(ck.ok for (ck,) in results)
    assert took < 3.0, took
    locks = list((tmp_path / "c" / "twins").glob("*/*"))
    assert [p.suffix for p in locks] == [".done"]  # one program, done; no lock left


@needs_cpp
def test_a_source_the_preprocessor_fails_on_is_not_looked_at_again(
    standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "kernel.cu"
    src.write_text('#include "only_nvrtc_finds_this.h"\n' + KERNEL)
    looks: list[str | None] = []
    real = twins.twin_key
    monkeypatch.setattr(twins, "twin_key", lambda *a, **k: looks.append(real(*a, **k)) or looks[-1])
    compile_batch(request(src, 0, 32), tmp_path / "c")
    compile_batch(request(src, 1, 32), tmp_path / "c")
    assert looks == [None] and len(standin.calls) == 2  # one failed look, then none; both compiled
