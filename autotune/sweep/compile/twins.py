"""Compile each distinct program once at a time: a configuration whose defines seem to give the same program as one
compiling now waits for it, then compiles in a tenth of the time.

Many tuning parameters change nothing in some corner of a space: a padding switch where the tile needs no padding,
an unroll factor above the loop's trip count. Kernel Tuner's 2D convolution compiles the same program for 450 of its
1,080 configurations (`scripts/bench_compile_scaling.py --twins`). NVRTC (CUDA 13, through the driver's compute
cache) compiles a program it compiled before in 13-24 ms in the same process and about 0.2 s in another, against
1.2-8.6 s the first time (results/bench/PROVENANCE.md), but only once that first compile has finished: in the order
Kernel Tuner enumerates them the twins come next to each other, so they compiled at the same time, each in full.

How: before an NVRTC compile whose options define macros, the C preprocessor (`cpp -P`, with the request's macros,
include folders and NVRTC's own predefined macros) gives the program text; its hash, with the name expressions,
the options that are not macros or include folders and the architecture, is the *twin key*. The first compile of a
key holds `<compile cache>/twins/<key>.lock` (`pid host time`) while it runs and leaves `<key>.done` when it ends; a
configuration that finds the lock held by a live process waits until the program is done, then compiles as usual
(NVRTC's cache serves it); once it is done, its twins compile at once, side by side, without a lock. In a `compile_pool`
worker it does not wait in its process: its call answers `Later` and the pool asks again after a while, so the
process compiles something else meanwhile. A lock whose process is gone (a compile killed at its time limit, a
killed sweep) is taken over.

The key only orders compiles; it never hands one configuration another's binary, so a preprocessor that differs
from NVRTC's (GCC's, here) costs at most a wait, never a wrong kernel. Without `cpp`, or where it fails on the
source, nothing waits. Per source and per compile process, looking stops once the preprocessor costs more than
`MAX_PASS_SHARE` of a full compile, after `GIVE_UP_AFTER` looks without a twin, or once it fails (`TwinPolicy`).
On by default since the GPU test tier passed with it on (H200, 2026-11-28: CHANGELOG); `AUTOTUNE_COMPILE_TWINS=0`
turns it off (`enabled`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

TWINS_ENV = "AUTOTUNE_COMPILE_TWINS"  # "0": never look for twins (on by default: `enabled`)
MAX_PASS_SHARE = 0.25  # a preprocessor run costing more than this share of a full compile is not worth its twins
GIVE_UP_AFTER = 24  # looks at one source in one process that found no twin: stop looking there
FIRST_WAIT_S = 0.25  # a twin whose program compiles elsewhere looks again after this, doubling up to MAX_WAIT_S
MAX_WAIT_S = 1.0
CPP_TIMEOUT_S = 20.0
_MACRO_OPTIONS = ("-D", "--define-macro", "-U", "--undefine-macro", "-I", "--include-path")


@dataclass(frozen=True)
class Later:
    """A pool call's answer meaning "not now": the pool runs `fn(*args)` again, for the same future, after `after_s`
    seconds (`compile_pool.CompilePool`). Anything else that calls such a function never receives one."""

    fn: Callable[..., Any]
    args: tuple
    after_s: float


def enabled(env: dict[str, str] | None = None) -> bool:
    """Unless $AUTOTUNE_COMPILE_TWINS is "0" (or "off", "no", "false"): on by default."""
    value = (env if env is not None else os.environ).get(TWINS_ENV, "1").strip().lower()
    return value not in ("0", "off", "no", "false")


def may_have_twins(options: tuple[str, ...], edited: bool) -> bool:
    """Only macro definitions (or Kernel Tuner's unroll edits of the text) can make two configurations one program:
    template instances differ in their names, so a request without either is never looked up."""
    return edited or any(o.startswith(("-D", "--define-macro")) for o in options)


@functools.cache
def find_cpp() -> str | None:
    return shutil.which("cpp")


def _macro_args(options: tuple[str, ...]) -> list[str]:
    """The options' macro definitions and include folders, as the C preprocessor's arguments."""
    out = []
    for o in options:
        for long, short in (("--define-macro=", "-D"), ("--undefine-macro=", "-U"), ("--include-path=", "-I")):
            if o.startswith(long):
                o = short + o[len(long) :]
        if o.startswith(("-D", "-U", "-I")):
            out.append(o)
    return out


def twin_key(
    text: str, names: tuple[str, ...], options: tuple[str, ...], arch: int, cpp: str | None = None
) -> str | None:
    """The key of the program `text` is under `options` (the module docstring), or None without a preprocessor or
    where it fails. `options` are the compile's own: macros, include folders, then the rest. `cpp`: the
    preprocessor (default: `cpp` on the PATH)."""
    cpp = cpp or find_cpp()
    if cpp is None:
        return None
    predefined = ["-D__CUDACC__", "-D__CUDACC_RTC__", "-D__NVCC__", f"-D__CUDA_ARCH__={arch * 10}"]
    try:
        done = subprocess.run(
            [cpp, "-P", "-x", "c++", *predefined, *_macro_args(options)],
            input=text,
            capture_output=True,
            text=True,
            timeout=CPP_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    h = hashlib.sha256(" ".join(done.stdout.split()).encode())
    rest = [o for o in options if not o.startswith(_MACRO_OPTIONS)]
    h.update(json.dumps([list(names), rest, arch]).encode())
    return h.hexdigest()


@dataclass
class _SourceStats:
    looks: int = 0
    look_s: float = 0.0
    found: int = 0
    fulls: int = 0
    full_s: float = 0.0
    keyless: bool = False


@dataclass
class TwinPolicy:
    """Whether a compile process still looks for twins of a source (by its digest): see the module docstring."""

    stats: dict[str, _SourceStats] = field(default_factory=dict)

    def wants(self, digest: str) -> bool:
        s = self.stats.get(digest)
        if s is None:
            return True
        if s.keyless:  # the preprocessor failed on it: it would again (its includes, its syntax)
            return False
        if s.found == 0 and s.looks >= GIVE_UP_AFTER:
            return False
        if s.fulls and s.looks and s.look_s / s.looks > MAX_PASS_SHARE * (s.full_s / s.fulls):
            return False
        return True

    def looked(self, digest: str, seconds: float, twin: bool) -> None:
        s = self.stats.setdefault(digest, _SourceStats())
        s.looks, s.look_s, s.found = s.looks + 1, s.look_s + seconds, s.found + int(twin)

    def no_key(self, digest: str) -> None:
        self.stats.setdefault(digest, _SourceStats()).keyless = True

    def compiled(self, digest: str, seconds: float) -> None:
        s = self.stats.setdefault(digest, _SourceStats())
        s.fulls, s.full_s = s.fulls + 1, s.full_s + seconds


POLICY = TwinPolicy()  # this process's (a compile process lives for a whole sweep)


class TwinLocks:
    """`<root>/<key[:2]>/<key>.lock`: the program of that key is compiling (the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.lock"

    def claim(self, key: str) -> bool:
        """Take the program's compile: True when this process holds its lock now (taken from a dead holder if need
        be), False when a live process holds it. An unwritable folder claims (nothing waits)."""
        path = self._path(key)
        for _ in range(2):
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if self.holder_alive(key):
                    return False
                aside = path.with_suffix(f".stale-{os.getpid()}")
                try:  # a dead holder's lock: move it aside (one taker wins the rename) and try again
                    os.replace(path, aside)
                    os.unlink(aside)
                except OSError:
                    pass
                continue
            except OSError:
                return True
            with os.fdopen(fd, "w") as f:
                f.write(f"{os.getpid()} {socket.gethostname()} {time.time():.3f}")
            return True
        return not self.holder_alive(key)

    def holder_alive(self, key: str, stale_after_s: float = 3600.0) -> bool:
        """Whether the lock's process still runs: by its pid on this host; on another host (a shared folder) until
        the lock is `stale_after_s` old."""
        try:
            pid, host, at = self._path(key).read_text().split()
        except (OSError, ValueError):
            return False
        if host != socket.gethostname():
            return time.time() - float(at) < stale_after_s
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except (PermissionError, ValueError):
            return True
        return True

    def done(self, key: str) -> bool:
        """Whether the key's first compile has ended (its twins need not wait)."""
        return self._path(key).with_suffix(".done").exists()

    def finish(self, key: str) -> None:
        """The key's first compile ended (whatever its outcome): mark it done, then release its lock."""
        try:
            self._path(key).with_suffix(".done").touch()
        except OSError:
            pass
        self.release(key)

    def release(self, key: str) -> None:
        try:
            path = self._path(key)
            if path.read_text().split()[0] == str(os.getpid()):
                path.unlink()
        except (OSError, IndexError):
            pass


@dataclass(frozen=True)
class Program:
    """What one NVRTC compile is of: the source text and its digest (included headers too), the instances' name
    expressions, the options without the architecture, the architecture, and whether the text was edited
    (`semantics: kerneltuner`)."""

    text: str
    digest: str
    names: tuple[str, ...]
    options: tuple[str, ...]
    arch: int
    edited: bool


def take_turn(
    root: Path,
    program: Program,
    *,
    twin: str | None,
    again: tuple[Callable[..., Any], tuple] | None,
    wait_s: float | None,
) -> str | Later | None:
    """Before a compile of `program.names` (the module docstring; locks under `root`): the twin key this process now
    holds (compile, then `TwinLocks.finish` it), or None (compile now: not looked for, no key, or the program's first
    compile is done). Its program's first compile running elsewhere, it waits here, or with `again` (fn, its first
    arguments) answers `Later(fn, (*arguments, key, next wait), wait)`. `twin`, `wait_s`: such a later call's."""
    text, digest, names, options = program.text, program.digest, program.names, program.options
    locks = TwinLocks(root)
    if twin is None:
        if not (enabled() and may_have_twins(options, program.edited) and POLICY.wants(digest)):
            return None
        t0 = time.perf_counter()
        twin = twin_key(text, names, options, program.arch)
        if twin is None:
            POLICY.looked(digest, time.perf_counter() - t0, twin=False)
            POLICY.no_key(digest)
            return None
        if locks.done(twin):
            POLICY.looked(digest, time.perf_counter() - t0, twin=True)
            return None
        claimed = locks.claim(twin)
        POLICY.looked(digest, time.perf_counter() - t0, twin=not claimed)
        if claimed:
            return twin
    wait = FIRST_WAIT_S if wait_s is None else wait_s
    while True:
        if locks.done(twin):
            return None
        if locks.claim(twin):  # (its first compile was killed: this one takes it over)
            return twin
        if again is not None:
            fn, first = again
            return Later(fn, (*first, twin, min(2 * wait, MAX_WAIT_S)), wait)
        time.sleep(wait)
        wait = min(2 * wait, MAX_WAIT_S)
