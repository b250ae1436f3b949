"""Option declarations shared by the commands that read results and build tables (`analyze`, `emit`, `report`,
`compare`), with the callbacks that check their text before any database is read."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from autotune.cli.tol import tol_callback
from autotune.errors import UserError
from autotune.vocab import METHODS
from autotune.workflows.tables import check_fallback, parse_structure


def checked_structure(text: str) -> str:
    """--structure's callback: the text checked before any database is read."""
    parse_structure(text)
    return text


def read_bks(text: str) -> list[int | None]:
    """--bks: whole numbers (0: all), read by autotune.untrusted (1e999 was an OverflowError traceback)."""
    from autotune.untrusted import number

    bks = [int(number(x, name="--bks", integer=True, lo=0, example="10,0")) for x in text.split(",") if x.strip()]
    if not bks:
        raise UserError(f"--bks {text!r}: no BK value", hint="write e.g. --bks 10 or --bks 5,10,0 (0: all)")
    return [bk or None for bk in bks]


def checked_bks(text: str) -> str:
    """--bks' callback: checked before any database is read."""
    read_bks(text)
    return text


def checked_bk(value: int) -> int:
    """--bk's callback: a whole number >= 0 (0: all), checked before any database is read (-1 was a ValueError
    traceback after the analysis started)."""
    return _count(value, "--bk", "10 (0: all)")


def checked_pool_bk(value: int) -> int:
    """--pool-bk's callback (validate, active): as --bk's (-1 was taken as 0)."""
    return _count(value, "--pool-bk", "3 (0: the table's kernels only)")


def _count(value: int, name: str, example: str) -> int:
    from autotune.untrusted import number

    return int(number(value, name=name, integer=True, lo=0, example=example))


def checked_generic(text: str) -> str:
    """--generic's callback: NAME=VALUE,... with whole values, checked before any database is read (the names and
    values against the generic kernel's space once the kind is known: `dispatch.build.generic_kernel`)."""
    from autotune.untrusted import assignments

    assignments(text, name="--generic", example="BLOCK_X=32,BLOCK_Y=4")
    return text


def checked_method(method: str) -> str:
    """--method's callback: a kernel-set reduction by name (an unknown one was a ValueError traceback)."""
    if method not in METHODS:
        raise UserError(
            f"--method {method[:60]}: no such kernel-set reduction", hint=f"write --method {' or '.join(METHODS)}"
        )
    return method


Source = Annotated[str, typer.Argument(help="Results database (SQLite path or URL) or a measurements CSV.")]
EmitSource = Annotated[
    str,
    typer.Argument(
        help="Results database (SQLite path or URL), a measurements CSV, or a dispatch.json (.json.xz, .json.gz too)."
    ),
]
DeviceOpt = Annotated[Optional[str], typer.Option("--device", "-d", help="GPU name or UUID in the database.")]
SpaceOpt = Annotated[Optional[str], typer.Option("--space", help="Only this space's instances.")]
BkOpt = Annotated[int, typer.Option("--bk", callback=checked_bk, help="Best instances kept per test point (0: all).")]
TolOpt = Annotated[
    float, typer.Option("--tol", callback=tol_callback, help="Accepted loss against the best (0.05 = 5%).")
]
MethodOpt = Annotated[
    str, typer.Option("--method", callback=checked_method, help=f"Kernel-set reduction: {' or '.join(METHODS)}.")
]
SpreadOpt = Annotated[
    bool, typer.Option("--spread-ties", help="Count instances whose p20..p80 overlaps the best's as tied.")
]
ValidityOpt = Annotated[
    Optional[Path],
    typer.Option("--validity", help='JSON {instance_id or space: [{"m_multiple_of": 8}, {"max_k": 256}]}.'),
]
GenericOpt = Annotated[
    str,
    typer.Option(
        "--generic",
        callback=checked_generic,
        help="Parameters NAME=VALUE,... of the kind's generic kernel instance "
        "(its generic_space; default: the kind's generic_params).",
    ),
]
KindOpt = Annotated[
    Optional[str], typer.Option("--kind", help="The problem kind to analyze, when the database holds several.")
]
IncludeOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--include-dir",
        help="Name kernel sources relative to this directory (the -I a compiler gets); default: each "
        "source's file name, the header saying which -I to pass.",
    ),
]
StructureOpt = Annotated[
    str,
    typer.Option(
        "--structure",
        callback=checked_structure,
        help="How the table answers problems it was not tuned on: auto (the structure with the smallest measured "
        "leave-one-out loss: regions, nearest point or cost, library margin 0, 5, 10 or 20%, cost reach 0.5, 1 "
        "or 2; model, the selection model, margin 0, 5 or 10%), auto:MODE[,MODE] (auto among those modes, e.g. "
        "auto:model), or MODE[:MARGIN[:REACH[:NEIGHBOURS[:STEPS]]]] (e.g. nearest:0.1, cost:0.05:1, model:0.05; "
        "cost:0.05:1:2 prices each answer by its 2 nearest measurements; cost:0.05:1:4:m,k%2 prices the library "
        "only from tuned points on the problem's side of its steps, here M and K both even or not; steps joined "
        "by +, e.g. cols<=2048+rows<16000; docs/tables2.md).",
    ),
]
WorkloadOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--workload",
        help="Workload file (YAML or CSV, `autotune workload show`): each tuned point is weighted by the "
        "workload problems nearest to it; the mean losses the analyzer minimises are weighted.",
    ),
]
FallbackOpt = Annotated[
    Optional[str],
    typer.Option(
        "--fallback",
        callback=check_fallback,  # one of the fallbacks by name, before any database is read
        help="Answer where no kernel of the table is valid: library (the kind's baseline, index -2), naive (the "
        "kind's generic kernel, -1) or none (-4); default: the library, else the generic kernel, else none.",
    ),
]
