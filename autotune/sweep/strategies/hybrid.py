"""`hybrid`: a surrogate model's proposals plus local search around the incumbents, on the valid set only.

Why: TPE models each parameter's good and bad values, but proposes far from the best instance found and does
not learn where instances fail; Kernel Tuner's genetic algorithm wins on spaces whose optimum is a few steps from
good instances (convolution, batched GEMM). `hybrid` does both, and only ever proposes free valid instances:

  - a surrogate of log(time): ridge regression on one-hot parameter values and one-hot pairs of parameter
    values (main effects and every two-parameter interaction; a parameter of many values is cut into runs of
    neighbouring values), refitted as results come in. It is failure-aware: a failed instance is learned as the
    slowest time seen so far, so regions that fail look slow and are avoided (the study records the trial FAIL);
  - per proposal, one of three moves (seeded): with probability `explore` (0.1) a random free instance; with
    probability `glob` (0.5) the free instance the surrogate predicts fastest less a bonus for what it has seen
    little (`optimism`, 1.0: a lower confidence bound over every free instance, or a random `pool` of them on
    large spaces); otherwise a local move: the free instance the surrogate predicts fastest among
    the neighbours of an incumbent in the valid set's graph (instances that differ from it in at most `radius` (1)
    parameters), the incumbent being the best instance measured, or the next best when the neighbourhoods of the
    better ones are exhausted;
  - `startup` (8) random free instances first (the surrogate needs a few points).
  - off by default (`stall` 0): after `stall` results without a better best, a share `cross` of the local moves
    become a genetic algorithm's crossover of two of the ELITE fastest instances (measured on development and
    held-out pairs: results/bench/SEARCH_PROVENANCE.md, "A portfolio move"; not adopted);
  - off by default (`clip` 0): the surrogate learns log times above the `clip` quantile of the verified ones as
    that quantile (SEARCH_PROVENANCE.md, "Search II"; measured on development pairs, not adopted).
  - off by default (`restart` 0): after `restart` results without a better best (and `restart` results after the
    last restart), a local search starts again from a random free row and descends from it (the surrogate's
    fastest free neighbour of the restart's best) until `patience` (24) of its results in a row found nothing
    better, as basin hopping does (SEARCH_PROVENANCE.md, "Restarts"; measured on development pairs, not adopted).
Nothing depends on the budget but the stop, so the first N proposals of a long run are those of a run of N
(anytime). A proposal costs a few vectorized passes over the instances' codes packed into uint64 words (Hamming
distances by bit operations) and the surrogate's prediction on the candidates: under 50 ms of CPU on 10^6 valid
instances (tests/test_strategy_hybrid.py; `scripts/bench_search.py --proposal-cost N` for the whole strategy).

`HybridModel` is the algorithm on integer codes (no Optuna); `HybridSampler` puts it behind Optuna's sampler
interface, so `HybridSearch` keeps every property of the Optuna strategies (studies in the sweep's database,
resume, transfer, batches, failed trials).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, fields, replace
from typing import Any, Sequence

import numpy as np
import optuna
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from autotune.sweep.strategies.optuna_search import OptunaSearch, objective
from autotune.sweep.strategies.validset import ValidSet
from autotune.vocab import Measurement

ELITE = 8  # the crossover's parents are drawn from this many fastest instances
MAX_PAIR_FEATURES = 2_000  # above this many pair features, main effects only (large spaces of many values)
PAIR_LEVELS = 8  # a parameter's values are cut into at most this many runs for the pair features
MAIN_LEVELS = 64  # ... and into at most this many for its main effect
REFIT = 10  # past the first results, the surrogate is refitted when the results grew by 1/REFIT
PRECOMPUTE = 4_000_000  # feature indices kept for every instance when instances x features is at most this


@dataclass(frozen=True)
class HybridOptions:
    """`hybrid`'s tuning options (the module docstring says what each does); the names are those a user passes:
    `--option key=value` of scripts/bench_search.py and scripts/search_dev.py, keywords of `make_strategy`. The
    defaults were chosen with scripts/bench_search.py on tuning seeds >= 100 (results/bench/SEARCH_PROVENANCE.md)."""

    startup: int = 8
    explore: float = 0.1
    glob: float = 0.5
    radius: int = 1
    pool: int = 20_000  # free instances the global move scores at most (a random sample of them on larger spaces)
    ridge: float = 1.0
    basins: int = 1  # local moves around the best of up to this many basins (1: around the best instance only)
    optimism: float = 1.0  # the global move's bonus (log time) for instances whose features the model has seen little
    stall: int = 0  # after this many results without a better best (0: never), some local moves become crossovers
    cross: float = 0.5  # ... this share of them: a child of two of the best instances (a genetic algorithm's)
    clip: float = 0.0  # (0: off) log times above this quantile of the verified ones are learned as that quantile
    restart: int = 0  # (0: off) after this many results without a better best, a local search restarts at random
    patience: int = 24  # ... and descends from it until this many of its results in a row found nothing better


OPTION_NAMES = tuple(f.name for f in fields(HybridOptions))


def codes_of(valid: ValidSet) -> np.ndarray:
    """Per instance and searched parameter, the index of its value among the parameter's distinct values (in
    value order for numbers, first-seen order for categories): an (instances x parameters) int32 matrix, read off
    the valid set's coordinate matrix (vectorized: a few seconds for 10^6 instances)."""
    x = valid._x
    if x.shape[1] == 0:
        return np.zeros((len(valid), 0), np.int32)
    cols = [np.unique(x[:, j], return_inverse=True)[1].reshape(-1) for j in range(x.shape[1])]
    return np.stack(cols, axis=1).astype(np.int32)


def _runs(card: list[int], most: int) -> list[np.ndarray]:
    """Per parameter of `card` values, the run (0..most-1) of neighbouring values each value falls in."""
    return [np.arange(c, dtype=np.int64) * min(c, most) // c for c in card]


class HybridModel:
    """The `hybrid` algorithm on an (instances x parameters) code matrix. `propose(free)` returns a free row;
    `observe(row, log_time | None)` tells a result (None: failed)."""

    def __init__(self, codes: np.ndarray, seed: int = 0, options: HybridOptions | None = None) -> None:
        self.options = options if options is not None else HybridOptions()
        self._optima: list[int] = []  # the best row of every restart that ended
        self._phase: list[tuple[float, int]] | None = None  # a restart's results (log time, row), fastest first
        self._phase_idle = 0  # the restart's results in a row that did not improve on its best
        self._calm = 0  # results since the last restart ended (the next waits `restart` results)
        self._asked: set[int] = set()  # rows the restart proposed that were not told yet (a batch asks several)
        self._since_best = 0  # results told since the best verified time last improved
        self.codes = np.ascontiguousarray(codes, dtype=np.int32)
        n, p = self.codes.shape
        self.rng = np.random.default_rng(seed)
        self._layout()
        m = p + len(self.pairs)
        self._all = self._features(np.arange(n)) if n * m <= PRECOMPUTE else None
        self._pack()
        self.rows: list[int] = []
        self.y: list[float | None] = []
        self.w: np.ndarray | None = None
        self.b0 = 0.0
        nf = self.nf
        self.gram = np.zeros((nf, nf))  # F^T F of the told rows' one-hot features
        self.ok_sum = np.zeros(nf)  # F^T y over the verified rows
        self.fail_count = np.zeros(nf)  # F^T 1 over the failed rows
        self.ok_total, self.worst = 0.0, -math.inf
        self.ranked: list[tuple[float, int]] = []  # (log time, row) of the verified rows, fastest first
        self._exhausted: set[int] = set()  # incumbents with no free row within the radius (free rows only go)
        self._fitted_at = 0

    def _layout(self) -> None:
        """The surrogate's features: per parameter the runs of values of its main effect and of its pair features,
        and where each feature block starts (`main_off`, `pair_off`; `nf` features in all)."""
        n, p = self.codes.shape
        self.card = [int(self.codes[:, j].max()) + 1 if n else 1 for j in range(p)]
        # values cut into runs of neighbouring values: at most PAIR_LEVELS for the pair features (at most
        # PAIR_LEVELS^2 features a pair), MAIN_LEVELS for the main effects (not thousands of features for a parameter)
        self.level, self.mlevel = _runs(self.card, PAIR_LEVELS), _runs(self.card, MAIN_LEVELS)
        self.lcard = [int(lv.max()) + 1 if len(lv) else 1 for lv in self.level]
        self.mcard = [int(lv.max()) + 1 if len(lv) else 1 for lv in self.mlevel]
        # feature layout: one-hot per (parameter, level), then per pair of parameters one-hot per (level, level)
        self.main_off = np.cumsum([0] + self.mcard[:-1]).astype(np.int64) if p else np.zeros(0, np.int64)
        nf = sum(self.mcard)
        pairs = [(a, b) for a in range(p) for b in range(a + 1, p)]
        if sum(self.lcard[a] * self.lcard[b] for a, b in pairs) > MAX_PAIR_FEATURES:
            pairs = []
        self.pairs = pairs
        sizes = [self.lcard[a] * self.lcard[b] for a, b in pairs]
        self.pair_off = [nf + int(o) for o in np.cumsum([0] + sizes[:-1])] if pairs else []
        self.nf = nf + sum(sizes)

    # ------------------------------------------------------------------ the neighbourhood graph
    def _pack(self) -> None:
        """Each row's codes packed into fields of 4, 8 or 16 bits of (instances x words) uint64 keys, so that the
        Hamming distance of every row to one row is a few vectorized bit operations (`distance`)."""
        n, p = self.codes.shape
        top = max(self.card, default=1)
        self._w = 4 if top <= 16 else 8 if top <= 256 else 16 if top <= 65536 else 32
        per = 64 // self._w
        words = max(1, math.ceil(p / per))
        self.keys = np.zeros((n, words), np.uint64)
        self._low = np.zeros(words, np.uint64)
        for j in range(p):
            shift = np.uint64((j % per) * self._w)
            self.keys[:, j // per] |= self.codes[:, j].astype(np.uint64) << shift
            self._low[j // per] |= np.uint64(1) << shift
        self._buf: tuple[np.ndarray, np.ndarray] | None = None

    def distance(self, row: int) -> np.ndarray:
        """The number of parameters in which each row differs from `row`."""
        if self._buf is None:
            self._buf = (np.empty_like(self.keys), np.empty_like(self.keys))
        x, tmp = self._buf
        np.bitwise_xor(self.keys, self.keys[row][None, :], out=x)
        shift = 1
        while shift < self._w:  # fold every field's bits onto its lowest bit (nothing crosses into the field below)
            np.right_shift(x, np.uint64(shift), out=tmp)
            x |= tmp
            shift *= 2
        x &= self._low[None, :]
        bits = np.bitwise_count(x) if hasattr(np, "bitwise_count") else _POPCOUNT[x.view(np.uint8)].reshape(len(x), -1)
        return bits.sum(axis=1, dtype=np.int64)

    # ------------------------------------------------------------------ the surrogate
    def _features(self, rows: np.ndarray) -> np.ndarray:
        c = self.codes[rows].astype(np.int64)
        cols = [(self.mlevel[j][c[:, j]] + self.main_off[j])[:, None] for j in range(c.shape[1])]
        for (a, b), off in zip(self.pairs, self.pair_off, strict=True):
            cols.append((off + self.level[a][c[:, a]] * self.lcard[b] + self.level[b][c[:, b]])[:, None])
        return np.concatenate(cols, axis=1) if cols else np.zeros((len(c), 0), np.int64)

    def features(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows) x (parameters + pairs)) feature indices of the rows."""
        return self._all[rows] if self._all is not None else self._features(rows)

    def observe(self, row: int, log_time: float | None) -> None:
        """Tell a result: accumulates the normal equations (a failure counts as the slowest time seen, whichever
        that is when the model is fitted)."""
        f = self.features(np.array([row]))[0]
        self.gram[np.ix_(f, f)] += 1.0
        if log_time is None:
            self.fail_count[f] += 1.0
        else:
            self.ok_sum[f] += log_time
            self.ok_total += log_time
            self.worst = max(self.worst, log_time)
            better = not self.ranked or log_time < self.ranked[0][0]
            bisect.insort(self.ranked, (log_time, int(row)))
            self._since_best = -1 if better else self._since_best
        self._since_best += 1
        self._calm += 1
        if self._phase is not None and int(row) in self._asked:  # the restart's own results only
            self._asked.discard(int(row))
            gain = log_time is not None and (not self._phase or log_time < self._phase[0][0])
            self._phase_idle = 0 if gain else self._phase_idle + 1
            if log_time is not None:
                bisect.insort(self._phase, (log_time, int(row)))
            if self._phase_idle >= self.options.patience:
                self._end_phase()
        self.rows.append(int(row))
        self.y.append(log_time)

    def fit(self) -> None:
        """Ridge regression of log time on the features (refitted for every result while few, then whenever the
        data grew by 1/REFIT)."""
        n = len(self.rows)
        if self.w is not None and n - self._fitted_at < max(1, self._fitted_at // REFIT):
            return
        fails = n - len(self.ranked)
        self.b0 = (self.ok_total + fails * self.worst) / n
        if self.options.clip:
            self._fit_clipped()
        elif 2 * n < self.nf:
            y = np.array([self.worst if v is None else v for v in self.y]) - self.b0
            self._fit_dual(self.features(np.array(self.rows)), y)
        else:
            rhs = self.ok_sum + self.worst * self.fail_count - self.b0 * np.diag(self.gram)
            self.w = np.linalg.solve(self.gram + self.options.ridge * np.eye(self.nf), rhs)
        self._fitted_at = n

    def _fit_clipped(self) -> None:
        """The fit on log times capped at the `clip` quantile of the verified ones (a failure: the cap): the model
        ranks the good part of the space and no longer averages a region's few fast instances with its many slow
        ones (a convolution's fastest instances sit in a region whose median is 3-100x slower)."""
        n = len(self.rows)
        ok = np.array([v for v in self.y if v is not None])
        cap = float(np.quantile(ok, self.options.clip))
        y = np.array([cap if v is None else min(v, cap) for v in self.y])
        self.b0 = float(y.mean())
        f = self.features(np.array(self.rows))
        if 2 * n < self.nf:
            self._fit_dual(f, y - self.b0)
        else:
            rhs = np.zeros(self.nf)
            np.add.at(rhs, f.ravel(), np.repeat(y - self.b0, f.shape[1]))
            self.w = np.linalg.solve(self.gram + self.options.ridge * np.eye(self.nf), rhs)

    def _fit_dual(self, f: np.ndarray, y: np.ndarray) -> None:
        """The dual form, cheaper while results are few: (F F^T + lambda I) a = y, w = F^T a."""
        k = np.zeros((len(y), len(y)))
        for col in f.T:
            k += col[:, None] == col[None, :]
        a = np.linalg.solve(k + self.options.ridge * np.eye(len(y)), y)
        self.w = np.zeros(self.nf)
        np.add.at(self.w, f.ravel(), np.repeat(a, f.shape[1]))

    def predict(self, rows: np.ndarray) -> np.ndarray:
        assert self.w is not None
        return self.b0 + self.w[self.features(rows)].sum(axis=1)

    # ------------------------------------------------------------------ proposals
    def _best(self, rows: np.ndarray, optimism: float = 0.0) -> int:
        """The row of `rows` the surrogate predicts fastest; with `optimism`, the prediction less `optimism` x the
        mean over the row's features of 1 / sqrt(1 + the number of results that had the feature): a lower
        confidence bound, so that values and pairs of values the results have seen little get tried (an optimum
        whose neighbours are slow, in a region the first results missed, is otherwise never proposed)."""
        pred = self.predict(rows)
        if optimism:
            pred = pred - optimism * (1.0 / np.sqrt(1.0 + np.diag(self.gram)))[self.features(rows)].mean(axis=1)
        return int(rows[int(np.argmin(pred))])

    def propose(self, free: np.ndarray) -> int:
        """A free row (`free`: a boolean mask over the rows with at least one True)."""
        idx = np.flatnonzero(free)
        ok = len(self.ranked)
        u = self.rng.random()
        if len(self.rows) < self.options.startup or ok < 2 or not self.codes.shape[1]:
            return int(self.rng.choice(idx))
        waited = min(self._since_best, self._calm) >= self.options.restart
        if self.options.restart and (self._phase is not None or waited):
            got = self._restarted(idx, free)
            if got is not None:
                self._asked.add(got)
                return got
        if u < self.options.explore:
            return int(self.rng.choice(idx))
        self.fit()
        if u < self.options.explore + self.options.glob:
            return self._best(self._sample(idx), self.options.optimism)
        if self.options.stall and self._since_best >= self.options.stall and self.rng.random() < self.options.cross:
            return self._crossover(idx)  # (ok >= 2 here)
        order = [r for _, r in self.ranked]
        # local search around the best of another basin now and then (a trap has many good rows)
        if self.options.basins > 1:
            reps = self._representatives()
            if len(reps) > 1 and self.rng.random() < 0.5:
                pick = int(reps[int(self.rng.integers(1, len(reps)))])
                order = [pick] + order
        for inc in order:
            if inc in self._exhausted:
                continue
            near = np.flatnonzero((self.distance(inc) <= self.options.radius) & free)
            if len(near):
                return self._best(near)
            self._exhausted.add(inc)
        return self._best(self._sample(idx))

    def _restarted(self, idx: np.ndarray, free: np.ndarray) -> int | None:
        """A portfolio's second source (`restart`): once the best has not improved for `restart` results, a local
        search starts again from a random free row and descends (the surrogate's fastest free neighbour of the
        restart's best row) until `patience` of its results in a row found nothing better, as basin hopping does;
        then the default moves go on (around the overall best, which the restart may have moved). None while its
        start was asked but not told (the rest of a batch: the default moves)."""
        if self._phase is None or not self._phase:
            if self._phase is not None and self._asked:
                return None
            self._phase, self._phase_idle = [], 0
            self._asked.clear()
            return int(self.rng.choice(idx))
        self.fit()
        for _, inc in self._phase:
            near = np.flatnonzero((self.distance(inc) <= self.options.radius) & free)
            if len(near):
                return self._best(near)
        self._end_phase()
        return int(self.rng.choice(idx))

    def _end_phase(self) -> None:
        if self._phase:
            self._optima.append(self._phase[0][1])
        self._phase, self._calm = None, 0
        self._asked.clear()

    def _crossover(self, idx: np.ndarray) -> int:
        """A genetic algorithm's child of two parents drawn from the ELITE fastest instances: each parameter's
        value from either parent, one parameter mutated to a random value; proposed as the free row nearest to it
        (fewest differing parameters), the surrogate's fastest among those (the best's basin is left when the best
        has not improved for `stall` results)."""
        top = [r for _, r in self.ranked[:ELITE]]
        a, b = self.rng.choice(len(top), 2, replace=False)
        pa, pb = self.codes[top[int(a)]], self.codes[top[int(b)]]
        child = np.where(self.rng.random(len(pa)) < 0.5, pa, pb)
        j = int(self.rng.integers(len(child)))
        child[j] = int(self.rng.integers(self.card[j]))
        cand = self._sample(idx)
        d = (self.codes[cand] != child).sum(axis=1)
        return self._best(cand[d == d.min()])

    def _representatives(self) -> list[int]:
        """The best verified row, then the best rows at least `spread` parameters away from every one kept before
        (the best of other basins), at most `basins` of them, among the 256 fastest; rows whose neighbourhood is
        exhausted are passed over."""
        spread = max(2, math.ceil(self.codes.shape[1] / 3))
        reps: list[int] = []
        for _, r in self.ranked[:256]:
            if r in self._exhausted:
                continue
            if all(int((self.codes[r] != self.codes[q]).sum()) >= spread for q in reps):
                reps.append(r)
                if len(reps) >= self.options.basins:
                    break
        return reps

    def _sample(self, idx: np.ndarray) -> np.ndarray:
        """Every free row, or about `pool` of them drawn at random on a large space."""
        if len(idx) <= self.options.pool:
            return idx
        return np.unique(idx[self.rng.integers(0, len(idx), self.options.pool)])


_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


class HybridSampler(BaseSampler):
    """`HybridModel` behind Optuna's sampler interface: it reads the study's finished trials (by their
    `instance_id`), and answers each trial with a free valid instance's parameters (`chosen_row` says which)."""

    def __init__(self, valid: ValidSet, seed: int, options: HybridOptions) -> None:
        self.valid = valid
        self.model = HybridModel(codes_of(valid), seed, options)
        self._seen: set[int] = set()
        self.chosen_row: int | None = None
        self._caught_up = False

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, Any]:
        return dict(self.valid.distributions)

    def catch_up(self, study: optuna.Study) -> None:
        """Learn the study's finished trials not learned yet (a study loaded from the database: a resumed sweep)."""
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
            self.learn(t.number, t.user_attrs.get("instance_id"), t.value if t.state == TrialState.COMPLETE else None)
        self._caught_up = True

    def learn(self, number: int, instance_id: Any, value: float | None) -> None:
        """One finished trial (value None: failed); a trial learned before is ignored."""
        if number in self._seen:
            return
        self._seen.add(number)
        row = self.valid.row_of(str(instance_id or ""))
        if row is not None:
            self.model.observe(row, math.log(value) if value is not None and value > 0 else None)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, Any]) -> dict[str, Any]:
        if not search_space:
            return {}
        if not self._caught_up:
            self.catch_up(study)
        self.chosen_row = self.model.propose(self.valid.free)
        return self.valid.params(self.chosen_row)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, name: str, dist: Any) -> Any:
        raise RuntimeError("hybrid samples every parameter jointly")  # never called: the space is relative


class HybridSearch(OptunaSearch):
    """`hybrid`: surrogate (ridge on parameter values and pairs, failure-aware) + local search around the
    incumbents + random moves, over free valid instances only (see the module docstring)."""

    name = "hybrid"

    def __init__(self, instances: Sequence[Any], budget: int | None = None, seed: int = 0, **options: Any) -> None:
        """`options`: `HybridOptions`' names (`startup` is shared with Optuna's strategies) and `OptunaSearch`'s."""
        startup = options.pop("startup", None)
        startup = HybridOptions.startup if startup is None else startup
        self._options = HybridOptions(**{k: options.pop(k) for k in OPTION_NAMES if k in options})
        super().__init__(instances, budget, seed, startup=startup, **options)

    def sampler(self, seed: int, n_startup: int) -> BaseSampler:
        self._hybrid = HybridSampler(self.valid, seed, replace(self._options, startup=n_startup))
        return self._hybrid

    def tell(self, instance: Any, results: Sequence[Measurement]) -> None:
        trial = self.pending.get(instance)
        super().tell(instance, results)
        if trial is not None:  # the model learns it now (reading the whole study per proposal costs O(trials))
            self._hybrid.learn(trial.number, instance.id, objective(results))
