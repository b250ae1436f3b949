"""Kernel Tuner's strategies in its simulation mode on complete caches (issue 33's benchmark).

Runs under Kernel Tuner's own interpreter (e.g. .venv-kt/bin/python; this file imports nothing of autotune):

    python kt_simulate.py CACHE.json[.gz] --strategies genetic_algorithm,pso --seeds 0-9 --max-fevals 326 --out T.json
    python kt_simulate.py A.json B.json.xz --strategies pso --seeds 0-29 --max-fevals 326,873 --out T.json

Several caches run in one process (Kernel Tuner is imported once), seed by seed over every cache.

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

Speed (`--fast`, the default; `--no-fast` runs Kernel Tuner untouched): two changes that alter no decision of
any strategy, checked by tests/test_bench_search.py against an untouched run (the same order of configurations
for each strategy and seed): each cache file is parsed once per process instead of once per `tune_kernel` call
(simulation mode only reads it: its runner copies every entry it returns), and the debug log line of
`CostFunc._run_configs` that formats every evaluated point with numpy's array printer (`str(x)`, up to half of a
run's time for the swarm strategies) even when debug logging is off is left out. Together 27-37% less CPU for
the ten strategies on a convolution and a dedispersion cache. (diff_evo is not reproducible from the seed either
way: its Latin hypercube start draws from fresh entropy.)

Seeds are the outer loop (every strategy runs seed s on every cache before any runs seed s + 1), so `--deadline`
(a Unix time after which no further seed starts; a seed started runs to its end) leaves the same whole seeds on
every cache.

Output JSON (one cache; several: {"caches": [one such object per cache, with "cache": its path]}):
             {"kernel_tuner": version, "max_fevals": N, "params": [...], "size": n,
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


_DEBUG_LINE = 'logging.debug("normalize config: %s -> %s (legal: %s)", str(x), str(config), is_legal)'


def speed_up() -> list[str]:
    """Patch Kernel Tuner in this process for replays (see the module docstring); returns what was patched (a
    Kernel Tuner whose source differs from 1.5.0's where patched is left as it is for that part)."""
    import functools
    import inspect
    import textwrap

    from kernel_tuner import util
    from kernel_tuner.strategies import common

    done = []
    if not getattr(util.read_cache, "_memo", False):
        original = util.read_cache

        @functools.lru_cache(maxsize=None)  # every cache of the run, parsed once
        def parsed(path: str, mtime: float) -> dict:
            return original(path, open_cache=False)

        def read_cache(cachefile: str, open_cache: bool = True) -> dict:
            if open_cache:  # not a simulation: Kernel Tuner's own behaviour
                return original(cachefile, open_cache)
            return parsed(cachefile, os.path.getmtime(cachefile))

        read_cache._memo = True  # type: ignore[attr-defined]
        util.read_cache = read_cache
        done.append("read_cache parsed once")
    try:
        src = textwrap.dedent(inspect.getsource(common.CostFunc._run_configs))
    except (OSError, TypeError):
        src = ""
    if _DEBUG_LINE in src:
        namespace: dict = {}
        exec(compile(src.replace(_DEBUG_LINE, "pass"), common.__file__, "exec"), common.__dict__, namespace)
        common.CostFunc._run_configs = namespace["_run_configs"]
        done.append("_run_configs without its eager debug formatting")
    return done


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
    ap.add_argument("caches", nargs="+", metavar="CACHE", help="Kernel Tuner cache(s) (.json, .json.gz, .json.xz)")
    ap.add_argument("--strategies", required=True)
    ap.add_argument("--seeds", default="0-9", help="a range a-b or a list a,b,c")
    ap.add_argument(
        "--max-fevals", required=True, help="evaluations per run: one number, or one per cache (comma-separated)"
    )
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--deadline",
        type=float,
        default=0.0,
        help="Unix time after which no further seed is started "
        '(the runs finished so far are written; "cut" in the output says where it stopped)',
    )
    ap.add_argument(
        "--fast",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="patch Kernel Tuner's replay overheads (no decision changes; see above)",
    )
    args = ap.parse_args()
    fevals = [int(v) for v in args.max_fevals.split(",")]
    if len(fevals) == 1:
        fevals *= len(args.caches)
    if len(fevals) != len(args.caches):
        ap.error(f"--max-fevals has {len(fevals)} numbers for {len(args.caches)} caches: give one, or one per cache")
    import kernel_tuner

    patched = speed_up() if args.fast else []
    strategies = args.strategies.split(",")
    spent = {s: 0.0 for s in strategies}
    outs, docs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i, cache in enumerate(args.caches):
            doc, keep = reduced(load(cache))
            path = os.path.join(tmp, f"cache{i}.json")
            with open(path, "w") as f:
                json.dump(doc, f)
            docs.append((doc, keep, path))
            outs.append(
                {
                    "cache": cache,
                    "kernel_tuner": getattr(kernel_tuner, "__version__", "?"),
                    "max_fevals": fevals[i],
                    "params": keep,
                    "size": len(doc["cache"]),
                    "runs": {},
                    "failed": {},
                    "patched": patched,
                }
            )
        # seeds outer, then caches, then strategies: a deadline leaves the same whole seeds on every cache
        for seed in seeds_of(args.seeds):
            if args.deadline and time.time() > args.deadline:
                for out in outs:
                    out["cut"] = f"deadline reached before seed {seed}"
                break
            for out, (doc, keep, path) in zip(outs, docs, strict=True):
                for strategy in strategies:
                    if strategy in out["failed"]:
                        continue
                    t = time.monotonic()
                    try:
                        out["runs"].setdefault(strategy, {})[str(seed)] = run_one(
                            strategy, seed, doc, keep, path, out["max_fevals"]
                        )
                    except Exception as exc:  # noqa: BLE001 - a strategy that cannot run here is reported, not fatal
                        out["failed"][strategy] = f"{type(exc).__name__}: {exc}"[:300]
                        out["runs"].pop(strategy, None)
                    spent[strategy] += time.monotonic() - t
            print(f"  kt seed {seed} done", file=sys.stderr, flush=True)
    for strategy, s in spent.items():
        print(f"  kt {strategy}: {s:.1f} s", file=sys.stderr)
    with open(args.out, "w") as f:
        json.dump(outs[0] if len(outs) == 1 else {"caches": outs}, f)


if __name__ == "__main__":
    main()
