"""Throughput of one sweep in the runner's process and through the Dask executor on 1, 2, ... workers.

    python scripts/bench_dask.py CONFIG [--max-instances N] [--workers 1,2] [--warm] [--out DIR]
    python scripts/bench_dask.py CONFIG --replay DB --delay 0.02     # no GPU: replays as GPUs

Each variant sweeps CONFIG into a fresh database (under --out) without the early stop (every instance timed fully,
so every variant does the same work); the executor is started (GPU processes, cluster) before the clock starts,
and that start is printed apart. `--warm` first runs the single-process sweep once unreported, so every reported
variant finds its kernels in the compile cache (timing-bound: the executor's own overhead). Prints one line per
variant: pairs, instances ("configs"), seconds, pairs/s and configs/s, and the per-GPU rates of Dask variants.
"""

from __future__ import annotations

import argparse
import dataclasses
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence


class _Quiet:
    def start(self, total_pairs: int, already_done: int) -> None:
        pass

    def measured(self, m: Any, best_ms: float | None) -> None:
        pass

    def note(self, text: str) -> None:
        pass


def _single(replay: str | None, delay: float) -> Any:
    if replay:
        from autotune.sweep.backends.replay import ReplayBackend

        return ReplayBackend(replay, delay_s=delay)
    from autotune.sweep.backends.local import gpu_backend

    return gpu_backend(tol=None)


def _dask(replay: str | None, delay: float, workers: int) -> Any:
    from autotune.sweep.backends.dask_backend import DaskBackend, gpu_list
    from autotune.sweep.backends.dask_executors import GpuExecutor, ReplayExecutor

    executor = ReplayExecutor(replay, delay_s=delay, relabel=True) if replay else GpuExecutor(per_host=workers)
    return DaskBackend(executor, devices=gpu_list(str(workers), replay=replay is not None))


def run_variant(name: str, cfg: Any, backend: Any, out: Path) -> dict:
    """Sweep `cfg` into out/NAME.sqlite with `backend` (started first, untimed); the figures of the run."""
    from autotune.store.store import Store
    from autotune.sweep.runner import run_sweep

    db = out / f"{name}.sqlite"
    db.unlink(missing_ok=True)
    cfg = dataclasses.replace(cfg, database=f"sqlite:///{db}")
    t0 = time.monotonic()
    try:
        start = getattr(backend, "start", None)
        if start is not None:
            start()
        backend.device_info()
        started = time.monotonic() - t0
        t1 = time.monotonic()
        with Store.open(cfg.database) as store:
            summary = run_sweep(cfg, store, backend, _Quiet())
        seconds = time.monotonic() - t1
        rates = [f"{r.worker} {r.pairs} pairs {r.per_s:.1f}/s" for r in getattr(backend, "rates", list)()]
    finally:
        backend.close()
    with sqlite3.connect(db) as c:
        pairs, configs = c.execute("select count(*), count(distinct instance_id) from measurements").fetchone()
    return dict(
        name=name,
        status=summary.status,
        start_s=started,
        seconds=seconds,
        pairs=pairs,
        configs=configs,
        pairs_s=pairs / seconds if seconds else 0.0,
        configs_s=configs / seconds if seconds else 0.0,
        rates=rates,
    )


def main(argv: Sequence[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(
        prog="scripts/bench_dask.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("config", help="sweep config (configs/NAME.yaml)")
    ap.add_argument("--max-instances", type=int, default=None, help="instances per space (the config's otherwise)")
    ap.add_argument("--workers", default="1,2", help="Dask variants: comma-separated worker (GPU) counts")
    ap.add_argument("--no-single", action="store_true", help="skip the single-process variant")
    ap.add_argument("--warm", action="store_true", help="run the single-process sweep once first, unreported")
    ap.add_argument("--replay", default=None, help="replay this recorded database instead of using GPUs")
    ap.add_argument("--delay", type=float, default=0.0, help="with --replay: seconds per measurement")
    ap.add_argument("--out", default=None, help="folder for the databases (default: a temporary folder)")
    args = ap.parse_args(argv)
    from autotune.sweep.config import load_config

    cfg = load_config(args.config)
    if args.max_instances is not None:
        cfg = dataclasses.replace(cfg, max_instances=args.max_instances)
    out = Path(args.out or tempfile.mkdtemp(prefix="dask-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    if args.warm:
        run_variant("warm", cfg, _single(args.replay, args.delay), out)
    variants: list[tuple[str, Any]] = (
        [] if args.no_single else [("one process", lambda: _single(args.replay, args.delay))]
    )
    for n in (int(w) for w in args.workers.split(",") if w.strip()):
        variants.append((f"dask {n}", lambda n=n: _dask(args.replay, args.delay, n)))
    results = []
    for name, make in variants:
        r = run_variant(name.replace(" ", "_"), cfg, make(), out)
        r["name"] = name
        results.append(r)
        print(
            f"{name}: {r['status']}, {r['pairs']} pairs, {r['configs']} configs in {r['seconds']:.2f} s: "
            f"{r['pairs_s']:.2f} pairs/s, {r['configs_s']:.3f} configs/s (executor start {r['start_s']:.1f} s)"
            + (f"; per GPU: {', '.join(r['rates'])}" if r["rates"] else ""),
            flush=True,
        )
    return results


if __name__ == "__main__":
    main()
