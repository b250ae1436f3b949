"""Issue 32's figures of validated dispatch tables: for each TABLE VALIDATION_DIR pair (`autotune validate --out
VALIDATION_DIR` of TABLE), the share of answers within TOL of the best of all candidates and the library, the worst
loss, the answers below 0.97x the library, the oracle (the table's own kernels and the library) beside it, and the
kernels per tuned size. Writes the figures as JSON with --json FILE.

    python3 scripts/bench_tables.py [--tol 0.1] [--json figures.json] [--space FILE] TABLE VALIDATION_DIR [TABLE VALIDATION_DIR ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from autotune.dispatch.figures import validated_figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pairs", nargs="+", metavar="TABLE VALIDATION_DIR")
    parser.add_argument("--tol", type=float, default=0.1)
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--space", action="append", default=[], help="space file of a kind that is not built in (repeatable)"
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
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if out else 1


if __name__ == "__main__":
    sys.exit(main())
