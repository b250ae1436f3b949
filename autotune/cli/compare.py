"""`autotune compare`: what each design choice buys, per test point, on one GPU and one problem kind.

Side effects (database, printing) live here; the comparison is analysis/compare.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console
from rich.measure import Measurement

from autotune.cli.consoles import stdout, table as tabled
from autotune.cli.options import KindOpt, SpaceOpt
from autotune.workflows.results import kind_layout, one_kind, other_sizes, source_url
from autotune.errors import UserError

if TYPE_CHECKING:  # pragma: no cover  (pandas, numpy: imported where used, not by `autotune --help`)
    import pandas as pd

    from autotune.analysis.winners import Layout
    from autotune.vocab import DeviceInfo


@dataclass(frozen=True)
class GpuResults:
    frame: pd.DataFrame  # Store.measurements of one GPU and one problem kind
    library: pd.DataFrame  # precision, shape, the kind's sizes, median_ms (its verified library times on that GPU)
    layout: Layout  # the kind's sizes
    info: DeviceInfo  # that GPU and its software stack, as the database records them
    gpus: int  # GPUs with measurements in the database

    @property
    def device(self) -> str:
        return self.info.name


def load_gpu(source: str, device: str | None, kind: str | None = None) -> GpuResults:
    """One GPU's measurements and library times of one problem kind (`kind`, default: the only one): `device`
    (name or UUID), by default the GPU with the most measurements in the database."""
    from autotune.store.query import run_query
    from autotune.store.store import Store

    url = source_url(source)
    with Store.open(url, create=False, readonly=True) as store:
        counts = run_query(
            url,
            "SELECT d.uuid, COUNT(*) AS n FROM measurements m JOIN devices d ON d.id = m.device_id "
            "GROUP BY d.uuid ORDER BY n DESC, d.uuid",
        )
        if counts.empty:
            raise UserError(f"no measurements in {source}", hint="run `autotune sweep CONFIG` into it first")
        device_id = store.device_id(str(counts["uuid"][0]) if device is None else device)
        info = store.device_info(device_id)
        frame = store.measurements(device=info.uuid)
        library = store.baselines(device=info.uuid)
        kind = one_kind(source, kind)
        if kind is None:
            raise UserError(f"no measurements in {source}", hint="run `autotune sweep CONFIG` into it first")
        sizes = store.kind_sizes().get(kind, ())
    if "kind" in frame.columns:
        frame = frame[frame["kind"] == kind]
    layout = kind_layout(kind, frame, tuple(sizes))
    frame = frame.drop(columns=other_sizes(frame, layout))
    library = library[(library["kind"] == kind) & (library["status"] == "ok")] if len(library) else None
    return GpuResults(frame, library, layout, info, len(counts))


def compare(
    source: Annotated[str, typer.Argument(help="Results database (SQLite path or URL).")],
    by: Annotated[
        str,
        typer.Option(
            "--by", help="Parameter whose values form the groups (e.g. NSG, RUNG), or `space` for one group per space."
        ),
    ],
    space: SpaceOpt = None,
    where: Annotated[
        Optional[str],
        typer.Option(
            "--where",
            help="Only instances whose parameters satisfy EXPR (space-file expression language), "
            "e.g. 'BLK_M >= 16 and DIM_X in [8, 16]'.",
        ),
    ] = None,
    device: Annotated[
        Optional[str],
        typer.Option(
            "--device", "-d", help="GPU name or UUID in the database (default: the GPU with the most measurements)."
        ),
    ] = None,
    csv: Annotated[Optional[Path], typer.Option("--csv", help="Also write the full table to this CSV file.")] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print a Markdown table instead.")] = False,
    kind: KindOpt = None,
) -> None:
    """What each design choice buys: per test point, the best verified time of each group of instances.

    A group is the instances sharing one value of the parameter --by (or one space). Each row is a test \
point: each group's best time in ms and its slowdown against the best group (1.00x: the best), the best \
group, and the kind's library (its baseline) on the same GPU. A time marked with a dagger comes from an early-stopped ('skipped') \
measurement: the median of fewer repetitions, an estimate known to be more than TOL slower than the best \
the sweep saw at that point. Then one line per group: at how many points it is the best, its geometric \
mean slowdown, and the sizes where it wins.

    Example: autotune compare results/default/default.sqlite.xz --by NSG --where "DIM_X * DIM_Y >= 64"
    """
    from autotune.analysis import compare as comparing

    gpu = load_gpu(source, device, kind)
    try:
        result = comparing.compare(gpu.frame, by, space, where, gpu.library, gpu.layout)
    except UserError as exc:
        exc.file = exc.file or source
        raise
    summary = comparing.summarize(result)
    if csv is not None:
        csv.parent.mkdir(parents=True, exist_ok=True)
        result.to_csv(csv, index=False, float_format="%.6g")
    title = (
        f"best ms per {by} (slowdown vs the best) on {gpu.device}"
        + (f", space {space}" if space else "")
        + (f", where {where}" if where else "")
        + f": {len(result)} test points"
    )
    notes = _compare_notes(result, summary, gpu, by)
    rows = _compare_rows(result)
    if markdown:
        typer.echo(_markdown(title, rows, notes))
    else:
        table = tabled(title, rows[0], left=("precision", "shape", "best"))
        for row in rows[1:]:
            table.add_row(*row)
        if (out := stdout()).is_terminal:
            out.print(table)
        else:  # a file or a pipe: as wide as the table needs, never squashed to 80 columns
            wide = Console(width=10_000)
            Console(width=Measurement.get(wide, wide.options, table).maximum).print(table)
        for line in notes:
            typer.echo(line)
    if csv is not None:
        stdout().print(f"wrote {csv}")


SKIP_MARK = "\u2020"  # dagger: the time comes from a skipped (early-stopped) measurement


def _compare_rows(result: pd.DataFrame) -> list[list[str]]:
    """Header and cells of the printed table: each group's 'ms (slowdown)'."""
    import pandas as pd

    from autotune.analysis import compare as comparing

    labels = comparing.groups(result)
    layout, lib = result.attrs["layout"], result.attrs["library"]
    ties = list(layout.tie_sizes)
    rows = [["precision", "shape", "size", *ties, *labels, "best", f"{lib} ms", f"best vs {lib}"]]
    num = lambda x, f, unit="": "" if pd.isna(x) else format(x, f) + unit  # noqa: E731
    for r in result.to_dict("records"):
        cells = []
        for g in labels:
            mark = SKIP_MARK if r[g + comparing.SKIPPED] else ""
            cells.append(num(r[g], ".4g", f"{mark} ({num(r[g + comparing.SLOWDOWN], '.2f', 'x')})"))
        best = r["best"] + (SKIP_MARK if r["best"] and r[r["best"] + comparing.SKIPPED] else "") or "-"
        rows.append(
            [
                r["precision"],
                r["shape"],
                "x".join(str(r[n]) for n in layout.table_sizes),
                *(str(r[n]) for n in ties),
                *cells,
                best,
                num(r[f"{lib}_ms"], ".4g"),
                num(r[f"speedup_vs_{lib}"], ".2f", "x"),
            ]
        )
    return rows


def _compare_notes(result: pd.DataFrame, summary: pd.DataFrame, gpu: GpuResults, by: str) -> list[str]:
    import numpy as np

    lines = []
    for s in summary.itertuples():
        skipped = f", {s.skipped_points} of them {SKIP_MARK}" if s.skipped_points else ""
        lines.append(
            f"{s.group}: best at {s.best_at}/{len(result)} points, geomean slowdown {s.geomean_slowdown:.2f}x "
            f"(worst {s.worst_slowdown:.2f}x, over {s.points} points{skipped})"
            + (f"; wins at {s.wins}" if s.wins else "")
        )
    lib = result.attrs["library"]
    cb = result[f"speedup_vs_{lib}"].dropna()
    if len(cb):
        lines.append(
            f"{lib}: measured at {len(cb)} points; the best group is faster at {int((cb > 1).sum())}, "
            f"geomean speedup {math.exp(np.log(cb).mean()):.2f}x ({lib} ms / best ms)"
        )
    if result.attrs.get("without_by"):
        lines.append(f"left out: {result.attrs['without_by']} instances without the parameter {by}")
    if any(summary["skipped_points"]):
        lines.append(
            f"{SKIP_MARK} the group's fastest measurement here was stopped early ('skipped'): the median of its "
            "first repetitions, an estimate known to be more than TOL slower than the best the sweep saw"
        )
    if gpu.gpus > 1:
        lines.append(
            f"GPU {gpu.device} ({gpu.info.uuid}), one of {gpu.gpus} in the database; --device NAME_OR_UUID picks another"
        )
    return lines


def _markdown(title: str, rows: list[list[str]], notes: list[str]) -> str:
    head, *body = rows
    lines = [
        f"**{title}**",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" if c in ("precision", "shape", "best") else "---:" for c in head) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines + [""] + [f"- {n}" for n in notes])
