"""`autotune analyze | emit | report`: from a results database to Table I, dispatch code and plots.

Side effects (database, files, printing) live here; the analysis is winners/setcover/dispatch/emit/report.
SOURCE is a results database (a path to an SQLite file or an SQLAlchemy URL) or a measurements CSV with the
columns of Store.measurements() (autotune.cli.measurements_csv; point_key optional); `emit` also takes a
dispatch.json.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console

from autotune.errors import UserError
from autotune.cli.measurements_csv import read_measurements_csv
from autotune.cli.tol import fraction, tol_callback, tols_callback
from autotune.vocab import METHODS

if TYPE_CHECKING:  # imported where used: `autotune --help` does not load pandas (tests/test_startup.py)
    import pandas as pd

    from autotune.analysis.winners import Criteria, Layout
    from autotune.dispatch.build import Built
    from autotune.dispatch.table import GenericKernel, Provenance, Structure

# the dispatch builder's names, re-exported for callers of autotune.cli.analyze (loaded on first use)
_BUILD_NAMES = (
    "Built",
    "KernelInfoSource",
    "build",
    "generic_kernel",
    "include_hint",
    "rename_sources",
    "info_source",
    "kernel_info",
)


def __getattr__(name: str) -> Any:
    if name in _BUILD_NAMES:
        from autotune.dispatch import build as building

        return getattr(building, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


out = Console()


class Format(str, Enum):
    cpp = "cpp"
    python = "python"
    json = "json"
    csv = "csv"


@dataclass(frozen=True)
class Loaded:
    """One problem kind's measurements on one GPU, what they need to become a table."""

    frame: pd.DataFrame  # Store.measurements() rows of this kind
    layout: Layout  # the kind's sizes and the kind object (its bytes, flops, baseline, generic kernel)
    baseline: pd.DataFrame | None  # the kind's verified library (baseline) times: point columns and median_ms
    provenance: Provenance  # device, sweeps, software, the sweeps' scalars
    bandwidth: float | None  # measured copy bandwidth, bytes/s

    @property
    def scalars(self) -> dict:
        return dict(self.provenance.scalars)


def source_url(source: str) -> str:
    from autotune.store.engine import database_url

    return database_url(source)


def kind_object(name: str, frame: pd.DataFrame, sizes: tuple[str, ...]):
    """The problem kind of a database's measurements: from a recorded space of that kind (store/spaces.py points
    the space loader at the recorded versions), else the built-in kind of that name, else None."""
    from autotune.space.spec import load_space

    for space_name in dict.fromkeys(frame["space"].dropna().astype(str)) if "space" in frame.columns else ():
        try:
            kind = load_space(space_name).kind
        except Exception:  # noqa: BLE001 - a space not on this machine: try the next one
            continue
        if kind.name == name:
            return kind
    from autotune.problems.registry import BUILT_IN

    builtin = BUILT_IN.get(name)
    return builtin if builtin is not None and tuple(builtin.size_names) == tuple(sizes) else None


def kind_layout(name: str, frame: pd.DataFrame, sizes: tuple[str, ...]) -> Layout:
    from autotune.analysis.winners import Layout

    kind = kind_object(name, frame, sizes)
    if kind is not None:
        return Layout.of(kind)
    return Layout(name, tuple(sizes), tuple(sizes), (), ())


def kinds_in(source: str) -> dict[str, tuple[str, ...]]:
    """The problem kinds measured in a database (or CSV) and their size names."""
    from autotune.analysis.winners import Layout

    if source.endswith(".csv"):
        frame = read_measurements_csv(source, nrows=50)
        layout = Layout.infer(frame)
        return {layout.kind or "": layout.sizes}
    from autotune.store.store import Store

    with Store.open(source_url(source), create=False, readonly=True) as store:
        return store.kind_sizes()


def one_kind(source: str, kind: str | None) -> str | None:
    """The kind a command works on: `kind`, else the only kind of the database (UserError when there are several)."""
    kinds = kinds_in(source)
    if kind is not None:
        if kind not in kinds:
            raise UserError(
                f"--kind {kind}: no such problem kind in {source}",
                hint=f"kinds measured there: {', '.join(kinds) or 'none'}",
            )
        return kind
    if len(kinds) > 1:
        raise UserError(f"{source} holds several problem kinds ({', '.join(kinds)}): pick one with --kind")
    return next(iter(kinds), None)


def one_model_cards(store: Any, device: str | None, name: str) -> list[str]:
    """The uuids of the cards whose measurements count: `device` when it is one card's uuid, else every card of
    the GPU model named `name`, first recorded first."""
    from autotune.dispatch.validate import model_cards

    cards = model_cards(store, name)
    return [device] if device is not None and device in cards else cards


def first_card_rows(frames: list[pd.DataFrame], keys: list[str]) -> pd.DataFrame:
    """The frames (one per card, first recorded card first) as one, each (keys...) once: the first card's row."""
    import pandas as pd

    frame = pd.concat(frames, ignore_index=True)
    return frame.drop_duplicates(subset=[k for k in keys if k in frame.columns], keep="first").reset_index(drop=True)


def load(
    source: str, device: str | None, space: str | None, recorded_spaces: bool = True, kind: str | None = None
) -> Loaded:
    """Measurements, library times and provenance of one problem kind (`kind`, default: the only one) from a
    database or a CSV file."""
    from autotune.analysis.winners import Layout
    from autotune.dispatch.table import Provenance

    if source.endswith(".csv"):
        frame = read_measurements_csv(source)
        if device is not None and "device" in frame.columns:
            frame = frame[frame["device"] == device]
        if space is not None and "space" in frame.columns:
            frame = frame[frame["space"] == space]
        name = device or (str(frame["device"].iloc[0]) if "device" in frame.columns and len(frame) else "unknown")
        _require_verified(frame, source)
        return Loaded(frame, Layout.infer(frame), None, Provenance(device=name), None)
    from autotune.store.query import run_query
    from autotune.store.store import Store

    url = source_url(source)
    if recorded_spaces:  # the kernels as measured, not as the work tree holds them now
        from autotune.store.spaces import use_stored_spaces

        use_stored_spaces(url)  # (dispatch.validity's caches follow: keyed by the file a name resolves to)
    kind = one_kind(source, kind)
    if kind is None:
        raise UserError(f"no measurements in {source}", hint="run `autotune sweep CONFIG` into it first")
    with Store.open(url, create=False, readonly=True) as store:
        sizes = store.kind_sizes().get(kind, ())
        frame = store.measurements(device=device, space=space)
        if "kind" in frame.columns:
            frame = frame[frame["kind"] == kind]
        devices = sorted(frame["device"].unique()) if len(frame) else []
        if len(devices) > 1:
            raise UserError(
                f"{source} holds measurements of several GPUs ({', '.join(devices)}): pick one with --device"
            )
        if not devices:
            raise UserError(f"no measurements in {source} for device={device!r} space={space!r} kind={kind!r}")
        # the cards of one GPU model count as one GPU (a sweep that went on on another card): where two cards
        # measured the same pair, the first recorded card's measurement counts (as `--replay` answers)
        cards = one_model_cards(store, device, devices[0])
        info = store.device_info(store.device_id(cards[0]))
        point = ["kind", "precision", "shape", *sizes]
        if len(cards) > 1:
            frame = first_card_rows([store.measurements(device=c, space=space) for c in cards], ["instance_id", *point])
            frame = frame[frame["kind"] == kind] if "kind" in frame.columns else frame
        baseline = first_card_rows([store.baselines(device=c) for c in cards], point)
    layout = kind_layout(kind, frame, tuple(sizes))
    frame = frame.drop(columns=[c for c in frame.columns if c in other_sizes(frame, layout)])
    baseline = baseline[(baseline["kind"] == kind) & (baseline["status"] == "ok")] if len(baseline) else None
    _require_verified(frame, source)
    sweeps = sorted(int(s) for s in frame["sweep_id"].unique())
    sw = run_query(url, f"SELECT * FROM sweeps WHERE id IN ({', '.join(map(str, sweeps))})")
    prov = Provenance(
        device=info.name,
        sweep_ids=tuple(str(s) for s in sweeps),
        device_info={
            "name": info.name,
            "uuid": info.uuid,
            "cc": info.cc,
            "sm_count": info.sm_count,
            "sm_clock_mhz": info.sm_clock_mhz,
            "mem_clock_mhz": info.mem_clock_mhz,
            "copy_bandwidth": info.copy_bandwidth,
        },
        software={
            "driver": info.driver,
            "cuda_runtime": info.cuda_runtime,
            "nvrtc": info.nvrtc,
            "cupy": info.cupy,
            "autotune": _version(),
        },
        scalars=_scalars(sw, layout),
    )
    bandwidth = float(sw["copy_bandwidth"].median()) if len(sw) else info.copy_bandwidth
    return Loaded(frame, layout, baseline, prov, bandwidth)


def other_sizes(frame: pd.DataFrame, layout: Layout) -> list[str]:
    """Size columns of other kinds in a frame of one kind (all empty there): dropped, so that the kind's sizes
    stand between `shape` and `status`."""
    cols = list(frame.columns)
    if "shape" not in cols or "status" not in cols:
        return []
    between = cols[cols.index("shape") + 1 : cols.index("status")]
    return [c for c in between if c not in layout.sizes and c != "sizes" and frame[c].isna().all()]


def _scalars(sweeps: pd.DataFrame, layout: Layout) -> dict[str, float]:
    """The kind's scalars the sweeps ran with (a `scalars` JSON column, or one column per scalar); where sweeps
    differ, a scalar that is nonzero in any of them counts (bytes moved read it)."""
    import json

    kind = layout.kind_object
    names = list(kind.scalar_defaults) if kind is not None else []
    out: dict[str, float] = {}
    for row in sweeps.to_dict("records"):
        given = (
            json.loads(row["scalars"])
            if isinstance(row.get("scalars"), str)
            else {n: row[n] for n in names if n in row and row[n] is not None}
        )
        for n, v in given.items():
            if n in names and (n not in out or float(v) != 0.0):
                out[n] = float(v)
    return out


def _require_verified(frame: pd.DataFrame, source: str) -> None:
    """A UserError (exit 2) when no measurement has a verified time: there is nothing to analyze."""
    if "status" not in frame.columns or (frame["status"] == "ok").any():
        return
    kinds = ", ".join(f"{k}: {v:,}" for k, v in frame["status"].value_counts().sort_index().items()) or "none"
    raise UserError(
        f"nothing verified to analyze in {source}: {len(frame):,} measurements, none with status ok ({kinds})",
        hint="look at the failures first (`autotune query` with docs/queries.md's 'Failures by "
        "kind' recipe), fix the kernels or the config, and sweep again",
    )


def _version() -> str:
    """The version every dispatch.json records: the package's one version (autotune.__version__)."""
    from autotune import __version__

    return __version__


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"expected comma-separated numbers, got {text!r}") from None


def _fallback(text: str | None) -> str | None:
    from autotune.dispatch.runtime import FALLBACKS

    if text is not None and text not in FALLBACKS:
        raise UserError(f"--fallback must be one of {', '.join(sorted(FALLBACKS))}, got {text!r}")
    return text


def _modes(text: str) -> tuple[str, ...] | None:
    """The modes `--structure auto:MODE[,MODE]` chooses among (None: every mode)."""
    if not text.startswith("auto:"):
        return None
    from autotune.dispatch.table import MODES

    modes = tuple(m for m in text[5:].split(",") if m)
    if not modes or set(modes) - set(MODES):
        raise UserError(f"--structure {text}: the modes after auto: must be among {', '.join(MODES)}")
    return modes


def _structure(text: str) -> Structure | None:
    """--structure: None for auto (chosen by held-out loss; auto:MODE[,MODE] among those modes);
    MODE[:MARGIN[:REACH[:NEIGHBOURS]]] otherwise (dispatch.table.parse_structure)."""
    from autotune.dispatch.table import parse_structure

    if text == "auto" or text.startswith("auto:"):
        _modes(text)
        return None
    margin = text.split(":")[1:2]
    if margin:
        fraction(margin[0], f"--structure {text}: MARGIN")  # a margin of 5 (meaning 5%) is told how to write it
    try:
        return parse_structure(text)
    except ValueError:
        pass
    raise UserError(
        f"--structure must be auto, auto:MODE[,MODE] or MODE[:MARGIN[:REACH[:NEIGHBOURS]]] with MODE regions, "
        f"nearest, cost or model "
        f"(e.g. cost:0.05:1, cost:0.05:1:2), MARGIN and REACH >= 0, NEIGHBOURS 1..16 (cost only); got {text!r}"
    )


def _checked_structure(text: str) -> str:
    """--structure's callback: the text checked before any database is read."""
    _structure(text)
    return text


def _weights(path: Path | None):
    """--workload: a function of a points frame giving each tuned point's weight (None without a workload)."""
    if path is None:
        return None
    from autotune.sweep.workload import point_weights_frame
    from autotune.sweep.workload_files import load_workload

    workload = load_workload(path)
    return lambda points: point_weights_frame(workload, points)


def _generic_space(layout: Layout) -> GenericKernel | None:
    """The kind's generic kernel without name expressions (leave-one-out only needs to know it exists)."""
    from autotune.dispatch.table import GenericKernel

    kind = layout.kind_object
    return GenericKernel(space=kind.generic_space) if kind is not None and kind.generic_space else None


def _bks(text: str) -> list[int | None]:
    """--bks: whole numbers (0: all), read by autotune.untrusted (1e999 was an OverflowError traceback)."""
    from autotune.untrusted import number

    bks = [int(number(x, name="--bks", integer=True, lo=0, example="10,0")) for x in text.split(",") if x.strip()]
    if not bks:
        raise UserError(f"--bks {text!r}: no BK value", hint="write e.g. --bks 10 or --bks 5,10,0 (0: all)")
    return [bk or None for bk in bks]


def _checked_bks(text: str) -> str:
    """--bks' callback: checked before any database is read."""
    _bks(text)
    return text


def _checked_method(method: str) -> str:
    """--method's callback: a kernel-set reduction by name (an unknown one was a ValueError traceback)."""
    if method not in METHODS:
        raise UserError(
            f"--method {method[:60]}: no such kernel-set reduction", hint=f"write --method {' or '.join(METHODS)}"
        )
    return method


DEFAULT_TOL, DEFAULT_METHOD = 0.05, "exact"  # emit's and report's --tol and --method
Source = Annotated[str, typer.Argument(help="Results database (SQLite path or URL) or a measurements CSV.")]
EmitSource = Annotated[
    str, typer.Argument(help="Results database (SQLite path or URL), a measurements CSV, or a dispatch.json.")
]
DeviceOpt = Annotated[Optional[str], typer.Option("--device", "-d", help="GPU name or UUID in the database.")]
SpaceOpt = Annotated[Optional[str], typer.Option("--space", help="Only this space's instances.")]
BkOpt = Annotated[int, typer.Option("--bk", help="Best instances kept per test point (0: all).")]
TolOpt = Annotated[
    float, typer.Option("--tol", callback=tol_callback, help="Accepted loss against the best (0.05 = 5%).")
]
MethodOpt = Annotated[
    str, typer.Option("--method", callback=_checked_method, help=f"Kernel-set reduction: {' or '.join(METHODS)}.")
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
        callback=_checked_structure,
        help="How the table answers problems it was not tuned on: auto (the structure with the smallest "
        "measured leave-one-out loss: regions, nearest point or cost, library margin 0, 5, 10 or "
        "20%, cost reach 0.5, 1 or 2; model, the selection model, margin 0, 5 or 10%), "
        "auto:MODE[,MODE] (auto among those modes, e.g. auto:model), or MODE[:MARGIN[:REACH[:NEIGHBOURS]]] "
        "(e.g. nearest:0.1, cost:0.05:1, model:0.05; cost:0.05:1:2 prices each answer by its 2 nearest "
        "measurements).",
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
        help="Answer where no kernel of the table is valid: library (the kind's baseline, index -2), naive "
        "(the kind's generic kernel, -1) or none (-4); default: the library, else the generic kernel, "
        "else none.",
    ),
]


def analyze(
    source: Source,
    device: DeviceOpt = None,
    space: SpaceOpt = None,
    bks: Annotated[
        str, typer.Option("--bks", callback=_checked_bks, help="BK values, comma-separated (0: all).")
    ] = "10",
    tols: Annotated[
        str, typer.Option("--tols", callback=tols_callback, help="TOL values, comma-separated.")
    ] = "0,0.05,0.1,0.15",
    spread_ties: SpreadOpt = False,
    loo: Annotated[bool, typer.Option("--loo/--no-loo", help="Leave-one-out loss per row.")] = True,
    out_dir: Annotated[
        Optional[Path], typer.Option("--out", "-o", help="Write tol_table.csv and winners.csv here.")
    ] = None,
    validity: ValidityOpt = None,
    fallback: FallbackOpt = None,
    kind: KindOpt = None,
    structure: StructureOpt = "auto",
) -> None:
    """The number of kernels against TOL for both methods, with worst, mean and leave-one-out loss (Table I).

    The leave-one-out loss is that of the tables of one structure, named in the `LOO structure` column: --structure
    as `emit` and `report` read it; auto (the default), the one they choose with their defaults (exact, TOL 0.05,
    here at the first of --bks), so that the row of those settings is the figure `report` prints. With --out, also
    writes tol_table.csv and the BK winners per test point (winners.csv, at the first BK and TOL). A database with
    no verified measurement exits with code 2."""
    from rich.table import Table

    from autotune.analysis.winners import Criteria, perf_matrix, winners, winners_frame
    from autotune.dispatch.build import info_source
    from autotune.dispatch.loo import TOL_TABLE_COLUMNS, describe, tol_table
    from autotune.dispatch.table import Structure, library_times

    loaded = load(source, device, space, kind=kind)
    matrix = perf_matrix(loaded.frame, loaded.layout)
    info = info_source(loaded, validity)
    library_ms = library_times(matrix.points, loaded.baseline, matrix.layout)
    generic = _generic_space(matrix.layout)
    chosen = _structure(structure)
    auto = chosen is None
    if auto and loo:  # as emit/report choose it with their defaults
        from autotune.dispatch.loo import choose_structure
        from autotune.dispatch.table import STRUCTURES

        modes = _modes(structure)
        chosen, _, _ = choose_structure(
            matrix,
            Criteria(bk=_bks(bks)[0], tol=DEFAULT_TOL, spread_ties=spread_ties),
            DEFAULT_METHOD,
            kernel_info=info,
            library_ms=library_ms,
            fallback=_fallback(fallback),
            generic=generic,
            structures=tuple(s for s in STRUCTURES if modes is None or s.mode in modes),
        )
    frame = tol_table(
        matrix,
        _bks(bks),
        _floats(tols),
        METHODS,
        loo=loo,
        spread_ties=spread_ties,
        kernel_info=info,
        library_ms=library_ms,
        fallback=_fallback(fallback),
        generic=generic,
        structure=chosen or Structure(),
    )
    table = Table(
        title=f"kernels against TOL on {loaded.provenance.device}: {len(matrix.points)} test points, "
        f"{len(matrix.instances)} instances"
    )
    for col in ("method", "BK", "TOL", "kernels", "worst loss", "mean loss", "LOO worst", "optimal"):
        table.add_column(col, justify="left" if col == "method" else "right")
    pct = lambda x: "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.2f}%"  # noqa: E731
    for r in frame.itertuples():
        table.add_row(
            r.method,
            str(r.bk or "all"),
            pct(r.tol),
            str(r.kernels),
            pct(r.worst_loss),
            pct(r.mean_loss),
            (pct(r.loo_worst_loss) or "-") + (f" ({r.loo_measured} measured)" if r.loo_failures else ""),
            "proven" if r.optimal else "-",
        )
    out.print(table)
    if loo and chosen is not None:
        out.print(
            f"LOO worst: the leave-one-out worst loss of the {describe(chosen)} tables"
            + (f" (chosen as report/emit choose it: {DEFAULT_METHOD}, TOL {100 * DEFAULT_TOL:g}%)" if auto else "")
        )
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        frame.to_csv(out_dir / "tol_table.csv", index=False, float_format="%.6g", columns=list(TOL_TABLE_COLUMNS))
        w = winners(matrix, Criteria(bk=_bks(bks)[0], tol=_floats(tols)[0], spread_ties=spread_ties))
        winners_frame(w).to_csv(out_dir / "winners.csv", index=False, float_format="%.6g")
        out.print(f"wrote {out_dir / 'tol_table.csv'} and {out_dir / 'winners.csv'}")


def emit(
    source: EmitSource,
    fmt: Annotated[
        Optional[Format],
        typer.Option("--format", "-f", help="Output kind (default: from the --out extension, else json)."),
    ] = None,
    output: Annotated[
        Optional[Path],
        typer.Option("--out", "-o", help="Output file (default: stdout); .json, .cuh/.h/.hpp, .py or .csv."),
    ] = None,
    device: DeviceOpt = None,
    space: SpaceOpt = None,
    bk: BkOpt = 10,
    tol: TolOpt = DEFAULT_TOL,
    method: MethodOpt = DEFAULT_METHOD,
    spread_ties: SpreadOpt = False,
    validity: ValidityOpt = None,
    generic: GenericOpt = "",
    fallback: FallbackOpt = None,
    structure: StructureOpt = "auto",
    workload: WorkloadOpt = None,
    kind: KindOpt = None,
    include_dir: IncludeOpt = None,
) -> None:
    """Write the dispatch table as JSON (canonical), a C++ header, a Python module or CSV (the format of --out's
    extension unless --format says otherwise)."""
    from autotune.analysis.winners import Criteria
    from autotune.dispatch.build import rename_sources
    from autotune.dispatch.emit import emit_cpp, emit_csv, emit_python
    from autotune.dispatch.table import load_table

    from autotune.cli.outformat import output_format

    fmt = Format(output_format(output, fmt.value if fmt else None, [f.value for f in Format], Format.json.value))
    if source.endswith(".json"):
        table = load_table(source)
        rename_sources(table.data, include_dir)  # no absolute path of the machine that wrote it
    else:
        criteria = Criteria(bk=bk if bk > 0 else None, tol=tol, spread_ties=spread_ties)
        table = _build(
            load(source, device, space, kind=kind),
            criteria,
            method,
            validity,
            generic,
            fallback,
            structure,
            workload,
            include_dir,
        ).table
    text = {
        Format.json: lambda: table.to_json() + "\n",
        Format.cpp: lambda: emit_cpp(table),
        Format.python: lambda: emit_python(table),
        Format.csv: lambda: emit_csv(table),
    }[fmt]()
    if output is None:
        typer.echo(text, nl=False)
    else:
        from autotune.outfiles import write_file

        write_file(output, text, make_folders=True)
        p = table.provenance
        out.print(
            f"wrote {output}: {p['kernels']} kernels, {p['points']} points, worst loss "
            f"{100 * (p['worst_loss'] or 0):.2f}% (TOL {100 * p['tol']:g}%, {p['method']})"
            + (f"; the library answers {p['library_points']} points" if p.get("library_points") else "")
        )


def _build(
    loaded: Loaded,
    criteria: Criteria,
    method: str,
    validity: Path | None,
    generic: str,
    fallback: str | None,
    structure: str,
    workload: Path | None,
    include_dir: Path | None,
) -> Built:
    """build() with the command line's checks: a fallback the kind cannot give is a UserError."""
    from autotune.dispatch.build import build, include_hint

    try:
        built = build(
            loaded,
            criteria,
            method,
            validity,
            generic,
            _fallback(fallback),
            _structure(structure),
            _weights(workload),
            include_dir,
            _modes(structure),
        )
    except ValueError as exc:
        if "fallback" in str(exc):
            raise UserError(f"--fallback: {exc}") from None
        raise
    if include_dir is None:  # which -I the header needs, relative to here where possible
        built.table.provenance["include_dirs"] = include_hint(_sources(loaded, built), None)
    else:
        built.table.provenance["include_dir"] = str(include_dir)
    return built


def _sources(loaded: Loaded, built: Built) -> list[str]:
    """The kernel source paths as the space files (recorded versions) name them."""
    from autotune.space.spec import load_space

    out = []
    for space_name in dict.fromkeys(
        [k["space"] for k in built.table.kernels] + [(built.table.data.get("generic") or {}).get("space")]
    ):
        try:
            kernel = load_space(space_name).kernel
        except Exception:  # noqa: BLE001 - no space file: nothing to include
            continue
        if kernel is not None:
            out.append(str(kernel.source_path))
    return out


def report(
    source: Source,
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Directory for the files.")] = Path("report"),
    device: DeviceOpt = None,
    space: SpaceOpt = None,
    bk: BkOpt = 10,
    tol: TolOpt = DEFAULT_TOL,
    method: MethodOpt = DEFAULT_METHOD,
    spread_ties: SpreadOpt = False,
    validity: ValidityOpt = None,
    generic: GenericOpt = "",
    tols: Annotated[
        str, typer.Option("--tols", callback=tols_callback, help="TOL values for tol_table.csv.")
    ] = "0,0.05,0.1,0.15",
    fallback: FallbackOpt = None,
    structure: StructureOpt = "auto",
    workload: WorkloadOpt = None,
    kind: KindOpt = None,
    include_dir: IncludeOpt = None,
) -> None:
    """Write summary.csv, tol_table.csv, structures.csv, dispatch.json/.cuh/.py and the PNG plots into --out, for
    every problem kind of the database (in --out/KIND/ when it holds several kinds; --kind picks one)."""
    kinds = [kind] if kind is not None or source.endswith(".csv") else list(kinds_in(source))
    if not source.endswith(".csv"):
        from autotune.store.spaces import use_stored_spaces

        use_stored_spaces(source_url(source))  # the kernels as measured (warns when the work tree differs)
    from autotune.outfiles import staged_folder

    with staged_folder(out_dir) as stage:  # every file of every kind, or none (a failure leaves --out as it was)
        written: list[Path] = []
        for name in kinds or [None]:
            folder = name if len(kinds) > 1 and name else ""
            written += [
                out_dir / p.relative_to(stage)
                for p in _report_kind(
                    source,
                    stage / folder,
                    name,
                    device,
                    space,
                    bk,
                    tol,
                    method,
                    spread_ties,
                    validity,
                    generic,
                    tols,
                    fallback,
                    structure,
                    workload,
                    include_dir,
                )
            ]
    for path in written:
        out.print(f"wrote {path}")


def _report_kind(
    source: str,
    out_dir: Path,
    kind: str | None,
    device: str | None,
    space: str | None,
    bk: int,
    tol: float,
    method: str,
    spread_ties: bool,
    validity: Path | None,
    generic: str,
    tols: str,
    fallback: str | None,
    structure: str,
    workload: Path | None,
    include_dir: Path | None,
) -> list[Path]:
    """One kind's report files into `out_dir` (made if missing); returns the paths written."""
    from autotune.analysis.winners import Criteria
    from autotune.dispatch.emit import emit_cpp, emit_python
    from autotune.dispatch.loo import describe, leave_one_out, tol_table
    from autotune.dispatch.sharing import kernels_with_and_without_sharing
    from autotune.dispatch.table import Structure

    from autotune.dispatch.report import write_report

    out_dir.mkdir(parents=True, exist_ok=True)
    loaded = load(source, device, space, recorded_spaces=False, kind=kind)  # applied by report
    criteria = Criteria(bk=bk if bk > 0 else None, tol=tol, spread_ties=spread_ties)
    built = _build(loaded, criteria, method, validity, generic, fallback, structure, workload, include_dir)
    table, w = built.table, built.winners
    fallback = table.data["fallback"]
    chosen = Structure(**table.provenance["structure"])
    frame = tol_table(
        w.matrix,
        [criteria.bk],
        _floats(tols),
        METHODS,
        spread_ties=spread_ties,
        kernel_info=built.info,
        library_ms=built.library_ms,
        fallback=fallback,
        generic=built.generic,
        structure=chosen,
    )
    held = built.held  # computed while choosing the structure; else now
    if held is None:
        held = leave_one_out(
            w.matrix,
            criteria,
            method,
            kernel_info=built.info,
            library_ms=built.library_ms,
            fallback=fallback,
            generic=built.generic,
            structure=chosen,
        )
    written = write_report(
        out_dir, table, w.matrix, frame, loaded.baseline, loaded.bandwidth, loaded.scalars, held.frame
    )
    written.append(table.save(out_dir / "dispatch.json"))
    (out_dir / "dispatch.cuh").write_text(emit_cpp(table))
    (out_dir / "dispatch.py").write_text(emit_python(table))
    written += [out_dir / "dispatch.cuh", out_dir / "dispatch.py"]
    if built.structures is not None:
        built.structures.to_csv(out_dir / "structures.csv", index=False, float_format="%.6g")
        written.append(out_dir / "structures.csv")
    sharing = kernels_with_and_without_sharing(loaded.frame, criteria, _floats(tols), method, loaded.layout)
    if sharing is not None:
        sharing.to_csv(out_dir / "sharing.csv", index=False, float_format="%.6g")
        written.append(out_dir / "sharing.csv")
    if kind is not None:
        out.print(f"problem kind {kind}: sizes {', '.join(loaded.layout.sizes)}")
    out.print(
        f"structure: {chosen.mode}, library margin {100 * chosen.library_margin:g}%"
        + (f", reach {chosen.reach:g}" if chosen.mode == "cost" else "")
        + (" (smallest measured leave-one-out loss)" if built.structures is not None else "")
    )
    loo_text = "not measured" if math.isnan(held.worst_loss) else f"{100 * held.worst_loss:.2f}%"
    out.print(
        f"leave-one-out worst loss {loo_text} of the {describe(chosen)} table ({method}, BK {bk or 'all'}, "
        f"TOL {100 * tol:g}%; {held.measured_text} held-out answers measured; in sample "
        f"{100 * (table.provenance['worst_loss'] or 0):.2f}%)"
    )
    return written


def register(app: typer.Typer) -> None:
    """Add analyze, emit, report and compare to the main app (called by autotune.cli.main)."""
    app.command()(analyze)
    app.command()(emit)
    app.command()(report)
    from autotune.cli.compare import compare

    app.command()(compare)
