"""Issue 55 item 3: the lookup alone, per committed table, in the generated C++ header and Python module.

For each table, `--queries` random problems (seeded): a (precision, shape) group that has tuned points, each size
log-uniform between the smallest and the largest the group was tuned at. The header (`autotune emit -f cpp`) is
compiled with g++ -O2 into a small driver that times each `lookup_sizes` call (std::chrono::steady_clock around
it); the module (`autotune emit -f python`) runs in a fresh `python -I -S` (no autotune, no site-packages) that
times each `lookup_index(...)` call, its public entry point (time.perf_counter_ns around it). Both answer every
query; the report says whether they agree on all of them (they must: the lookup is integers only, bit for bit).
Per table: p50, p99 and max per call in microseconds (the clock's own cost included, reported as `clock_ns`), of
the last of `--passes` timed passes after a warm-up pass, and the same of each problem's fastest pass
(`*_best_of_passes`: the lookup's own cost, without the interruptions of a shared machine).

    .venv/bin/python scripts/bench_lookup.py --out results/bench/lookup.json          # every committed table
    .venv/bin/python scripts/bench_lookup.py --queries 2000 results/tsm2_h100/dispatch.json

No GPU is needed (the header's CUDA parts are behind __CUDACC__). Timings depend on the CPU: the report records
which one, its core count and load average.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import random
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autotune.dispatch.emit import emit_cpp, emit_python, simple_call  # noqa: E402
from autotune.dispatch.table import load_table  # noqa: E402

DRIVER = r"""
#include "dispatch.cuh"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
namespace ad = autotune_dispatch;
int main(int argc, char** argv) {
  std::FILE* in = std::fopen(argv[1], "rb");
  std::vector<long long> q;
  long long v;
  while (std::fread(&v, sizeof v, 1, in) == 1) q.push_back(v);
  std::fclose(in);
  const int w = 2 + ad::kNumSizes;
  const size_t n = q.size() / w;
  std::vector<int> answer(n);
  const int passes = std::atoi(argv[2]);
  std::vector<long long> ns(n), best(n, 1LL << 60);
  long long d[ad::kNumSizes];
  for (int pass = 0; pass <= passes; ++pass)  // pass 0 warms caches and branch predictors
    for (size_t i = 0; i < n; ++i) {
      for (int j = 0; j < ad::kNumSizes; ++j) d[j] = q[i * w + 2 + j];
      const auto t0 = std::chrono::steady_clock::now();
      answer[i] = ad::lookup_sizes(int(q[i * w]), int(q[i * w + 1]), d);
      const auto t1 = std::chrono::steady_clock::now();
      ns[i] = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
      if (pass && ns[i] < best[i]) best[i] = ns[i];
    }
  long long clock_ns = 1LL << 60;  // the clock's own cost: the smallest of many empty intervals
  for (int i = 0; i < 10000; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto t1 = std::chrono::steady_clock::now();
    const long long e = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    if (e < clock_ns) clock_ns = e;
  }
  std::printf("%lld\n", clock_ns);
  for (size_t i = 0; i < n; ++i) std::printf("%d %lld %lld\n", answer[i], ns[i], best[i]);
  return 0;
}
"""

PROBE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import dispatch_bench as d
queries = json.loads(sys.stdin.read())
simple, passes = bool(int(sys.argv[2])), int(sys.argv[3])
calls = [tuple(s) if simple else (p, h, *s) for p, h, s in queries]
f = d.lookup_index
ns = time.perf_counter_ns
best = [1 << 60] * len(calls)
for _pass in range(passes + 1):  # pass 0 warms the interpreter's caches
    out = []
    for args in calls:
        t0 = ns()
        a = f(*args)
        out.append((a, ns() - t0))
    if _pass:
        best = list(map(min, best, (t for _, t in out)))
clock = min(-(ns() - ns()) for _ in range(10000))
foreign = sorted(m for m in sys.modules if m.split(".")[0] in ("autotune", "numpy", "pandas", "yaml"))
print(json.dumps({"answers": [a for a, _ in out], "ns": [t for _, t in out], "best": best, "clock_ns": clock, "foreign": foreign}))
"""


def committed_tables() -> list[Path]:
    """Every dispatch.json (or .json.gz / .json.xz) committed under results/ (one per distinct table)."""
    seen: dict[str, Path] = {}
    for path in sorted(
        p
        for pattern in ("dispatch.json", "dispatch.json.gz", "dispatch.json.xz")
        for p in ROOT.glob(f"results/**/{pattern}")
    ):
        seen.setdefault(json.dumps(load_table(path).data, sort_keys=True), path)
    return sorted(seen.values())


def queries(data: dict, count: int, seed: int) -> list[tuple[str, str, list[int]]]:
    """`count` problems: a group with tuned points, each size log-uniform over the group's tuned range."""
    rng = random.Random(seed)
    groups: dict[tuple[str, str], list[dict]] = {}
    for p in data["points"]:
        groups.setdefault((p["precision"], p["shape"]), []).append(p["sizes"])
    keys = sorted(groups)
    bounds = {
        g: {n: (min(s[n] for s in groups[g]), max(s[n] for s in groups[g])) for n in data["size_names"]} for g in keys
    }
    out = []
    for _ in range(count):
        g = rng.choice(keys)
        sizes = []
        for n in data["size_names"]:
            lo, hi = bounds[g][n]
            sizes.append(max(1, round(math.exp(rng.uniform(math.log(lo), math.log(hi))))))
        out.append((g[0], g[1], sizes))
    return out


def percentiles(ns: list[int], clock_ns: int) -> dict:
    s = sorted(ns)
    at = lambda q: s[min(len(s) - 1, int(q * len(s)))] / 1000  # noqa: E731
    return {
        "p50_us": round(at(0.5), 3),
        "p99_us": round(at(0.99), 3),
        "max_us": round(s[-1] / 1000, 3),
        "mean_us": round(sum(s) / len(s) / 1000, 3),
        "clock_ns": clock_ns,
    }


def bench_table(path: Path, count: int, seed: int, work: Path, cxx: str, passes: int) -> dict:
    table = load_table(path)
    data = table.data
    asked = queries(data, count, seed)
    (work / "dispatch.cuh").write_text(emit_cpp(table))
    (work / "dispatch_bench.py").write_text(emit_python(table))
    (work / "main.cpp").write_text(DRIVER)
    precisions, shapes = list(table.precisions), list(table.shapes)
    with open(work / "queries.bin", "wb") as f:
        for p, s, sizes in asked:
            f.write(struct.pack(f"<{2 + len(sizes)}q", precisions.index(p), shapes.index(s), *sizes))
    exe = work / "bench"
    subprocess.run([cxx, "-std=c++17", "-O2", "-o", str(exe), str(work / "main.cpp")], check=True, cwd=work)
    lines = subprocess.run(
        [str(exe), str(work / "queries.bin"), str(passes)], check=True, capture_output=True, text=True
    ).stdout
    rows = lines.split("\n")
    cpp_clock = int(rows[0])
    cpp = [tuple(map(int, r.split())) for r in rows[1:] if r.strip()]
    probe = subprocess.run(
        [sys.executable, "-I", "-S", "-c", PROBE, str(work), str(int(simple_call(table))), str(passes)],
        input=json.dumps(asked),
        capture_output=True,
        text=True,
        cwd=work,
        env={"PATH": "/usr/bin:/bin"},
        check=True,
    )
    py = json.loads(probe.stdout)
    if py["foreign"]:
        raise SystemExit(f"error: the generated module imported {py['foreign']}: it must be standalone")
    cpp_answers = [a for a, _, _ in cpp]
    agree = sum(a == b for a, b in zip(cpp_answers, py["answers"], strict=True))
    structure = (data.get("structure") or {}).get("mode", "regions")
    return {
        "table": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
        "kind": data["kind"],
        "structure": structure,
        "kernels": len(data["kernels"]),
        "points": len(data["points"]),
        "regions": len(data["regions"]),
        "queries": len(asked),
        "agree": agree,
        "cpp": percentiles([t for _, t, _ in cpp], cpp_clock),
        "python": percentiles(py["ns"], py["clock_ns"]),
        # per problem, its fastest of the timed passes: what the lookup costs without the machine's interruptions
        "cpp_best_of_passes": percentiles([b for _, _, b in cpp], cpp_clock),
        "python_best_of_passes": percentiles(py["best"], py["clock_ns"]),
    }


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("tables", nargs="*", type=Path, help="dispatch.json files (default: every committed one)")
    ap.add_argument("--queries", type=int, default=100_000, help="random problems per table (default 10^5)")
    ap.add_argument("--seed", type=int, default=55)
    ap.add_argument(
        "--passes",
        type=int,
        default=3,
        help="timed passes over the problems after a warm-up pass (default 3): the p50/p99 are the last pass's;\n"
        "`*_best_of_passes` are per problem the fastest of the passes (without the machine's interruptions)",
    )
    ap.add_argument("--cxx", default="g++")
    ap.add_argument("--out", type=Path, help="write the report (JSON) here")
    ap.add_argument("--machine", default="", help="what the machine is and was doing, for the report's provenance")
    args = ap.parse_args()
    if shutil.which(args.cxx) is None:
        print(f"error: {args.cxx} not found (the C++ side is compiled with it)", file=sys.stderr)
        return 2
    tables = [p.resolve() for p in args.tables] or committed_tables()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-lookup-") as tmp:
        for i, path in enumerate(tables):
            work = Path(tmp) / str(i)
            work.mkdir()
            r = bench_table(path, args.queries, args.seed + i, work, args.cxx, max(1, args.passes))
            results.append(r)
            print(
                f"{r['table']} ({r['structure']}, {r['kernels']} kernels, {r['points']} points): "
                f"C++ p50 {r['cpp']['p50_us']:.3f} p99 {r['cpp']['p99_us']:.3f} us; "
                f"Python p50 {r['python']['p50_us']:.2f} p99 {r['python']['p99_us']:.2f} us; best of "
                f"{args.passes}: C++ p99 {r['cpp_best_of_passes']['p99_us']:.3f}, "
                f"Python p99 {r['python_best_of_passes']['p99_us']:.2f} us; "
                f"agree {r['agree']}/{r['queries']}",
                flush=True,
            )
    from autotune.sweep.provenance import git_commit  # AUTOTUNE_GIT_COMMIT where the tree was copied without .git

    commit = (git_commit() or "")[:7]
    cxx_version = subprocess.run([args.cxx, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    report = {
        "what": "lookup alone per call: the generated C++ header (g++ -O2) and Python module (python -I -S)",
        "command": "python " + shlex.join([f"scripts/{Path(__file__).name}", *sys.argv[1:]]),
        "provenance": {
            "cpu": cpu_model(),
            "cores": os.cpu_count(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(),
            "cxx": cxx_version,
            "commit": commit.strip(),
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            **({"machine": args.machine} if args.machine else {}),
        },
        "targets": {"cpp_p99_us": 1.0, "python_p99_us": 20.0},
        "tables": results,
        "all_agree": all(r["agree"] == r["queries"] for r in results),
        "worst": {
            "cpp_p99_us": max(r["cpp"]["p99_us"] for r in results),
            "python_p99_us": max(r["python"]["p99_us"] for r in results),
            "cpp_best_of_passes_p99_us": max(r["cpp_best_of_passes"]["p99_us"] for r in results),
            "python_best_of_passes_p99_us": max(r["python_best_of_passes"]["p99_us"] for r in results),
        },
    }
    print(
        f"worst p99: C++ {report['worst']['cpp_p99_us']:.3f} us, Python {report['worst']['python_p99_us']:.2f} us; "
        f"C++ and Python agree on every query: {report['all_agree']}"
    )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0 if report["all_agree"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
