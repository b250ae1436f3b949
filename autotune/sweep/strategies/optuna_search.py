"""`tpe`, `gp`, `cmaes`: Optuna samplers on ask/tell, searching one test point's valid instances.

Each strategy drives one Optuna study (minimize the median time at one point). Optuna's sampler proposes
values from per-parameter ranges (`ValidSet.distributions`); `OnValidSet` wraps it and answers each proposal
with the nearest valid instance not proposed before, whose values become the trial's parameters: the study
records exactly the instances measured, and none twice. Told results become trials:
  - `ok`: the median time;
  - `skipped` with a time (early stop: the instance was provably slower than best / (1 - TOL) after a few reps):
    that partial median (it is at least the cut-off, so the model learns the region is slow);
  - every failure (compile_error, launch_error, wrong, timeout, crashed, a skip without a time): a FAIL trial,
    as the issue asks. Samplers ignore FAIL trials (a penalty value would bend a GP's regression and TPE's split
    around a made-up number); the valid-set map already keeps failed instances from being proposed again.
    Each trial carries user attributes `instance_id` and `status`.
Batches: `ask(n)` returns up to `batch` (default 4) instances at once (TPE's constant liar keeps them apart),
so a GPU backend compiles a few ahead; the strategy needs each batch told before it asks again.
A study in a database (`study=(url, name)`) is loaded if it exists: its trials count toward the budget and are
never proposed again (a resumed sweep continues its study); trials left running by a sweep that died are
marked FAIL. `start` instances (transfer from neighbouring points) are enqueued first.
"""

from __future__ import annotations

import importlib.util
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np
import optuna
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from autotune.errors import UserError
from autotune.space.instance import Instance
from autotune.sweep.strategies.base import Strategy, check_n
from autotune.sweep.strategies.validset import ValidSet
from autotune.vocab import Measurement, Status

optuna.logging.set_verbosity(optuna.logging.WARNING)

# Defaults, chosen with scripts/bench_search.py on tuning seeds 100-102 of four pairs (results/bench/SEARCH_PROVENANCE.md)
STARTUP = 10  # random proposals before the model
CANDIDATES = 256  # tpe: free valid instances drawn as acquisition candidates (0: Optuna's proposals + nearest valid)
EXPLORE = 0.25  # tpe: share of proposals drawn at random from the free valid instances


def objective(results: Sequence[Measurement]) -> float | None:
    """The value told to the study: the best verified median, else an early-stopped median, else None (failed)."""
    ok = [m.median_ms for m in results if m.status == Status.OK and m.median_ms is not None]
    if ok:
        return min(ok)
    early = [m.median_ms for m in results if m.status == Status.SKIPPED and m.median_ms is not None]
    return min(early) if early else None


class OnValidSet(BaseSampler):
    """Wraps a sampler: every parameter is sampled jointly (as one relative sample), then mapped onto the
    nearest free instance of the valid set, which is taken."""

    def __init__(self, inner: BaseSampler, valid: ValidSet) -> None:
        self.inner = inner
        self.valid = valid
        self.last_row: int | None = None

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, Any]:
        return dict(self.valid.distributions)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, Any]) -> dict[str, Any]:
        if not search_space:
            return {}
        inner_space = self.inner.infer_relative_search_space(study, trial)
        proposal = dict(self.inner.sample_relative(study, trial, inner_space)) if inner_space else {}
        for name, dist in search_space.items():
            if name not in proposal:
                proposal[name] = self.inner.sample_independent(study, trial, name, dist)
        chosen = getattr(self.inner, "chosen_row", None)  # a sampler that picks valid rows itself says which
        if chosen is not None and self.valid.free[chosen]:
            self.valid.take(chosen)
            self.last_row = chosen
        else:
            self.last_row = self.valid.take_nearest(proposal)
        if self.last_row is None:  # cannot happen: the strategy asks only while instances are free
            raise RuntimeError("no free instance left")
        return self.valid.params(self.last_row)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, name: str, dist: Any) -> Any:
        return self.inner.sample_independent(study, trial, name, dist)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.inner.before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Any) -> None:
        self.inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()


def tpe_internals() -> bool:
    """Whether this Optuna has the private TPE pieces ValidTPESampler uses (else `tpe` maps Optuna's own proposals
    onto the valid set, the `candidates=0` behaviour)."""
    try:
        from optuna.samplers._tpe.sampler import _split_trials, default_gamma  # noqa: F401
    except ImportError:
        return False
    tpe = optuna.samplers.TPESampler
    return all(hasattr(tpe, name) for name in ("_build_parzen_estimator", "_compute_acquisition_func"))


class ValidTPESampler(optuna.samplers.TPESampler):
    """Multivariate TPE whose acquisition (log l(x) - log g(x), Optuna's own Parzen estimators) is maximized over
    valid instances not taken yet, instead of over samples of l(x) in the product of the parameter ranges (which
    mostly fall on invalid combinations and are then moved to their nearest valid neighbour, away from what the
    model asked for). Candidates: up to `candidates` free instances drawn at random, plus the nearest free instance
    of each of Optuna's `n_ei_candidates` samples of l(x). Uses Optuna's private TPE internals (`_split_trials`,
    `_build_parzen_estimator`, `_compute_acquisition_func`; checked against Optuna 5.0)."""

    def __init__(self, valid: ValidSet, candidates: int, explore: float = 0.0, **kwargs: Any) -> None:
        super().__init__(multivariate=True, **kwargs)
        self.valid = valid
        self.candidates = candidates
        self.explore = explore
        self._internal: dict[str, np.ndarray] = {}

    def _column(self, name: str, dist: Any) -> np.ndarray:
        if name not in self._internal:
            self._internal[name] = np.array(
                [dist.to_internal_repr(self.valid.params(r)[name]) for r in range(len(self.valid))], dtype=float
            )
        return self._internal[name]

    def _sample(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, Any]) -> dict[str, Any]:
        from optuna.samplers._tpe.sampler import _split_trials, default_gamma

        states = [TrialState.COMPLETE, TrialState.PRUNED] + ([TrialState.RUNNING] if self._constant_liar else [])
        trials = [
            t
            for t in study._get_trials(deepcopy=False, states=states, use_cache=not self._constant_liar)
            if t.number != trial.number
        ]
        n = sum(t.state != TrialState.RUNNING for t in trials)
        below, above = _split_trials(study, trials, (self._gamma or default_gamma)(n))
        mpe_below = self._build_parzen_estimator(study, search_space, below, handle_below=True)
        mpe_above = self._build_parzen_estimator(study, search_space, above, handle_below=False)
        free = np.flatnonzero(self.valid.free)
        rng = self._rng.rng
        if self.explore and rng.random_sample() < self.explore:  # a random free instance: keeps the model honest
            return self.valid.params(int(rng.choice(free)))
        rows = free if len(free) <= self.candidates else rng.choice(free, self.candidates, replace=False)
        drawn = mpe_below.sample(rng, self._n_ei_candidates)
        near = []
        for i in range(self._n_ei_candidates):
            proposal = {k: search_space[k].to_external_repr(drawn[k][i]) for k in search_space}
            row = self.valid.nearest(proposal)
            if row is not None:
                near.append(row)
        rows = np.unique(np.concatenate([rows, np.array(near, dtype=int)]))
        samples = {k: self._column(k, d)[rows] for k, d in search_space.items()}
        acq = self._compute_acquisition_func(samples, mpe_below, mpe_above)
        return self.valid.params(int(rows[int(np.argmax(acq))]))


@dataclass(frozen=True)
class OptunaOptions:
    """The keywords of the Optuna strategies (`make_strategy`, `base.Strategy`'s per-point construction)."""

    study: tuple[str, str] | None = None  # (database URL, study name): loaded if it exists, else created there
    start: Sequence[Instance] = ()  # instances enqueued first (transfer from neighbouring points)
    batch: int = 4  # instances per `ask` at most
    startup: int | None = None  # random proposals before the model (None: STARTUP)
    candidates: int = CANDIDATES
    ei: int = 24  # Optuna's n_ei_candidates (tpe)
    explore: float = EXPLORE


class OptunaSearch(Strategy):
    """Base of the Optuna strategies; subclasses say which sampler (`sampler`)."""

    model_based: ClassVar[bool] = True
    name: ClassVar[str] = "optuna"
    needs: ClassVar[tuple[str, ...]] = ()  # Python packages the sampler imports

    def __init__(self, instances: Sequence[Instance], budget: int | None = None, seed: int = 0, **options: Any) -> None:
        """`options`: `OptunaOptions`' names (a TypeError names an unknown one)."""
        o = OptunaOptions(**options)
        missing = [p for p in self.needs if importlib.util.find_spec(p) is None]
        if missing:
            raise UserError(
                f"the {self.name} strategy needs the Python package(s) {', '.join(missing)}",
                hint=f"pip install {' '.join(missing)}, or use --strategy tpe",
            )
        if o.batch < 1:
            raise ValueError(f"batch must be >= 1, got {o.batch}")
        self.valid = ValidSet(instances)
        self.budget = len(self.valid) if budget is None else min(budget, len(self.valid))
        self.batch = o.batch
        self.candidates, self.ei, self.explore = o.candidates, o.ei, o.explore
        # random proposals before the model takes over; not a function of the budget, so that the first N
        # proposals of a run with a larger budget are those of a run with budget N (anytime)
        n_startup = o.startup if o.startup is not None else STARTUP
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Optuna's ExperimentalWarning
            self.on_valid = OnValidSet(self.sampler(seed, n_startup), self.valid)
            storage = optuna.storages.RDBStorage(o.study[0]) if o.study else None
            self._storage = storage
            self.study = optuna.create_study(
                storage=storage,
                study_name=o.study[1] if o.study else None,
                sampler=self.on_valid,
                direction="minimize",
                load_if_exists=True,
            )
        self.spent = 0
        self._queued = 0  # WAITING trials (enqueued instances, already taken from the valid set)
        self.pending: dict[Instance, optuna.Trial] = {}
        self._resume()
        for inst in o.start:
            row = self.valid.row_of(inst.id)
            if row is not None and self.valid.free[row]:
                self.study.enqueue_trial(self.valid.params(row), user_attrs={"instance_id": inst.id})
                self.valid.take(row)  # the enqueued trial measures it; nothing else may take it
                self._queued += 1
        self._done = False

    def sampler(self, seed: int, n_startup: int) -> BaseSampler:
        raise NotImplementedError

    def _resume(self) -> None:
        """A study loaded from the database: its instances are taken; trials a dead sweep left running fail."""
        for t in self.study.get_trials(deepcopy=False):
            row = self.valid.row_of(str(t.user_attrs.get("instance_id", "")))
            if row is not None and self.valid.free[row]:
                self.valid.take(row)
            if t.state == TrialState.WAITING:
                self._queued += 1  # enqueued by an earlier run and not asked yet: asked first
                continue
            if t.state == TrialState.RUNNING:  # its pair was recorded as crashed by the runner
                self.study.tell(t.number, state=TrialState.FAIL)
            self.spent += 1

    def ask(self, n: int) -> list[Instance]:
        check_n(n)
        if self._done:
            return []
        out: list[Instance] = []
        while len(out) < min(n, self.batch) and self.spent < self.budget and (self.valid.left or self._queued):
            self.on_valid.last_row = None
            trial = self.study.ask(self.valid.distributions)
            iid = trial.user_attrs.get("instance_id")
            if iid is not None:
                self._queued -= 1
            row = self.valid.row_of(iid) if iid is not None else self.on_valid.last_row
            if row is None and iid is None and self.valid.left:  # nothing varies (one instance): no sampling
                row = int(self.valid.free.argmax())
                self.valid.take(row)
            if row is None:  # an enqueued instance this space does not have: drop its trial
                self.study.tell(trial, state=TrialState.FAIL)
                continue
            inst = self.valid.instances[row]
            trial.set_user_attr("instance_id", inst.id)
            self.pending[inst] = trial
            self.spent += 1
            out.append(inst)
        if not out:
            self._done = True
        return out

    def close(self) -> None:
        """Dispose of the study's database engine (a study in the results database): its pooled connections
        would keep the file open (a replaced or renamed database, `autotune db bake`)."""
        if self._storage is not None:
            self._storage.remove_session()
            self._storage.engine.dispose()

    def tell(self, instance: Instance, results: Sequence[Measurement]) -> None:
        trial = self.pending.pop(instance, None)
        if trial is None:
            raise ValueError(f"instance {instance.id} was not proposed by this strategy (or was told already)")
        status = Status(results[0].status).value if results else "measured_earlier"
        trial.set_user_attr("status", status)
        value = objective(results)
        if value is None:
            self.study.tell(trial, state=TrialState.FAIL)
        else:
            self.study.tell(trial, value)


class TPESearch(OptunaSearch):
    """`tpe`: Optuna's multivariate Tree-structured Parzen Estimator (constant liar for batches)."""

    name = "tpe"

    def sampler(self, seed: int, n_startup: int) -> BaseSampler:
        kw: dict[str, Any] = dict(seed=seed, n_startup_trials=n_startup, n_ei_candidates=self.ei)
        kw.update(constant_liar=True, warn_independent_sampling=False)
        if self.candidates and tpe_internals():
            return ValidTPESampler(self.valid, self.candidates, self.explore, **kw)  # (multivariate too)
        return optuna.samplers.TPESampler(multivariate=True, **kw)


class GPSearch(OptunaSearch):
    """`gp`: Optuna's Gaussian-process sampler (needs torch and scipy)."""

    name = "gp"
    needs = ("torch", "scipy")

    def sampler(self, seed: int, n_startup: int) -> BaseSampler:
        return optuna.samplers.GPSampler(
            seed=seed, n_startup_trials=n_startup, deterministic_objective=False, warn_independent_sampling=False
        )


class CmaEsSearch(OptunaSearch):
    """`cmaes`: Optuna's CMA-ES sampler (needs the cmaes package; categorical parameters are sampled at random)."""

    name = "cmaes"
    needs = ("cmaes",)

    def sampler(self, seed: int, n_startup: int) -> BaseSampler:
        return optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=n_startup, warn_independent_sampling=False)
