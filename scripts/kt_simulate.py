"""Kernel Tuner's strategies in its simulation mode on one complete cache (issue 33's benchmark).

Runs under Kernel Tuner's own interpreter (e.g. .venv-kt/bin/python; this file imports nothing of autotune):

    python kt_simulate.py CACHE.json[.gz] --strategies genetic_algorithm,pso --seeds 0-9 --max-fevals 326 --out T.json

For each strategy and seed it calls `tune_kernel(..., simulation_mode=True, cache=..., strategy=S,
strategy_options={"max_fevals": N})` after seeding `random` and `numpy.random` with the seed, and records the
order in which distinct configurations were evaluated ("first-N-distinct accounting": every configuration of the
cache counts once, valid or failed; a configuration evaluated again is not counted again) with each one's time
(null for Kernel Tuner's failed configurations). The caller takes the best of the first N for each budget N.

The search space is exactly the cache's configurations: `restrictions` accepts a configuration iff it is in the
cache (so a strategy's restriction-aware moves see the same valid set as ours), and `tune_params` lists, per
parameter, the values that occur in the cache. A non-constant parameter whose values equal another parameter's in
every configuration (gemm_batched_simt's DIM_XA == DIM_X under the complete_h100 config's `where:`) is dropped
from Kernel Tuner's view (it is a copy, not a dimension; keeping it would make Kernel Tuner enumerate a cartesian
product millions of configurations large). The cache is rewritten to a temporary file with those keys.

Seeds are the outer loop (every strategy runs seed s before any runs seed s + 1), so `--deadline` (a Unix time
after which no further run starts) leaves whole seeds of the strategies listed first.

Output JSON: {"kernel_tuner": version, "max_fevals": N, "params": [...], "size": n,
              "runs": {strategy: {seed: {"order": [key, ...], "times": [ms | null, ...], "wall_s": s}}},
              "failed": {strategy: "error text"}, "cut": "why it stopped early" (only when it did)}
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import os
import random
import sys
import tempfile
import time
import warnings

import numpy as np

FAILED = ("InvalidConfig", "CompilationFailedConfig", "RuntimeFailedConfig", "ErrorConfig")


def load(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as f:
        text = f.read().rstrip()
    if not text.endswith("}\n}") and not text.endswith("}}"):  # an unterminated cache: close it as Kernel Tuner does
        text = text.rstrip(",") + "}\n}"
    return json.loads(text)


def time_of(entry: dict) -> float | None:
    if "__error__" in entry:
        return None
    t = entry.get("time")
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None


def reduced(doc: dict) -> tuple[dict, list[str]]:
    """The cache with dropped duplicate parameters and per-parameter values that occur; and the kept names."""
    keys = list(doc["tune_params_keys"])
    entries = list(doc["cache"].values())
    cols = {k: tuple(e[k] for e in entries) for k in keys}
    keep: list[str] = []
    for k in keys:
        if len(set(cols[k])) > 1 and any(cols[k] == cols[j] for j in keep):
            continue  # a copy of a kept parameter
        keep.append(k)
    tune_params = {k: sorted(set(cols[k]), key=lambda v: (isinstance(v, str), v)) for k in keep}
    cache = {}
    for e in entries:
        cache[",".join(str(e[k]) for k in keep)] = {k: v for k, v in e.items() if k in keep or k not in keys}
    out = {**doc, "tune_params_keys": keep, "tune_params": tune_params, "cache": cache}
    return out, keep


def run_one(strategy: str, seed: int, doc: dict, keep: list[str], path: str, max_fevals: int) -> dict:
    from kernel_tuner import tune_kernel

    valid_keys = set(doc["cache"])

    def restrictions(p: dict) -> bool:
        return ",".join(str(p[k]) for k in keep) in valid_keys

    random.seed(seed)
    np.random.seed(seed)
    t = time.monotonic()
    ps = doc["problem_size"]
    with warnings.catch_warnings(), open(os.devnull, "w") as devnull:
        warnings.simplefilter("ignore")
        stdout, sys.stdout = sys.stdout, devnull
        try:
            results, _ = tune_kernel(
                doc["kernel_name"],
                "/* simulated */",
                ps if ps != "callable" else 1,
                [],
                doc["tune_params"],
                restrictions=restrictions,
                simulation_mode=True,
                cache=path,
                strategy=strategy,
                strategy_options={"max_fevals": max_fevals},
                quiet=True,
                verbose=False,
                objective="time",
            )
        finally:
            sys.stdout = stdout
    order, times, seen = [], [], set()
    for r in results:
        key = ",".join(str(r[k]) for k in keep)
        if key in seen or key not in valid_keys:
            continue
        seen.add(key)
        order.append(key)
        times.append(time_of(doc["cache"][key]))
    return {"order": order, "times": times, "wall_s": round(time.monotonic() - t, 3)}


def seeds_of(text: str) -> list[int]:
    if "-" in text:
        a, b = text.split("-")
        return list(range(int(a), int(b) + 1))
    return [int(s) for s in text.split(",")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cache")
    ap.add_argument("--strategies", required=True)
    ap.add_argument("--seeds", default="0-9", help="a range a-b or a list a,b,c")
    ap.add_argument("--max-fevals", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--deadline",
        type=float,
        default=0.0,
        help="Unix time after which no further seed is started "
        '(the runs finished so far are written; "cut" in the output says where it stopped)',
    )
    args = ap.parse_args()
    import kernel_tuner

    doc, keep = reduced(load(args.cache))
    out = {
        "kernel_tuner": getattr(kernel_tuner, "__version__", "?"),
        "max_fevals": args.max_fevals,
        "params": keep,
        "size": len(doc["cache"]),
        "runs": {},
        "failed": {},
    }
    strategies = args.strategies.split(",")
    spent = {s: 0.0 for s in strategies}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cache.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        for seed in seeds_of(args.seeds):  # seeds outer: a deadline leaves whole seeds of the first strategies
            for strategy in strategies:
                if args.deadline and time.time() > args.deadline:
                    out["cut"] = out.get("cut") or f"deadline reached before seed {seed} of {strategy}"
                    break
                if strategy in out["failed"]:
                    continue
                t = time.monotonic()
                try:
                    out["runs"].setdefault(strategy, {})[str(seed)] = run_one(
                        strategy, seed, doc, keep, path, args.max_fevals
                    )
                except Exception as exc:  # noqa: BLE001 - a strategy that cannot run here is reported, not fatal
                    out["failed"][strategy] = f"{type(exc).__name__}: {exc}"[:300]
                    out["runs"].pop(strategy, None)
                spent[strategy] += time.monotonic() - t
    for strategy, s in spent.items():
        print(f"  kt {strategy}: {s:.1f} s", file=sys.stderr)
    with open(args.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
