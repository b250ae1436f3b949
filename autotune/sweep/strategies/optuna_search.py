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
from typing import Any, ClassVar, Sequence

import optuna
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from autotune.errors import UserError
from autotune.space.instance import Instance
from autotune.sweep.strategies.base import Strategy, check_n
from autotune.sweep.strategies.validset import ValidSet
from autotune.vocab import Measurement, Status

optuna.logging.set_verbosity(optuna.logging.WARNING)


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


class OptunaSearch(Strategy):
    """Base of the Optuna strategies; subclasses say which sampler (`sampler`)."""

    model_based: ClassVar[bool] = True
    name: ClassVar[str] = "optuna"
    needs: ClassVar[tuple[str, ...]] = ()  # Python packages the sampler imports

    def __init__(self, instances: Sequence[Instance], budget: int | None = None, seed: int = 0, *,
                 study: tuple[str, str] | None = None, start: Sequence[Instance] = (), batch: int = 4,
                 startup: int | None = None) -> None:
        missing = [p for p in self.needs if importlib.util.find_spec(p) is None]
        if missing:
            raise UserError(f"the {self.name} strategy needs the Python package(s) {', '.join(missing)}",
                            hint=f"pip install {' '.join(missing)}, or use --strategy tpe")
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        self.valid = ValidSet(instances)
        self.budget = len(self.valid) if budget is None else min(budget, len(self.valid))
        self.batch = batch
        # random proposals before the model takes over: a fifth of the budget, 3 to 10
        n_startup = startup if startup is not None else max(3, min(10, self.budget // 5))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Optuna's ExperimentalWarning
            self.sampler = OnValidSet(self.sampler(seed, n_startup), self.valid)
            storage = optuna.storages.RDBStorage(study[0]) if study else None
            self.study = optuna.create_study(storage=storage, study_name=study[1] if study else None,
                                             sampler=self.sampler, direction="minimize", load_if_exists=True)
        self.spent = 0
        self._queued = 0  # WAITING trials (enqueued instances, already taken from the valid set)
        self.pending: dict[Instance, optuna.Trial] = {}
        self._resume()
        for inst in start:
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
            self.sampler.last_row = None
            trial = self.study.ask(self.valid.distributions)
            iid = trial.user_attrs.get("instance_id")
            if iid is not None:
                self._queued -= 1
            row = self.valid.row_of(iid) if iid is not None else self.sampler.last_row
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
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup, multivariate=True,
                                          constant_liar=True, warn_independent_sampling=False)


class GPSearch(OptunaSearch):
    """`gp`: Optuna's Gaussian-process sampler (needs torch and scipy)."""

    name = "gp"
    needs = ("torch", "scipy")

    def sampler(self, seed: int, n_startup: int) -> BaseSampler:
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=n_startup, deterministic_objective=False,
                                         warn_independent_sampling=False)


class CmaEsSearch(OptunaSearch):
    """`cmaes`: Optuna's CMA-ES sampler (needs the cmaes package; categorical parameters are sampled at random)."""

    name = "cmaes"
    needs = ("cmaes",)

    def sampler(self, seed: int, n_startup: int) -> BaseSampler:
        return optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=n_startup, warn_independent_sampling=False)
