"""The TSM2 analytical model against a sweep (does the model pick what the sweep found best?).

Pure: the model's picks as parameter dictionaries of the `tsm2` space, the where-filter that makes a
sweep config measure them, and, from one GPU's measurements frame (`Store.measurements`) and cuBLAS
times, one row per TSM2 test point: the model's pick and its measured time, the paper's own
configuration, the sweep's best instance, and cuBLAS.

The model (tsm2_model.py beside this module) chooses t1, t2, t3 and the k-split KS; the rest of a pick is the
paper's kernel: one row of C per thread (RPT = 1), the register prefetch of the next B tile (BPF = 1)
and A prefetched in registers (AST = 0). The paper's configuration is t1 = 128, t2 = n, t3 = 4, no
k-split (seed 001, Section 5).

Which times count: `ok` and `skipped` measurements (verified; a skipped one was stopped early because
its first repetitions were more than TOL slower than the best, see autotune/analysis/compare.py); a time that
comes from a skipped measurement is flagged, since it is an estimate from fewer repetitions.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from autotune.devices import DeviceLimits
from autotune.errors import UserError
from autotune.problems.gemm.tsm2_model import ModelDevice, Tsm2Choice, choose_tsm2

SPACE = "tsm2"
PARAMS = ("T1", "T2", "T3", "KS", "RPT", "BPF", "AST")
PAPER_KERNEL = {"RPT": 1, "BPF": 1, "AST": 0}  # what the model does not choose: the paper's kernel
FLAG = "\u2020"  # marks a time from an early-stopped measurement
COLUMNS = [
    "precision",
    "m",
    "n",
    "k",
    "bound",
    "t2_threshold",
    "pick",
    "predicted_ms",
    "pick_ms",
    "pick_skipped",
    "pick_frac",
    "paper",
    "paper_ms",
    "paper_skipped",
    "best",
    "best_ms",
    "best_frac",
    "pick_vs_best",
    "paper_vs_best",
    "cublas_ms",
    "best_vs_cublas",
]


def pick_params(choice: Tsm2Choice) -> dict[str, int]:
    """The `tsm2` space parameters of the model's choice."""
    return {"T1": choice.t1, "T2": choice.t2, "T3": choice.t3, "KS": choice.ks, **PAPER_KERNEL}


def paper_params(n: int) -> dict[str, int]:
    """The paper's configuration for B with n columns: t1 = 128, t2 = n, t3 = 4, one k-slice."""
    return {"T1": 128, "T2": n, "T3": 4, "KS": 1, **PAPER_KERNEL}


def label(params: Mapping[str, object]) -> str:
    return " ".join(f"{k}={params[k]}" for k in PARAMS if k in params)


def short(params: Mapping[str, object]) -> str:
    """T1/T2/T3/KS, then what differs from the paper's kernel: '32/8/4/4 BPF=0 AST=3'."""
    head = "/".join(str(params[k]) for k in ("T1", "T2", "T3", "KS"))
    rest = [f"{k}={params[k]}" for k in PAPER_KERNEL if params.get(k, PAPER_KERNEL[k]) != PAPER_KERNEL[k]]
    return " ".join([head, *rest])


def parse_label(text: str) -> dict[str, int]:
    """The inverse of `label`."""
    return {k: int(v) for k, v in (item.split("=") for item in text.split())}


def model_device(
    limits: DeviceLimits, precision: str, bandwidth: float, clock_hz: float, sm_count: int | None = None
) -> ModelDevice:
    """The model's device: the profile's per-SM limits with the measured bandwidth, clock and SM count."""
    dev = ModelDevice.from_limits(limits, precision, clock_hz=clock_hz, bandwidth=bandwidth)
    if sm_count is None or sm_count == dev.sm_count:
        return dev
    # peak flops scale with the SMs
    return dataclasses.replace(dev, sm_count=sm_count, peak_flops=dev.peak_flops * sm_count / dev.sm_count)


def where_expr(picks: Iterable[Mapping[str, int]]) -> str:
    """A where-filter (space-file expression language) that keeps exactly these parameter sets."""
    terms = sorted({" and ".join(f"{k} == {p[k]}" for k in PARAMS) for p in picks})
    if not terms:
        raise UserError("no TSM2 picks to write a filter for", hint="give at least one n and one precision")
    return " or ".join(f"({t})" for t in terms)


def _time(rows: pd.DataFrame, params: Mapping[str, int]) -> tuple[float, bool, float]:
    """Best median, whether it comes from an early-stopped measurement, and its roofline fraction."""
    mask = np.ones(len(rows), dtype=bool)
    for k, v in params.items():
        mask &= (rows[k] == v).to_numpy()
    hit = rows[mask]
    if hit.empty:
        return math.nan, False, math.nan
    r = hit.sort_values(["median_ms", "status"]).iloc[0]  # 'ok' sorts before 'skipped' at equal times
    return float(r["median_ms"]), r["status"] != "ok", float(r["roofline_frac"]) if r["status"] == "ok" else math.nan


def compare(frame: pd.DataFrame, cublas: pd.DataFrame, devices: Mapping[str, ModelDevice]) -> pd.DataFrame:
    """One row per TSM2 test point of `frame` (one GPU): the model's pick against the sweep's best.

    `devices`: precision -> the model's device (see `model_device`). `pick_ms` is NaN where the sweep did
    not measure the pick (run the config with the filter from `where_expr` to include it)."""
    missing = [c for c in PARAMS if c not in frame.columns]
    rows = frame[(frame["space"] == SPACE) & frame["status"].isin(["ok", "skipped"])] if not missing else frame[:0]
    if rows.empty:
        raise UserError(
            "no verified measurements of the tsm2 space in this database",
            hint="sweep a config with `spaces: [tsm2]`, e.g. configs/tsm2_h100.yaml",
        )
    out = []
    for (prec, m, n, k), at in rows.groupby(["precision", "m", "n", "k"], sort=True):
        if prec not in devices:
            raise UserError(f"no model device for {prec}", hint="the TSM2 model covers fp64 and fp32")
        choice = choose_tsm2(devices[prec], int(m), int(n), int(k), prec)
        pick, paper = pick_params(choice), paper_params(int(n))
        pick_ms, pick_skipped, pick_frac = _time(at, pick)
        paper_ms, paper_skipped, _ = _time(at, paper)
        ok = at[at["status"] == "ok"]
        best = (ok if not ok.empty else at).sort_values("median_ms").iloc[0]
        best_params = {p: int(best[p]) for p in PARAMS}
        cb = cublas[(cublas["precision"] == prec) & (cublas["m"] == m) & (cublas["n"] == n) & (cublas["k"] == k)]
        cublas_ms = float(cb["cublas_ms"].min()) if not cb.empty else math.nan
        best_ms = float(best["median_ms"])
        out.append(
            {
                "precision": prec,
                "m": int(m),
                "n": int(n),
                "k": int(k),
                "bound": choice.bound,
                "t2_threshold": choice.t2_threshold,
                "pick": label(pick),
                "predicted_ms": choice.predicted_time_s * 1e3,
                "pick_ms": pick_ms,
                "pick_skipped": pick_skipped,
                "pick_frac": pick_frac,
                "paper": label(paper),
                "paper_ms": paper_ms,
                "paper_skipped": paper_skipped,
                "best": label(best_params),
                "best_ms": best_ms,
                "best_frac": float(best["roofline_frac"]) if best["status"] == "ok" else math.nan,
                "pick_vs_best": pick_ms / best_ms,
                "paper_vs_best": paper_ms / best_ms,
                "cublas_ms": cublas_ms,
                "best_vs_cublas": cublas_ms / best_ms,
            }
        )
    return pd.DataFrame(out, columns=COLUMNS)
