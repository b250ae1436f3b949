"""Compile each distinct program once (`autotune.sweep.twins`): configurations whose defines give the same program
share one full compile. Here without NVRTC: the registry and its locks with real processes, the policy, the key, the
compile pool's `Later`, and `compile_batch`'s flow with a stand-in compiler whose "PTX" is the defines the text uses
(tests/gpu/test_twins_gpu.py runs the real NVRTC and a sweep)."""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autotune.sweep import compile as comp
from autotune.sweep import twins
from autotune.sweep.compile import CompileFailed, CompileRequest, compile_batch
from autotune.sweep.compile_pool import CompilePool
from autotune.sweep.twins import Later, TwinPolicy, TwinRegistry, twin_key
from tests.support.pool_calls import later_then, sleep_then

SHARED = "ptxas error   : Entry function 'k' uses too much shared data (0x10000 bytes, 0xc000 max)"


# ----------------------------------------------------------------------------------------------------- the key
def test_the_key_ignores_macros_and_include_folders_but_not_what_changes_the_code() -> None:
    base = twin_key(b"ptx", {"k": "_Z1k"}, ("-std=c++17", "-DA=1", "--include-path=/x"), "-arch=sm_90", (13, 0))
    assert base == twin_key(b"ptx", {"k": "_Z1k"}, ("-std=c++17", "-DA=2", "-I/y", "-UB"), "-arch=sm_90", (13, 0))
    others = [
        twin_key(b"ptx2", {"k": "_Z1k"}, ("-std=c++17",), "-arch=sm_90", (13, 0)),
        twin_key(b"ptx", {"k": "_Z1kv"}, ("-std=c++17",), "-arch=sm_90", (13, 0)),
        twin_key(b"ptx", {"k": "_Z1k"}, ("-std=c++17", "-maxrregcount=64"), "-arch=sm_90", (13, 0)),
        twin_key(b"ptx", {"k": "_Z1k"}, ("-std=c++17",), "-arch=sm_89", (13, 0)),
        twin_key(b"ptx", {"k": "_Z1k"}, ("-std=c++17",), "-arch=sm_90", (13, 1)),
    ]
    assert len({base, *others}) == 6


# -------------------------------------------------------------------------------------------------- the policy
def test_the_policy_stops_looking_where_no_twin_comes_or_the_pass_costs_too_much() -> None:
    p = TwinPolicy()
    for _ in range(twins.GIVE_UP_AFTER - 1):
        p.passed("a", 0.01, twin=False)
    assert p.wants("a")
    p.passed("a", 0.01, twin=False)
    assert not p.wants("a")  # no twin in GIVE_UP_AFTER passes
    for _ in range(twins.GIVE_UP_AFTER + 5):
        p.passed("b", 0.01, twin=False)
    p.passed("b", 0.01, twin=True)
    assert p.wants("b")  # twins come: keep looking
    p.passed("c", 0.2, twin=True)
    p.compiled("c", 2.5)
    assert p.wants("c")  # a pass is 8% of a full compile
    p.compiled("d", 0.05)
    p.passed("d", 0.03, twin=True)
    assert not p.wants("d")  # a pass costs 60% of a full compile
    assert p.wants("never seen")


# ------------------------------------------------------------------------------------------------ the registry
def test_one_process_claims_a_program_and_a_dead_holders_lock_is_taken_over(tmp_path: Path) -> None:
    reg = TwinRegistry(tmp_path)
    key = "ab" * 32
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = tmp_path / key[:2] / f"{key}.lock"
        lock.parent.mkdir(parents=True)
        import socket

        lock.write_text(f"{holder.pid} {socket.gethostname()} {time.time()}")
        assert reg.holder_alive(key) and not reg.claim(key)
        reg.release(key)  # not ours: stays
        assert lock.exists()
    finally:
        holder.kill()
        holder.wait()
    assert not reg.holder_alive(key) and reg.claim(key)  # the dead holder's lock is ours now
    assert lock.read_text().split()[0] == str(__import__("os").getpid())
    assert not TwinRegistry(tmp_path).claim(key)  # held by a live process (this one)
    reg.publish(key, {"ok": False, "log": "x"})
    reg.release(key)
    assert not lock.exists() and reg.outcome(key) == {"ok": False, "log": "x"}
    assert reg.claim("cd" * 32) and reg.outcome("cd" * 32) is None


def test_a_lock_from_another_host_is_held_until_it_is_old(tmp_path: Path) -> None:
    reg, key = TwinRegistry(tmp_path), "ef" * 32
    lock = tmp_path / key[:2] / f"{key}.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text(f"1 elsewhere.example {time.time() - 10}")
    assert reg.holder_alive(key) and not reg.claim(key)
    lock.write_text(f"1 elsewhere.example {time.time() - 7200}")
    assert not reg.holder_alive(key) and reg.claim(key)


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
    """nvrtc_compile's stand-in: the "PTX" of a program is the -D macros its text names (others change nothing);
    a full build takes 50 ms; a cubin build of a program with BIG=1 fails on shared memory, with BAD=1 fails to
    compile."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []  # (kind, the defines)
        self.lock = threading.Lock()

    def __call__(self, text: str, filename: str, names: tuple, options: tuple, kind: str) -> tuple:
        defines = {o[2:].split("=")[0]: o.split("=", 1)[1] for o in options if o.startswith("-D")}
        used = sorted((k, v) for k, v in defines.items() if k in text.split())
        fast = "--Ofast-compile=max" in options
        with self.lock:
            self.calls.append(
                (kind + (" fast" if fast else ""), ",".join(f"{k}={v}" for k, v in sorted(defines.items())))
            )
        if kind == "cubin" and not fast:
            time.sleep(0.05)  # a full build costs far more than the front-end pass (the policy keeps looking)
        if kind == "cubin" and ("BIG", "1") in used:
            raise CompileFailed(SHARED)
        if ("BAD", "1") in used:
            raise CompileFailed("kernel.cu(1): error: BAD")
        code = repr(used).encode()
        return (b"cubin:" if kind == "cubin" else b"ptx:") + code, {n: f"_lowered_{n}" for n in names}, ""


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> StandIn:
    s = StandIn()
    monkeypatch.setattr(comp, "nvrtc_compile", s)
    monkeypatch.setattr(comp, "nvrtc_version", lambda: (13, 0))
    monkeypatch.setattr(comp, "nvrtc_archs", lambda: (90,))
    monkeypatch.setattr(comp, "cuda_include_dir", lambda: "")
    monkeypatch.setattr(twins, "POLICY", TwinPolicy())
    monkeypatch.delenv(twins.TWINS_ENV, raising=False)
    return s


def request(src: Path, precheck: bool = False, **defines: int) -> CompileRequest:
    opts = ("-std=c++17", *(f"-D{k}={v}" for k, v in defines.items()))
    return CompileRequest(src, ("k",), 90, options=opts, precheck=precheck)


@pytest.fixture
def src(tmp_path: Path) -> Path:
    path = tmp_path / "kernel.cu"
    path.write_text("TILE BIG BAD\n")  # the macros the "program" uses; PAD changes nothing
    return path


def fulls(s: StandIn) -> list[str]:
    return [d for kind, d in s.calls if kind == "cubin"]


def test_a_twin_is_served_by_the_full_compile_of_its_program(standin: StandIn, src: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (a,) = compile_batch(request(src, TILE=2, PAD=0), cache)
    (b,) = compile_batch(request(src, TILE=2, PAD=1), cache)  # the same program
    (c,) = compile_batch(request(src, TILE=4, PAD=1), cache)  # another
    assert a.ok and b.ok and c.ok
    assert b.blob == a.blob and b.lowered_name == a.lowered_name == "_lowered_k" and c.blob != a.blob
    assert b.key != a.key  # its own cache entry
    assert fulls(standin) == ["PAD=0,TILE=2", "PAD=1,TILE=4"]
    assert [k for k, _ in standin.calls].count("ptx") == 3
    again = compile_batch(request(src, TILE=2, PAD=1), cache)[0]  # from the compile cache: no pass at all
    assert again.cached and again.blob == a.blob and len(standin.calls) == 5


def test_a_twin_shares_a_deterministic_failure(standin: StandIn, src: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (a,) = compile_batch(request(src, TILE=2, BIG=1, PAD=0), cache)
    (b,) = compile_batch(request(src, TILE=2, BIG=1, PAD=1), cache)
    assert not a.ok and not b.ok and SHARED in b.log
    assert fulls(standin) == ["BIG=1,PAD=0,TILE=2"]
    (c,) = compile_batch(request(src, TILE=2, BAD=1, PAD=0), cache)  # fails in the front end: no key, no sharing
    assert not c.ok and "error: BAD" in c.log


def test_a_twin_is_looked_for_before_the_resource_precheck(standin: StandIn, src: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (a,) = compile_batch(request(src, precheck=True, TILE=2, BIG=1, PAD=0), cache)
    (b,) = compile_batch(request(src, precheck=True, TILE=2, BIG=1, PAD=1), cache)
    assert not a.ok and a.log.startswith(comp.PRECHECK_NOTE) and b.log == a.log
    assert [k for k, _ in standin.calls] == ["ptx", "cubin fast", "ptx"]  # the twin: its pass only


def test_a_twin_compiling_elsewhere_is_waited_for_or_deferred(standin: StandIn, src: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (a,) = compile_batch(request(src, TILE=2, PAD=0), cache)
    outcome_dir = cache / "twins"
    (json_file,) = outcome_dir.glob("*/*.json")
    key = json_file.stem
    saved = json_file.read_text()
    json_file.unlink()  # as if A were still compiling, in this (live) process
    import os
    import socket

    (outcome_dir / key[:2] / f"{key}.lock").write_text(f"{os.getpid()} {socket.gethostname()} {time.time()}")
    later = compile_batch(request(src, TILE=2, PAD=1), cache, defer=True)
    assert isinstance(later, Later) and later.after_s == twins.FIRST_WAIT_S and later.args[2] == key
    assert fulls(standin) == ["PAD=0,TILE=2"]

    again = later.fn(*later.args)  # still compiling elsewhere: later again, waiting twice as long
    assert isinstance(again, Later) and again.after_s == 2 * twins.FIRST_WAIT_S

    def finish(delay: float) -> None:  # the "other process" ends its compile
        time.sleep(delay)
        json_file.write_text(saved)
        (outcome_dir / key[:2] / f"{key}.lock").unlink()

    finish(0)
    (b,) = again.fn(*again.args)
    assert b.ok and b.blob == a.blob and fulls(standin) == ["PAD=0,TILE=2"]
    (json_file.parent / f"{key}.lock").write_text(f"{os.getpid()} {socket.gethostname()} {time.time()}")
    json_file.unlink()
    t = threading.Thread(target=finish, args=(0.5,))
    t.start()
    t0 = time.monotonic()
    (c,) = compile_batch(request(src, TILE=2, PAD=2), cache)  # not deferring: waits here for the outcome
    t.join()
    assert c.ok and c.blob == a.blob and fulls(standin) == ["PAD=0,TILE=2"] and time.monotonic() - t0 >= 0.5


def test_twins_off_compiles_every_configuration(
    standin: StandIn, src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(twins.TWINS_ENV, "0")
    compile_batch(request(src, TILE=2, PAD=0), tmp_path / "cache")
    compile_batch(request(src, TILE=2, PAD=1), tmp_path / "cache")
    assert [k for k, _ in standin.calls] == ["cubin", "cubin"] and not (tmp_path / "cache" / "twins").exists()


def test_template_instances_without_macros_are_never_looked_up(standin: StandIn, src: Path, tmp_path: Path) -> None:
    compile_batch(CompileRequest(src, ("k<1>", "k<2>"), 90), tmp_path / "cache")
    assert [k for k, _ in standin.calls] == ["cubin"] and not (tmp_path / "cache" / "twins").exists()
