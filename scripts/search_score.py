"""The autotuning community's methodology score (0 = random search, 1 = the optimum), over function evaluations.

A faithful re-implementation of github.com/AutoTuningAssociation/autotuning_methodology at commit b0075f8
(src/autotuning_methodology/), with its experiment files' settings (experiment_files/milo_hotspot.json,
methodology_paper_evaluation.json: "cutoff_percentile": 0.96, "cutoff_percentile_start": 0.5, minimization):
  - `dist`: the pair's valid objective values sorted ascending (failures excluded: `include_nan=False`,
    searchspace_statistics.py `objective_performances_total_sorted`).
  - range (report_experiments.py `get_aggregation_data`, searchspace_statistics.py `cutoff_point`): the target
    value at percentile p is `opt + (median - opt) * (1 - p)`; `i` is the first index of the descending `dist`
    whose value is <= the target; the fevals to it are `ceil(i / (N + 1 - i))`; the range is
    `arange(fevals(0.5), fevals(0.96))`.
  - random-search baseline (baseline.py `RandomSearchCalculatedBaseline._get_random_curve`, the default,
    calculated, no simulation): after M evaluations the expected best is `desc[min(N - 1, round(M (N + 1) / (M + 1)))]`,
    smoothed with a PCHIP interpolator over the range.
  - a strategy's curve (curves.py `StochasticOptimizationAlgorithm.get_curve_over_fevals` with `dist`): per
    evaluation count, each repeat's best-so-far is located in `dist` (`searchsorted`, left; not found: NaN), the
    median index over repeats (rounded) is looked up in `dist`.
  - standardised (baseline.py `Baseline.get_standardised_curves`): `(curve - random) / (opt - random)`.
  - score (report_experiments.py `get_strategies_aggregated_performance`, `get_strategy_scores`): the mean over
    search spaces of the standardised curve, then the mean over the range.
Difference: the methodology's default x-axis is time (compile + benchmark + framework time per evaluation); a
replay of our strategies has no such times for the hub's spaces, so this is its `fevals` x-axis (the same curves,
evaluated at each evaluation count). Where a range runs past a strategy's trace (budget 20% of the space), the last
value is carried, as the methodology does for runs that stop early.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.interpolate import PchipInterpolator

CUTOFF = 0.96
CUTOFF_START = 0.5


def cutoff_fevals(dist: np.ndarray, percentile: float) -> int:
    """searchspace_statistics.py `cutoff_point`: fevals random search needs (in expectation) to reach the target."""
    desc = dist[::-1]
    n = len(dist)
    opt, median = dist[0], float(np.median(dist))
    target = opt + (median - opt) * (1 - percentile)
    i = int(np.argmax(desc <= target))
    return math.ceil(i / (n + 1 - i))


def fevals_range(dist: np.ndarray) -> np.ndarray:
    start, stop = cutoff_fevals(dist, CUTOFF_START), cutoff_fevals(dist, CUTOFF)
    return np.arange(start, max(stop, start + 1))  # a range of at least one evaluation count


def random_curve(dist: np.ndarray, fevals: np.ndarray) -> np.ndarray:
    """baseline.py `_get_random_curve` (smoothing on)."""
    desc = dist[::-1]
    n = len(dist)
    draws = np.array([desc[min(n - 1, round(m * (n + 1) / (m + 1)))] for m in fevals])
    if len(fevals) <= 2:
        return draws
    first = np.concatenate([[True], np.ediff1d(fevals) > 0])
    return PchipInterpolator(fevals[first], draws[first])(np.linspace(fevals[0], fevals[-1], len(fevals)))


def strategy_curve(traces: np.ndarray, dist: np.ndarray, fevals: np.ndarray) -> np.ndarray:
    """curves.py `get_curve_over_fevals` with a distribution: traces are (repeats, evaluations) best-so-far values
    (inf before the first valid one); the curve at M evaluations is dist[round(nanmedian(index of best-so-far))]."""
    cols = np.clip(fevals - 1, 0, traces.shape[1] - 1)  # M evaluations -> column M - 1; carried past the end
    values = traces[:, cols].astype(float)
    idx = np.searchsorted(dist, values, side="left").astype(float)
    idx[(idx >= len(dist)) | ~np.isfinite(values)] = np.nan
    with np.errstate(all="ignore"):
        med = np.nanmedian(idx, axis=0)
    med = np.where(np.isnan(med), len(dist) - 1, med)  # no repeat has found a valid value yet: the worst
    return dist[np.round(med).astype(int)]


def pair_score(traces: np.ndarray, dist: np.ndarray) -> np.ndarray:
    """The standardised curve of one strategy on one pair over the methodology's range."""
    dist = np.sort(dist[np.isfinite(dist)])
    fevals = fevals_range(dist)
    rnd = random_curve(dist, fevals)
    cur = strategy_curve(traces, dist, fevals)
    with np.errstate(all="ignore"):
        std = (cur - rnd) / (dist[0] - rnd)
    # where the random curve is at the optimum already (0 / 0 there; the methodology's mean would be NaN): 1 when the
    # strategy is at the optimum too, else 0 (it is no better than random search)
    return np.where(np.isfinite(std), std, np.where(cur <= dist[0], 1.0, 0.0))


def score(curves: list[np.ndarray]) -> float:
    """report_experiments.py: mean over search spaces per step, then the mean over the range. The ranges of
    different spaces differ in length here (fevals, not a shared time grid), so each space's curve is resampled
    to a common grid of 1,000 steps (the experiment files' `resolution`) first."""
    grid = np.linspace(0, 1, 1000)
    rows = [np.interp(grid, np.linspace(0, 1, len(c)), c) if len(c) > 1 else np.full(len(grid), c[0]) for c in curves]
    return float(np.mean(np.mean(np.array(rows), axis=0)))
