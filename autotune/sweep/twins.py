"""Compile each distinct program once: configurations whose defines give the same code share one full compile.

Many tuning parameters change nothing in some corner of a space: a padding switch where the tile needs no padding,
an unroll factor above the loop's trip count. Kernel Tuner's 2D convolution compiles the same program for 450 of its
1,080 configurations (`scripts/bench_compile_scaling.py --twins`); in the order Kernel Tuner enumerates them the
twins come next to each other, so they compile at the same time in different processes and neither is served by the
driver's compute cache (which keeps ptxas's output for a program compiled *before*).

How (NVRTC, cubin output): a front-end pass to PTX (NVRTC with `-arch=compute_XX`; on the convolution about a
tenth of a full compile, whose rest is ptxas) gives the program's code. Its hash, with the name expressions' lowered
names, the options that are not macro definitions or include folders, the architecture option and the NVRTC
version, is the program's *twin key*. Under `<compile cache>/twins/`:

- `<key>.json`: the outcome of the full compile of that program (the cubin blob it wrote, the lowered names, the
  log; or the deterministic failure), read by any later twin instead of compiling;
- `<key>.lock`: the full compile of that program is running (`pid host` of its process); a twin that finds it waits
  for the outcome. In a `compile_pool` worker it does not wait in its process: its call answers `Later` and the pool
  runs it again after a while, so the process compiles something else meanwhile. A lock whose process is gone (a
  compile killed at its time limit, a killed sweep) is taken over.

The front-end pass is spent only where it pays: per source and per compile process, it stops once a pass costs more
than `MAX_PASS_SHARE` of a full compile, or after `GIVE_UP_AFTER` passes without a twin (`TwinPolicy`).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

TWINS_ENV = "AUTOTUNE_COMPILE_TWINS"  # "0": never look for twins (every configuration compiles in full)
MAX_PASS_SHARE = 0.25  # a front-end pass costing more than this share of a full compile is not worth its twins
GIVE_UP_AFTER = 24  # passes of one source in one process that found no twin: stop looking there
FIRST_WAIT_S = 0.25  # a twin whose program compiles elsewhere looks again after this, doubling up to MAX_WAIT_S
MAX_WAIT_S = 2.0
_MACRO_OPTIONS = ("-D", "--define-macro", "-U", "--undefine-macro", "-I", "--include-path")


@dataclass(frozen=True)
class Later:
    """A pool call's answer meaning "not now": the pool runs `fn(*args)` again, for the same future, after `after_s`
    seconds (`compile_pool.CompilePool`). Anything else that calls such a function never receives one."""

    fn: Callable[..., Any]
    args: tuple
    after_s: float


def enabled(env: dict[str, str] | None = None) -> bool:
    return (env if env is not None else os.environ).get(TWINS_ENV, "1").strip().lower() not in ("0", "off", "no")


def may_have_twins(options: tuple[str, ...], edited: bool) -> bool:
    """Only macro definitions (or Kernel Tuner's unroll edits of the text) can make two configurations one program:
    template instances differ in their lowered names, so a request without either is never looked up."""
    return edited or any(o.startswith(("-D", "--define-macro")) for o in options)


def twin_key(ptx: bytes, lowered: dict[str, str], options: tuple[str, ...], arch_option: str, version: Any) -> str:
    """The key of the program a front-end pass produced: its PTX, lowered names, the options besides macro
    definitions and include folders (those only change the text, whose effect the PTX already shows), the
    architecture option the full compile uses and the compiler's version."""
    h = hashlib.sha256(ptx)
    rest = [o for o in options if not o.startswith(_MACRO_OPTIONS)]
    h.update(json.dumps([sorted(lowered.items()), rest, arch_option, list(version)]).encode())
    return h.hexdigest()


@dataclass
class _SourceStats:
    passes: int = 0
    pass_s: float = 0.0
    found: int = 0
    fulls: int = 0
    full_s: float = 0.0


@dataclass
class TwinPolicy:
    """Whether a compile process still looks for twins of a source (by its digest): see the module docstring."""

    stats: dict[str, _SourceStats] = field(default_factory=dict)

    def wants(self, digest: str) -> bool:
        s = self.stats.get(digest)
        if s is None:
            return True
        if s.found == 0 and s.passes >= GIVE_UP_AFTER:
            return False
        if s.fulls and s.passes and s.pass_s / s.passes > MAX_PASS_SHARE * (s.full_s / s.fulls):
            return False
        return True

    def passed(self, digest: str, seconds: float, twin: bool) -> None:
        s = self.stats.setdefault(digest, _SourceStats())
        s.passes, s.pass_s, s.found = s.passes + 1, s.pass_s + seconds, s.found + int(twin)

    def compiled(self, digest: str, seconds: float) -> None:
        s = self.stats.setdefault(digest, _SourceStats())
        s.fulls, s.full_s = s.fulls + 1, s.full_s + seconds


POLICY = TwinPolicy()  # this process's (a compile process lives for a whole sweep)


class TwinRegistry:
    """`<root>/<key>.json` outcomes and `<key>.lock` claims (the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, key: str, suffix: str) -> Path:
        return self.root / key[:2] / f"{key}{suffix}"

    def outcome(self, key: str) -> dict | None:
        try:
            return json.loads(self._path(key, ".json").read_text())
        except (OSError, ValueError):
            return None

    def publish(self, key: str, outcome: dict) -> None:
        from autotune.sweep.compile import _atomic_write

        _atomic_write(self._path(key, ".json"), json.dumps(outcome).encode())

    def claim(self, key: str) -> bool:
        """Take the program's compile: True when this process holds its lock now (taken from a dead holder if need
        be), False when a live process holds it. An unwritable folder claims (nothing is shared, nothing lost)."""
        path = self._path(key, ".lock")
        for _ in range(2):
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if self.holder_alive(key):
                    return False
                try:  # a dead holder's lock: move it aside (one taker wins the rename) and try again
                    os.replace(path, path.with_suffix(f".stale-{os.getpid()}"))
                    os.unlink(path.with_suffix(f".stale-{os.getpid()}"))
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
            pid, host, at = self._path(key, ".lock").read_text().split()
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

    def release(self, key: str) -> None:
        try:
            path = self._path(key, ".lock")
            if path.read_text().split()[0] == str(os.getpid()):
                path.unlink()
        except (OSError, IndexError):
            pass
