#!/usr/bin/env python3
"""How many compiles a host runs at once, in effect: the compile-bound ceiling of a sweep on it (issue 31: a 2D
convolution whose configurations each take seconds of NVRTC, where 10x Kernel Tuner's configurations per second was
asked of a 16-core host).

A seeded sample of --sample configurations of Kernel Tuner's convolution (tests/data/kt_public/convolution.cu,
unchanged) is compiled through the sweep's own path (`compile_batch` in a `compile_pool.CompilePool` of P processes,
as GpuBackend runs it: nice 5, NVRTC warmed, a fresh compile cache each time, one instance a request) for every P of
--procs, and, with --kt N, the first N of them one at a time the way Kernel Tuner 1.5's CuPy backend compiles them
(`cupy.RawModule` on the source with the configuration's #define lines in front, options --std=c++11, then
`get_function`, a fresh CuPy cache). Every way on the same configurations, in one process, one after the other.

For each P it prints:

  wall         from the first submit to the last result (includes starting the P processes, and the tail: the last
               compiles run with fewer processes busy)
  compile s    the sum of the instances' compile times (NVRTC's own wall in the compile process)
  slowdown     the sum of compile times at P over the sum at P=1 (the same instances): what running P at once costs
               each compile (the cores' shared caches, memory bandwidth and clock)
  ratio med    the median over those instances of each one's compile time at P over its time at P=1 (the sums are
               ruled by the longest compiles, which run mostly alone at the end whatever P is: read both)
  effective    P / slowdown: compiles at once, in effect, with every process busy. A compile-bound sweep on this
               host measures at most `effective` times the configurations per second of one compile at a time
               (Kernel Tuner), when each of its compiles costs what ours does alone (the `kt/ours` column: Kernel
               Tuner's way over ours, P=1, on the same instances), and only where both tools are judged over
               configurations that cost the same to compile (the same order, or a random one)

Every way runs with a fresh CUDA_CACHE_PATH: NVRTC's cubin step (ptxas) and the driver's JIT of CuPy's PTX both keep
their output in the driver's compute cache (~/.nv/ComputeCache), so a configuration compiled before on the machine
compiles again in a tenth of the time (measured on an H100 host, CUDA 13: 2.70 s, then 0.21 s; 2.22-2.27 s with the
cache off or a fresh one).

Sample spaces (--space): `bench` (default), the 1,080 configurations of scripts/bench_kt_switch.py's convolution case
(Kernel Tuner's convolution_correct.py: block 16..128 x 2..32, tiles 1, 2, 4, padding and read-only 0/1, at most 1,024
threads a block); `whole`, the issue's 7,296 (scripts/bench_compile_bound.py: tiles 1..8).

    python3 scripts/bench_compile_scaling.py --sample 24 --procs 1,8,15,16,24 --kt 8 --out $OUT/scaling.json
    python3 scripts/bench_compile_scaling.py --dry-run        # here: the sample and the requests, nothing compiled
    python3 scripts/bench_compile_scaling.py --twins          # here: configurations whose code is another's (cpp)

`--twins` keys each configuration's program as the sweep does with `AUTOTUNE_COMPILE_TWINS=1`
(`autotune.sweep.compile.twins.twin_key`: the C preprocessor, `cpp -P`, with its defines) and counts the distinct programs: a
configuration whose key equals an earlier one's in the enumeration order compiles the same program.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
KERNEL = ROOT / "tests" / "data" / "kt_public" / "convolution.cu"
NAME = "convolution_kernel"


def space(which: str) -> list[dict[str, int]]:
    """The configurations of a sample space (the module docstring), in Kernel Tuner's enumeration order."""
    sys.path.insert(0, str(ROOT / "scripts"))  # the sibling scripts that define these spaces
    if which == "bench":
        import two_stage_compile as bench  # type: ignore[import-not-found]

        params: dict[str, list[int]] = bench.tune_params()
        keep = [lambda c: c["block_size_x"] * c["block_size_y"] <= 1024]
    elif which == "whole":
        import bench_compile_bound as whole  # type: ignore[import-not-found]

        params = whole.tune_params()
        keep = [lambda c, r=r: bool(eval(r, {}, dict(c))) for r in whole.RESTRICTIONS]  # noqa: S307 - its own
    else:
        raise SystemExit(f"--space {which!r}: use bench or whole")
    configs = [dict(zip(params, values, strict=True)) for values in itertools.product(*params.values())]
    return [c for c in configs if all(k(c) for k in keep)]


def sample(configs: list[dict[str, int]], k: int, seed: int) -> list[dict[str, int]]:
    """k configurations drawn without replacement (seeded), in the order drawn."""
    import random

    if not 1 <= k <= len(configs):
        raise SystemExit(f"--sample {k}: between 1 and the space's {len(configs)} configurations")
    return random.Random(seed).sample(configs, k)


def summarize(times: dict[int, list[float | None]], walls: dict[int, float]) -> list[dict[str, Any]]:
    """One row per process count: `times[P]` the instances' compile seconds (None: no time), `walls[P]` the wall.
    The slowdown compares sums over the instances timed at both P and 1 (the module docstring)."""
    base = times.get(1)
    rows = []
    for p in sorted(times):
        got = [t for t in times[p] if t is not None]
        row: dict[str, Any] = {
            "procs": p,
            "instances": len(got),
            "wall_s": round(walls[p], 2),
            "compile_s": round(sum(got), 2),
            "median_s": round(statistics.median(got), 3) if got else None,
            "slowdown": None,
            "ratio_median": None,
            "effective": None,
        }
        if base is not None:
            pairs = [(a, b) for a, b in zip(times[p], base, strict=True) if a is not None and b is not None]
            if pairs and sum(b for _, b in pairs) > 0:
                slow = sum(a for a, _ in pairs) / sum(b for _, b in pairs)
                row["slowdown"], row["effective"] = round(slow, 3), round(p / slow, 2)
                row["ratio_median"] = round(statistics.median(a / b for a, b in pairs if b > 0), 3)
        rows.append(row)
    return rows


def requests(configs: list[dict[str, int]], arch: int, options: tuple[str, ...] | None = None) -> list[Any]:
    """One CompileRequest per configuration: the kernel file, `options` (default: the sweep's own), then its
    parameters as -D options (as `tune_kernel` does)."""
    from autotune.sweep.compile.nvrtc import DEFAULT_OPTIONS, CompileRequest

    base = DEFAULT_OPTIONS if options is None else options
    return [
        CompileRequest(KERNEL, (NAME,), arch, options=(*base, *(f"-D{k}={v}" for k, v in c.items())), timeout_s=None)
        for c in configs
    ]


def ours(reqs: list[Any], procs: int) -> tuple[list[float | None], float, int]:
    """Every request through `compile_batch` in a CompilePool of `procs` processes, a fresh cache: (compile
    seconds per request, None where it has none; the wall from the first submit; failures)."""
    import multiprocessing as mp

    from autotune.sweep.compile.nvrtc import COMPILE_CACHE_ENV, cold_cache_env, compile_batch, warm_compile_process
    from autotune.sweep.compile.compile_pool import CompilePool

    with tempfile.TemporaryDirectory(prefix="autotune-scaling-") as tmp:
        env = cold_cache_env(Path(tmp))
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)  # the pool's processes inherit it as they spawn: every cache cold
        pool = CompilePool(procs, mp.get_context("spawn"), initializer=warm_compile_process)
        try:
            t0 = time.perf_counter()
            cache = Path(env[COMPILE_CACHE_ENV])
            futures = [pool.submit(compile_batch, r, cache, what="a scaling compile") for r in reqs]
            out: list[float | None] = []
            failed = 0
            for f in futures:
                try:
                    (ck,) = f.result()
                except Exception:  # noqa: BLE001 - a pool failure: no time for this one
                    out.append(None)
                    failed += 1
                    continue
                out.append(ck.compile_s)
                failed += not ck.ok
            return out, time.perf_counter() - t0, failed
        finally:
            pool.shutdown()
            for k, v in saved.items():  # this process's own caches again (Kernel Tuner's way compiles here)
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def kt_way(configs: list[dict[str, int]]) -> list[float]:
    """Seconds per configuration, compiled one at a time as Kernel Tuner 1.5's CuPy backend does (the docstring)."""
    import cupy  # CUDA started in `main` under this process's own fresh caches (`cold_cache_env`), used by nothing else

    source = KERNEL.read_text()
    out = []
    for c in configs:
        code = "".join(f"#define {k} {v}\n" for k, v in c.items()) + source
        t0 = time.perf_counter()
        try:
            cupy.RawModule(code=code, options=("--std=c++11",), name_expressions=[NAME]).get_function(NAME)
        except Exception:  # noqa: BLE001 - a configuration that fails (ptxas: too much shared memory) still cost this
            pass
        out.append(time.perf_counter() - t0)
    return out


def twins(configs: list[dict[str, int]], cpp: str = "cpp") -> list[bool]:
    """For each configuration, in order: whether its program (the sweep's own twin key, `autotune.sweep.compile.twins`: the
    preprocessed kernel, its name, the sweep's options, sm_90) equals an earlier configuration's."""
    import shutil

    from autotune.sweep.compile.nvrtc import DEFAULT_OPTIONS
    from autotune.sweep.compile.twins import twin_key

    found = shutil.which(cpp)
    if found is None:
        raise SystemExit(f"--twins needs the C preprocessor ({cpp}): install cpp (GCC) or pass another with --cpp")
    text, seen, out = KERNEL.read_text(), set(), []
    for c in configs:
        key = twin_key(text, (NAME,), (*DEFAULT_OPTIONS, *(f"-D{k}={v}" for k, v in c.items())), 90, cpp=found)
        if key is None:
            raise SystemExit(f"{cpp} failed on {KERNEL} with {c}")
        out.append(key in seen)
        seen.add(key)
    return out


def host() -> dict[str, Any]:
    """Cores as the OS and /proc/cpuinfo count them, and the CPU model."""
    cores: set[tuple[str, str]] = set()
    model, phys, core = None, "0", None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = (s.strip() for s in line.partition(":"))
            if key == "model name":
                model = value
            elif key == "physical id":
                phys = value
            elif key == "core id":
                core = value
            elif not key and core is not None:
                cores.add((phys, core))
                core = None
        if core is not None:
            cores.add((phys, core))
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu_count": os.cpu_count(), "usable": usable, "physical_cores": len(cores) or None, "model": model}


def table(rows: list[dict[str, Any]], kt_over_ours: float | None) -> str:
    head = (
        f"{'procs':>5} {'n':>4} {'wall s':>8} {'compile s':>10} {'median s':>9} {'slowdown':>9} {'ratio med':>9} "
        f"{'effective':>9}"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['procs']:>5} {r['instances']:>4} {r['wall_s']:>8.2f} {r['compile_s']:>10.2f} "
            f"{r['median_s'] if r['median_s'] is not None else '':>9} {r['slowdown'] or '':>9} "
            f"{r.get('ratio_median') or '':>9} {r['effective'] or '':>9}"
        )
    if kt_over_ours is not None:
        lines.append(f"kt/ours (P=1, the same instances): {kt_over_ours:.3f}")
    return "\n".join(lines)


def report(path: Path) -> int:
    """The table of a saved run, recomputed from its compile times (a run saved before a column existed gets it)."""
    import lzma

    raw = path.read_bytes()
    saved = json.loads(lzma.decompress(raw) if path.suffix == ".xz" else raw)
    times = {int(p): t for p, t in saved["times"].items()}
    walls = {r["procs"]: r["wall_s"] for r in saved["rows"]}
    print(json.dumps({k: saved.get(k) for k in ("commit", "when_utc", "host", "space", "options")}))
    print(table(summarize(times, walls), saved.get("kt_over_ours")))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--space", default="bench", help="bench (1,080 configurations, default) or whole (7,296)")
    ap.add_argument("--sample", type=int, default=24, help="configurations compiled each way (default 24)")
    ap.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    ap.add_argument("--procs", default="1,15", help="process counts, comma-separated; 1 is always run (default 1,15)")
    ap.add_argument("--kt", type=int, default=0, help="also compile the first N Kernel Tuner's way (needs a GPU)")
    ap.add_argument("--arch", type=int, default=None, help="compute capability, e.g. 90 (default: the GPU's)")
    ap.add_argument(
        "--options",
        default=None,
        help="compiler options instead of the sweep's (-std=c++17), e.g. --options=--std=c++11",
    )
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    ap.add_argument("--dry-run", action="store_true", help="print the sample and its requests; compile nothing")
    ap.add_argument("--twins", action="store_true", help="count configurations compiling another's program; no GPU")
    ap.add_argument("--prefix", default="14,18,88", help="--twins: also count within these first N (default 14,18,88)")
    ap.add_argument("--cpp", default="cpp", help="--twins: the C preprocessor (default cpp)")
    ap.add_argument("--report", type=Path, default=None, help="print the table of a saved run (its --out, or .xz)")
    a = ap.parse_args(argv)
    if a.report is not None:
        return report(a.report)
    if a.twins:
        every = space(a.space)
        flags = twins(every, a.cpp)
        print(
            f"{a.space}: {len(every)} configurations, {len(every) - sum(flags)} distinct programs, {sum(flags)} twins"
        )
        for n in (int(x) for x in a.prefix.split(",") if x.strip()):
            print(f"  twins among the first {n} in enumeration order: {sum(flags[:n])}")
        return 0
    try:
        procs = sorted({1, *(int(p) for p in a.procs.split(",") if p.strip())})
    except ValueError:
        raise SystemExit(f"--procs {a.procs!r}: process counts separated by commas, e.g. 1,8,15") from None
    if procs[0] < 1:
        raise SystemExit(f"--procs {a.procs!r}: every count at least 1")
    configs = sample(space(a.space), a.sample, a.seed)
    opts = None if a.options is None else tuple(a.options.split())
    if a.dry_run:
        for c, r in zip(configs, requests(configs, a.arch or 90, opts), strict=True):
            print(json.dumps(c), " ".join(r.options))
        return 0
    from autotune.devices import no_gpu_reason

    if (why := no_gpu_reason()) is not None:
        raise SystemExit(f"error: {Path(__file__).name} measures on a GPU and {why}")
    from autotune.sweep.compile.nvrtc import cold_cache_env

    os.environ.update(cold_cache_env(Path(tempfile.mkdtemp(prefix="autotune-scaling-"))))  # before CUDA starts here
    if a.arch is None:
        import cupy

        a.arch = int(cupy.cuda.Device(0).compute_capability)  # "90" for sm_90
    reqs = requests(configs, a.arch, opts)
    times: dict[int, list[float | None]] = {}
    walls: dict[int, float] = {}
    failed: dict[int, int] = {}
    for p in procs:
        times[p], walls[p], failed[p] = ours(reqs, p)
        print(f"P={p}: {walls[p]:.1f} s wall, {failed[p]} failed, {json.dumps(times[p])}", file=sys.stderr, flush=True)
    rows = summarize(times, walls)
    kt_times = kt_way(configs[: a.kt]) if a.kt > 0 else []
    kt_over_ours = None
    if kt_times:
        pairs = [(k, b) for k, b in zip(kt_times, times[1], strict=False) if b is not None]
        kt_over_ours = sum(k for k, _ in pairs) / sum(b for _, b in pairs) if pairs else None
    result = {
        "script": "scripts/bench_compile_scaling.py",
        "argv": sys.argv[1:] if argv is None else argv,
        "commit": os.environ.get("AUTOTUNE_GIT_COMMIT"),
        "when_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": {**host(), "python": platform.python_version()},
        "arch": a.arch,
        "options": list(reqs[0].options[: len(reqs[0].options) - len(configs[0])]),
        "space": a.space,
        "configs": configs,
        "times": {str(p): t for p, t in times.items()},
        "failed": {str(p): n for p, n in failed.items()},
        "rows": rows,
        "kt_times": kt_times,
        "kt_over_ours": kt_over_ours,
    }
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result["host"]))
    print(table(rows, kt_over_ours))
    return 0


if __name__ == "__main__":
    sys.exit(main())
