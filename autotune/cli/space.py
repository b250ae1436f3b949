"""`autotune space ...`: explore a space file without a GPU (show, list, export)."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from autotune.cli.consoles import stdout, table as tabled
from autotune.cli.aliases import renamed
from autotune.devices import PROFILES, get_device
from autotune.vocab import MAX_SEED

if TYPE_CHECKING:  # numpy and the generator are imported where used: `autotune --help` does not load them
    import numpy as np

    from autotune.space.generator import Generated

app = typer.Typer(
    help="Explore a tuning space: the funnel of constraints, the surviving instances, exports.", no_args_is_help=True
)

SpaceArg = Annotated[str, typer.Argument(help="Space file (spaces/NAME.yaml) or a space name under spaces/.")]
DeviceOpt = Annotated[
    Optional[str],
    typer.Option(
        "--device", "-d", help=f"Device profile ({', '.join(PROFILES)}). Default: the GPU of this machine, else H100."
    ),
]
PrecisionOpt = Annotated[
    Optional[str],
    typer.Option(
        "--precision", "-p", help="fp64, fp32 or fp16 (sets elem_bytes). Default: the space's first precision."
    ),
]
NoSoftOpt = Annotated[bool, typer.Option("--no-soft", help="Switch off every soft constraint.")]
SoftOffOpt = Annotated[
    Optional[list[str]], typer.Option("--soft-off", help="Switch off one soft constraint by name (repeatable).")
]
MaxRawOpt = Annotated[
    Optional[int],
    typer.Option(
        "--max-raw",
        help="Stop when building a space expands more partial combinations than this (default 10^10, or "
        "AUTOTUNE_MAX_RAW); a larger raw space builds if its constraints prune early.",
    ),
]
MaxSurvivorsOpt = Annotated[
    Optional[int],
    typer.Option(
        "--max-survivors",
        help="Stop when more instances than this pass the hard constraints (default 10^8, or AUTOTUNE_MAX_SURVIVORS).",
    ),
]


def _generate(
    space: str,
    device: str | None,
    precision: str | None,
    no_soft: bool,
    soft_off: list[str] | None,
    max_raw: int | None = None,
    max_survivors: int | None = None,
) -> Generated:
    from autotune.space.generator import generate
    from autotune.space.spec import load_space

    return generate(
        load_space(space),
        get_device(device),
        precision,
        soft=not no_soft,
        soft_off=soft_off or (),
        max_raw=max_raw,
        max_survivors=max_survivors,
    )


@app.command()
def show(
    space: SpaceArg,
    device: DeviceOpt = None,
    precision: PrecisionOpt = None,
    no_soft: NoSoftOpt = False,
    soft_off: SoftOffOpt = None,
    max_raw: MaxRawOpt = None,
    max_survivors: MaxSurvivorsOpt = None,
) -> None:
    """Print the funnel (raw -> after each hard -> after each soft constraint) and value counts."""
    g = _generate(space, device, precision, no_soft, soft_off, max_raw, max_survivors)
    stdout().print(f"[bold]{g.space.name}[/bold]: {g.space.description}")
    stdout().print(
        f"device: {g.device.name} ({g.device.source}), precision: {g.precision}, generated in {g.seconds:.3f} s"
    )
    table = tabled("funnel", ("step", "kind", "remaining", "removed", "reason"), left=("step", "kind", "reason"))
    for f in g.funnel:
        table.add_row(f.name, f.kind, f"{f.remaining:,}", f"{f.removed:,}" if f.kind != "raw" else "", f.reason)
    stdout().print(table)
    pruning = [f for f in g.funnel if f.kind != "raw"]
    if pruning:
        top = max(pruning, key=lambda f: f.removed)
        stdout().print(f"pruned most: {top.name} ({top.kind}, removed {top.removed:,})")
    skipped = [c.name for c in g.space.soft if c.name not in g.soft_applied]
    if skipped:
        stdout().print(f"soft constraints switched off: {', '.join(skipped)}")
    stdout().print(f"[bold]{g.count:,} instances[/bold]")
    if g.count:
        counts = tabled("value counts among survivors", ("parameter", "value: count"))
        for name in g.space.param_names:
            counts.add_row(name, value_counts_text(g, name))
        stdout().print(counts)


SHOWN_VALUES = 20


def value_counts_text(g: Generated, name: str, shown: int = SHOWN_VALUES) -> str:
    """`value: count` pairs among the survivors, in value order; with more than `shown` distinct values,
    the `shown` most frequent ones and `… N more values` (counted from the integer codes: no frame)."""
    import numpy as np

    values = next(p.values for p in g.space.parameters if p.name == name)
    counts = np.bincount(g.codes[name], minlength=len(values))
    present = np.flatnonzero(counts)
    more = 0
    if len(present) > shown:
        top = present[np.argsort(-counts[present], kind="stable")[:shown]]
        more = len(present) - shown
        present = np.sort(top)
    text = "  ".join(f"{values[i]}: {counts[i]}" for i in present)
    return text + (f"  … {more:,} more values" if more else "")


def _matching(g: Generated, where_expr: str | None) -> np.ndarray:
    import numpy as np

    from autotune.space.generator import where

    rows = np.arange(g.count)
    return rows[where(g, where_expr)] if where_expr else rows


@app.command("list")
def list_(
    space: SpaceArg,
    limit: Annotated[int, typer.Option(help="Print at most this many rows (0: all).")] = 20,
    where_expr: Annotated[
        Optional[str], typer.Option("--where", help="Keep rows where EXPR holds, e.g. 'BLK_M >= 32'.")
    ] = None,
    sample: Annotated[
        Optional[int],
        typer.Option(min=1, help="Random sample of N instances (every one that matches where they are N or fewer)."),
    ] = None,
    seed: Annotated[int, typer.Option(min=0, max=MAX_SEED, help="Seed of --sample (0 to 2**32-1).")] = 0,
    device: DeviceOpt = None,
    precision: PrecisionOpt = None,
    no_soft: NoSoftOpt = False,
    soft_off: SoftOffOpt = None,
    max_raw: MaxRawOpt = None,
    max_survivors: MaxSurvivorsOpt = None,
) -> None:
    """List surviving instances with their stable IDs."""
    import numpy as np

    g = _generate(space, device, precision, no_soft, soft_off, max_raw, max_survivors)
    matching = rows = _matching(g, where_expr)
    if sample is not None and sample < len(matching):
        rows = np.sort(np.random.default_rng(seed).choice(matching, size=sample, replace=False))
    shown = rows if limit <= 0 else rows[:limit]
    frame = g.frame.iloc[shown]
    frame = frame.assign(id=g.ids(shown))[["id", *frame.columns]]
    stdout().print(frame.to_string(index=False))
    sampled = f", a sample of {len(rows):,}" if sample is not None and len(rows) < len(matching) else ""
    stdout().print(f"{len(shown):,} shown; {len(matching):,} match{sampled} ({g.count:,} in the space)")


class Format(str, Enum):
    csv = "csv"
    json = "json"


@app.command()
def export(
    space: SpaceArg,
    format: Annotated[
        Optional[Format],
        typer.Option("--format", "-f", help="csv or json (default: from the --out extension, else csv)."),
    ] = None,
    output: Annotated[Optional[Path], typer.Option("--out", "-o", help="File to write (default: stdout).")] = None,
    output_old: Annotated[Optional[Path], typer.Option("--output", hidden=True, help="Old name of --out.")] = None,
    where_expr: Annotated[Optional[str], typer.Option("--where", help="Keep rows where EXPR holds.")] = None,
    device: DeviceOpt = None,
    precision: PrecisionOpt = None,
    no_soft: NoSoftOpt = False,
    soft_off: SoftOffOpt = None,
    max_raw: MaxRawOpt = None,
    max_survivors: MaxSurvivorsOpt = None,
) -> None:
    """Write every surviving instance (id, name, parameters, derived quantities) as CSV or JSON."""
    from autotune.cli.outformat import output_format

    output = renamed(output, output_old, "--out", "--output")
    format = Format(output_format(output, format.value if format else None, ["csv", "json"], "csv"))
    if output:
        from autotune.outfiles import check_writable

        check_writable([output])  # before generating: a path that cannot be written fails at once
    g = _generate(space, device, precision, no_soft, soft_off, max_raw, max_survivors)
    rows = _matching(g, where_expr)
    frame = g.with_derived().iloc[rows]
    frame.insert(0, "id", g.ids(rows))
    if format is Format.csv:
        text = frame.to_csv(index=False)
    else:
        about = dict(space=g.space.name, device=g.device.name, precision=g.precision, soft=list(g.soft_applied))
        text = json.dumps({**about, "instances": json.loads(frame.to_json(orient="records"))}, indent=1) + "\n"
    if output:
        from autotune.outfiles import write_file

        write_file(output, text)
        stdout().print(f"wrote {len(frame):,} instances to {output}", style="dim", highlight=False)
    else:
        sys.stdout.write(text)


@app.command()
def diff(
    a: Annotated[str, typer.Argument(metavar="A", help="The old space (file or built-in name).")],
    b: Annotated[str, typer.Argument(metavar="B", help="The new space (file or built-in name).")],
    device: DeviceOpt = None,
    precision: PrecisionOpt = None,
    no_counts: Annotated[
        bool,
        typer.Option(
            "--no-counts", help="Compare the files only; do not generate both spaces to compare their counts."
        ),
    ] = False,
    max_raw: MaxRawOpt = None,
    max_survivors: MaxSurvivorsOpt = None,
) -> None:
    """What changed between two versions of a space: parameters, derived quantities, constraints, kernel binding,
    and the counts (raw, after the hard constraints, after all, each funnel step). Exit code 1 when they differ."""
    from autotune.explore.diff import add_counts, diff_spaces
    from autotune.space.generator import generate
    from autotune.space.spec import load_space

    sa, sb = load_space(a), load_space(b)
    d = diff_spaces(sa, sb)
    if not no_counts:
        dev = get_device(device)
        ga = generate(sa, dev, precision, max_raw=max_raw, max_survivors=max_survivors)
        gb = generate(sb, dev, precision, max_raw=max_raw, max_survivors=max_survivors)
        add_counts(d, ga.funnel, gb.funnel)
    stdout().print(f"[bold]{a}[/bold] -> [bold]{b}[/bold]")
    if d.lines:
        table = tabled("definition", ("section", "what", "change"))
        for row in d.lines:
            table.add_row(*row)
        stdout().print(table)
    else:
        stdout().print("same parameters, derived quantities, constraints and kernel binding")
    if d.counts:
        table = tabled(f"counts ({ga.device.name}, {ga.precision})", ("step", "A", "B", "change"), left=("step",))
        for step, x, y in d.counts:
            change = "" if x is None or y is None or x == y else f"{y - x:+,}"
            table.add_row(step, "" if x is None else f"{x:,}", "" if y is None else f"{y:,}", change)
        stdout().print(table)
    if not d.same:
        raise typer.Exit(1)
