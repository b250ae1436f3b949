"""The sweep loop: plan (instances × test points), resume, measure through a Backend, record.

Resume rules: a pair (instance, test point) already in the database for this device is never
measured again, whatever its status; a pair left "in flight" by a sweep that died (kill -9, a worker
that took the whole process down) is recorded as `crashed` first, so the instance that killed the
sweep is not re-run. Each measurement is committed as soon as it is known: `kill -9` loses at most
the measurement in flight.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Protocol, Sequence

from sqlalchemy.exc import SQLAlchemyError

from autotune import __version__, stopping
from autotune.sweep.config import SweepConfig
from autotune.devices import DeviceLimits, get_device
from autotune.errors import UserError
from autotune.problems.base import ProblemKind
from autotune.space.instance import Instance
from autotune.vocab import DeviceInfo, Measurement, Status, TestPoint
from autotune.sweep.backends.base import Backend, Job, not_recorded
from autotune.store.schema import SweepStart
from autotune.space.spec import Space
from autotune.store.engine import database_url
from autotune.store.store import Store
from autotune.sweep.strategies import Strategy, make_strategy, strategy_class
from autotune.sweep.compile.failstop import FailureStreak, earlier_streak
from autotune.sweep.plan import (
    SpacePlan,
    plan_sweep,
    refuse_nothing_recorded,
    refuse_recorded_without_replay,
    share_plans,
)
from autotune.sweep.provenance import git_commit, space_record

if TYPE_CHECKING:
    from autotune.sweep.strategies.options import StopRule

# Instances handed to the backend at once: enough that its compile pool (one NVRTC call per couple of
# instances, every core busy) stays ahead of the GPU; the pipeline drains once per batch.
ASK_BATCH = 256
STREAM_GROWTH = 4  # a streaming strategy's next batch: 4x the last (256, 1,024, 4,096, ...)


class Reporter(Protocol):
    """Progress events (the command line draws a bar; tests may count)."""

    def start(self, total_pairs: int, already_done: int) -> None: ...

    def measured(self, m: Measurement, best_ms: float | None) -> None: ...

    def note(self, text: str) -> None: ...


@dataclass
class SweepSummary:
    sweep_id: int
    status: str  # done, interrupted, budget, failed
    seconds: float
    counts: Counter = field(default_factory=Counter)  # status -> measurements taken in this run
    skipped_done: int = 0  # pairs found already measured (resume)
    recovered: list[tuple[str, TestPoint]] = field(default_factory=list)
    best: dict[TestPoint, tuple[str, float]] = field(default_factory=dict)  # point -> (instance id, ms)
    baseline: dict[TestPoint, float] = field(default_factory=dict)  # point -> the kind's baseline median (ms)
    started: float = field(default_factory=time.monotonic)  # time.monotonic() when run_sweep was called
    first_measurement_s: float | None = None  # seconds from `started` to the first measurement taken
    # a replay's recording: the pairs of the plan it lacks, left out (`Backend.recorded_pairs`), of those planned; and
    # pairs asked that it answered `not_recorded` (a backend that does not name its pairs). Neither is stored.
    left_out: int = 0
    planned: int = 0
    not_recorded: int = 0

    @property
    def measured(self) -> int:
        return sum(self.counts.values())


@dataclass
class Run:
    """One sweep in progress, what every step of the runner reads: its config, store, backend and reporter, its row
    in the database (`sweep_id`) and its state: `summary` (what it measured, the best times, its start) and `done`,
    the pairs already measured (by this sweep or an earlier one, on this GPU or, with `resume: model`, its model)."""

    cfg: SweepConfig
    store: Store
    backend: Backend
    reporter: Reporter
    summary: SweepSummary
    done: set[tuple[str, TestPoint]]
    sweep_id: int

    def out_of_time(self) -> bool:
        """Whether the config's time budget has run out (then it says so)."""
        budget = self.cfg.budget_s
        if budget is not None and time.monotonic() - self.summary.started > budget:
            self.reporter.note(f"time budget of {budget:.0f} s reached; run the same command again to go on")
            return True
        return False

    def past_budget(self) -> bool:
        """Whether the time budget has run out, silently (checked after each measurement)."""
        return self.cfg.budget_s is not None and time.monotonic() - self.summary.started > self.cfg.budget_s

    def account(self, m: Measurement) -> None:
        """A measurement taken: counted, the point's best updated, reported."""
        summary = self.summary
        if summary.first_measurement_s is None:
            summary.first_measurement_s = time.monotonic() - summary.started
            self.reporter.note(f"first measurement {summary.first_measurement_s:.1f} s after the sweep's start")
        summary.counts[Status(m.status).value] += 1
        if m.status == Status.OK and m.median_ms is not None:
            best = summary.best.get(m.point)
            if best is None or m.median_ms < best[1]:
                summary.best[m.point] = (m.instance_id, m.median_ms)
        best = summary.best.get(m.point)
        self.reporter.measured(m, best[1] if best else None)


@dataclass
class SpaceAt:
    """One space of a run: its id in the store and the failure streak that stops it (`failstop`)."""

    space: Space
    space_id: int
    streak: FailureStreak


def kind_scalars(kind: ProblemKind, cfg: SweepConfig) -> dict[str, float]:
    """The run's scalars of one kind: its defaults overridden by the config's values of its own scalars (a config
    whose spaces solve several kinds holds the scalars of all of them)."""
    return kind.own_scalars(cfg.scalars)


def _annotate(m: Measurement, kind: ProblemKind, cfg: SweepConfig) -> Measurement:
    """The work the point's kind counts (flops, fewest bytes), from which the store derives GFLOP/s, GB/s and
    the roofline fraction."""
    m.flops = kind.flops(m.point)
    m.bytes_moved = kind.bytes_moved(m.point, kind_scalars(kind, cfg))
    return m


def _failed(job_instance: Instance, point: TestPoint, error: str) -> Measurement:
    return Measurement(job_instance.id, point, Status.LAUNCH_ERROR, error=error)


def run_sweep(
    cfg: SweepConfig,
    store: Store,
    backend: Backend,
    reporter: Reporter,
    limits: Callable[[str | None], DeviceLimits] = get_device,
    recording: str | None = None,
) -> SweepSummary:
    """Run (or resume) the sweep `cfg` into `store`. Ctrl-C ends it cleanly with status `interrupted`.
    `recording`: the replayed database as the user named it, where a recording holding none of the planned pairs is
    a mistake (`autotune sweep`: `plan.refuse_nothing_recorded`); None: such a sweep runs, empty."""
    start = time.monotonic()
    if cfg.budget_s is not None:  # a GPU backend cancels its compiles then
        backend.deadline = start + cfg.budget_s
    backend.start()  # a GPU backend starts its processes while the spaces are generated
    plans = plan_sweep(cfg, limits)
    held = backend.recorded_pairs()
    refuse_recorded_without_replay(plans, held)
    info: DeviceInfo = backend.device_info()
    _check_fit(cfg, plans, info)  # (a point this GPU cannot hold is the config's mistake, whatever is replayed)
    refuse_nothing_recorded(plans, held, recording)
    sweep_id, device_ids = _begin(cfg, store, backend, reporter, plans, info)
    summary = SweepSummary(sweep_id, "running", 0.0, started=start)
    status, db_failed, forget = "failed", False, False
    try:
        siblings, done = _resume_state(cfg, store, reporter, summary, device_ids)
        store.upsert_points(sorted({p for plan in plans for p in plan.points()}))
        device_key = info.name if len(siblings) > 1 else info.uuid  # the GPUs whose times count here
        run = Run(cfg, store, backend, reporter, summary, done, sweep_id)
        _seed_best(run, device_key, {plan.space.kind.name: plan.space.kind for plan in plans})
        plans = recorded_only(plans, held, reporter, summary)
        total, summary.skipped_done = _pair_counts(cfg, plans, done)
        reporter.start(total, summary.skipped_done)
        summary.baseline = store.baseline_times(device_ids[0])
        status = _measure_plans(run, plans, device_key)  # (an exception leaves the sweep `failed`)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (autotune.stopping): not the kernel's fault, measured on resume
        status, forget = "interrupted", True
    except UserError:
        forget = True  # the problem's fault (its reference, buffers, kernel name), not the pair's
        raise
    except SQLAlchemyError:
        # the database failed (disk full, read-only, server gone), not the kernel in flight: its pair is freed for
        # the resume if the database still takes a write (if not, the resume records it as crashed)
        db_failed = forget = True
        raise
    finally:
        if status == "failed" and stopping.requested():  # failed of the stop (a worker the same SIGTERM ended)
            status, forget = "interrupted", True
        summary.status = status
        summary.seconds = time.monotonic() - start
        # one transaction, which no signal cuts halfway (a second Ctrl-C, SIGTERM after SIGINT): the sweep's status
        # and, unless the sweep died of a kernel, its in-flight notes forgotten
        with stopping.deferred():
            try:
                store.finish_sweep(sweep_id, status, forget_inflight=forget)
            except SQLAlchemyError:
                if not db_failed:
                    raise
                # the sweep stays `running`; the next sweep on this database finds its lock stale and marks it `died`
    return summary


def _check_fit(cfg: SweepConfig, plans: Sequence[SpacePlan], info: DeviceInfo) -> None:
    """The points fit the GPU's memory (before anything is allocated or recorded): else one UserError."""
    from autotune.sweep.limits import check_points_fit

    check_points_fit(
        [p for plan in plans for p in plan.points()],
        info.name,
        free_bytes=info.free_bytes,
        kinds={plan.space.kind.name: plan.space.kind for plan in plans},
        scalars=cfg.scalars,
    )


def _begin(
    cfg: SweepConfig, store: Store, backend: Backend, reporter: Reporter, plans: Sequence[SpacePlan], info: DeviceInfo
) -> tuple[int, list[int]]:
    """Record the devices and the software, and begin the sweep: (sweep id, device ids, this process's GPU first)."""
    store.notify = reporter.note  # a lost database connection is retried: its warning lines join the sweep's notes
    device_id = store.upsert_device(info)
    # an executor of several GPUs (Dask) names them all (`devices()`): each measurement is recorded on its own GPU
    device_ids = list(dict.fromkeys([device_id, *(store.upsert_device(d) for d in backend.devices())]))
    backend.on_device = store.upsert_device  # a GPU that joins mid-sweep is recorded before its measurements
    software_id = store.upsert_software(info, __version__, git_commit())
    start = SweepStart(
        config_name=cfg.name,
        config_text=cfg.text,
        device_id=device_id,
        software_id=software_id,
        device=info,
        scalars=cfg.scalars,
        reps=cfg.repetitions,
    )
    return store.begin_sweep(start), device_ids


def _resume_state(
    cfg: SweepConfig, store: Store, reporter: Reporter, summary: SweepSummary, device_ids: list[int]
) -> tuple[list[int], set[tuple[str, TestPoint]]]:
    """The devices whose measurements count as done (`resume: model`: every GPU of the model) and the pairs done on
    them; the pairs a dead sweep left in flight are recorded as crashed first (summary.recovered)."""
    siblings = list(
        dict.fromkeys(d for i in device_ids for d in (store.same_model(i) if cfg.resume == "model" else [i]))
    )
    summary.recovered = [pair for d in siblings for pair in store.recover_inflight(d)]
    for pair in summary.recovered:
        reporter.note(f"recorded as crashed (in flight when the last sweep died): {pair[0]} at {pair[1].key}")
    done: set[tuple[str, TestPoint]] = set().union(*(store.done_pairs(d) for d in siblings))
    if len(siblings) > len(device_ids):
        reporter.note(
            f"resume: model: pairs measured on {len(siblings) - len(device_ids)} other GPU(s) of this model are skipped"
        )
    return siblings, done


def _pair_counts(cfg: SweepConfig, plans: Sequence[SpacePlan], done: set[tuple[str, TestPoint]]) -> tuple[int, int]:
    """(pairs the sweep plans, pairs of them already done)."""
    total = sum(
        plan.point_pairs(cfg.search.budget if cfg.search.budget is not None else plan.limit(cfg))
        if per_point(cfg)
        else plan.expected_pairs(plan.limit(cfg))
        for plan in plans
    )
    # (a new database has nothing done: no instance's id (a hash, ~40 us each) is computed for a 30,000-instance
    # space before the first measurement)
    already = sum(1 for plan in plans for i, pts in plan.work.items() for p in pts if (i.id, p) in done) if done else 0
    return total, already


def _measure_plans(run: Run, plans: Sequence[SpacePlan], device_key: str) -> str:
    """Measure every space, then the share phase: "done", or "budget" when the time budget ran out."""
    for plan in plans:
        if not _sweep_space(run, plan):
            return "budget"
    if any(plan.share for plan in plans):
        return _share_phase(run, plans, device_key)
    return "done"


def recorded_only(
    plans: Sequence[SpacePlan], held: set[tuple[str, TestPoint]] | None, reporter: Reporter, summary: SweepSummary
) -> list[SpacePlan]:
    """The plans with only the pairs `held`, the backend can measure, where it names them (`Backend.recorded_pairs`:
    a replay's recording), so no strategy spends its budget on a pair that cannot be measured; each space that loses
    pairs says how many, and they count as `not_recorded` in the summary."""
    if held is None:
        return list(plans)
    out = []
    for plan in plans:
        summary.planned += plan.pairs
        work = {}
        for inst, pts in plan.work.items():
            kept = tuple(p for p in pts if (inst.id, p) in held)
            if kept:
                work[inst] = kept
        lacking = plan.pairs - sum(len(pts) for pts in work.values())
        if lacking:
            reporter.note(
                f"{plan.space.name}: the recording lacks {lacking:,} of its {plan.pairs:,} (instance, test point) "
                f"pairs: left out, the sweep measures among the {plan.pairs - lacking:,} it holds"
            )
            summary.left_out += lacking
        out.append(dataclasses.replace(plan, work=work))
    return out


def _share_phase(run: Run, plans: Sequence[SpacePlan], device: str) -> str:
    """Measure the BK-best instances at nearby valid points (SweepConfig.share); "budget" if time ran out.
    `device`: the uuid (or, with resume: model, the name) whose measurements rank the instances."""
    cfg, reporter = run.cfg, run.reporter
    shared = share_plans(plans, run.store.ranked_instances(device), cfg.bk, run.done)
    pairs = sum(p.pairs for p in shared)
    if not pairs:
        return "done"
    reporter.note(
        f"sharing: {pairs:,} more pairs (the {cfg.bk} best instances of each point at up to "
        f"{max(p.share for p in plans)} nearby points where they are valid)"
    )
    reporter.start(pairs, 0)
    brute = dataclasses.replace(run, cfg=dataclasses.replace(cfg, strategy="brute"))  # (the same state)
    for plan in shared:
        if not _sweep_space(brute, plan):
            return "budget"
    return "done"


def _seed_best(run: Run, device_uuid: str, kinds: dict[str, ProblemKind]) -> None:
    """Best verified times already in the database on this GPU (a resumed sweep) feed the early-stop rule;
    another GPU's times must not: on a slower GPU they would stop every instance early. Points of kinds this
    config does not sweep are left out."""
    for p, (iid, ms) in run.store.best_times(device_uuid).items():
        run.summary.best[p] = (iid, ms)
        if p.kind in kinds:
            run.backend.seed_best(p, kind_scalars(kinds[p.kind], run.cfg), ms)


def _sweep_space(run: Run, plan: SpacePlan) -> bool:
    """Measure one space's remaining pairs; False when the time budget ran out. A model-based strategy, or a
    per-point option (cfg.search), searches each test point on its own (`_search_points`)."""
    cfg, store, backend, done, sweep_id = run.cfg, run.store, run.backend, run.done, run.sweep_id
    space = plan.space
    space_id = store.upsert_space(space_record(space))
    backend.before_measure = lambda iid, p: store.mark_inflight(sweep_id, space_id, iid, p)
    # a pipelined backend's pair sent but not measured: its note goes
    backend.after_abandon = lambda iid, p: store.unmark_inflight(sweep_id, iid, p)
    finished = {i.id for i, pts in plan.work.items() if all((i.id, p) in done for p in pts)} if done else set()
    at = SpaceAt(space, space_id, earlier_streak(store, space.name, finished, cfg.stop_after_failures))
    if at.streak.stopped:
        run.reporter.note(at.streak.message(space.name, again=True))
        return True
    if per_point(cfg):
        return _search_points(run, plan, at)
    todo = (
        {i: tuple(p for p in pts if (i.id, p) not in done) for i, pts in plan.work.items()} if done else dict(plan.work)
    )
    # the strategy sees every instance, so a random sample is the same one when a sweep resumes
    strategy = make_strategy(cfg.strategy, list(todo), plan.limit(cfg), cfg.seed)
    return _search(run, at, todo, strategy, _growing(strategy)) is not False


def _growing(strategy: Strategy) -> Iterator[int]:
    """ASK_BATCH instances at a time; a streaming strategy's batches grow (fewer pauses while a batch's last compiles
    finish, `Strategy.streams`)."""
    ask = ASK_BATCH
    while True:
        yield ask
        if strategy.streams:
            ask *= STREAM_GROWTH


def _search(
    run: Run,
    at: SpaceAt,
    todo: dict[Instance, tuple[TestPoint, ...]],
    strategy: Strategy,
    sizes: Iterator[int],
    recorded: Mapping[str, list[Measurement]] | None = None,
    told: Callable[[list[Measurement]], None] | None = None,
) -> bool | None:
    """Ask `strategy` for batches of the next of `sizes` instances and measure them (`_measure`), until it proposes
    none or `sizes` ends (None); False when the time budget ran out, True when the space stopped on a failure
    streak. `told` sees each instance's measurements (a per-point StopRule)."""
    for size in sizes:
        if run.out_of_time():
            return False
        proposed = strategy.ask(size)
        if not proposed:
            return None
        results = _measure(run, at, todo, proposed, strategy, recorded)
        if results is None:
            return not run.out_of_time()
        if at.streak.stopped:
            return True
        if told is not None:
            for ms in results.values():
                told(ms)
    return None


def per_point(cfg: SweepConfig) -> bool:
    """Whether the sweep searches each test point on its own (base.py, "Per point")."""
    return cfg.search.per_point or getattr(strategy_class(cfg.strategy), "model_based", False)


def _search_points(run: Run, plan: SpacePlan, at: SpaceAt) -> bool:
    """One strategy per test point (base.py: "Per point"), over the instances serving it, each measured at that
    point only, until the strategy is done or the point's StopRule says so; False when the time budget ran out."""
    from autotune.sweep.strategies.options import StopRule, roofline_ms

    cfg, store, backend, reporter, done = run.cfg, run.store, run.backend, run.reporter, run.done
    space, opts = plan.space, cfg.search
    model_based = getattr(strategy_class(cfg.strategy), "model_based", False)
    order = {p: i for i, p in enumerate(cfg.points)}
    points = sorted({p for pts in plan.work.values() for p in pts}, key=lambda p: order.get(p, len(order)))
    bandwidth = backend.device_info().copy_bandwidth
    searched: list[TestPoint] = []
    for point in points:
        instances = [i for i, pts in plan.work.items() if point in pts]
        todo: dict[Instance, tuple[TestPoint, ...]] = {
            i: (() if (i.id, point) in done else (point,)) for i in instances
        }
        recorded = store.recorded_at(run.sweep_id, point, cfg.resume == "model") if not all(todo.values()) else {}
        budget = opts.budget if opts.budget is not None else plan.limit(cfg)
        options: dict = {}
        if model_based:
            options = dict(
                opts.sampler_options(), start=_transfer(run, space, point, searched, instances, opts.transfer)
            )
            width = backend.parallelism()  # an executor of several GPUs: asks that keep each busy
            if width is not None and "batch" not in options:
                options["batch"] = max(4, 2 * width)
            if opts.studies == "database":
                name = study_name(cfg, space.name, point, backend.device_info().uuid)
                options["study"] = (database_url(store.url, write=True), name)
        strategy = make_strategy(cfg.strategy, instances, budget, cfg.seed, **options)
        if getattr(strategy, "reason", None) and point == points[0]:
            reporter.note(f"{space.name}: {strategy.reason}")  # type: ignore[attr-defined]
        best = run.summary.best.get(point)
        stop = StopRule(
            opts,
            roofline_ms(space.kind.bytes_moved(point, kind_scalars(space.kind, cfg)), bandwidth),
            best[1] if best else None,
        )
        searched.append(point)
        # a study's connections are released per point (a strategy not built on base.Strategy may have no close)
        close = getattr(strategy, "close", None)
        try:
            ended = _search(run, at, todo, strategy, _batches(stop), recorded, stop.tell)
        finally:
            if close is not None:
                close()
        if ended is not None:  # out of time (False) or the space stopped (True)
            return ended
        if stop.reason:
            reporter.note(f"{space.name} at {point.key}: stopped, {stop.reason}")
    return True


def _batches(stop: StopRule) -> Iterator[int]:
    """A per-point search's batch sizes, until its StopRule says it is done."""
    while not stop.done:
        yield stop.batch(ASK_BATCH)


def study_name(cfg: SweepConfig, space: str, point: TestPoint, device_uuid: str) -> str:
    """The Optuna study of one (config, space, point, GPU) in the sweep's database."""
    return f"autotune:{cfg.name}:{space}:{point.key}:{device_uuid}"


def _transfer(
    run: Run, space: Space, point: TestPoint, searched: Sequence[TestPoint], instances: Sequence[Instance], k: int
) -> list[Instance]:
    """The `k` best instances (verified, on this GPU) of the nearest point searched before of the same precision
    and variant, among `instances` (those serving `point`)."""
    near = [q for q in searched if (q.precision, q.shape, q.kind) == (point.precision, point.shape, point.kind)]
    if k <= 0 or not near:
        return []
    ranked = run.store.ranked_instances(run.backend.device_info().uuid)
    q = min(near, key=lambda q: space.kind.distance(point, q))
    by_id = {i.id: i for i in instances}
    return [by_id[iid] for iid in ranked.get(q, []) if iid in by_id][:k]


def _measure(
    run: Run,
    at: SpaceAt,
    todo: dict[Instance, tuple[TestPoint, ...]],
    proposed: list[Instance],
    strategy: Strategy,
    recorded: Mapping[str, list[Measurement]] | None = None,
) -> dict[Instance, list[Measurement]] | None:
    """Measure the proposed instances at their `todo` points, record and tell each (one with no point to measure is
    told what `recorded` holds of it: measured by an earlier run); what each measured (None
    when the time budget ran out mid-batch: the rest stays unmeasured and the next run resumes there). When the
    first instances all failed alike (`at.streak`), it says so and returns at once: `at.streak.stopped` is then True
    and the batch's other pairs stay unmeasured (their compiles are cancelled)."""
    cfg, store, reporter, summary = run.cfg, run.store, run.reporter, run.summary
    space, space_id, streak = at.space, at.space_id, at.streak
    asked = [i for i in proposed if todo[i]]
    store.upsert_instances(asked)  # only what is measured: a sampled sweep stores its sample
    for inst in proposed:
        if not todo[inst]:  # measured by an earlier run of this sweep: the search learns its recorded result
            strategy.tell(inst, list((recorded or {}).get(inst.id, ())))
    jobs: list[Job] = []
    results: dict[str, list[Measurement]] = {i.id: [] for i in asked}
    answered: Counter[str] = Counter()  # pairs of each instance the backend answered (measured or not recorded)
    out: dict[Instance, list[Measurement]] = {}
    for inst in asked:
        bad = _bind_error(space, inst, todo[inst])
        if bad is not None:
            ms = [_annotate(_failed(inst, p, bad), space.kind, cfg) for p in todo[inst]]
            store.record(run.sweep_id, space_id, ms)
            for m in ms:
                run.account(m)
            strategy.tell(inst, ms)
            out[inst] = ms
            if streak.add_measurements(ms):
                reporter.note(streak.message(space.name))
                return out
            continue
        jobs.append(Job(space, inst, todo[inst], kind_scalars(space.kind, cfg), cfg.repetitions))
    by_id = {j.instance.id: j.instance for j in jobs}
    measurements = run.backend.run(jobs)  # a GPU backend starts compiling here ...
    _baseline(run, space.kind, sorted({p for j in jobs for p in j.points}))  # ... meanwhile
    try:
        for m in measurements:
            stopping.check()  # after a stop was asked, a failure (a GPU worker ended by the same SIGTERM) is not the pair's
            answered[m.instance_id] += 1
            if not_recorded(m):  # a replay's recording lacks it: no measurement, nothing stored or told
                summary.not_recorded += 1
                best = summary.best.get(m.point)
                reporter.measured(m, best[1] if best else None)
            else:
                store.record(run.sweep_id, space_id, [_annotate(m, space.kind, cfg)])
                run.done.add((m.instance_id, m.point))
                run.account(m)
                results[m.instance_id].append(m)
            if answered[m.instance_id] == len(todo[by_id[m.instance_id]]):
                strategy.tell(by_id[m.instance_id], results[m.instance_id])
                out[by_id[m.instance_id]] = results[m.instance_id]
                if streak.add_measurements(results[m.instance_id]):
                    reporter.note(streak.message(space.name))
                    return out
            if run.past_budget():
                return None
    finally:
        _close(measurements)  # a backend cancels what it still compiles for pairs left unmeasured
    return out


def _close(measurements: object) -> None:
    close = getattr(measurements, "close", None)
    if close is not None:
        close()


def _baseline(run: Run, kind: ProblemKind, points: Sequence[TestPoint]) -> None:
    """The kind's baseline (cuBLAS for GEMM) at each point that has none on this GPU yet, measured just before
    the point's first instance (while the backend compiles), so a budget-limited sweep never times it at points
    it skips. Kinds without a baseline are skipped."""
    if kind.baseline_name is None:
        return
    cfg, summary = run.cfg, run.summary
    for p in points:
        if p not in summary.baseline:
            m = _annotate(run.backend.baseline(kind, p, kind_scalars(kind, cfg), cfg.repetitions), kind, cfg)
            run.store.record_baseline(run.sweep_id, m)
            if m.status == Status.OK and m.median_ms is not None:
                summary.baseline[p] = m.median_ms


def _bind_error(space: Space, inst: Instance, points: Sequence[TestPoint]) -> str | None:
    """Name expressions and launch geometry are evaluated before anything is sent to the GPU."""
    if space.kernel is None:  # recorded measurements only (run_sweep lets such a space reach a replay alone)
        return None
    try:
        for p in points:
            space.template_name(inst.param_dict, p.precision, p.shape)
            space.geometry(inst.param_dict, p)
            space.defines(inst.param_dict, p)
    except UserError as exc:
        return f"cannot bind instance to the kernel: {exc.message}"
    return None
