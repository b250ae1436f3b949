"""Write the measurements of several results databases as one measurements CSV, the input `autotune emit`,
`analyze`, `report` and `compare` read in place of a database (docs/queries.md): the rows of
`Store.measurements()` of each database in turn. Library (baseline) times are not part of such a CSV, so a table
emitted from it answers with the databases' kernels only.
    python scripts/measurements_union.py OUT.csv DB [DB ...]     (DB: .sqlite, .sqlite.xz or .sqlite.gz, or a URL)
"""

import argparse
import sys

import pandas as pd

from autotune.errors import UserError
from autotune.store.store import Store
from autotune.workflows.results import source_url


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="the CSV to write")
    ap.add_argument("dbs", nargs="+", help="results databases, read in this order")
    a = ap.parse_args()
    frames = []
    for db in a.dbs:
        try:
            with Store.open(source_url(db), create=False, readonly=True) as store:
                frames.append(store.measurements())
        except UserError as exc:  # no database there, not SQLite, another schema: one line, nothing written
            sys.exit(f"error: {exc}")
    union = pd.concat(frames, ignore_index=True)
    union.to_csv(a.out, index=False)
    print(f"wrote {a.out}: {len(union):,} measurements of {len(a.dbs)} databases")


if __name__ == "__main__":
    main()
