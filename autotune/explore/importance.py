"""Parameter importance from recorded measurements, with Optuna's importance evaluators.

The verified measurements of one space become the COMPLETE trials of an in-memory Optuna study (one trial per
(instance, point): its parameters as categorical distributions, its value log2(slowdown), slowdown = time / the best
time at that point), so measurements at different sizes compare. Optuna's evaluators then rank the parameters:
PED-ANOVA (numpy only) always; fANOVA and mean decrease in impurity where scikit-learn is installed (they need it).
A space with more than `MAX_TRIALS` measurements is evaluated on a seeded uniform sample of them, and says so.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

MAX_TRIALS = 1000  # Optuna's in-memory storage adds ~1 ms a trial (deep copies): a large space is sampled


@dataclass(frozen=True)
class Importance:
    evaluator: str
    values: dict[str, float]  # parameter -> importance (normalized: they add up to 1)
    trials: int  # trials the evaluator saw
    measured: int  # verified measurements of the space (more than trials when sampled)


def ranked_names(found: list[Importance]) -> list[str]:
    """Every parameter any evaluator ranked, by the first evaluator's importance, largest first (ties: by name, so
    that the order does not depend on the process's string hashing)."""
    return sorted({n for f in found for n in f.values}, key=lambda n: (-found[0].values.get(n, 0), n))


def evaluators() -> dict[str, object]:
    """Optuna's evaluators usable here: PED-ANOVA, and fANOVA / MDI when scikit-learn is installed."""
    import importlib.util

    from optuna.importance import (
        FanovaImportanceEvaluator,
        MeanDecreaseImpurityImportanceEvaluator,
        PedAnovaImportanceEvaluator,
    )

    out: dict[str, object] = {"PED-ANOVA": PedAnovaImportanceEvaluator()}
    if importlib.util.find_spec("sklearn") is not None:
        out["fANOVA"] = FanovaImportanceEvaluator(seed=0)
        out["MDI"] = MeanDecreaseImpurityImportanceEvaluator(seed=0)
    return out


def study_of(params: pd.DataFrame, values: np.ndarray):  # type: ignore[no-untyped-def]
    """An in-memory study with one COMPLETE trial per row of `params`. A numeric parameter is an integer
    distribution over the rank of its value (its values are few and ordered: powers of two, tile sizes); any other is
    categorical. Integer distributions also keep Optuna's per-trial compatibility checks cheap."""
    import optuna
    from optuna.distributions import CategoricalDistribution, IntDistribution

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists: dict = {}
    params = params.copy()
    for c in params.columns:
        values_c = sorted(set(params[c].tolist()), key=value_order)
        if all(value_order(v)[0] == 0 for v in values_c):
            rank = {v: i for i, v in enumerate(values_c)}
            params[c] = [rank[v] for v in params[c].tolist()]
            dists[c] = IntDistribution(0, max(len(values_c) - 1, 1))
        else:
            dists[c] = CategoricalDistribution(values_c)
    study = optuna.create_study(direction="minimize")
    records = params.to_dict("records")
    trials = [
        optuna.trial.create_trial(
            params={k: python_scalar(v) for k, v in rec.items()}, distributions=dists, value=float(v)
        )
        for rec, v in zip(records, values, strict=True)
    ]
    study.add_trials(trials)
    return study


def importances(params: pd.DataFrame, slowdown: np.ndarray, seed: int = 0) -> list[Importance]:
    """Each available evaluator's importances of the varying parameters of `params` (one row per measurement)."""
    varying = [c for c in params.columns if params[c].nunique(dropna=True) > 1 and params[c].notna().all()]
    if not varying or len(params) < 8:
        return []
    measured = len(params)
    if measured > MAX_TRIALS:
        rows = np.sort(np.random.default_rng(seed).choice(measured, MAX_TRIALS, replace=False))
        params, slowdown = params.iloc[rows], slowdown[rows]
    values = np.log2(np.maximum(slowdown, 1.0))
    if float(np.ptp(values)) == 0.0:
        return []
    study = study_of(params[varying], values)
    import optuna

    out = []
    for name, ev in evaluators().items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                got = optuna.importance.get_param_importances(study, evaluator=ev)  # type: ignore[arg-type]
            except Exception as exc:  # noqa: BLE001 - an evaluator that cannot rank this study is left out
                warnings.warn(f"{name} importance failed: {exc}", stacklevel=2)
                continue
        got = {k: float(v) for k, v in got.items() if not math.isnan(float(v))}
        out.append(Importance(name, got, len(params), measured))
    return out


def python_scalar(v: object) -> object:
    """A numpy scalar as the Python scalar Optuna's distributions take; anything else as it is."""
    return v.item() if isinstance(v, np.generic) else v


def value_order(v: object) -> tuple:
    """Numbers first, by value, then the rest by text (a parameter's values in a categorical distribution)."""
    return (0, float(v), "") if isinstance(v, (int, float, np.number)) and not isinstance(v, bool) else (1, 0.0, str(v))
