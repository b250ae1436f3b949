"""Every sweep of a results database as Optuna studies, for optuna-dashboard (`autotune dashboard`).

Brute-force sweeps record measurements, not trials; here each measurement becomes a trial of a study, so any
database opens in optuna-dashboard (history, slices, parallel coordinates, importance):

- `per="point"` (default): one study per (space, test point, device), named `SPACE:POINT_KEY:DEVICE`;
- `per="sweep"`: one study per (sweep, space), named `sweep N CONFIG:SPACE` (one sweep covers many points: the
  study's value is then the slowdown against the best at each point, so points compare; the raw time is a user
  attribute).

A verified measurement is a COMPLETE trial (value: median ms, or slowdown for `per="sweep"`); a failure (compile,
launch, wrong, timeout, crashed) is a FAIL trial; one the early-stop rule cut ("skipped") is PRUNED. Each trial's
parameters are the instance's, as categorical distributions over the values measured in that study; its user
attributes hold instance_id, status, error, gflops and roofline_frac. Studies that the search strategies stored in
the sweep database itself (`autotune.sweep.strategies.optuna_search`) are in its Optuna tables and open as they are.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import pandas as pd

from autotune.explore.data import Results, ok_frame
from autotune.explore.importance import python_scalar, value_order


def studies(r: Results, storage: Any, per: str = "point") -> list[str]:
    """Write the studies of `r` into an Optuna storage (URL or storage object); returns their names."""
    import optuna
    from optuna.distributions import BaseDistribution, CategoricalDistribution
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if per not in ("point", "sweep"):
        raise ValueError(f"per must be 'point' or 'sweep', not {per!r}")
    m = r.measurements.copy()
    m["space"] = r.instances["space"].reindex(m["instance_id"].to_numpy()).to_numpy()
    m["slowdown"] = ok_frame(r)["slowdown"].reindex(m.index)
    dev = r.devices["name"]
    sweeps = r.sweeps.set_index("id")["config_name"] if len(r.sweeps) else pd.Series(dtype=str)
    keys = ["space", "point_id", "device_id"] if per == "point" else ["sweep_id", "space"]
    names = []
    for key, sub in m.groupby(keys, sort=True):
        if per == "point":
            space, point_id, device_id = key
            name = f"{space}:{r.points.loc[point_id, 'key']}:{dev.get(device_id, device_id)}"
        else:
            sweep_id, space = key
            name = f"sweep {sweep_id} {sweeps.get(sweep_id, '')}:{space}"
        params = r.params[space].reindex(sub["instance_id"].to_numpy())
        dists: dict[str, BaseDistribution] = {
            c: CategoricalDistribution(sorted(set(params[c].dropna().tolist()), key=value_order))
            for c in params.columns
            if params[c].notna().all()
        }
        trials = []
        for rec, row in zip(params[list(dists)].to_dict("records"), sub.itertuples(), strict=True):
            status = str(row.status)
            value = row.median_ms if per == "point" else row.slowdown
            ok = status == "ok" and value is not None and not math.isnan(value)
            state = TrialState.COMPLETE if ok else TrialState.PRUNED if status == "skipped" else TrialState.FAIL
            attrs = {
                "instance_id": row.instance_id,
                "status": status,
                "median_ms": _num(row.median_ms),
                "gflops": _num(row.gflops),
                "roofline_frac": _num(row.roofline_frac),
            }
            trials.append(
                optuna.trial.create_trial(
                    params={k: python_scalar(v) for k, v in rec.items()},
                    distributions=dists,
                    value=float(value) if ok else None,
                    state=state,
                    user_attrs=attrs,
                )
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            study = optuna.create_study(storage=storage, study_name=name, direction="minimize", load_if_exists=True)
            if study.get_trials(deepcopy=False):
                names.append(name)
                continue  # already converted (a storage written before)
            study.set_user_attr("source", r.source)
            study.set_user_attr("objective", "median_ms" if per == "point" else "slowdown vs the best at the point")
            study.set_metric_names(["median_ms" if per == "point" else "slowdown"])  # the dashboard's axis title
            study.add_trials(trials)
        names.append(name)
    return names


def _num(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
