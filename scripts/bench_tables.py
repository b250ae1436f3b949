"""Issue 32's figures of validated dispatch tables: for each TABLE VALIDATION_DIR pair (`autotune validate --out
VALIDATION_DIR` of TABLE), the share of answers within TOL of the best of all candidates and the library, the worst
loss, the answers below 0.97x the library, the oracle (the table's own kernels and the library) beside it, and the
kernels per tuned size. Writes the figures as JSON with --json FILE.

With --refine K (repeatable) a second line per table gives the figures with runtime refinement on (dispatch/refine.py:
the K best-predicted kernels and the library timed once at each new problem), replayed from the validation's own
medians (figures.refined_figures); the static figures stay the first line, unchanged.

    python3 scripts/bench_tables.py [--tol 0.1] [--json figures.json] [--space FILE] [--refine K] TABLE VALIDATION_DIR [TABLE VALIDATION_DIR ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from autotune.dispatch.figures import refined_figures, validated_figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pairs", nargs="+", metavar="TABLE VALIDATION_DIR")
    parser.add_argument("--tol", type=float, default=0.1)
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--space", action="append", default=[], help="space file of a kind that is not built in (repeatable)"
    )
    parser.add_argument(
        "--refine",
        type=int,
        action="append",
        default=[],
        metavar="K",
        help="also the figures with runtime refinement of the K best-predicted kernels and the library (repeatable)",
    )
    args = parser.parse_args(argv)
    if len(args.pairs) % 2:
        parser.error("give TABLE VALIDATION_DIR pairs")
    out = {}
    for table, folder in zip(args.pairs[::2], args.pairs[1::2], strict=True):
        try:
            figs = validated_figures(table, folder, tol=args.tol, spaces=tuple(map(Path, args.space)))
        except Exception as exc:  # noqa: BLE001 - a missing validation is reported, the others still printed
            print(f"{table}: no figures ({exc})")
            continue
        print(figs.line(table))
        out[table] = figs.as_dict()
        for top in args.refine:
            spaces = tuple(map(Path, args.space))
            refined, calls = refined_figures(table, folder, top, tol=args.tol, spaces=spaces)
            name = f"{table} [refined: top {top} + library timed at each new problem, replayed from the validation]"
            print(f"{refined.line(name)} | timer calls {calls:.2f} per problem")
            out[f"{table}#refine{top}"] = {**refined.as_dict(), "refine_top": top, "timer_calls_per_problem": calls}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if out else 1


if __name__ == "__main__":
    sys.exit(main())
