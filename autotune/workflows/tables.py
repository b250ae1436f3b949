"""Table building: from one kind's loaded measurements (workflows/results.py) to a dispatch table, Table I (kernels
against TOL) and the report folder. The analysis itself is analysis/ and dispatch/; here the options as a user gives
them (a structure as text, a workload file) become its arguments. `autotune analyze`, `emit`, `report` and active
tuning build their tables here."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from autotune.errors import UserError
from autotune.untrusted import fraction
from autotune.vocab import METHODS
from autotune.workflows.results import Loaded, kinds_in, load_results, source_url

if TYPE_CHECKING:  # imported where used: `autotune --help` does not load pandas (tests/test_startup.py)
    import pandas as pd

    from autotune.analysis.winners import Criteria, Layout, PerfMatrix
    from autotune.dispatch.build import Built
    from autotune.dispatch.table import GenericKernel, Structure

DEFAULT_TOL, DEFAULT_METHOD = 0.05, "exact"  # emit's and report's --tol and --method


@dataclass(frozen=True)
class TableOptions:
    """How a table is built from one kind's measurements (the options of `autotune emit` and `report`)."""

    bk: int | None = 10  # best instances kept per test point (None or 0: all)
    tol: float = DEFAULT_TOL  # accepted loss against the best
    method: str = DEFAULT_METHOD  # kernel-set reduction (vocab.METHODS)
    spread_ties: bool = False  # instances whose p20..p80 overlaps the best's count as tied
    validity: Path | None = None  # JSON of validity predicates per instance or space
    generic: str = ""  # NAME=VALUE,... of the kind's generic kernel instance
    fallback: str | None = None  # library, naive or none (None: the kind's default)
    structure: str = "auto"  # as --structure: auto, auto:MODE[,MODE] or MODE[:MARGIN[:REACH[:NEIGHBOURS]]]
    workload: Path | None = None  # a workload file weighting the tuned points
    include_dir: Path | None = None  # kernel sources named relative to it

    @property
    def criteria(self) -> Criteria:
        from autotune.analysis.winners import Criteria

        return Criteria(bk=self.bk or None, tol=self.tol, spread_ties=self.spread_ties)


def check_fallback(text: str | None) -> str | None:
    from autotune.dispatch.runtime import FALLBACKS

    if text is not None and text not in FALLBACKS:
        raise UserError(
            f"--fallback must be one of {', '.join(sorted(FALLBACKS))}, got {text[:60]!r}",
            hint=f"write --fallback {' or '.join(sorted(FALLBACKS))}, or leave it out for the kind's default",
        )
    return text


def structure_modes(text: str) -> tuple[str, ...] | None:
    """The modes `--structure auto:MODE[,MODE]` chooses among (None: every mode)."""
    if not text.startswith("auto:"):
        return None
    from autotune.dispatch.table import MODES

    modes = tuple(m for m in text[5:].split(",") if m)
    if not modes or set(modes) - set(MODES):
        raise UserError(f"--structure {text}: the modes after auto: must be among {', '.join(MODES)}")
    return modes


def parse_structure(text: str) -> Structure | None:
    """--structure: None for auto (chosen by held-out loss; auto:MODE[,MODE] among those modes);
    MODE[:MARGIN[:REACH[:NEIGHBOURS[:STEPS]]]] otherwise (dispatch.table.parse_structure)."""
    from autotune.dispatch.table import parse_structure as structure_of

    if text == "auto" or text.startswith("auto:"):
        structure_modes(text)
        return None
    margin = text.split(":")[1:2]
    if margin:
        fraction(margin[0], f"--structure {text}: MARGIN")  # a margin of 5 (meaning 5%) is told how to write it
    try:
        return structure_of(text)
    except ValueError:
        raise UserError(
            f"--structure must be auto, auto:MODE[,MODE] or MODE[:MARGIN[:REACH[:NEIGHBOURS[:STEPS]]]] with MODE "
            f"regions, nearest, cost or model (e.g. cost:0.05:1, cost:0.05:1:2, cost:0.05:1:4:m,k%2), MARGIN and "
            f"REACH >= 0, NEIGHBOURS 1..16 (cost only), STEPS the library's steps joined by + (SIZE[,SIZE]%N, "
            f"SIZE<=N, SIZE<N; cost only); got {text!r}"
        ) from None


def workload_weights(path: Path | None):
    """--workload: a function of a points frame giving each tuned point's weight (None without a workload)."""
    if path is None:
        return None
    from autotune.sweep.workloads.workload import point_weights_frame
    from autotune.sweep.workloads.workload_files import load_workload

    workload = load_workload(path)
    return lambda points: point_weights_frame(workload, points)


def generic_space(layout: Layout) -> GenericKernel | None:
    """The kind's generic kernel without name expressions (leave-one-out only needs to know it exists)."""
    from autotune.dispatch.table import GenericKernel

    kind = layout.kind_object
    return GenericKernel(space=kind.generic_space) if kind is not None and kind.generic_space else None


def build_table(loaded: Loaded, opts: TableOptions) -> Built:
    """The dispatch table of `loaded` built as `opts` say (dispatch.build.build with the options' checks: a
    fallback the kind cannot give is a UserError)."""
    from autotune.dispatch.build import Recipe, build, include_hint

    recipe = Recipe(
        opts.criteria,
        opts.method,
        opts.validity,
        opts.generic,
        check_fallback(opts.fallback),
        parse_structure(opts.structure),
        workload_weights(opts.workload),
        opts.include_dir,
        structure_modes(opts.structure),
    )
    try:
        built = build(loaded, recipe)
    except ValueError as exc:
        if "fallback" in str(exc):
            raise UserError(f"--fallback: {exc}") from None
        raise
    if opts.include_dir is None:  # which -I the header needs, relative to here where possible
        built.table.provenance["include_dirs"] = include_hint(_sources(loaded, built), None)
    else:
        built.table.provenance["include_dir"] = str(opts.include_dir)
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


def report_folder(
    source: str,
    out_dir: Path,
    opts: TableOptions,
    tols: list[float],
    *,
    device: str | None = None,
    space: str | None = None,
    kind: str | None = None,
    say: Callable[[str], None] = print,
) -> list[Path]:
    """`autotune report`: summary.csv, tol_table.csv (at `tols`), structures.csv, dispatch.json/.cuh/.py and the
    plots into `out_dir`, for every problem kind of `source` (in out_dir/KIND/ when it holds several kinds; `kind`
    picks one); all of them or none (a failure leaves `out_dir` as it was). Returns the paths written."""
    kinds = [kind] if kind is not None or source.endswith(".csv") else list(kinds_in(source))
    if not source.endswith(".csv"):
        from autotune.store.spaces import use_stored_spaces

        use_stored_spaces(source_url(source))  # the kernels as measured (warns when the work tree differs)
    from autotune.outfiles import staged_folder

    with staged_folder(out_dir) as stage:  # every file of every kind, or none (a failure leaves --out as it was)
        written: list[Path] = []
        for name in kinds or [None]:
            folder = name if len(kinds) > 1 and name else ""
            loaded = load_results(source, device, space, recorded_spaces=False, kind=name)  # applied above
            written += [
                out_dir / p.relative_to(stage) for p in _kind_report(loaded, stage / folder, opts, tols, name, say)
            ]
    return written


def _kind_report(
    loaded: Loaded, out_dir: Path, opts: TableOptions, tols: list[float], kind: str | None, say: Callable[[str], None]
) -> list[Path]:
    """One kind's report files into `out_dir` (made if missing); returns the paths written."""
    from autotune.dispatch.emit import emit_cpp, emit_python
    from autotune.dispatch.loo import describe, leave_one_out, tol_table
    from autotune.dispatch.report import write_report
    from autotune.dispatch.sharing import kernels_with_and_without_sharing
    from autotune.dispatch.table import Answers, Structure

    out_dir.mkdir(parents=True, exist_ok=True)
    criteria, method = opts.criteria, opts.method
    built = build_table(loaded, opts)
    table, w = built.table, built.winners
    fallback = table.data["fallback"]
    chosen = Structure(**table.provenance["structure"])
    answers = Answers(built.info, built.library_ms, fallback, built.generic)
    frame = tol_table(w.matrix, [criteria.bk], tols, METHODS, loo=chosen, spread_ties=opts.spread_ties, answers=answers)
    held = built.held  # computed while choosing the structure; else now
    if held is None:
        held = leave_one_out(w.matrix, criteria, method, answers=answers, structure=chosen)
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
    sharing = kernels_with_and_without_sharing(loaded.frame, criteria, tols, method, loaded.layout)
    if sharing is not None:
        sharing.to_csv(out_dir / "sharing.csv", index=False, float_format="%.6g")
        written.append(out_dir / "sharing.csv")
    if kind is not None:
        say(f"problem kind {kind}: sizes {', '.join(loaded.layout.sizes)}")
    say(
        f"structure: {chosen.mode}, library margin {100 * chosen.library_margin:g}%"
        + (f", reach {chosen.reach:g}" if chosen.mode == "cost" else "")
        + (" (smallest measured leave-one-out loss)" if built.structures is not None else "")
    )
    loo_text = "not measured" if math.isnan(held.worst_loss) else f"{100 * held.worst_loss:.2f}%"
    say(
        f"leave-one-out worst loss {loo_text} of the {describe(chosen)} table ({method}, BK {opts.bk or 'all'}, "
        f"TOL {100 * opts.tol:g}%; {held.measured_text} held-out answers measured; in sample "
        f"{100 * (table.provenance['worst_loss'] or 0):.2f}%)"
    )
    return written


@dataclass(frozen=True)
class TolTable:
    """Table I of one kind: the kernels against TOL for both methods, with worst, mean and leave-one-out loss."""

    frame: pd.DataFrame  # dispatch.loo.TOL_TABLE_COLUMNS, one row per method, BK and TOL
    matrix: PerfMatrix  # the measurements as a matrix of points by instances
    structure: Structure | None  # the structure of the leave-one-out tables (None: no leave-one-out)
    chosen: bool  # the structure was chosen as `report` and `emit` choose it (structure auto)


def kernels_against_tol(
    loaded: Loaded, opts: TableOptions, bks: list[int | None], tols: list[float], loo: bool = True
) -> TolTable:
    """`autotune analyze`: Table I at every BK of `bks` and TOL of `tols`. The leave-one-out loss is that of the
    tables of `opts.structure`; auto: the one `report` and `emit` choose with their defaults (exact, TOL 0.05, at
    the first of `bks`)."""
    from autotune.analysis.winners import Criteria, perf_matrix
    from autotune.dispatch.build import info_source
    from autotune.dispatch.loo import tol_table
    from autotune.dispatch.table import Answers, Structure, library_times

    matrix = perf_matrix(loaded.frame, loaded.layout)
    info = info_source(loaded, opts.validity)
    library_ms = library_times(matrix.points, loaded.baseline, matrix.layout)
    answers = Answers(info, library_ms, check_fallback(opts.fallback), generic_space(matrix.layout))
    chosen = parse_structure(opts.structure)
    auto = chosen is None
    if auto and loo:  # as emit/report choose it with their defaults
        from autotune.dispatch.loo import choose_structure
        from autotune.dispatch.table import STRUCTURES

        modes = structure_modes(opts.structure)
        chosen, _, _ = choose_structure(
            matrix,
            Criteria(bk=bks[0], tol=DEFAULT_TOL, spread_ties=opts.spread_ties),
            DEFAULT_METHOD,
            answers=answers,
            structures=tuple(s for s in STRUCTURES if modes is None or s.mode in modes),
        )
    frame = tol_table(
        matrix,
        bks,
        tols,
        METHODS,
        loo=(chosen or Structure()) if loo else None,
        spread_ties=opts.spread_ties,
        answers=answers,
    )
    return TolTable(frame, matrix, chosen if loo else None, auto)


def write_tol_files(result: TolTable, out_dir: Path, criteria: Criteria) -> list[Path]:
    """tol_table.csv and the winners per test point at `criteria` (winners.csv) into `out_dir` (made if missing)."""
    from autotune.analysis.winners import winners, winners_frame
    from autotune.dispatch.loo import TOL_TABLE_COLUMNS

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "tol_table.csv", out_dir / "winners.csv"]
    result.frame.to_csv(paths[0], index=False, float_format="%.6g", columns=list(TOL_TABLE_COLUMNS))
    winners_frame(winners(result.matrix, criteria)).to_csv(paths[1], index=False, float_format="%.6g")
    return paths
