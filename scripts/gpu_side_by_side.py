#!/usr/bin/env python3
"""Two GPUs side by side on the same sweep (issue 54 item 4): per test point both GPUs measured, each GPU's best
kernel, its roofline fraction and its speed-up over the kind's library, whether the winners differ, and what using
the first GPU's winner on the second costs (its time there against the second GPU's best).

    python scripts/gpu_side_by_side.py H100_DB H200_DB [--a-device NAME] [--b-device NAME] [--csv OUT.csv]

A and B may be one database (then name the devices, or the two GPU models with the most measurements are taken).
The same comparison serves a search against brute force on one GPU (configs/seeds/*_search.yaml and *_check.yaml):
A the search's database, B the brute-force sweep of some of its points; the loss is then how far the search's pick
is from the best of every instance, on B's timings.
"The first GPU's winner" is its fastest verified instance at the point (a TOL 0 table); where B never measured that
instance at that point, the loss is empty and counted as "not measured on B". A `skipped` (early-stopped) time on B
counts: it is a verified median known to be more than TOL slower than B's best, so the loss it shows is a lower
bound. Every figure is read from the databases (no GPU). Prints a Markdown summary; --csv writes every point.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Side:
    device: str
    sizes: tuple[str, ...]  # the kind's size columns
    summary: pd.DataFrame  # summary_frame: the point columns, instance, ms, roofline_frac, library ms, speed-up
    times: pd.DataFrame  # every verified (ok or skipped) time: the point columns, instance_id, median_ms


def devices_by_count(db: str) -> list[str]:
    """The GPU models (device names) of a database, the most measured first."""
    from autotune.store.query import run_query
    from autotune.workflows.results import source_url

    counts = run_query(
        source_url(db),
        "SELECT d.name, COUNT(*) AS n FROM measurements m JOIN devices d ON d.id = m.device_id "
        "GROUP BY d.name ORDER BY n DESC, d.name",
    )
    return [str(x) for x in counts["name"]]


def load_side(db: str, device: str) -> Side:
    from autotune.workflows.results import load_results

    with warnings.catch_warnings():  # a space file changed since the sweep: its recorded copy is read
        warnings.simplefilter("ignore", UserWarning)
        loaded = load_results(db, device, None)
    summary = loaded.summary()
    summary = summary.rename(columns={summary.columns[-2]: "library_ms", summary.columns[-1]: "speedup"})
    point = list(loaded.layout.columns)
    verified = loaded.frame[loaded.frame["status"].isin(["ok", "skipped"])]
    times = verified.groupby([*point, "instance_id"], as_index=False)["median_ms"].min()
    return Side(device, tuple(loaded.layout.sizes), summary, times)


BEST = ["instance", "ms", "roofline_frac", "library_ms", "speedup"]  # a side's best at a point (summary columns)


def side_by_side(a: Side, b: Side) -> pd.DataFrame:
    """One row per point both GPUs measured: a_* and b_* of each side's best, same_winner, a_winner_on_b_ms,
    loss_a_on_b (a_winner_on_b_ms / b_ms - 1; empty where B never timed A's winner there)."""
    point = [c for c in a.summary.columns if c in b.summary.columns and c not in BEST]  # precision, shape, sizes
    both = a.summary[point + BEST].merge(b.summary[point + BEST], on=point, suffixes=("_a", "_b"))
    both = both.rename(columns={f"{c}_{s}": f"{s}_{c}" for c in BEST for s in "ab"})
    both = both[both["a_instance"].astype(bool) & both["b_instance"].astype(bool)]
    on_b = b.times.rename(columns={"instance_id": "a_instance", "median_ms": "a_winner_on_b_ms"})
    both = both.merge(on_b, on=[*point, "a_instance"], how="left")
    both["same_winner"] = both["a_instance"] == both["b_instance"]
    both["loss_a_on_b"] = both["a_winner_on_b_ms"] / both["b_ms"] - 1
    both["b_over_a_speed"] = both["a_ms"] / both["b_ms"]
    return both.reset_index(drop=True)


def _point(row: pd.Series, sizes: tuple[str, ...]) -> str:
    dims = [s for s in sizes if s != "batch"]
    return (
        f"{row['precision']} {row['shape']} "
        + "x".join(str(row[s]) for s in dims)
        + (f" b{row['batch']}" if "batch" in sizes else "")
    )


def report(both: pd.DataFrame, a: str, b: str, sizes: tuple[str, ...]) -> str:
    lines = [f"**{a} (A) and {b} (B): {len(both)} test points measured on both**", ""]
    if both.empty:
        return "\n".join(lines + ["no test point was measured on both GPUs"])

    def spread(col: str, fmt: str) -> str:
        v = both[col].dropna()
        return " / ".join(fmt.format(x) for x in (v.min(), v.median(), v.max())) if len(v) else "-"

    lines += [
        "| | A | B |",
        "|---|---|---|",
        f"| roofline fraction of the best (min / median / max) | {spread('a_roofline_frac', '{:.3f}')} | "
        f"{spread('b_roofline_frac', '{:.3f}')} |",
        f"| speed-up of the best over the library (min / median / max) | {spread('a_speedup', '{:.3f}x')} | "
        f"{spread('b_speedup', '{:.3f}x')} |",
        f"| points slower than the library | {int((both['a_speedup'] < 1).sum())} | "
        f"{int((both['b_speedup'] < 1).sum())} |",
        "",
    ]
    ratio = both["b_over_a_speed"]
    lines += [
        f"- B's best against A's best: {np.exp(np.log(ratio).mean()):.3f}x geometric mean "
        f"({ratio.min():.3f}x to {ratio.max():.3f}x)",
        f"- winners that differ: {int((~both['same_winner']).sum())} of {len(both)} points",
    ]
    loss = both["loss_a_on_b"].dropna()
    if len(loss):
        worst = both.loc[loss.idxmax()]
        lines.append(
            f"- A's winner used on B: loss median {loss.median():.2%}, mean {loss.mean():.2%}, max {loss.max():.2%} "
            f"at {_point(worst, sizes)}; within 5% at {int((loss <= 0.05).sum())} of {len(loss)}"
        )
    if missing := int(both["loss_a_on_b"].isna().sum()):
        lines.append(f"- A's winner not measured on B at {missing} points (no loss figure there)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a_db", help="results database of GPU A (.sqlite, .sqlite.xz or URL)")
    ap.add_argument("b_db", help="results database of GPU B (may be the same file)")
    ap.add_argument("--a-device", help="GPU name of A (default: the most measured in A's database)")
    ap.add_argument("--b-device", help="GPU name of B (default: the most measured in B's database other than A's)")
    ap.add_argument("--csv", type=Path, help="also write every point here")
    args = ap.parse_args(argv)
    a_dev = args.a_device or devices_by_count(args.a_db)[0]
    b_choices = [d for d in devices_by_count(args.b_db) if d != a_dev or args.b_db != args.a_db]
    if not args.b_device and not b_choices:
        print(
            f"error: {args.b_db} holds no GPU other than {a_dev}: give a second database or --b-device", file=sys.stderr
        )
        return 2
    b_dev = args.b_device or b_choices[0]
    a, b = load_side(args.a_db, a_dev), load_side(args.b_db, b_dev)
    both = side_by_side(a, b)
    if args.csv:
        both.to_csv(args.csv, index=False, float_format="%.6g")
    print(report(both, a_dev, b_dev, a.sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
