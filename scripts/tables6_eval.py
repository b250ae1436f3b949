"""Issue 55 item 1 on a CPU: tables with measured problems baked in, scored at spent validations they were not built
from (nothing measured here; every figure is a replay of H100 measurements).

A table's points are its tuning database's measured problems. Baking in problems measured ahead of time (a spent
validation, or the problems `devscript` samples on a GPU at the deployment workload's sizes) is a replay of that
validation's sweep into a copy of the tuning database (`autotune db bake`, autotune.workflows.bake).
The table is then built with each --structure (e.g. cost with neighbours, `cost:0.05:1:2`) and each held-out
validation folder is rescored with the table's static answers (`dispatch.figures.rescored_figures`: within 10% of the
best of that validation's candidates and the library, worst loss, answers below 0.97x the library).

    python3 scripts/tables6_eval.py TUNING_DB --bake FOLDER [--bake FOLDER ...] --held FOLDER [--held ...] \
        --structure cost:0.05:1:2 [--structure ...] [--space SPACE] [--tol 0.1]

A FOLDER is what `autotune validate --out` wrote: validate_sweep.yaml (or .yaml.xz) and validation.sqlite(.xz). A
held-out folder must hold problems the tuning database and the baked folders never measured (the script refuses a
folder whose problems it baked in).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

from autotune.dispatch.figures import rescored_figures
from autotune.workflows.bake import bake
from autotune.workflows.tables import TableOptions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tuning_db")
    parser.add_argument("--bake", type=Path, action="append", default=[])
    parser.add_argument("--held", type=Path, action="append", required=True)
    parser.add_argument("--structure", action="append", required=True)
    parser.add_argument("--space", type=Path, action="append", default=[])
    parser.add_argument("--tol", type=float, default=0.1)
    parser.add_argument("--include-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    if {b.resolve() for b in args.bake} & {h.resolve() for h in args.held}:
        raise SystemExit("a held-out folder is also baked in: its figures would not be held out")
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        baked = bake(Path(args.tuning_db), args.bake, Path(tmp) / "tuning.sqlite")
        print(f"tuning database {args.tuning_db}, baked in: {', '.join(str(b) for b in args.bake) or 'nothing'}")
        for i, structure in enumerate(args.structure):
            opts = TableOptions(tol=args.tol, structure=structure, include_dir=args.include_dir)
            table = baked.table(opts).save(Path(tmp) / f"dispatch_{i}.json")
            for held in args.held:
                f = rescored_figures(table, held, tol=args.tol, spaces=tuple(args.space))
                print(
                    f"  {structure:<16} at {held}: {f.problems} problems, within {100 * f.within:.1f}%, worst "
                    f"{100 * f.worst:.1f}%, below 0.97x library {f.below_library}, not measured {f.not_measured} "
                    f"| oracle {100 * f.oracle_within:.1f}% / {100 * f.oracle_worst:.1f}% | {f.kernels} kernels, "
                    f"{f.tuned_points} points",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
