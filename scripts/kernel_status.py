#!/usr/bin/env python3
"""Issue 54's check: per group of the kernel library's test points, the roofline fraction and the speed-up over the
vendor library of the best measured kernel at each point, from committed results only (no GPU), the worst named.

Groups and their sources (committed result folders; each row of a source is one point of one sweep, timed against
cuBLAS in the same run on the same GPU, so every ratio is a same-run ratio):
- fp16 square n = 2..128 (`tc_final_h100`, the complete run; `flat_s0_h100`, `tc_flat_ppb_h100`, `tc_mma_h100`,
  `wgmma_h100` (its two databases), `wgmma_flat_h100` and `wgmma_epi_h100` (both wgmma spaces whole at n = 64..128,
  after their epilogue was rewritten) at the same points);
- fp32 / fp64 square n = 2..32 (`square_share_h100`; `simt32_h100`, `simt_h100`, the databases of `square_h100` and
  `dmma_h100` at the same points);
- fixed K = 8, 16, 32 (`fixedk_h100`; `dmma_h100`, fp64 tensor cores, at three of its points);
- TSM2 (`tsm2_h100`, `tsm2_n16_h100`) and ISM2 (`seed_repro/ism2`, its fig6.csv: the TOL 0 table's kernel);
- fp16 rectangles: the 100 tuned points of the fp16 workload tables (`rect_h100/summary.csv`: the flat kernels with
  rectangular bounds searched there, issue 54 item 2; `rect_h100/rect_wgmma_h100.sqlite.xz`: the wgmma kernels'
  rectangular bounds at its 31 points with M > 64; `tables2_h100/fp16`'s tuning database: the square winners),
  the 100 held-out problems of the tables6 fp16 validation (seed 3811: `tables6_h100/fp16/validation`, the square
  winners that table served; `rect_h100/library_table/validation_3811`, the kernels of the rectangular table at the
  same problems) and 100 + 100 fresh ones (seeds 3911 and 4011, `rect_h100/library_table/validation_*`: that table's
  kernels), each the best kernel measured there against cuBLAS in its run.
A point is (precision, shape, m, n, k, batch); where several sources measured it, the row with the highest speed-up
counts (the best kernel known there; the choice among runs favours noise upwards a little, which the printed
source makes visible). Targets (issue 54): >= 0.85 of the roofline and >= 1.0x the library at every point.

    python scripts/kernel_status.py [--results results] [--csv OUT.csv] [--gpu h100]

Prints one Markdown table (a row per group: points, how many miss each target, the worst point of each) and, with
--csv, writes every point's best row. A group with no committed source for the GPU says "not measured".
"""

from __future__ import annotations

import argparse
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
KEY = ["precision", "shape", "m", "n", "k", "batch"]
ROOFLINE_TARGET, SPEEDUP_TARGET = 0.85, 1.0
BELOW, SLOWER, BOTH = f"below {ROOFLINE_TARGET} of the roofline", "slower than the library", "misses both"


TOP3 = "kernels_top3_{{gpu}}/kernels_{kind}_top3_{{gpu}}.sqlite.xz"  # scripts/transfer_config.py's configs, run


@dataclass(frozen=True)
class Group:
    name: str
    points: tuple[str, ...]  # the source whose points define the group: the first committed of these (relative to
    #                          results/, {gpu} filled in; a GPU's complete sweep first, else its top-3 transfer run)
    others: tuple[str, ...]  # sources that may hold a better kernel at the same points
    where: str  # pandas query selecting the group's points from `points`
    only: str | None = None  # the GPU of a source whose path does not name one (seed reproductions: H100)


GROUPS = (
    Group(
        "fp16 square n = 2..128",
        ("tc_final_{gpu}/summary.csv", TOP3.format(kind="fp16")),
        (
            TOP3.format(kind="fp16"),
            "flat_s0_{gpu}/summary.csv",
            "tc_flat_ppb_{gpu}/summary.csv",
            "tc_mma_{gpu}/summary.csv",
            "wgmma_{gpu}/wgmma_{gpu}.sqlite.xz",
            "wgmma_{gpu}/wgmma_{gpu}_losses.sqlite.xz",
            "wgmma_flat_{gpu}/wgmma_flat_{gpu}.sqlite.xz",
            "wgmma_epi_{gpu}/wgmma_epi_{gpu}.sqlite.xz",
        ),
        "precision == 'fp16' and m == n == k and 2 <= m <= 128",
    ),
    Group(
        "fp32/fp64 square n = 2..32",
        ("square_share_{gpu}/summary.csv", TOP3.format(kind="simt")),
        (
            TOP3.format(kind="simt"),
            "simt32_{gpu}/summary.csv",
            "simt_{gpu}/summary.csv",
            "square_{gpu}/square_{gpu}.sqlite.xz",
            "dmma_{gpu}/dmma_{gpu}.sqlite.xz",
        ),
        "precision in ['fp32', 'fp64'] and m == n == k and 2 <= m <= 32",
    ),
    Group(
        "fixed K = 8, 16, 32",
        ("fixedk_{gpu}/summary.csv", TOP3.format(kind="simt")),
        (TOP3.format(kind="simt"), "dmma_{gpu}/dmma_{gpu}.sqlite.xz"),
        "k in [8, 16, 32] and m == n and m >= 32",
    ),
    Group(
        "TSM2 (n = 2..16)",
        ("tsm2_{gpu}/summary.csv", TOP3.format(kind="simt")),
        (TOP3.format(kind="simt"), "tsm2_n16_{gpu}/summary.csv"),
        "n <= 16 and m > 10000",
    ),
    Group("ISM2 (k = n = 8, 16)", ("seed_repro/ism2/fig6.csv",), (), "n <= 16", only="h100"),
    Group(
        "fp16 rectangles, tuned points",
        ("rect_{gpu}/summary.csv",),
        ("tables2_{gpu}/fp16/fp16_model_{gpu}.sqlite.xz", "rect_{gpu}/rect_wgmma_{gpu}.sqlite.xz"),
        "precision == 'fp16' and not (m == n == k)",
    ),
    Group(
        "fp16 rectangles, held out (tables6 validation)",
        ("tables6_{gpu}/fp16/validation/validation.sqlite.xz",),
        ("rect_{gpu}/library_table/validation_3811/validation.sqlite.xz",),
        "precision == 'fp16'",
    ),
    Group(
        "fp16 rectangles, held out (seed 3911)",
        ("rect_{gpu}/library_table/validation_3911/validation.sqlite.xz",),
        (),
        "precision == 'fp16'",
    ),
    Group(
        "fp16 rectangles, held out (seed 4011)",
        ("rect_{gpu}/library_table/validation_4011/validation.sqlite.xz",),
        (),
        "precision == 'fp16'",
    ),
)


def _summary_of_database(path: Path, spaces: tuple[str, ...] | None = None) -> pd.DataFrame:
    """What `autotune report` writes as summary.csv, computed from a committed results database (the best of the
    named spaces only, where given)."""
    from autotune.errors import UserError
    from autotune.workflows.results import load_results

    if spaces is None:
        return load_results(str(path), None, None).summary()
    frames = []
    for space in spaces:
        try:
            frames.append(load_results(str(path), None, space).summary())
        except UserError:  # no measurements of this space there
            continue
    best = pd.concat(frames, ignore_index=True).sort_values("speedup_vs_cublas", ascending=False)
    return best.drop_duplicates(KEY)


def read_source(path: Path, results: Path, spaces: tuple[str, ...] | None = None) -> pd.DataFrame:
    """A summary.csv (`autotune report`), a results database (its summary, computed; of the named spaces only, where
    given) or a seed reproduction's fig6.csv, as KEY + instance, ms, roofline_frac, library_ms, speedup, source."""
    frame = _summary_of_database(path, spaces) if ".sqlite" in path.name else pd.read_csv(path)
    if "speedup_vs_cublas" in frame:
        frame = frame.rename(columns={"cublas_ms": "library_ms", "speedup_vs_cublas": "speedup"})
    else:  # fig6.csv of scripts/seed_repro.py: the TOL 0 table's kernel
        frame = frame.rename(
            columns={
                "instance_tol0": "instance",
                "ms_tol0": "ms",
                "roofline_tol0": "roofline_frac",
                "speedup_tol0": "speedup",
            }
        )
    frame["source"] = path.relative_to(results).as_posix()
    return frame[[*KEY, "instance", "ms", "roofline_frac", "library_ms", "speedup", "source"]]


def group_points(results: Path, group: Group, gpu: str) -> pd.DataFrame | None:
    """The group's points, each with its best row over the group's sources; None when its defining source is not
    committed for this GPU."""
    main = next((p for s in group.points if (p := results / s.format(gpu=gpu)).exists()), None)
    if main is None or group.only not in (None, gpu):
        return None
    points = read_source(main, results).query(group.where)
    rows = [points] + [read_source(p, results) for o in group.others if (p := results / o.format(gpu=gpu)).exists()]
    every = pd.concat(rows, ignore_index=True).merge(points[KEY].drop_duplicates(), on=KEY)
    best = every.sort_values("speedup", ascending=False).drop_duplicates(KEY)
    return best.sort_values(KEY).reset_index(drop=True)


def _point(row: pd.Series) -> str:
    return f"{row['precision']} {row['shape']} {row['m']}x{row['n']}x{row['k']} b{row['batch']}"


def status(results: Path, gpu: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per group, every point's best row with its group)."""
    summary, points = [], []
    for group in GROUPS:
        with warnings.catch_warnings():  # a space file changed since a database was measured: its stored copy is read
            warnings.simplefilter("ignore", UserWarning)
            best = group_points(results, group, gpu)
        if best is None or best.empty:
            summary.append({"group": group.name, "points": 0, "note": f"not measured on {gpu}"})
            continue
        worst_roof, worst_speed = best.loc[best["roofline_frac"].idxmin()], best.loc[best["speedup"].idxmin()]
        summary.append(
            {
                "group": group.name,
                "points": len(best),
                BELOW: int((best["roofline_frac"] < ROOFLINE_TARGET).sum()),
                SLOWER: int((best["speedup"] < SPEEDUP_TARGET).sum()),
                BOTH: int(((best["speedup"] < SPEEDUP_TARGET) & (best["roofline_frac"] < ROOFLINE_TARGET)).sum()),
                "worst roofline": f"{worst_roof['roofline_frac']:.3f} at {_point(worst_roof)}",
                "worst speed-up": f"{worst_speed['speedup']:.3f}x at {_point(worst_speed)}",
                "note": "",
            }
        )
        points.append(best.assign(group=group.name))
    columns = ["group", "points", BELOW, SLOWER, BOTH, "worst roofline", "worst speed-up", "note"]
    table = pd.DataFrame(summary, columns=columns).astype({BELOW: "Int64", SLOWER: "Int64", BOTH: "Int64"})
    return table, (pd.concat(points, ignore_index=True) if points else pd.DataFrame())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=ROOT / "results", help="the results folder (default: results/)")
    ap.add_argument("--gpu", default="h100", help="the GPU suffix of the result folders (h100, h200)")
    ap.add_argument("--csv", type=Path, help="also write every point's best row here")
    args = ap.parse_args(argv)
    summary, points = status(args.results, args.gpu)
    if args.csv:
        points.to_csv(args.csv, index=False)
    cols = list(summary.columns)
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for row in summary.astype(object).itertuples(index=False):
        print("| " + " | ".join("" if pd.isna(v) else str(v) for v in row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
