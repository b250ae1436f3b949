"""Per-pair figures of the search benchmark (issue 57): every (space, point) pair on its own, not only pooled.

For each pair, budget and strategy: the median, 90th percentile and worst of `best_ms / true_best_ms - 1` over the
seeds, and the strategy's rank among every strategy run on that pair at that budget (1 = the lowest median, ties
broken by the p90; equal figures share the lower rank). `worst_pairs` names, per strategy and budget, the pair
with the highest p90 (then median). Rows are bench_search.py's CSV rows (`tool, strategy, space, point, seed,
space_size, evals, best_ms, true_best_ms, device`); a run that found nothing valid counts as 999% (as the pooled
summary counts it).

    python scripts/bench_search.py --per-pair results/bench/search.csv.gz --out results/bench/search.csv.gz
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from pathlib import Path

import numpy as np

PAIR_COLUMNS = [
    "space",
    "device",
    "point",
    "space_size",
    "budget_pct",
    "evals",
    "tool",
    "strategy",
    "seeds",
    "median",
    "p90",
    "worst",
    "rank",
    "ranked",
]
NOTHING = 9.99  # a run without a valid result: counted as 999% over the best


def _g7(text: str) -> float:
    return float(f"{float(text):.7g}")


def parse_row(r: dict, number=float) -> tuple:
    """One row of bench_search.py's CSV as a typed tuple (tool, strategy, space, point, seed, space_size, evals,
    best_ms, true_best_ms, device); `number` reads the two times."""
    return (
        r["tool"],
        r["strategy"],
        r["space"],
        r["point"],
        int(r["seed"]),
        int(r["space_size"]),
        int(r["evals"]),
        number(r["best_ms"]),
        number(r["true_best_ms"]),
        r["device"],
    )


def read_rows(path: Path) -> list[tuple]:
    """bench_search.py's CSV (plain or .gz) as typed row tuples; times to 7 significant digits, as a merged CSV
    holds them, so that a run's rows and a merged file's tie where they are the same measurement."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", newline="") as fh:  # type: ignore[operator]
        return [parse_row(r, _g7) for r in csv.DictReader(fh)]


def overlay(base: list[tuple], newer: list[tuple]) -> tuple[list[tuple], int, int]:
    """`base` with `newer`'s rows in place of those of the same (tool, strategy, pair, seed, evals); also how many
    rows were replaced and how many of those changed best_ms by more than a relative 1e-6 (a rerun's check)."""
    key = lambda r: (r[0], r[1], r[2], r[3], r[9], r[4], r[6])  # noqa: E731
    out = {key(r): r for r in base}
    replaced = changed = 0
    for r in newer:
        old = out.get(key(r))
        if old is not None:
            replaced += 1
            changed += not math.isclose(old[7], r[7], rel_tol=1e-6)
        out[key(r)] = r
    return list(out.values()), replaced, changed


def budget_of(evals: int, size: int, fractions: list[float]) -> float | None:
    """The budget fraction whose evaluation count at a pair of `size` is `evals` (None: not one of `fractions`)."""
    for f in fractions:
        if max(1, math.ceil(f * size)) == evals:
            return f
    return None


def per_pair(rows: list[tuple], fractions: list[float]) -> list[dict]:
    """One record per (pair, budget, tool, strategy): seeds, median, p90, worst, rank among the pair's strategies."""
    groups: dict[tuple, list[float]] = {}
    for tool, strategy, space, point, _seed, size, evals, best, true_best, device in rows:
        f = budget_of(evals, size, fractions)
        if f is None:
            continue
        gap = best / true_best - 1 if math.isfinite(best) else NOTHING
        groups.setdefault((space, device, point, size, f, evals, tool, strategy), []).append(gap)
    out = []
    for (space, device, point, size, f, evals, tool, strategy), g in groups.items():
        a = np.array(g)
        out.append(
            {
                "space": space,
                "device": device,
                "point": point,
                "space_size": size,
                "budget_pct": round(100 * f, 6),
                "evals": evals,
                "tool": tool,
                "strategy": strategy,
                "seeds": len(a),
                "median": float(np.median(a)),
                "p90": float(np.percentile(a, 90)),
                "worst": float(a.max()),
            }
        )
    by_cell: dict[tuple, list[dict]] = {}
    for r in out:
        by_cell.setdefault((r["space"], r["device"], r["point"], r["budget_pct"]), []).append(r)
    for cell in by_cell.values():
        order = sorted(cell, key=lambda r: (r["median"], r["p90"]))
        for i, r in enumerate(order):
            prev = order[i - 1] if i else None
            same = prev is not None and (prev["median"], prev["p90"]) == (r["median"], r["p90"])
            r["rank"] = prev["rank"] if same else i + 1  # type: ignore[index]
            r["ranked"] = len(cell)
    out.sort(key=lambda r: (r["space"], r["device"], r["point"], r["budget_pct"], r["rank"], r["tool"], r["strategy"]))
    return out


def rank_of(r: dict | None) -> str:
    return f"{r['rank']} of {r['ranked']}" if r else "-"


def pair_name(r: dict) -> str:
    return f"{r['space']} {r['device']} {r['point'].split(':')[-1]}"


def write_csv(path: Path, table: list[dict]) -> None:
    """The per-pair records as CSV (PAIR_COLUMNS; figures to 4 decimals), gzipped where the name ends in .gz."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(PAIR_COLUMNS)
    for r in table:
        w.writerow([f"{r[c]:.4f}" if c in ("median", "p90", "worst") else r[c] for c in PAIR_COLUMNS])
    if path.name.endswith(".gz"):
        with gzip.GzipFile(path, "wb", mtime=0) as gz:  # mtime 0: the same rows, the same bytes
            gz.write(buf.getvalue().encode())
    else:
        path.write_text(buf.getvalue())


def worst_pairs(table: list[dict], min_size: int = 0) -> list[dict]:
    """Per (tool, strategy, budget): the pairs counted, the worst pair (highest p90, then median), how many pairs
    have a p90 above 10%, the median of the per-pair medians and p90s, the mean rank and the pairs ranked first."""
    groups: dict[tuple, list[dict]] = {}
    for r in table:
        if r["space_size"] >= min_size:
            groups.setdefault((r["tool"], r["strategy"], r["budget_pct"]), []).append(r)
    out = []
    for (tool, strategy, pct), rs in groups.items():
        w = max(rs, key=lambda r: (r["p90"], r["median"]))
        out.append(
            {
                "tool": tool,
                "strategy": strategy,
                "budget_pct": pct,
                "pairs": len(rs),
                "worst": w,
                "over_10": sum(r["p90"] > 0.10 for r in rs),
                "median_of_medians": float(np.median([r["median"] for r in rs])),
                "median_of_p90": float(np.median([r["p90"] for r in rs])),
                "mean_rank": float(np.mean([r["rank"] for r in rs])),
                "first": sum(r["rank"] == 1 for r in rs),
            }
        )
    out.sort(key=lambda x: (x["budget_pct"], x["worst"]["p90"], x["mean_rank"]))
    return out


def markdown(table: list[dict], budgets_pct: tuple[float, ...] = (2.0, 5.0), min_size: int = 0) -> str:
    """The per-strategy summary (worst pair named) at every budget, then the per-pair table at `budgets_pct`:
    hybrid's figures and rank beside the best strategy of the pair, Kernel Tuner's best, and the lowest p90 any
    strategy reached on the pair (whether a p90 target is met by anything measured there)."""
    lines = [
        "Per strategy and budget, over the pairs (median / p90 over seeds per pair; worst pair: the highest p90):",
        "",
        "| budget | tool | strategy | pairs | median of pair medians | median of pair p90s | pairs with p90 > 10% "
        "| mean rank | ranked first | worst pair: median / p90 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in worst_pairs(table, min_size):
        w = s["worst"]
        lines.append(
            f"| {s['budget_pct']:g}% | {s['tool']} | {s['strategy']} | {s['pairs']} | {s['median_of_medians']:.4f} "
            f"| {s['median_of_p90']:.4f} | {s['over_10']} | {s['mean_rank']:.1f} | {s['first']} "
            f"| {pair_name(w)}: {w['median']:.4f} / {w['p90']:.4f} |"
        )
    for pct in budgets_pct:
        cells: dict[tuple, list[dict]] = {}
        for r in table:
            if r["budget_pct"] == pct and r["space_size"] >= min_size:
                cells.setdefault((r["space"], r["device"], r["point"]), []).append(r)
        if not cells:
            continue
        lines += [
            "",
            f"At {pct:g}% of each pair (median / p90 over seeds; rank among the strategies run on the pair):",
            "",
            "| pair | size | hybrid | hybrid's rank | best on the pair | Kernel Tuner's best | lowest p90 of any |",
            "|---|---|---|---|---|---|---|",
        ]
        for key in sorted(cells):
            rs = cells[key]
            hy = next((r for r in rs if r["strategy"] == "hybrid" and r["tool"] == "autotune"), None)
            best = min(rs, key=lambda r: r["rank"])
            kts = [r for r in rs if r["tool"] == "kerneltuner"]
            kt = min(kts, key=lambda r: r["rank"]) if kts else None
            low = min(rs, key=lambda r: (r["p90"], r["median"]))  # whether any strategy meets a p90 target here
            fig = lambda r: f"{r['median']:.4f} / {r['p90']:.4f}" if r else "-"  # noqa: E731
            lines.append(
                f"| {pair_name(rs[0])} | {rs[0]['space_size']} | {fig(hy)} "
                f"| {rank_of(hy)} | {best['strategy']} {fig(best)} "
                f"| {kt['strategy'] + ' ' + fig(kt) if kt else '-'} | {low['strategy']} {low['p90']:.4f} |"
            )
    return "\n".join(lines)


def plot(table: list[dict], path: Path, budgets_pct: tuple[float, ...] = (2.0, 5.0)) -> None:
    """One heat map per budget: pairs x strategies, colour the p90, text median and p90 in percent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    pairs = sorted({(r["space"], r["device"], r["point"]) for r in table})
    names = {(r["space"], r["device"], r["point"]): pair_name(r) for r in table}
    rank = worst_pairs(table)
    order: dict[tuple[str, str], float] = {}
    for s in rank:  # strategies ordered by their mean rank at the largest plotted budget
        if s["budget_pct"] == budgets_pct[-1]:
            order[(s["tool"], s["strategy"])] = s["mean_rank"]
    strategies = sorted(order, key=lambda k: order[k])
    fig, axes = plt.subplots(
        1, len(budgets_pct), figsize=(0.62 * len(strategies) * len(budgets_pct) + 4, 0.34 * len(pairs) + 2.0)
    )
    axes = np.atleast_1d(axes)
    cells = {(r["space"], r["device"], r["point"], r["budget_pct"], r["tool"], r["strategy"]): r for r in table}
    for ax, pct in zip(axes, budgets_pct, strict=True):
        grid = np.full((len(pairs), len(strategies)), np.nan)
        for i, p in enumerate(pairs):
            for j, (tool, strategy) in enumerate(strategies):
                r = cells.get((*p, pct, tool, strategy))
                if r is None:
                    continue
                grid[i, j] = r["p90"]
                ax.text(
                    j,
                    i,
                    f"{100 * r['median']:.1f}\n{100 * r['p90']:.1f}",
                    ha="center",
                    va="center",
                    fontsize=5,
                    color="black" if r["p90"] < 0.3 else "white",
                )
        im = ax.imshow(np.maximum(grid, 1e-3), cmap="viridis_r", norm=LogNorm(1e-3, 3.0), aspect="auto")
        ax.set_xticks(range(len(strategies)))
        ax.set_xticklabels([("" if t == "autotune" else "KT ") + s for t, s in strategies], rotation=60, fontsize=7)
        ax.set_yticks(range(len(pairs)))
        ax.set_yticklabels([names[p] for p in pairs] if ax is axes[0] else [], fontsize=7)
        ax.set_title(f"{pct:g}% of each pair: median (top) and p90 (below) over seeds, % over the best", fontsize=8)
    fig.tight_layout()
    fig.colorbar(im, ax=list(axes), fraction=0.015, pad=0.01).set_label("p90 over the best (ratio - 1)", fontsize=7)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    from PIL import Image  # matplotlib's own dependency

    with Image.open(path) as im:  # a 64-colour palette: a third of the file
        im.convert("RGB").quantize(64).save(path, optimize=True)
