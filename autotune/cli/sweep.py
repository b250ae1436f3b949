"""`autotune sweep CONFIG`: the main job."""

from __future__ import annotations

import time
from collections import Counter
from typing import Annotated, Any, Optional

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from autotune.cli.consoles import stdout, stderr, table as tabled
from autotune.cli.aliases import renamed
from autotune.cli.tol import tol_callback
from autotune.errors import UserError
from autotune.vocab import MAX_SEED, Measurement, Status
from autotune.workflows.sweeps import Launch, launch_sweep


class BarReporter:
    """A live bar: pairs done, failures by kind, best so far at the current point, ETA."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.failures: Counter = Counter()
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        self.count = 0
        self.last_line = 0.0
        self.rates = None  # an executor of several GPUs: its `rates()`, shown on the bar (workflows.sweeps sets it)
        self._rates_text, self._rates_at = "", 0.0

    def start(self, total_pairs: int, already_done: int) -> None:
        msg = f"{total_pairs:,} (instance, test point) pairs; {already_done:,} already in the database"
        stderr().print(msg, highlight=False)
        if self.quiet:
            return
        self.stop()  # a second phase (sharing) starts a new bar
        self.progress = Progress(
            TextColumn("[bold]sweep"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=stderr(),
        )
        self.progress.start()
        self.task = self.progress.add_task("sweep", total=total_pairs - already_done, info="")

    def measured(self, m: Measurement, best_ms: float | None) -> None:
        self.count += 1
        if m.status not in (Status.OK, Status.SKIPPED):
            self.failures[Status(m.status).value] += 1
        fails = " ".join(f"{k}:{v}" for k, v in sorted(self.failures.items())) or "no failures"
        best = f"best {best_ms:.4f} ms" if best_ms is not None else "no valid time yet"
        info = f"{m.point.key} {best} | {fails}{self._per_gpu()}"
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, advance=1, info=info)
        elif time.monotonic() - self.last_line > 30:  # quiet: one line every 30 s for logs
            self.last_line = time.monotonic()
            stderr().print(f"{self.count:,} measured; {info}", highlight=False)

    def _per_gpu(self) -> str:
        """Each GPU's pairs/s so far (a Dask sweep), refreshed at most once a second."""
        if self.rates is None:
            return ""
        if time.monotonic() - self._rates_at > 1.0:
            self._rates_at = time.monotonic()
            self._rates_text = "".join(f" | {r.worker} {r.per_s:.1f}/s" for r in self.rates())
        return self._rates_text

    def note(self, text: str) -> None:
        (self.progress.console if self.progress else stderr()).print(text, highlight=False)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def sweep(
    config: Annotated[str, typer.Argument(help="Sweep config (configs/NAME.yaml).")],
    database: Annotated[
        Optional[str], typer.Option("--db", help="Database URL or SQLite path; overrides the config's `database`.")
    ] = None,
    database_old: Annotated[Optional[str], typer.Option("--database", hidden=True, help="Old name of --db.")] = None,
    strategy: Annotated[
        Optional[str],
        typer.Option(
            help="Search strategy: brute (every instance), random (a seeded sample), tpe (Optuna's TPE), hybrid (a surrogate model plus local search around the best instances), gp (Optuna's Gaussian process; needs torch), cmaes (needs the cmaes package), auto (brute when --budget covers the space, else hybrid; says which and why), an installed one or module:Class. tpe, hybrid, gp, cmaes and auto search each test point on its own and keep an Optuna study per point in the sweep's database. Overrides the config's `strategy:`."
        ),
    ] = None,
    budget: Annotated[
        Optional[int],
        typer.Option(
            min=1,
            help="Evaluations per test point (the config's `strategy: {budget: N}`; the top-level `budget:` is a time budget). Any strategy given a per-point budget, patience or roofline tolerance searches each point on its own.",
        ),
    ] = None,
    patience: Annotated[
        Optional[int],
        typer.Option(
            min=1,
            help="Stop a test point after this many evaluations without a better time (`strategy: {patience: K}`).",
        ),
    ] = None,
    roofline_tol: Annotated[
        Optional[float],
        typer.Option(
            callback=tol_callback,
            help="Stop a test point once its best time is within this fraction of its kind's roofline time (0.05: 95% of the roofline; `strategy: {roofline_tol: F}`).",
        ),
    ] = None,
    transfer: Annotated[
        Optional[int],
        typer.Option(
            min=0,
            help="Start each test point from this many best instances of the nearest point searched before (model-based strategies; `strategy: {transfer: K}`).",
        ),
    ] = None,
    max_instances: Annotated[
        Optional[int],
        typer.Option(
            min=1,
            help="Measure at most this many instances per space. Overrides the config's top-level max_instances (a space entry's own max_instances still applies).",
        ),
    ] = None,
    seed: Annotated[
        Optional[int],
        typer.Option(
            min=0,
            max=MAX_SEED,
            help="Seed of the random and model-based strategies (0 to 2**32-1). Overrides the config.",
        ),
    ] = None,
    replay: Annotated[
        Optional[str], typer.Option(help="Take measurements from this recorded database URL instead of a GPU.")
    ] = None,
    resume: Annotated[
        Optional[str],
        typer.Option(
            help="What a resumed sweep skips: gpu (pairs measured on this very GPU) or model (pairs measured on any GPU of the same name, SM count and compute capability: for clusters and lent machines where each run lands on another card). Overrides the config's `resume`."
        ),
    ] = None,
    gpus: Annotated[
        Optional[str],
        typer.Option(
            "--gpus",
            help="Measure on several GPUs of this machine at once: `all`, a number N (the first N visible) or a list of GPU indices (0,2). Starts a local Dask cluster, one worker per GPU (needs `pip install autotune\\[dask]`); with --replay, N replaying workers. One writer: results come back to this process. See docs/scale-out.md.",
        ),
    ] = None,
    scheduler: Annotated[
        Optional[str],
        typer.Option(
            "--scheduler",
            help="Address of a running Dask scheduler (tcp://host:8786 or host:8786; tls://, ucx://, ws://, wss://) whose workers each see one GPU (several nodes; a SLURM example in docs/scale-out.md). Reaching it and its first worker may take AUTOTUNE_SCHEDULER_TIMEOUT seconds (default 30). Results come back to this process, the only writer to the database.",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No live bar; a line every 30 s (for logs).")] = False,
    early_stop: Annotated[
        bool,
        typer.Option(
            "--early-stop/--no-early-stop",
            help="Stop timing an instance after a few repetitions once it is provably slower than the best / (1 - tol) (status skipped). --no-early-stop times every instance fully: complete recorded spaces, e.g. to benchmark search strategies on.",
        ),
    ] = True,
) -> None:
    """Compile, verify and time every instance of the config's spaces on its test points.

    Results go to the config's database (default results/<config name>.sqlite). Running the same
    command again resumes: measured pairs are skipped, and a pair that was in flight when a sweep
    died is recorded as crashed and not re-run. Ctrl-C or SIGTERM stops cleanly (status interrupted) with a
    summary and exit code 130.
    """
    from autotune.space.spec import reusing_spaces
    from autotune.sweep.config import load_config

    database = renamed(database, database_old, "--db", "--database")
    with reusing_spaces():  # each space file is built once, not at each of its loads (config, plan, runner)
        cfg = load_config(config)
        if resume is not None and resume not in ("gpu", "model"):
            raise UserError(f"--resume must be gpu or model, got {resume!r}")
        search = _given(cfg.search, budget=budget, patience=patience, roofline_tol=roofline_tol, transfer=transfer)
        given = dict(database=database, strategy=strategy, max_instances=max_instances, seed=seed, resume=resume)
        cfg = _given(cfg, search=search, **given)
        if gpus is not None and scheduler is not None:
            raise UserError("give --gpus (a local cluster) or --scheduler (an existing one), not both")
        if scheduler is not None:  # its form, before anything connects (the connect is bounded: DaskBackend.start)
            from autotune.sweep.backends.dask_backend import scheduler_address

            scheduler = scheduler_address(scheduler)
        reporter = BarReporter(quiet)  # the live bar; on several GPUs, their rates printed after it
        try:
            done = launch_sweep(cfg, Launch(replay, early_stop, gpus, scheduler, refuse_empty_replay=True), reporter)
        finally:
            reporter.stop()
        print_rates(done.rates)
    print_summary(done.summary, cfg.database)
    if done.summary.status == "interrupted":
        raise typer.Exit(130)


def _given(options: Any, **values: Any) -> Any:
    """The dataclass `options` with the values given on the command line (those not None) in place of its own."""
    import dataclasses

    return dataclasses.replace(options, **{k: v for k, v in values.items() if v is not None})


def print_rates(rates: list[Any]) -> None:
    """Per GPU (a Dask sweep): pairs measured and their rate."""
    if not rates:
        return
    table = tabled("per GPU", ("worker", "GPU", "pairs", "busy s", "pairs/s"))
    for r in rates:
        table.add_row(r.worker, r.device, f"{r.pairs:,}", f"{r.seconds:.1f}", f"{r.per_s:.2f}")
    stderr().print(table)


def print_summary(summary, database: str) -> None:
    table = tabled(
        f"sweep {summary.sweep_id}: {summary.status} in {summary.seconds:.1f} s",
        ("status", "measurements"),
        left=("status",),
    )
    for k, v in sorted(summary.counts.items()):
        table.add_row(k, f"{v:,}")
    if summary.not_recorded:
        table.add_row("not_recorded", f"{summary.not_recorded:,}")
    table.add_row("already in the database", f"{summary.skipped_done:,}")
    stdout().print(table)
    print_lacking(summary)
    if summary.measured and summary.seconds > 0:
        stdout().print(f"throughput: {summary.measured / summary.seconds:.2f} measurements/s")
    if summary.best:
        best = tabled("best so far per test point", ("point", "instance", "ms", "baseline ms", "speedup"))
        for p, (iid, ms) in sorted(summary.best.items()):
            cb = summary.baseline.get(p)
            best.add_row(p.key, iid, f"{ms:.5f}", f"{cb:.5f}" if cb else "", f"{cb / ms:.2f}x" if cb else "")
        stdout().print(best)
    stdout().print(f"results: {database}")


def print_lacking(summary) -> None:  # type: ignore[no-untyped-def]
    """What a replay's recording lacked: pairs left out of the plan (never proposed: no strategy spent an evaluation
    on them), and pairs asked and answered `not_recorded`. Neither kind is stored."""
    if summary.left_out:
        stdout().print(
            f"not in the recording: {summary.left_out:,} of the {summary.planned:,} (instance, test point) pairs "
            "this sweep plans were left out (never proposed, not stored); the search chose among the "
            f"{summary.planned - summary.left_out:,} the recording holds. Replay a complete recording (a sweep "
            "with --no-early-stop and no max_instances) to search every instance; an imported Kernel Tuner cache "
            "holds what Kernel Tuner ran (its restrictions kept the rest out).",
            highlight=False,
        )
    if summary.not_recorded:
        stdout().print(
            f"not_recorded: {summary.not_recorded:,} pairs asked are not in the recording (not stored; each cost its "
            "strategy an evaluation)",
            highlight=False,
        )


def register(app: typer.Typer) -> None:
    app.command()(sweep)
