"""The scale-out figures of issue 59 from one `scripts/bench_dask.py` run: `scaleout.json` and a plot.

    python scripts/bench_dask.py CONFIG --workers 1,2,4,8 --repeat 1 --out DIR --json DIR/bench.json
    python scripts/scaleout_report.py DIR/bench.json --dbs DIR --kind nvidia-h100-x8 \\
        --out results/bench/scaleout.json --plot results/bench/scaleout.png

Per variant of the bench (one process on one GPU, Dask on N GPUs): wall time (the median over its runs), pairs,
pairs per second, the speed-up over one process on one GPU, the scaling model's predicted wall time and speed-up
(`autotune.sweep.scaling`, fitted as `scripts/scaling_model.py` fits it: the one-process database gives the GPU's
seconds per pair, the smallest Dask run the client's seconds per record and the per-chunk cost) and its error, and
whether each test point's winner (the fastest verified instance) is the one-process run's; where it is not, whether
the two winners' medians, as the one-process run measured them, differ by less than that run's spread of the winner
(its p80 - p20 over its median). Reads the variants' last databases (`DIR/one_process.sqlite`, `DIR/dask_N.sqlite`)
with the standard library. Run-to-run spread across repeats: `--repeat 3` in the bench, min..max in the JSON.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scaling_model import fitted, read  # noqa: E402

from autotune.sweep.scaling import predict  # noqa: E402

SINGLE = "one process"


Verified = dict[tuple[int, str], tuple[float, float]]  # (point id, instance id) -> (median ms, spread)


def verified(db: Path) -> Verified:
    """Every verified measurement's median and spread, (p80 - p20) / median, read once."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        rows = c.execute(
            "select point_id, instance_id, median_ms, p20_ms, p80_ms from measurements "
            "where status = 'ok' and median_ms is not null"
        ).fetchall()
    return {
        (p, i): (med, (p80 - p20) / med if p20 is not None and p80 is not None and med > 0 else 0.0)
        for p, i, med, p20, p80 in rows
    }


def winners(measured: Verified) -> dict[int, tuple[str, float, float]]:
    """point id -> (instance id, median ms, spread) of its fastest verified measurement (ties: the smaller id)."""
    out: dict[int, tuple[str, float, float]] = {}
    for (point, iid), (med, spread) in sorted(measured.items(), key=lambda kv: (kv[0][0], kv[1][0], kv[0][1])):
        if point not in out:
            out[point] = (iid, med, spread)
    return out


def agreement(reference: Verified, other: Verified) -> dict[str, int]:
    """How many test points have the reference's winner, and of the others how many lie within its spread."""
    ref, theirs = winners(reference), winners(other)
    same = within = 0
    for point, (iid, med, spread) in ref.items():
        got = theirs.get(point)
        if got is None:
            continue
        if got[0] == iid:
            same += 1
        elif (point, got[0]) in reference and reference[(point, got[0])][0] / med - 1 <= spread:
            within += 1
    return {"points": len(ref), "same_winner": same, "other_within_spread": within}


def _gpus(name: str) -> int:
    return 1 if name == SINGLE else int(name.split()[1].split(":")[0])


def report(bench: dict, dbs: Path, kind: str, host_cores: int) -> dict[str, Any]:
    rows = bench["summary"]
    names = [r["name"] for r in rows]
    if SINGLE not in names:
        raise SystemExit("the bench has no one-process run: run scripts/bench_dask.py without --no-single")
    db_of = {n: dbs / f"{n.replace(' ', '_')}.sqlite" for n in names}
    missing = [str(p) for p in db_of.values() if not p.is_file()]
    if missing:
        raise SystemExit(f"no database for {', '.join(missing)}: give --dbs the bench's --out folder")
    dask = sorted((n for n in names if n != SINGLE), key=_gpus)
    split, base = fitted(read(str(db_of[SINGLE])), read(str(db_of[dask[0]])) if dask else None, None, host_cores, 16)
    single = next(r for r in rows if r["name"] == SINGLE)
    verified_of = {name: verified(path) for name, path in db_of.items()}  # each database read once
    one_pred = predict(split, replace(base, dask=False)).wall_s
    out = []
    for r in rows:
        gpus = _gpus(r["name"])
        pred = one_pred if r["name"] == SINGLE else predict(split, replace(base, gpus=gpus)).wall_s
        measured = r["row_s"]  # the sweep row's start to finish: what the model predicts
        out.append(
            dict(
                variant=r["name"],
                gpus=gpus,
                runs=r["runs"],
                wall_s=r["median_s"],
                wall_min_s=r["min_s"],
                wall_max_s=r["max_s"],
                sweep_row_s=measured,
                measurements=r["pairs"],
                measurements_per_s=r["pairs_s"],
                speedup=r["pairs_s"] / single["pairs_s"] if single["pairs_s"] else None,
                predicted_row_s=pred,
                predicted_speedup=one_pred / pred if pred else None,
                model_error=pred / measured - 1 if measured else None,
                winners=agreement(verified_of[SINGLE], verified_of[r["name"]]),
            )
        )
    return dict(
        kind=kind,
        generated=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        commit=_commit(),
        model=dict(
            gpu_s_per_pair=split.gpu_s_per_pair,
            record_s_per_pair=split.record_s_per_pair,
            chunk_s=split.chunk_s,
            start_s=split.start_s,
            fitted_on=[SINGLE, *dask[:1]],
        ),
        rows=out,
    )


def _commit() -> str | None:
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or None if r.returncode == 0 else None


def plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in data["rows"] if r["variant"] != SINGLE]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    gpus = [r["gpus"] for r in rows]
    ax.plot(gpus, [r["speedup"] for r in rows], "o-", label="measured")
    ax.plot(gpus, [r["predicted_speedup"] for r in rows], "s--", label="model")
    ax.plot(gpus, gpus, ":", color="grey", label="linear")
    ax.set_xlabel("GPUs")
    ax.set_ylabel("speed-up over one process on one GPU")
    ax.set_title(f"scale-out, {data['kind']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(
        prog="scripts/scaleout_report.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("bench", help="the JSON of scripts/bench_dask.py --json")
    ap.add_argument("--dbs", required=True, help="the bench's --out folder (its databases)")
    ap.add_argument("--kind", required=True, help="the machine, e.g. nvidia-h100-x8")
    ap.add_argument("--host-cores", type=int, default=16, help="cores of the GPU host (default 16)")
    ap.add_argument("--out", required=True, help="scaleout.json to write")
    ap.add_argument("--plot", default=None, help="a PNG of measured and predicted speed-ups")
    args = ap.parse_args(argv)
    bench = json.loads(Path(args.bench).read_text())
    data = report(bench, Path(args.dbs), args.kind, args.host_cores)
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n")
    if args.plot:
        plot(data, Path(args.plot))
    print(f"{'variant':<12} {'GPUs':>4} {'meas/s':>8} {'speed-up':>8} {'model':>6} {'error':>7} {'same winner':>12}")
    for r in data["rows"]:
        w = r["winners"]
        print(
            f"{r['variant']:<12} {r['gpus']:>4} {r['measurements_per_s']:>8.1f} {r['speedup']:>8.2f} "
            f"{r['predicted_speedup']:>6.2f} {r['model_error'] * 100:>+6.1f}% "
            f"{w['same_winner']:>5}/{w['points']} (+{w['other_within_spread']})"
        )
    return data


if __name__ == "__main__":
    main()
