"""Issue 32: selection rules replayed on every spent validation (CPU only, no GPU, nothing measured).

A dispatch table's kernel set is fixed; what a selection rule decides is which of its kernels (or the library)
answers a problem nobody tuned. Every validation already measured (validation.sqlite: every table kernel and the
library at 200 held-out problems) is development data for that decision. For each table this script

  - takes the tuned points' times from the table itself (each point's `costs`: every table kernel measured there
    and the library) and each spent validation's times from its database (`dispatch.validate.measured`);
  - fits a rule on the tuned points, or on the tuned points plus the OTHER spent validations (leave one validation
    set out; a problem of the held-out set that is also a tuned point is dropped from the training points), and
  - scores it on the held-out validation set: the share of answers within 10% of the best of all that validation's
    candidates and the library, the worst loss, the answers below 0.97x the library (issue 32's three targets).

Rules (float re-implementations for study; the table's own lookup is integer-only, runtime.py and its C++ header):
  table            the committed table as it answers (its own structure, fitted on its tuned points)
  model:M@T        the selection model (dispatch/model.py's features and ridge) refitted on the tuned points,
                   library margin M (a kernel answers only where predicted faster than the library by M)
  model:M@T+V      the same, fitted on the tuned points and the other spent validations
  model+res:K@T+V  the model plus, per answer, the mean residual of its K nearest training points (log-size distance
                   over the table sizes, the other sizes at half weight): follows local steps
  near:K@T+V       per kernel the mean log time ratio to the library at its K nearest training points; the smallest wins
  refine:K         runtime refinement (dispatch/refine.py) of the committed table: the K best-predicted kernels and
                   the library timed once at each new problem, the fastest kept (replayed from the validation's medians)

    python3 scripts/tables4_replay.py [--tables fp16,small,softmax] [--rules table,model:0.1@T,...]

Its inputs, the validations of the model tables (fp16_model_h100, softmax_model_h100) and the round-0 validations of
tables2_h100, were retired from the tree (docs/results.md): run it in a checkout of the commit that still has them,
RETIRED_AT (`git worktree add ../at-retired RETIRED_AT`); here it says so and stops.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from autotune.dispatch.refine import Refiner
from autotune.dispatch.features import FX_BITS, model_features
from autotune.dispatch.runtime import LIBRARY, Lookup
from autotune.dispatch.validate import measured
from autotune.dispatch.validate_table import read_table, table_kind
from autotune.store.engine import database_url

ROOT = Path(__file__).resolve().parents[1]
RETIRED_AT = "760dea1161c8"  # the last commit with every validation database this script reads
R = ROOT / "results"
T2 = R / "tables2_h100"
SOFTMAX_SPACE = ROOT / "examples" / "softmax" / "space.yaml"
# table -> (its dispatch.json, the spent validations of its kernel set (name, folder), space files)
TABLES: dict[str, tuple[Path, list[tuple[str, Path]], list[Path]]] = {
    "fp16": (
        T2 / "fp16/active/round0/dispatch.json",
        [("seed 3201", R / "fp16_model_h100/validation"), ("seed 3301", T2 / "fp16/active/round0/validation")],
        [],
    ),
    "small": (
        T2 / "small/active/round0/dispatch.json",
        [("seed 3202", R / "small_tables_h100/model/validation"), ("seed 3302", T2 / "small/active/round0/validation")],
        [],
    ),
    "softmax": (
        T2 / "softmax/active/round0/dispatch.json",
        [("seed 3203", R / "softmax_model_h100/validation"), ("seed 3303", T2 / "softmax/active/round0/validation")],
        [SOFTMAX_SPACE],
    ),
}
DEFAULT_RULES = (
    "table,model:0@T,model:0.05@T,model:0.1@T,model:0@T+V,model:0.05@T+V,model:0.1@T+V,"
    "model+res:2@T+V,near:1@T+V,near:3@T+V,refine:1,refine:2,refine:3"
)
Times = dict[int, float]  # answer (kernel index or LIBRARY) -> ms
Key = tuple  # (precision, shape, *sizes)


@dataclass
class DevTable:
    name: str
    raw: dict
    lookup: Lookup
    sizes: list[str]
    table_dims: list[int]
    tiles: list[tuple[int, ...]]
    tuned: dict[Key, Times]
    sets: dict[str, tuple[dict[Key, Times], list[tuple[Key, float, float]]]] = field(default_factory=dict)


def load(name: str) -> DevTable:
    path, validations, spaces = TABLES[name]
    raw = json.loads(path.read_text())
    kind = table_kind(read_table(path), spaces)
    sizes = list(kind.size_names)
    kernels = raw["kernels"]
    model_kernels = (raw.get("model") or {}).get("kernels") or [None] * len(kernels)
    td = [sizes.index(n) for n in raw["table_sizes"]]
    tiles = [tuple(m["tiles"]) if m else (1,) * len(td) for m in model_kernels]
    tuned: dict[Key, Times] = {}
    for p in raw["points"]:  # costs are ms per byte (scaled): times relative to the point's own measured answer
        key = (p["precision"], p["shape"], *(int(p["sizes"][n]) for n in sizes))
        costs = {int(a): int(c) for a, c in p["costs"]}
        ref = LIBRARY if p.get("library_ms") is not None and LIBRARY in costs else int(p["kernel"])
        ref_ms = float(p["library_ms"] if ref == LIBRARY else p["ms"])
        tuned[key] = {a: c / costs[ref] * ref_ms for a, c in costs.items()}
    dev = DevTable(name, raw, Lookup(raw), sizes, td, tiles, tuned)
    for set_name, folder in validations:
        times, base = measured(database_url(str(folder / "validation.sqlite.xz")), kind)
        points: dict[Key, Times] = {}
        for key in set(times) | set(base):
            here = {
                i: times[key][k["instance_id"]][0]
                for i, k in enumerate(kernels)
                if (k["precision"], k["shape"]) == key[:2] and k["instance_id"] in times.get(key, {})
            }
            if key in base:
                here[LIBRARY] = base[key][0]
            points[key] = here
        frame = pd.read_csv(folder / "validation.csv", keep_default_na=False, na_values=[""])
        rows = [
            (
                (str(r["precision"]), "" if pd.isna(r["shape"]) else str(r["shape"]), *(int(r[n]) for n in sizes)),
                float(r["best_ms"]),
                float(r["baseline_ms"]),
            )
            for r in frame.to_dict("records")
        ]
        dev.sets[set_name] = (points, rows)
    return dev


def training(dev: DevTable, held: str, with_validations: bool) -> dict[Key, Times]:
    keys = {k for k, _, _ in dev.sets[held][1]}
    out = {k: v for k, v in dev.tuned.items() if k not in keys}
    if with_validations:
        for other, (points, rows) in dev.sets.items():
            if other != held:
                out.update({k: points.get(k, {}) for k, _, _ in rows if k not in keys})
    return out


def features(dev: DevTable, dims: tuple[int, ...], answer: int) -> np.ndarray:
    tiles = [1] * len(dev.table_dims) if answer == LIBRARY else list(dev.tiles[answer])
    return np.asarray(model_features(dims, dev.table_dims, tiles), dtype=float) / (1 << FX_BITS)


def ridge(x: np.ndarray, y: np.ndarray, penalty: float = 1e-3) -> np.ndarray:
    use = np.ones(x.shape[1], dtype=bool)
    use[1:] = np.ptp(x[:, 1:], axis=0) > 1e-12
    coef = np.zeros(x.shape[1])
    xs = x[:, use]
    coef[use] = np.linalg.solve(xs.T @ xs + penalty * np.eye(xs.shape[1]), xs.T @ y)
    return coef


def answers_of(dev: DevTable, group: tuple) -> list[int]:
    ks = dev.raw["kernels"]
    return [LIBRARY] + [i for i, k in enumerate(ks) if (k["precision"], k["shape"]) == group]


def model_rule(dev: DevTable, train: dict[Key, Times], margin: float, res_k: int = 0) -> Callable[[Key], int]:
    fitted: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for group in {k[:2] for k in train}:
        for a in answers_of(dev, group):
            keys = [k for k in train if k[:2] == group and a in train[k]]
            if len(keys) < 3:
                continue
            x = np.array([features(dev, k[2:], a) for k in keys])
            y = np.log2([train[k][a] for k in keys])
            coef = ridge(x, y)
            fitted[(group, a)] = (coef, np.log2(np.array([k[2:] for k in keys], dtype=float)), y - x @ coef)
    raise_by = math.log2(1.0 + margin)
    other = [d for d in range(len(dev.sizes)) if d not in dev.table_dims]

    def choose(key: Key) -> int:
        best = (math.inf, LIBRARY)
        logs = np.log2(np.array(key[2:], dtype=float))
        for a in answers_of(dev, key[:2]):
            if (key[:2], a) not in fitted or (a != LIBRARY and not dev.lookup.valid(a, key[2:])):
                continue
            coef, where, residual = fitted[(key[:2], a)]
            t = float(features(dev, key[2:], a) @ coef)
            if res_k:
                dist = np.abs(where[:, dev.table_dims] - logs[dev.table_dims]).sum(1)
                dist += 0.5 * np.abs(where[:, other] - logs[other]).sum(1)
                t += float(residual[np.argsort(dist, kind="stable")[:res_k]].mean())
            t += 0.0 if a == LIBRARY else raise_by
            if t < best[0]:
                best = (t, a)
        return best[1]

    return choose


def near_rule(dev: DevTable, train: dict[Key, Times], k: int) -> Callable[[Key], int]:
    data: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    for group in {key[:2] for key in train}:
        for a in answers_of(dev, group)[1:]:
            keys = [key for key in train if key[:2] == group and a in train[key] and LIBRARY in train[key]]
            if keys:
                where = np.log2(np.array([key[2:] for key in keys], dtype=float))
                data[(group, a)] = (where, np.log2([train[key][a] / train[key][LIBRARY] for key in keys]))

    def choose(key: Key) -> int:
        logs = np.log2(np.array(key[2:], dtype=float))
        best = (0.0, LIBRARY)
        for a in answers_of(dev, key[:2])[1:]:
            if (key[:2], a) not in data or not dev.lookup.valid(a, key[2:]):
                continue
            where, ratio = data[(key[:2], a)]
            dist = np.abs(where[:, dev.table_dims] - logs[dev.table_dims]).sum(1)
            r = float(ratio[np.argsort(dist, kind="stable")[:k]].mean())
            if r < best[0]:
                best = (r, a)
        return best[1]

    return choose


def rule_for(dev: DevTable, rule: str, held: str) -> Callable[[Key], int]:
    name, _, rest = rule.partition(":")
    arg, _, data = rest.partition("@")
    train = training(dev, held, data == "T+V") if data else {}
    if name == "table":
        return lambda key: dev.lookup.index(key[0], key[1], list(key[2:]))
    if name == "model":
        return model_rule(dev, train, float(arg))
    if name == "model+res":
        return model_rule(dev, train, 0.0, res_k=int(arg))
    if name == "near":
        return near_rule(dev, train, int(arg))
    if name == "refine":
        points = dev.sets[held][0]

        def timer(answer: int, precision: str, shape: str, sizes: dict) -> float | None:
            return points.get((precision, shape, *(sizes[n] for n in dev.sizes)), {}).get(answer)

        refine = Refiner(dev.raw, timer, top=int(arg))
        return lambda key: refine.index(key[0], key[1], list(key[2:]))
    raise SystemExit(f"unknown rule {rule!r}: see --help")


def score(dev: DevTable, held: str, choose: Callable[[Key], int]) -> tuple[float, float, int, int]:
    """(within 10% of the best, worst loss, answers below 0.97x the library, answers not measured)."""
    points, rows = dev.sets[held]
    losses, below, missing = [], 0, 0
    for key, best, base in rows:
        t = points.get(key, {}).get(choose(key), math.nan)
        if not math.isfinite(t):
            missing += 1
            continue
        losses.append(max(0.0, 1.0 - best / t))
        below += int(base / t < 0.97)
    arr = np.array(losses)
    return float((arr <= 0.1 + 1e-12).sum() / len(rows)), float(arr.max()), below, missing


def oracle(dev: DevTable, held: str) -> tuple[float, float]:
    points, rows = dev.sets[held]
    arr = np.array(
        [
            max(0.0, 1.0 - best / min(t for a, t in points[key].items() if dev.lookup.valid(a, key[2:])))
            for key, best, _ in rows
        ]
    )
    return float((arr <= 0.1 + 1e-12).mean()), float(arr.max())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", default=",".join(TABLES))
    parser.add_argument("--rules", default=DEFAULT_RULES)
    args = parser.parse_args(argv)
    missing = [
        folder / "validation.sqlite.xz"
        for name in args.tables.split(",")
        for _, folder in TABLES[name][1]
        if not (folder / "validation.sqlite.xz").is_file()
    ]
    if missing:
        print(
            f"error: {missing[0].relative_to(ROOT)} (and {len(missing) - 1} more) was retired from the tree; "
            f"run this script in a checkout of commit {RETIRED_AT}, which has them",
            file=sys.stderr,
        )
        return 2
    for name in args.tables.split(","):
        dev = load(name)
        print(f"## {name}: {len(dev.raw['kernels'])} kernels, {len(dev.tuned)} tuned points")
        print("| rule | " + " | ".join(dev.sets) + " |")
        print("|---|" + "---|" * len(dev.sets))
        cells = [f"within {100 * w:.1f}%, worst {100 * x:.1f}%" for w, x in (oracle(dev, s) for s in dev.sets)]
        print("| oracle (table kernels + library) | " + " | ".join(cells) + " |")
        for rule in args.rules.split(","):
            cells = []
            for held in dev.sets:
                w, x, b, m = score(dev, held, rule_for(dev, rule, held))
                cells.append(f"{100 * w:.1f}% / {100 * x:.1f}% / {b}" + (f" ({m} not measured)" if m else ""))
            print(f"| {rule} | " + " | ".join(cells) + " |", flush=True)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
