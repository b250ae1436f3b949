"""Compile-check the example kernels of examples/*/space.yaml with nvcc for sm_90 (no GPU needed).

For each space: enumerate the parameter product, evaluate `derived` and the `hard` (and `soft`)
constraints with plain Python against H100 limits, print the counts, and compile the kernel file to a
real object (nvcc -c) at its #ifndef defaults and at a sample of the instances the hard constraints
allow: the extremes (first, last, most and fewest threads, most shared memory) plus a seeded random
sample. Also checks that every name in `kernel.defines` has an `#ifndef` default in the kernel file.

    python examples/check_compile.py               # counts + compile ~10 instances per space
    python examples/check_compile.py --count       # counts only
    python examples/check_compile.py --sample 20 --jobs 2 examples/softmax/space.yaml

Expressions are evaluated with Python's eval over a dict (no builtins; min, max, ceil, floor, log2, abs),
which is enough for the simple expressions of these files; the framework's own evaluator is autotune.expr.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
H100 = {
    "max_threads_per_block": 1024,
    "smem_per_block_default": 49152,
    "max_smem_per_block": 232448,
    "warp_size": 32,
    "sm_count": 132,
    "cc": 90,
    "l2_bytes": 50 * 1024 * 1024,
}
ELEM_BYTES = {"fp32": 4, "fp16": 2, "fp64": 8}
FUNCTIONS = {"min": min, "max": max, "ceil": math.ceil, "floor": math.floor, "log2": math.log2, "abs": abs}


def _values(spec) -> list:
    """A parameter's values: a list, or {pow2: [lo, hi]}, or {start, stop, step} (stop inclusive)."""
    if isinstance(spec, list):
        return spec
    if isinstance(spec, dict) and "pow2" in spec:
        lo, hi = spec["pow2"]
        return [2**k for k in range(int(math.log2(lo)), int(math.log2(hi)) + 1)]
    if isinstance(spec, dict) and "start" in spec:
        return list(range(spec["start"], spec["stop"] + 1, spec.get("step", 1)))
    return [spec]


def _eval(expr, env: dict):
    if isinstance(expr, (int, float)):
        return expr
    return eval(str(expr), {"__builtins__": {}, **FUNCTIONS}, env)  # noqa: S307 - trusted example files


def load(space_path: Path) -> dict:
    return yaml.safe_load(space_path.read_text())


def instances(space: dict, precision: str = "fp32") -> tuple[int, list[dict], list[dict]]:
    """(raw product size, instances passing hard, instances passing hard and soft) as dicts of parameters + derived."""
    names = list(space["parameters"])
    grids = [_values(space["parameters"][n]) for n in names]
    raw, hard, soft = 0, [], []
    for combo in itertools.product(*grids):
        raw += 1
        env = dict(H100, elem_bytes=ELEM_BYTES[precision], **dict(zip(names, combo, strict=True)))
        for k, e in (space.get("derived") or {}).items():
            env[k] = _eval(e, env)
        if all(_eval(c["expr"], env) for c in space.get("hard") or []):
            params = {n: env[n] for n in names}
            row = {"params": params, "env": env}
            hard.append(row)
            if all(_eval(c["expr"], env) for c in space.get("soft") or []):
                soft.append(row)
    return raw, hard, soft


def sample(space: dict, hard: list[dict], n: int, seed: int = 0) -> list[dict]:
    """The extremes of the hard-feasible instances, then a seeded random sample, n in all (no duplicates)."""
    picks: list[dict] = []

    def add(row):
        if row["params"] not in picks:
            picks.append(row["params"])

    if not hard:
        return []
    add(hard[0])
    add(hard[-1])
    for key in ("threads", "smem_bytes"):
        if key in hard[0]["env"]:
            add(max(hard, key=lambda r: r["env"][key]))
            add(min(hard, key=lambda r: r["env"][key]))
    rng = random.Random(seed)
    rest = [r for r in hard if r["params"] not in picks]
    for row in rng.sample(rest, min(len(rest), max(0, n - len(picks)))):
        add(row)
    return picks[: max(n, 1)]


def nvcc_command(source: Path, params: dict | None, out: Path) -> list[str]:
    defines = [f"-D{k}={v}" for k, v in (params or {}).items()]
    return ["nvcc", "-std=c++17", "-arch=sm_90", "-c", str(source), "-o", str(out), *defines]


def compile_one(source: Path, params: dict | None, workdir: Path, tag: str) -> tuple[bool, str, float]:
    out = workdir / f"{tag}.o"
    t0 = time.perf_counter()
    r = subprocess.run(nvcc_command(source, params, out), capture_output=True, text=True, timeout=300)
    ok = r.returncode == 0 and out.is_file() and out.stat().st_size > 0
    return ok, (r.stderr or r.stdout)[-3000:], time.perf_counter() - t0


def missing_defaults(space: dict, source: Path) -> list[str]:
    """Names of kernel.defines (default: every parameter) without an `#ifndef NAME` in the kernel file."""
    text = source.read_text()
    names = space["kernel"].get("defines") or list(space["parameters"])
    return [n for n in names if not re.search(rf"^\s*#\s*ifndef\s+{re.escape(n)}\b", text, re.MULTILINE)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spaces", nargs="*", type=Path, help="space files (default: examples/*/space.yaml)")
    ap.add_argument("--count", action="store_true", help="print the counts only, compile nothing")
    ap.add_argument("--sample", type=int, default=10, help="instances compiled per space besides the defaults")
    ap.add_argument("--jobs", type=int, default=2, help="parallel nvcc processes")
    args = ap.parse_args(argv)
    spaces = args.spaces or sorted(HERE.glob("*/space.yaml"))

    jobs = []  # (label, source, params)
    failures = 0
    for path in spaces:
        space = load(path)
        source = (path.parent / space["kernel"]["source"]).resolve()
        raw, hard, soft = instances(space)
        print(f"{path.parent.name:10s} {space['name']:18s} raw {raw:5d}  hard {len(hard):4d}  hard+soft {len(soft):4d}")
        missing = missing_defaults(space, source)
        if missing:
            print(f"  MISSING #ifndef defaults in {source.name}: {missing}")
            failures += 1
        if args.count:
            continue
        jobs.append((f"{path.parent.name}/defaults", source, None))
        for p in sample(space, hard, args.sample):
            jobs.append((f"{path.parent.name}/" + ",".join(f"{k}={v}" for k, v in p.items()), source, p))

    if args.count:
        return 1 if failures else 0
    if shutil.which("nvcc") is None:
        print("nvcc not found")
        return 2
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(compile_one, src, p, Path(tmp), f"u{i}") for i, (_, src, p) in enumerate(jobs)]
        for (label, _, _), fut in zip(jobs, futures, strict=True):
            ok, log, secs = fut.result()
            print(f"  {'ok  ' if ok else 'FAIL'} {secs:5.1f}s {label}")
            if not ok:
                failures += 1
                print("    " + log.replace("\n", "\n    "))
    print(
        f"{len(jobs) - failures if failures <= len(jobs) else 0}/{len(jobs)} compiled"
        if not failures
        else f"{failures} failure(s)"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
