"""Issue 32 item 3: what runtime refinement would answer at a committed validation's held-out problems, replayed on
a CPU: the table's `Refiner` (top 1, 2, 3, 5 kernels and the library) times its candidates with the replay backend
over the committed validation database (the times the validation measured on the GPU), and the answers are scored
against the best of all candidates as validation.csv is. A replay, not a GPU run: the timer returns exactly the
measurements the answers are scored on (a GPU timing each candidate once adds noise).

    python3 scripts/bench_refine.py [FOLDER TUNING_DB ...]   (default: the two committed model tables)
"""

from __future__ import annotations

import json
import sys
import warnings

import pandas as pd

from autotune.dispatch import validate as v
from autotune.dispatch.refine import Refiner
from autotune.dispatch.refine_timer import backend_timer
from autotune.dispatch.runtime import LIBRARY
from autotune.problems.gemm import GEMM
from autotune.store.engine import database_url
from autotune.sweep.backends.replay import ReplayBackend

DEFAULT = [
    "results/small_tables_h100/model",
    "results/small_tables_h100/small_tables_h100.sqlite.xz",
    "results/fp16_model_h100",
    "results/fp16_model_h100/fp16_model_h100.sqlite.xz",
]


def main(argv: list[str]) -> int:
    warnings.simplefilter("ignore")
    args = argv or DEFAULT
    for folder, tuning in zip(args[::2], args[1::2], strict=True):
        table = json.load(open(f"{folder}/dispatch.json"))
        frame = pd.read_csv(f"{folder}/validation/validation.csv", keep_default_na=False, na_values=[""])
        url = database_url(f"{folder}/validation/validation.sqlite.xz")
        backend = ReplayBackend(url)
        times, base = v.measured(url, GEMM)
        for top in (1, 2, 3, 5):
            refine = Refiner(table, backend_timer(backend, table, GEMM, tuning, reps=10), top=top)
            losses, below = [], 0
            for row in frame.to_dict("records"):
                sizes = {n: int(row[n]) for n in GEMM.size_names}
                key = (row["precision"], row["shape"], *(sizes[n] for n in GEMM.size_names))
                a = refine.index(row["precision"], row["shape"], sizes)
                t = base[key][0] if a == LIBRARY else times[key][table["kernels"][a]["instance_id"]][0]
                losses.append(max(0.0, 1 - row["best_ms"] / t))
                below += base[key][0] / t < 0.97
            s = pd.Series(losses)
            print(
                f"{folder} top {top}: within 10% {100 * (s <= 0.1 + 1e-12).mean():.1f}%, worst {100 * s.max():.1f}%, "
                f"median {100 * s.median():.2f}%, below 0.97x library {below}, timer calls {refine.stats.calls} "
                f"({refine.stats.calls / len(frame):.2f} per problem)"
            )
        backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
