"""Benchmark the search strategies on complete (space, point) pairs, against Kernel Tuner's (issue 33).

Pairs come from explicit sources (scripts/search_pairs.py): recorded databases, whose pairs' universe is exactly the
instances recorded at that point (default results/complete_h100: six pairs measured without early stop), and
Kernel Tuner caches (default results/bench/hub: twelve brute-forced spaces of the benchmark hub, imported into a
temporary database; universe = every configuration of the cache, Kernel Tuner's failed ones being failures).
`--discover-complete` adds the older rule's pairs (every instance the current space file generates for the point
was recorded). Only pairs of at least --min-size instances (default 1,000) are benchmarked.

Ours: each strategy is replayed on each pair (ask/tell against the recorded measurements, as the runner's per-point
search drives it; failures are failures) with --seeds seeds. Kernel Tuner: its strategies in simulation mode
(scripts/kt_simulate.py under --kt-python) on each pair's Kernel Tuner cache with --kt-seeds seeds. Both run once
per seed at the largest budget (20% of the pair) and are read with first-N-distinct accounting: the result at budget
N is the best of the first N distinct instances evaluated (valid or failed). Our strategies are anytime (nothing in
them depends on the budget but the stop), so the first N of a 20% run is what a run with budget N proposes; for
Kernel Tuner's it is what a 20% run had found after N evaluations (SEARCH_PROVENANCE.md says which depend on it).
Writes --out (results/bench/search.csv: tool,strategy,space,point,seed,space_size,evals,best_ms,true_best_ms,device)
at budgets of 1, 2, 5, 10 and 20%, a plot of best-so-far against evaluations (median and 90th percentile over
seeds), and prints median and p90 of best_ms / true_best_ms - 1 per tool, strategy and budget, with the benchmark
hub methodology's score (scripts/search_score.py: 0 = random search, 1 = the optimum).

    python scripts/bench_search.py --list                      # the pairs and their sizes
    python scripts/bench_search.py --seeds 30 --kt-seeds 10    # the benchmark
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# one BLAS thread: the replays solve small systems, where BLAS's threads only spin against each other and the
# Kernel Tuner process beside them (a 20x slower solve seen on a shared 2-core machine); set before numpy loads
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from search_pairs import DEFAULT_SOURCES, ROOT, Pair, discover_complete, load_sources, temp_work  # noqa: E402
from search_pairs import replay as search_replay  # noqa: E402
from search_score import pair_score, score  # noqa: E402
import search_report  # noqa: E402

from autotune.sweep.strategies import make_strategy, strategy_class  # noqa: E402

FRACTIONS = [0.01, 0.02, 0.05, 0.10, 0.20]
STRATEGIES = ("hybrid", "tpe", "random")
KT_STRATEGIES = (
    "random_sample",
    "genetic_algorithm",
    "simulated_annealing",
    "dual_annealing",
    "pso",
    "firefly_algorithm",
    "greedy_ils",
    "basinhopping",
    "diff_evo",
    "mls",
)
# a Python with Kernel Tuner 1.5 installed: $AUTOTUNE_KT_PYTHON, else this interpreter where it has kernel_tuner,
# else .venv-kt/ in the checkout (`python3 -m venv .venv-kt && .venv-kt/bin/pip install kernel_tuner==1.5.0`)
KT_PYTHON = os.environ.get("AUTOTUNE_KT_PYTHON") or (
    sys.executable
    if importlib.util.find_spec("kernel_tuner") is not None
    else str(Path(__file__).resolve().parents[1] / ".venv-kt" / "bin" / "python")
)
COLUMNS = ["tool", "strategy", "space", "point", "seed", "space_size", "evals", "best_ms", "true_best_ms", "device"]


def budgets(n: int) -> list[int]:
    return [max(1, math.ceil(f * n)) for f in FRACTIONS]


def replay(pair: Pair, strategy: str, budget: int, seed: int, options: dict) -> np.ndarray:
    """Best valid time after each evaluation (inf before the first): search_pairs.replay's trace."""
    return search_replay(pair, strategy, budget, seed, options).trace


def best_so_far(times: list) -> np.ndarray:
    return np.minimum.accumulate(np.array([math.inf if t is None else t for t in times], dtype=float))


def run_kt(
    pairs: list[Pair], work: Path, strategies: list[str], seeds: range, python: str, deadline: float = 0.0
) -> dict:
    """Kernel Tuner's strategies on every pair's cache, in one process (scripts/kt_simulate.py), seed by seed over
    the pairs: {pair label: kt_simulate's output for it, with "wall_s": the process's wall time shared by size}."""
    caches = [str(p.kt_cache(work)) for p in pairs]
    out = work / "kt_runs.json"
    t = time.monotonic()
    subprocess.run(
        [
            python,
            str(Path(__file__).with_name("kt_simulate.py")),
            *caches,
            "--strategies",
            ",".join(strategies),
            "--seeds",
            f"{seeds.start}-{seeds.stop - 1}",
            "--max-fevals",
            ",".join(str(budgets(len(p.instances))[-1]) for p in pairs),
            "--deadline",
            str(deadline),
            "--out",
            str(out),
        ],
        check=True,
    )
    wall = time.monotonic() - t
    got = json.loads(out.read_text())
    per = got["caches"] if "caches" in got else [got]
    spent = [sum(r["wall_s"] for runs in g["runs"].values() for r in runs.values()) for g in per]
    total = sum(spent) or 1.0
    return {p.label: {**g, "wall_s": wall * s / total} for p, g, s in zip(pairs, per, spent, strict=True)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--source", action="append", help=f"database, cache or directory (default: {' '.join(DEFAULT_SOURCES)})"
    )
    ap.add_argument(
        "--discover-complete",
        action="store_true",
        help="also the committed databases' pairs complete within the current space files",
    )
    ap.add_argument("--list", action="store_true", help="list the pairs and exit")
    ap.add_argument("--min-size", type=int, default=1000, help="smallest pair benchmarked (instances)")
    ap.add_argument("--pairs", default="", help="only pairs whose label contains one of these (comma-separated)")
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="seeds first-seed .. first-seed + seeds - 1 (tune on other seeds than those reported)",
    )
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--option", action="append", default=[], help="a model-based strategy option, key=value")
    ap.add_argument("--kt-seeds", type=int, default=10, help="Kernel Tuner's seeds (0: no Kernel Tuner)")
    ap.add_argument("--kt-first-seed", type=int, default=0, help="Kernel Tuner's seeds start here")
    ap.add_argument("--kt-strategies", default=",".join(KT_STRATEGIES))
    ap.add_argument(
        "--deadline",
        type=float,
        default=0.0,
        help="Unix time after which no further seed is started, "
        "ours or Kernel Tuner's (what finished is written: a job capped by time still leaves its rows)",
    )
    ap.add_argument(
        "--merge",
        nargs="+",
        metavar="DIR",
        help="merge the CSVs and traces of earlier runs (every "
        "*.csv with a *.traces.npz beside it under these folders) into --out, its plot and summary, "
        "instead of running anything",
    )
    ap.add_argument(
        "--scores-from",
        action="append",
        default=[],
        help="with --merge: a summary.md of an earlier merge whose scores stand for the strategies whose traces "
        "this merge lacks (rows merged from a CSV without its .traces.npz)",
    )
    ap.add_argument(
        "--one-seed",
        default="brute",
        help="with --merge or --per-pair: strategies that do not depend on the seed (every seed the same run): "
        "seed 0 kept only",
    )
    ap.add_argument(
        "--per-pair",
        nargs="+",
        metavar="CSV",
        help="write the per-pair figures (--out's stem + .pairs.csv or, for a .gz --out, .pairs.csv.gz; .pairs.md, .pairs.png) of these CSVs (plain or "
        ".gz; a later file's rows replace an earlier one's for the same strategy, pair, seed and budget, and how many "
        "changed is printed) instead of running anything",
    )
    ap.add_argument("--kt-python", default=KT_PYTHON)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "search.csv"))
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument(
        "--fractions",
        default=",".join(map(str, FRACTIONS)),
        help="budgets as fractions of each pair (the last: the runs' length)",
    )
    ap.add_argument(
        "--provenance",
        action="append",
        default=[],
        help="with --merge: replace the measured section "
        "of this markdown file (between <!-- measured:begin --> and <!-- measured:end -->) with the merged "
        "run's summary (repeatable)",
    )
    ap.add_argument(
        "--proposal-cost",
        type=int,
        metavar="N",
        help="measure the CPU time of a proposal of each "
        "--strategies on a synthetic space of N valid instances (6 parameters) instead, and exit",
    )
    args = ap.parse_args()
    if args.proposal_cost:
        proposal_cost(args.proposal_cost, [s for s in args.strategies.split(",") if s])
        return
    FRACTIONS[:] = [float(f) for f in args.fractions.split(",")]
    if args.merge:
        merge(args)
        return
    if args.per_pair:
        one_seed = set(filter(None, args.one_seed.split(",")))
        runs = [
            [r for r in search_report.read_rows(Path(f)) if r[1] not in one_seed or r[4] == 0] for f in args.per_pair
        ]
        rows = runs[0]
        for f, later in zip(args.per_pair[1:], runs[1:], strict=True):
            rows, replaced, changed = search_report.overlay(rows, later)
            print(f"{f}: {replaced} rows replace earlier ones, {changed} of them with another best_ms")
        report_pairs(rows, stem_of(Path(args.out)), args.no_plot, gz=args.out.endswith(".gz"))
        return
    if args.deadline and time.time() > args.deadline:
        print("deadline passed before the start: nothing run", file=sys.stderr)
        return
    work = temp_work()
    pairs = load_sources(args.source or list(DEFAULT_SOURCES), work, args.min_size)
    if args.discover_complete:
        pairs += discover_complete(args.min_size)
    pairs = [
        p
        for p in pairs
        if len(p.instances) >= args.min_size and (not args.pairs or any(s in p.label for s in args.pairs.split(",")))
    ]
    for p in pairs:
        print(f"{p.label:75s} {len(p.instances):6d} instances  true best {p.true_best:.5g} ms  ({p.source})")
    if args.list or not pairs:
        return
    options = {
        k: json.loads(v) if v[:1].isdigit() or v in ("true", "false") else v
        for k, v in (o.split("=", 1) for o in args.option)
    }
    rows: list[tuple] = []
    traces: dict[tuple[str, str, str], list[np.ndarray]] = {}  # (tool, strategy, pair label) -> per seed
    timings: dict[str, float] = {}
    pool = ThreadPoolExecutor(1)  # Kernel Tuner runs in its own process beside our replays
    kt_seeds = range(args.kt_first_seed, args.kt_first_seed + args.kt_seeds)
    kt_job = (
        pool.submit(run_kt, pairs, work, args.kt_strategies.split(","), kt_seeds, args.kt_python, args.deadline)
        if args.kt_seeds > 0
        else None
    )
    seeds: dict[tuple[str, str, str], list[int]] = {}  # (tool, strategy, pair label) -> the seed of each trace
    t0 = time.monotonic()
    # seed by seed over every pair, so that a run cut by --deadline has the same seeds on every pair
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        if args.deadline and time.time() > args.deadline:
            print(f"  deadline reached before seed {seed}: seeds {args.first_seed}-{seed - 1} run", file=sys.stderr)
            break
        for p in pairs:
            bs = budgets(len(p.instances))
            for strategy in filter(None, args.strategies.split(",")):
                t = time.monotonic()
                traces.setdefault(("autotune", strategy, p.label), []).append(
                    replay(p, strategy, bs[-1], seed, options)
                )
                seeds.setdefault(("autotune", strategy, p.label), []).append(seed)
                key = f"autotune {strategy} {p.label}"
                timings[key] = timings.get(key, 0.0) + time.monotonic() - t
        print(f"  seed {seed} done ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
    kt_results = kt_job.result() if kt_job is not None else {}
    for p in pairs:
        if p.label not in kt_results:
            continue
        got = kt_results[p.label]
        timings[f"kerneltuner (all strategies) {p.label}"] = got["wall_s"]
        for strategy, why in got["failed"].items():
            print(f"  kerneltuner {strategy} failed on {p.label}: {why}", file=sys.stderr)
        if got.get("cut"):
            print(f"  kerneltuner on {p.label}: {got['cut']}", file=sys.stderr)
        for strategy, runs in got["runs"].items():
            for seed in sorted(runs, key=int):
                traces.setdefault(("kerneltuner", strategy, p.label), []).append(best_so_far(runs[seed]["times"]))
                seeds.setdefault(("kerneltuner", strategy, p.label), []).append(int(seed))
    by_label = {p.label: p for p in pairs}
    for (tool, strategy, label), ts in traces.items():
        p = by_label[label]
        for seed, tr in zip(seeds[(tool, strategy, label)], ts, strict=True):
            for b in budgets(len(p.instances)):
                best = float(tr[min(b, len(tr)) - 1]) if len(tr) else math.inf
                rows.append(
                    (tool, strategy, p.space, p.point.key, seed, len(p.instances), b, best, p.true_best, p.device)
                )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        w.writerows(rows)
    save_traces(out.with_suffix(".traces.npz"), traces, seeds)
    scores = methodology_scores(traces, by_label)
    print(summary(rows, scores))
    (out.with_suffix(".timings.json")).write_text(json.dumps(timings, indent=1))
    report_pairs(rows, stem_of(out), args.no_plot)
    if not args.no_plot:
        plot(traces, pairs, out.with_suffix(".png"))
    print(f"wrote {out}" + ("" if args.no_plot else f" and {out.with_suffix('.png')}"))


def stem_of(out: Path) -> Path:
    """search.csv.gz and search.csv -> search (the other outputs' stem)."""
    return out.with_name(out.name.removesuffix(".gz").removesuffix(".csv"))


def report_pairs(rows: list[tuple], stem: Path, no_plot: bool, gz: bool = False) -> None:
    """Every (space, point) pair on its own (scripts/search_report.py): STEM.pairs.csv (.csv.gz with `gz`, as the
    rows' CSV is), STEM.pairs.md (printed: the worst pair of each strategy at each budget) and, unless no_plot,
    STEM.pairs.png."""
    table = search_report.per_pair(rows, FRACTIONS)
    csv_path = stem.with_suffix(".pairs.csv.gz" if gz else ".pairs.csv")
    search_report.write_csv(csv_path, table)
    text = search_report.markdown(table)
    stem.with_suffix(".pairs.md").write_text(text + "\n")
    print(text)
    if not no_plot:
        search_report.plot(table, stem.with_suffix(".pairs.png"))
    print(
        f"wrote {csv_path}, {stem.with_suffix('.pairs.md')}"
        + ("" if no_plot else f", {stem.with_suffix('.pairs.png')}")
    )


def proposal_cost(n: int, strategies: list[str], told: int = 300, timed: int = 40) -> None:
    """CPU time per proposal (ask + tell of one instance) of each strategy on a synthetic space of `n` valid
    instances of 6 parameters (times of a smooth bowl), after `told` results; printed and returned as JSON."""
    from autotune.space.instance import Instance
    from autotune.vocab import Measurement, Status, TestPoint

    rng = np.random.default_rng(0)
    cards = (8, 8, 6, 5, 4, 4, 3, 3, 2, 2)  # a product of 1,105,920 combinations
    t = time.process_time()
    grid = np.indices(cards).reshape(len(cards), -1).T
    codes = grid[np.sort(rng.permutation(len(grid))[:n])]  # n of them valid (the constraints drop the rest)
    names = "ABCDEFGHIJ"
    insts = [
        Instance.of("synthetic", {names[j]: (1 << int(v)) if j < 2 else int(v) for j, v in enumerate(c)})
        for c in codes.tolist()
    ]
    point = TestPoint("synthetic", "fp32", "", (("n", 1),))
    bowl = ((codes - (np.array(cards) - 1) / 3) ** 2).sum(axis=1) * 0.01 + rng.random(len(codes)) * 0.05 + 1.0
    ms = {i.id: float(v) for i, v in zip(insts, bowl, strict=True)}
    print(f"{len(insts):,} instances built in {time.process_time() - t:.1f} s CPU", file=sys.stderr)
    out = {}
    for name in strategies:
        t = time.process_time()
        opts = {"study": None, "batch": 1} if getattr(strategy_class(name), "model_based", False) else {}
        s = make_strategy(name, insts, told + timed, 0, **opts)
        setup = time.process_time() - t
        spent = []
        for _ in range(told + timed):
            t = time.process_time()
            asked = s.ask(1)
            inst = asked[0]
            s.tell(inst, [Measurement(inst.id, point, Status.OK, median_ms=ms[inst.id])])
            spent.append(time.process_time() - t)
        out[name] = {
            "instances": len(insts),
            "setup_s": round(setup, 2),
            "ms_per_proposal": round(1e3 * float(np.mean(spent[told:])), 2),
            "after_results": told,
        }
        print(
            f"{name}: {out[name]['ms_per_proposal']} ms CPU per proposal (ask + tell) after {told} results on "
            f"{len(insts):,} instances; set-up {setup:.1f} s",
            flush=True,
        )
    print(json.dumps(out))


def save_traces(path: Path, traces: dict, seeds: dict) -> None:
    """Best-so-far per evaluation of every run, as float32 arrays named tool|strategy|pair label|seed."""
    arrays = {
        f"{tool}|{strategy}|{label}|{seed}": tr.astype(np.float32)
        for (tool, strategy, label), ts in traces.items()
        for seed, tr in zip(seeds[(tool, strategy, label)], ts, strict=True)
    }
    np.savez_compressed(path, **arrays)


def merge(args: argparse.Namespace) -> None:
    """--merge: the rows of every job's CSV (a (tool, strategy, pair, seed) found in two jobs is kept once) and
    its traces, summarized, plotted and written to --out (a .gz name is gzipped); timings summed per key."""
    rows: dict[tuple, tuple] = {}
    traces: dict[tuple[str, str, str], dict[int, np.ndarray]] = {}
    timings: dict[str, float] = {}
    files = sorted(f for d in args.merge for f in Path(d).rglob("*.csv") if ".pairs." not in f.name)
    one_seed = set(filter(None, args.one_seed.split(",")))
    for f in files:
        with f.open(newline="") as fh:
            for r in csv.DictReader(fh):
                if r["strategy"] in one_seed and int(r["seed"]) != 0:
                    continue
                key = (r["tool"], r["strategy"], r["space"], r["point"], r["device"], int(r["seed"]), int(r["evals"]))
                rows[key] = search_report.parse_row(r)
        tr = f.with_suffix(".traces.npz")
        if tr.exists():
            with np.load(tr) as z:
                for name in z.files:
                    tool, strategy, rest = name.split("|", 2)
                    label, seed = rest.rsplit("|", 1)
                    if strategy in one_seed and int(seed) != 0:
                        continue
                    traces.setdefault((tool, strategy, label), {})[int(seed)] = z[name].astype(float)
        tj = f.with_suffix(".timings.json")
        if tj.exists():
            for k, v in json.loads(tj.read_text()).items():
                timings[k] = timings.get(k, 0.0) + v
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # times to 7 significant digits (a relative rounding under 1e-7; our medians are float32) for a smaller file
    body = [COLUMNS] + [
        (*r[:7], f"{r[7]:.7g}", f"{r[8]:.7g}", r[9])
        for r in sorted(rows.values(), key=lambda r: (r[0], r[1], r[2], r[9], r[3], r[4], r[6]))
    ]
    import io

    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(body)
    if out.name.endswith(".gz"):
        import gzip

        with gzip.GzipFile(out, "wb", mtime=0) as gz:
            gz.write(buf.getvalue().encode())
        stem = out.with_name(out.name.removesuffix(".csv.gz"))
    else:
        out.write_text(buf.getvalue())
        stem = out.with_suffix("")
    rowlist = list(rows.values())
    ordered = {k: [v[s] for s in sorted(v)] for k, v in traces.items()}
    pairs = pairs_of_labels({label for _, _, label in ordered}, args)
    scores = methodology_scores(
        {
            k: [t[: max(1, math.ceil(SCORE_FRACTION * len(pairs[k[2]].instances)))] for t in v]
            for k, v in ordered.items()
        },
        pairs,
    )
    for f in args.scores_from:  # strategies whose traces this merge lacks: their score from an earlier summary
        for (tool, strategy), sc in scores_of_summary(Path(f)).items():
            if (tool, strategy) not in scores and any(r[0] == tool and r[1] == strategy for r in rowlist):
                scores[(tool, strategy)] = sc
    text = summary(rowlist, scores, counts(rowlist))
    print(text)
    stem.with_suffix(".summary.md").write_text(text + "\n")
    report_pairs(rowlist, stem, args.no_plot, gz=out.name.endswith(".gz"))
    stem.with_suffix(".timings.json").write_text(json.dumps(timings, indent=1, sort_keys=True))
    logs = sorted(f for d in args.merge for f in Path(d).rglob("*.log"))
    stem.with_suffix(".log").write_text("".join(f"== {f.name}\n{f.read_text(errors='replace')}" for f in logs))
    host = "".join(f.read_text() for d in args.merge for f in Path(d).rglob("host.txt"))
    cost = [
        line
        for d in args.merge
        for f in Path(d).rglob("proposal_cost.log")
        for line in f.read_text().splitlines()
        if "ms CPU per proposal" in line or "instances built" in line
    ]
    for prov in args.provenance:
        write_provenance(Path(prov), text, verdict(rowlist), host, cost, args)
    if not args.no_plot:
        plot(ordered, [pairs[k] for k in sorted(pairs)], stem.with_suffix(".png"))
    print(f"wrote {out}, {stem.with_suffix('.summary.md')}" + ("" if args.no_plot else f", {stem.with_suffix('.png')}"))


def scores_of_summary(path: Path) -> dict[tuple[str, str], float]:
    """(tool, strategy) -> score, read off a summary table written by --merge (`| tool | strategy | ... | score |`)."""
    out = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 3 and cells[0] in ("autotune", "kerneltuner"):
            try:
                out[(cells[0], cells[1])] = float(cells[2 + len(FRACTIONS)])
            except ValueError:
                continue
    return out


def verdict(rows: list[tuple]) -> str:
    """Per budget: our best strategy and Kernel Tuner's best by the median, against the issue's targets."""
    lines = []
    for frac in FRACTIONS:
        med = {}
        for tool, strategy in sorted({(r[0], r[1]) for r in rows}):
            g = gaps(rows, tool, strategy, frac)
            if g:
                med[(tool, strategy)] = (float(np.median(g)), float(np.percentile(g, 90)))
        ours = {k: v for k, v in med.items() if k[0] == "autotune"}
        kt = {k: v for k, v in med.items() if k[0] == "kerneltuner"}
        if not ours:
            continue
        o = min(ours, key=lambda k: ours[k])
        line = f"- {frac:.0%}: ours best {o[1]} {ours[o][0]:.4f} / {ours[o][1]:.4f}"
        if "hybrid" in {k[1] for k in ours} and o[1] != "hybrid":
            line += f" (hybrid {ours[('autotune', 'hybrid')][0]:.4f} / {ours[('autotune', 'hybrid')][1]:.4f})"
        if kt:
            b = min(kt, key=lambda k: kt[k])
            line += f"; Kernel Tuner's best {b[1]} {kt[b][0]:.4f} / {kt[b][1]:.4f}: " + (
                "ours beats it on the median"
                if ours[o][0] < kt[b][0]
                else "a tie on the median"
                if ours[o][0] == kt[b][0]
                else "Kernel Tuner's is better on the median"
            )
        if abs(frac - 0.05) < 1e-9:
            line += (
                f"; target at 5% (median <= 0.02, p90 <= 0.10): median {'met' if ours[o][0] <= 0.02 else 'missed'}, "
                f"p90 {'met' if ours[o][1] <= 0.10 else 'missed'}"
            )
        lines.append(line)
    return "\n".join(lines)


def write_provenance(
    path: Path, table: str, verdicts: str, host: str, cost: list[str], args: argparse.Namespace
) -> None:
    begin, end = "<!-- measured:begin -->", "<!-- measured:end -->"
    text = path.read_text() if path.exists() else f"{begin}\n{end}\n"
    if begin not in text or end not in text:
        raise SystemExit(f"error: {path} has no {begin} ... {end} section to replace")
    section = (
        f"{begin}\n## Measured run (merged from {', '.join(Path(d).name for d in args.merge)})\n"
        f"Host of the run:\n```\n{host.strip() or 'not recorded'}\n```\n"
        "Median / p90 of best_ms / true_best_ms - 1 over pairs x seeds per budget (rows: runs behind "
        "each; score: the benchmark hub methodology's on the first 5% of each pair):\n\n"
        f"{table}\n\nPer budget, best by the median:\n{verdicts}\n\n"
        "Proposal cost on the run's host (`--proposal-cost 1000000 --strategies hybrid`): "
        + ("; ".join(cost) if cost else "not measured in this run")
        + f"\n{end}"
    )
    head, rest = text.split(begin, 1)
    path.write_text(head + section + rest.split(end, 1)[1])


SCORE_FRACTION = 0.05  # the methodology score is computed on the first 5% of each pair (every strategy has them)


def pairs_of_labels(labels: set[str], args: argparse.Namespace) -> dict[str, Pair]:
    work = temp_work()
    pairs = load_sources(args.source or list(DEFAULT_SOURCES), work, args.min_size)
    got = {p.label: p for p in pairs if p.label in labels}
    missing = labels - set(got)
    if missing:
        raise SystemExit(f"error: the merged traces name pairs the sources do not have: {sorted(missing)[:3]}")
    return got


def counts(rows: list[tuple]) -> dict[tuple[str, str], str]:
    """Per (tool, strategy): pairs and seeds per pair (min-max) behind the summary."""
    per: dict[tuple[str, str], dict[tuple, set]] = {}
    for r in rows:
        per.setdefault((r[0], r[1]), {}).setdefault((r[2], r[3], r[9]), set()).add(r[4])
    out = {}
    for k, v in per.items():
        n = [len(s) for s in v.values()]
        out[k] = f"{len(v)} pairs, {min(n)}-{max(n)} seeds" if min(n) != max(n) else f"{len(v)} pairs, {n[0]} seeds"
    return out


def methodology_scores(traces: dict, by_label: dict[str, Pair]) -> dict[tuple[str, str], float]:
    curves: dict[tuple[str, str], list[np.ndarray]] = {}
    for (tool, strategy, label), ts in traces.items():
        width = max(len(t) for t in ts)
        arr = np.array([np.pad(t, (0, width - len(t)), mode="edge") if len(t) else np.full(width, np.inf) for t in ts])
        curves.setdefault((tool, strategy), []).append(pair_score(arr, by_label[label].times))
    return {k: score(v) for k, v in curves.items()}


def gaps(rows: list[tuple], tool: str, strategy: str, frac: float) -> list[float]:
    g = [r[7] / r[8] - 1 for r in rows if r[0] == tool and r[1] == strategy and r[6] == max(1, math.ceil(frac * r[5]))]
    return [x if math.isfinite(x) else 9.99 for x in g]  # nothing valid found: counted as 999%


def summary(
    rows: list[tuple], scores: dict[tuple[str, str], float], runs: dict[tuple[str, str], str] | None = None
) -> str:
    lines = [
        "| tool | strategy | "
        + " | ".join(f"{int(f * 100)}% median / p90" for f in FRACTIONS)
        + " | score |"
        + (" runs |" if runs else ""),
        "|---|---|" + "---|" * (len(FRACTIONS) + 1 + bool(runs)),
    ]
    keys = sorted({(r[0], r[1]) for r in rows} | set(scores), key=lambda k: -scores.get(k, -math.inf))
    for tool, strategy in keys:
        cells = []
        for frac in FRACTIONS:
            g = gaps(rows, tool, strategy, frac)
            cells.append(f"{np.median(g):.4f} / {np.percentile(g, 90):.4f}" if g else "-")
        sc = f"{scores[(tool, strategy)]:.3f}" if (tool, strategy) in scores else "-"
        lines.append(
            f"| {tool} | {strategy} | "
            + " | ".join(cells)
            + f" | {sc} |"
            + (f" {runs.get((tool, strategy), '')} |" if runs else "")
        )
    return "\n".join(lines)


def plot(traces: dict, pairs: list[Pair], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(pairs))
    nrow = math.ceil(len(pairs) / cols)
    fig, axes = plt.subplots(nrow, cols, figsize=(5.5 * cols, 3.6 * nrow), squeeze=False)
    keys = sorted({(t, s) for t, s, _ in traces})
    for ax, p in zip(axes.flat, pairs, strict=False):  # the grid's last row may have more axes than pairs are left
        for i, (tool, strategy) in enumerate(keys):
            ts = traces.get((tool, strategy, p.label))
            if not ts:
                continue
            width = max(len(t) for t in ts)
            gap = np.array([np.pad(t, (0, width - len(t)), mode="edge") for t in ts]) / p.true_best - 1
            gap[~np.isfinite(gap)] = np.nan
            x = np.arange(1, width + 1)
            ours = tool == "autotune"
            ax.plot(
                x,
                np.nanmedian(gap, axis=0),
                color=f"C{i % 10}",
                lw=1.6 if ours else 0.9,
                label=f"{'' if ours else 'KT '}{strategy}",
            )
            if ours and len(ts) > 1:
                ax.plot(
                    x, np.nanpercentile(gap, 90, axis=0), color=f"C{i % 10}", ls="--", lw=1.0, label=f"{strategy} p90"
                )
        ax.set_yscale("symlog", linthresh=0.01)
        ax.set_title(f"{p.space} {p.device} {p.point.key.split(':')[-1]} ({len(p.instances)})", fontsize=8)
        ax.set_xlabel("evaluations")
        ax.set_ylabel("best / true best - 1 (median)")
    axes.flat[0].legend(fontsize=5, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    from PIL import Image  # matplotlib's own dependency

    with Image.open(path) as im:  # a 64-colour palette: a third of the file, the lines unchanged to the eye
        im.convert("RGB").quantize(64).save(path, optimize=True)


if __name__ == "__main__":
    main()
