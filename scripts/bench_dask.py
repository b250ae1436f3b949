"""Throughput of one sweep in the runner's process and through the Dask executor on 1, 2, ... workers.

    python scripts/bench_dask.py CONFIG [--max-instances N] [--workers 1,2] [--warm] [--repeat 3] [--out DIR]
    python scripts/bench_dask.py CONFIG --replay DB --delay 0.02 --baseline-delay 0.08   # no GPU: replays as GPUs

Each variant sweeps CONFIG into a fresh database (under --out) without the early stop (every instance timed fully,
so every variant does the same work); the executor is started (GPU processes, cluster) before the clock starts,
and that start is printed apart. `--warm` first runs the single-process sweep once unreported, so every reported
variant finds its kernels in the compile cache (timing-bound: the executor's own overhead). `--repeat N` runs the
variants N times, alternating (one process, dask 1, ..., one process, dask 1, ...), so that a drift of the machine
hits every variant alike; the summary gives each variant's median and its overhead against the single process, the
median of the N paired ratios (for the whole measured time, and for the sweep row's start to finish alone).

Each run's line splits its wall time: `results` (the runner waiting for the executor's measurements), `baselines`
(waiting for the kind's baselines), `client` (the rest: recording, the strategy, planning); and, for Dask, `busy`
(the seconds the workers spent in their chunks, summed over workers). The table last has one row per variant.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sqlite3
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator, Sequence


@dataclasses.dataclass(frozen=True)
class PacedReplay:
    """A replay executor (one per Dask worker, or the single process's backend) with a GPU's pace: `delay_s` per
    measurement and `baseline_delay_s` per baseline. A factory for `DaskBackend` (cloudpickle sends it by value)."""

    url: str
    delay_s: float
    baseline_delay_s: float
    relabel: bool = False

    def __call__(self, worker_name: str = "one") -> Any:
        from autotune.sweep.backends.dask_executors import ReplayExecutor

        inner = ReplayExecutor(self.url, delay_s=self.delay_s, relabel=self.relabel)(worker_name)
        return _SlowBaseline(inner, self.baseline_delay_s) if self.baseline_delay_s > 0 else inner


class _SlowBaseline:
    def __init__(self, inner: Any, delay_s: float) -> None:
        self.inner, self.delay_s = inner, delay_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def baseline(self, *args: Any) -> Any:
        time.sleep(self.delay_s)
        return self.inner.baseline(*args)


class Timed:
    """The backend, with the runner's waits timed: `results_s` (in its measurements' iterator), `baseline_s`."""

    def __init__(self, inner: Any) -> None:
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, "results_s", 0.0)
        object.__setattr__(self, "baseline_s", 0.0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.inner, name, value)

    def run(self, jobs: Sequence[Any]) -> Iterator[Any]:
        t0 = time.monotonic()
        it = iter(self.inner.run(jobs))
        object.__setattr__(self, "results_s", self.results_s + time.monotonic() - t0)
        return self._timed(it)

    def _timed(self, it: Iterator[Any]) -> Iterator[Any]:
        try:
            while True:
                t0 = time.monotonic()
                try:
                    m = next(it)
                except StopIteration:
                    return
                finally:
                    object.__setattr__(self, "results_s", self.results_s + time.monotonic() - t0)
                yield m
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    def baseline(self, *args: Any) -> Any:
        t0 = time.monotonic()
        try:
            return self.inner.baseline(*args)
        finally:
            object.__setattr__(self, "baseline_s", self.baseline_s + time.monotonic() - t0)


def _single(args: argparse.Namespace) -> Any:
    if args.replay:
        return PacedReplay(args.replay, args.delay, args.baseline_delay)()
    from autotune.sweep.backends.local import gpu_backend

    return gpu_backend(tol=None)


def _dask(args: argparse.Namespace, workers: int, chunks: int | None = None) -> Any:
    from autotune.sweep.backends.dask_backend import DaskBackend, gpu_list
    from autotune.sweep.backends.dask_executors import GpuExecutor

    executor = (
        PacedReplay(args.replay, args.delay, args.baseline_delay, relabel=True)
        if args.replay
        else GpuExecutor(per_host=workers)
    )
    extra = {} if chunks is None else {"chunks_per_worker": chunks}
    return DaskBackend(executor, devices=gpu_list(str(workers), replay=args.replay is not None), **extra)


def run_variant(name: str, cfg: Any, backend: Any, out: Path) -> dict:
    """Sweep `cfg` into out/NAME.sqlite with `backend` (started first, untimed); the figures of the run."""
    from autotune.store.store import Store
    from autotune.sweep.runner import run_sweep
    from autotune.workflows.sweeps import Silent

    db = out / f"{name}.sqlite"
    db.unlink(missing_ok=True)
    cfg = dataclasses.replace(cfg, database=f"sqlite:///{db}")
    t0 = time.monotonic()
    timed = Timed(backend)
    try:
        start = getattr(backend, "start", None)
        if start is not None:
            start()
        backend.device_info()
        started = time.monotonic() - t0
        t1, wall1 = time.monotonic(), time.time()
        with Store.open(cfg.database) as store:
            summary = run_sweep(cfg, store, timed, Silent())
        seconds, wall2 = time.monotonic() - t1, time.time()
        rates = getattr(backend, "rates", list)()
    finally:
        backend.close()
    with sqlite3.connect(db) as c:
        pairs, configs = c.execute("select count(*), count(distinct instance_id) from measurements").fetchone()
        began, ended = c.execute("select started_at, finished_at from sweeps order by id desc").fetchone()
        first = c.execute("select min(measured_at) from measurements").fetchone()[0]
    began_s, ended_s, first_s = (datetime.fromisoformat(t).timestamp() for t in (began, ended, first))
    return dict(
        name=name,
        status=summary.status,
        start_s=started,
        seconds=seconds,
        pairs=pairs,
        configs=configs,
        pairs_s=pairs / seconds if seconds else 0.0,
        configs_s=configs / seconds if seconds else 0.0,
        results_s=timed.results_s,
        baseline_s=timed.baseline_s,
        client_s=seconds - timed.results_s - timed.baseline_s,
        busy_s=sum(r.seconds for r in rates) if rates else None,
        chunks=sum(r.chunks for r in rates) if rates else None,
        rates=[f"{r.worker} {r.pairs} pairs {r.per_s:.1f}/s" for r in rates],
        sweep_row_s=ended_s - began_s,  # the sweep row's start to finish (what `scripts/scaling_model.py` reads)
        before_row_s=began_s - wall1,  # Store.open and run_sweep's start (planning, devices) before the row
        to_first_s=first_s - began_s,  # the row's start to the first measurement recorded
        after_row_s=wall2 - ended_s,
    )


def summarize(results: list[dict]) -> list[dict]:
    """Per variant (in order of first appearance): runs, median seconds and pairs/s, min..max seconds, and the
    median over repeats of seconds / the single process's seconds of the same repeat (None without it)."""
    names = list(dict.fromkeys(r["name"] for r in results))
    single = [r["seconds"] for r in results if r["name"] == "one process"]
    single_row = [r["sweep_row_s"] for r in results if r["name"] == "one process"]
    rows = []
    for name in names:
        runs = [r for r in results if r["name"] == name]
        secs = [r["seconds"] for r in runs]
        ratios = [s / b for s, b in zip(secs, single, strict=False)] if single else []  # a cut-short run: rounds made
        row_secs = [r["sweep_row_s"] for r in runs]
        row_ratios = [s / b for s, b in zip(row_secs, single_row, strict=False)] if single_row else []  # (same)
        rows.append(
            dict(
                name=name,
                runs=len(runs),
                median_s=statistics.median(secs),
                min_s=min(secs),
                max_s=max(secs),
                pairs=runs[0]["pairs"],
                pairs_s=statistics.median(r["pairs_s"] for r in runs),
                vs_single=statistics.median(ratios) if ratios else None,
                row_s=statistics.median(row_secs),
                row_vs_single=statistics.median(row_ratios) if row_ratios else None,
            )
        )
    return rows


def main(argv: Sequence[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(
        prog="scripts/bench_dask.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("config", help="sweep config (configs/NAME.yaml)")
    ap.add_argument("--max-instances", type=int, default=None, help="instances per space (the config's otherwise)")
    ap.add_argument(
        "--workers",
        default="1,2",
        help="Dask variants: comma-separated worker (GPU) counts; N:K gives each worker K chunks of each batch "
        "(default 2)",
    )
    ap.add_argument("--no-single", action="store_true", help="skip the single-process variant")
    ap.add_argument("--warm", action="store_true", help="run the single-process sweep once first, unreported")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each variant, alternating (default 3)")
    ap.add_argument("--replay", default=None, help="replay this recorded database instead of using GPUs")
    ap.add_argument("--delay", type=float, default=0.0, help="with --replay: seconds per measurement")
    ap.add_argument("--baseline-delay", type=float, default=0.0, help="with --replay: seconds per baseline")
    ap.add_argument("--out", default=None, help="folder for the databases (default: a temporary folder)")
    ap.add_argument("--json", default=None, help="also write every run and the summary to this JSON file")
    args = ap.parse_args(argv)
    from autotune.sweep.config import load_config

    cfg = load_config(args.config)
    if args.max_instances is not None:
        cfg = dataclasses.replace(cfg, max_instances=args.max_instances)
    out = Path(args.out or tempfile.mkdtemp(prefix="dask-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    if args.warm:
        run_variant("warm", cfg, _single(args), out)
    variants: list[tuple[str, Any]] = [] if args.no_single else [("one process", lambda: _single(args))]
    for spec in (w.strip() for w in args.workers.split(",") if w.strip()):
        n, _, k = spec.partition(":")
        chunks = int(k) if k else None
        variants.append((f"dask {spec}", lambda n=int(n), chunks=chunks: _dask(args, n, chunks)))
    results = []
    for rep in range(max(1, args.repeat)):
        for name, make in variants:
            r = run_variant(name.replace(" ", "_"), cfg, make(), out)
            r["name"], r["repeat"] = name, rep
            results.append(r)
            split = (
                f"before the sweep row {r['before_row_s']:.2f} s, row {r['sweep_row_s']:.2f} s (first measurement "
                f"at {r['to_first_s']:.2f} s), after {r['after_row_s']:.2f} s; results {r['results_s']:.2f} s, "
                f"baselines {r['baseline_s']:.2f} s, client {r['client_s']:.2f} s"
            )
            if r["busy_s"] is not None:
                split += f", workers busy {r['busy_s']:.2f} s in {r['chunks']} chunks"
            print(
                f"{name} #{rep + 1}: {r['status']}, {r['pairs']} pairs, {r['configs']} configs in {r['seconds']:.2f} s: "
                f"{r['pairs_s']:.2f} pairs/s (executor start {r['start_s']:.1f} s; {split})"
                + (f"; per GPU: {', '.join(r['rates'])}" if r["rates"] else ""),
                flush=True,
            )
    rows = summarize(results)
    print(
        f"\n{'variant':<12} {'runs':>4} {'pairs':>6} {'median s':>9} {'min..max s':>13} {'pairs/s':>8} {'vs one':>7} "
        f"{'row s':>6} {'row vs one':>10}"
    )
    for row in rows:
        vs = f"{row['vs_single']:.3f}" if row["vs_single"] is not None else "-"
        row_vs = f"{row['row_vs_single']:.3f}" if row["row_vs_single"] is not None else "-"
        print(
            f"{row['name']:<12} {row['runs']:>4} {row['pairs']:>6} {row['median_s']:>9.2f} "
            f"{row['min_s']:>6.2f}..{row['max_s']:<6.2f} {row['pairs_s']:>8.2f} {vs:>7} {row['row_s']:>6.2f} {row_vs:>10}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": results, "summary": rows}, indent=1))
    return results


if __name__ == "__main__":
    main()
