"""Reaching the GPUs of a Dask sweep (`autotune.sweep.backends.dask_backend`): `distributed` itself, this node's
GPUs (`--gpus all|N|LIST`), a local cluster of one worker per GPU, and a running scheduler (`--scheduler ADDRESS`).

The local cluster is plain `distributed` (a `SpecCluster` of one `Nanny` per GPU, each with its own
`CUDA_VISIBLE_DEVICES`), not dask-cuda: see docs/scale-out.md for why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from typing import Any, Sequence

from autotune import untrusted
from autotune.errors import UserError
from autotune.untrusted import env_number, number

INSTALL_HINT = "pip install 'autotune[dask]'  (or: pip install distributed)"
CONNECT_TIMEOUT_S = 60.0  # for the workers of a local cluster (--gpus) to appear
SCHEDULER_TIMEOUT_ENV = "AUTOTUNE_SCHEDULER_TIMEOUT"  # seconds to reach a --scheduler, and to see its first worker
SCHEDULER_TIMEOUT_S = 30.0
CLOSE_TIMEOUT_S = 3.0  # for the client's close (a stop waits for it)
SCHEMES = ("tcp", "tls", "ucx", "ws", "wss")  # Dask's schemes a scheduler in another process listens on
SCHEDULER_HINT = (
    "pass the address a running `dask scheduler` prints, e.g. --scheduler tcp://node01:8786 (or node01:8786; "
    "schemes: " + ", ".join(f"{s}://" for s in SCHEMES) + "); the SLURM job of docs/scale-out.md starts one"
)
MAX_LOCAL_WORKERS = 64  # GPU workers of a local cluster (one process each; the largest nodes hold 16 GPUs)


def require_distributed() -> Any:
    """The `distributed` package, or a UserError that says how to install it."""
    try:
        import distributed
    except ImportError:
        raise UserError(
            "--gpus and --scheduler need Dask's `distributed` package, which is not installed", hint=INSTALL_HINT
        ) from None
    return distributed


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries: CUDA_VISIBLE_DEVICES's own list when it is
    set, else one index per GPU that `nvidia-smi -L` lists (the client never initialises CUDA itself)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(ln for ln in out.stdout.splitlines() if ln.startswith("GPU "))]


def gpu_list(gpus: str, replay: bool = False) -> list[str]:
    """`--gpus all|N|LIST` as the CUDA_VISIBLE_DEVICES entry of each worker. With `replay` (no GPU used) the
    entries are only names: `all` is 2 workers and N is N workers."""
    text = gpus.strip().lower()
    if replay:
        n = 2 if text == "all" else _count(gpus)
        return [str(i) for i in range(n)]
    found = visible_gpus()
    if text == "all":
        if not found:
            raise UserError(
                "--gpus all: no GPU found (CUDA_VISIBLE_DEVICES is empty or nvidia-smi lists none)",
                hint="run on a machine with NVIDIA GPUs, or pass --scheduler ADDRESS of a Dask cluster",
            )
        return found
    if "," in text:
        listed = [d.strip() for d in gpus.split(",") if d.strip()]
        twice = next((d for d in listed if listed.count(d) > 1), None)
        if twice is not None or len(listed) > MAX_LOCAL_WORKERS:
            raise UserError(
                f"--gpus {gpus[:60]}: " + (f"GPU {twice} listed twice" if twice else f"{len(listed):,} GPUs listed"),
                hint=f"list each GPU of this machine once (at most {MAX_LOCAL_WORKERS}), or pass --gpus all",
            )
        return listed
    n = _count(gpus)
    if found and n > len(found):
        raise UserError(
            f"--gpus {n}: only {len(found)} GPU(s) visible ({', '.join(found)})",
            hint=f"pass --gpus all or a number up to {len(found)}",
        )
    return (found or [str(i) for i in range(n)])[:n]


def _count(gpus: str) -> int:
    """--gpus N: a whole number of workers from 1 to MAX_LOCAL_WORKERS (99,999 started 99,999 processes)."""
    try:
        n = int(untrusted.number(gpus, name="--gpus", integer=True))
    except UserError:
        raise UserError(
            f"--gpus must be `all`, a number of GPUs or a comma-separated list of GPU indices, got {gpus[:60]!r}"
        ) from None
    if n < 1:
        raise UserError(f"--gpus must be at least 1, got {n}")
    if n > MAX_LOCAL_WORKERS:
        raise UserError(
            f"--gpus {n:,}: a local cluster has at most {MAX_LOCAL_WORKERS} workers (one per GPU of this machine)",
            hint="pass --gpus all or the number of GPUs this machine has; several machines: --scheduler ADDRESS",
        )
    return n


def scheduler_address(text: str) -> str:
    """`--scheduler TEXT` as the Dask address to connect to: SCHEME://HOST:PORT with a scheme of `SCHEMES`, or
    HOST:PORT (tcp://, Dask's default). Anything else (an empty text, file:///..., an http:// URL, a path, no port) is
    a UserError before anything connects."""
    given = text.strip()
    if not given:
        raise UserError("--scheduler is empty: it takes the address of a Dask scheduler", hint=SCHEDULER_HINT)
    scheme, sep, rest = given.partition("://")
    if not sep:
        scheme, rest = "tcp", given
    scheme = scheme.lower()
    if scheme == "inproc":
        raise UserError(
            f"--scheduler {given}: an inproc:// scheduler lives inside another Python process, which a command "
            "cannot reach",
            hint=SCHEDULER_HINT,
        )
    if scheme not in SCHEMES:
        raise UserError(f"--scheduler {given}: {scheme}:// is not a Dask scheduler's scheme", hint=SCHEDULER_HINT)
    if rest.startswith("["):  # [IPv6]:port
        host, close, port = rest[1:].partition("]")
        port = port[1:] if close and port.startswith(":") else ""
        shown = f"[{host}]"
    else:
        host, _, port = rest.rpartition(":")
        shown = host
    if not host or not port or any(c in "/?#@[]" or c.isspace() for c in host) or (":" in host and shown == host):
        raise UserError(
            f"--scheduler {given} is not HOST:PORT"
            + (" (an IPv6 host goes in brackets: [::1]:8786)" if ":" in host else ""),
            hint=SCHEDULER_HINT,
        )
    at = number(port, name=f"--scheduler {given}: the port", integer=True, lo=1, hi=65535, example="8786")
    return f"{scheme}://{shown}:{int(at)}"


def scheduler_timeout_s() -> float:
    """Seconds to reach a --scheduler and to see its first worker ($AUTOTUNE_SCHEDULER_TIMEOUT, default 30)."""
    got = env_number(SCHEDULER_TIMEOUT_ENV, SCHEDULER_TIMEOUT_S, lo=0.1, hi=86400.0, example="30")
    assert got is not None
    return got


def identify_scheduler(address: str, timeout_s: float) -> dict:
    """Ask what answers at `address` (Dask's `identity` call) within `timeout_s`, and check that it is a scheduler:
    a service that accepts and says nothing (or an HTTP server) would otherwise hold `distributed.Client` forever,
    since Dask bounds the connection, not the handshake after it. In a thread of its own (with its own event loop),
    so the main thread takes a stop (Ctrl-C, SIGTERM) at once. A UserError when nothing (or not a scheduler)
    answers."""
    import asyncio

    answer: list[Any] = []

    async def ask() -> Any:
        from distributed.comm import connect
        from distributed.security import Security

        comm = await connect(address, timeout=timeout_s, **Security().get_connection_args("client"))
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    def run() -> None:
        try:
            answer.append(asyncio.run(asyncio.wait_for(ask(), timeout_s + 1.0)))  # (Dask's own error first)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            answer.append(exc)

    thread = threading.Thread(target=run, name="autotune-scheduler-probe", daemon=True)
    thread.start()
    thread.join(timeout_s + 5.0)  # (its own wait_for ends it before)
    got = answer[0] if answer else TimeoutError()
    knob = f"{SCHEDULER_TIMEOUT_ENV}={timeout_s:g} s"
    if isinstance(got, (TimeoutError, asyncio.TimeoutError)):
        raise UserError(
            f"no Dask scheduler answered at {address} within {knob}",
            hint=f"{SCHEDULER_HINT}; a slow network: set {SCHEDULER_TIMEOUT_ENV} to more seconds",
        )
    if isinstance(got, BaseException):
        cause = f" ({re.sub(r'in <[^>]*>: ', '', why(got.__cause__))})" if got.__cause__ is not None else ""
        raise UserError(
            f"cannot reach a Dask scheduler at {address} within {knob}: {why(got)}{cause}", hint=SCHEDULER_HINT
        )
    kind = got.get("type") if isinstance(got, dict) else None
    if kind != "Scheduler":
        what = f"a Dask {kind}" if isinstance(kind, str) and kind.isidentifier() else "not a Dask scheduler"
        raise UserError(f"{address} answers, and is {what}, not a scheduler", hint=SCHEDULER_HINT)
    return got


def local_cluster(devices: Sequence[str], *, compile_workers: int = 0, silence: bool = True) -> Any:
    """A cluster on this host: a scheduler and one worker process (a Nanny, which restarts it if it dies) per
    entry of `devices`, named gpu0, gpu1, ..., each with one thread, the resource GPU=1 and CUDA_VISIBLE_DEVICES=its
    entry, no memory limit (the Nanny would otherwise kill a worker holding a large float64 reference), no
    dashboard; and `compile_workers` CPU workers (compile0, ...; resource compile=1, no GPU) that compile ahead, each
    in a pool of the host's cores / `compile_workers` processes ($AUTOTUNE_COMPILE_WORKERS overrides)."""
    import logging

    distributed = require_distributed()
    import dask

    # a GPU executor starts processes of its own (compile pool, GPU process): Dask's workers must not be daemonic
    dask.config.set({"distributed.worker.daemon": False})
    scheduler = {
        "cls": distributed.Scheduler,
        "options": {"host": "127.0.0.1", "port": 0, "dashboard": False, "dashboard_address": None},
    }
    workers = {
        f"gpu{i}": {
            "cls": distributed.Nanny,
            "options": {
                "host": "127.0.0.1",
                "nthreads": 1,
                "memory_limit": 0,
                "env": {"CUDA_VISIBLE_DEVICES": str(dev)},
                "resources": {"GPU": 1},
                "silence_logs": logging.ERROR if silence else False,
            },
        }
        for i, dev in enumerate(devices)
    }
    share = str(max(1, (os.cpu_count() or 1) // max(1, compile_workers)))  # compile processes of each (its pool)
    for i in range(compile_workers):
        workers[f"compile{i}"] = {
            "cls": distributed.Nanny,
            "options": {
                "host": "127.0.0.1",
                "nthreads": 1,
                "memory_limit": 0,
                "env": {
                    "CUDA_VISIBLE_DEVICES": "",
                    "AUTOTUNE_COMPILE_WORKERS": os.environ.get("AUTOTUNE_COMPILE_WORKERS", share),
                },
                "resources": {"compile": 1},
                "silence_logs": logging.ERROR if silence else False,
            },
        }
    return distributed.SpecCluster(
        workers=workers, scheduler=scheduler, silence_logs=logging.ERROR if silence else False, name="autotune"
    )


def why(exc: BaseException) -> str:
    """An exception in one line: its type and the start of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__
