"""Building the dispatch table of one problem kind from loaded measurements: kernel records (name expressions or
defines, validity predicates, sources relative to an include directory) for any instance, the kind's generic
kernel, the kernel set, the structure chosen by held-out loss, the table. No I/O but reading space files
(workflows/results.py loads the measurements)."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from autotune.analysis.setcover import select
from autotune.analysis.winners import Criteria, Layout, perf_matrix, winners
from autotune.dispatch.model import tiles_of
from autotune.dispatch.loo import LooResult, choose_structure
from autotune.errors import UserError
from autotune.dispatch.table import (
    STRUCTURES,
    Answers,
    DispatchTable,
    GenericKernel,
    KernelInfo,
    Structure,
    build_table,
    kind_library,
    library_times,
)

DEFAULT = Structure()  # regions, no library margin


class KernelInfoSource(Mapping):
    """Kernel records for (instance_id, precision, shape), made on first use and cached: name expressions
    from the space files and validity predicates derived from the space's `valid` (else `serves`) / `problems.where`
    (dispatch/validity.py) plus the user's --validity entries. Leave-one-out asks for many kernels."""

    def __init__(
        self,
        frame: pd.DataFrame,
        validity: dict[str, list[dict[str, int]]] | None = None,
        derive: bool = True,
        layout: Layout | None = None,
        include_dir: Path | None = None,
    ) -> None:
        self.frame = frame
        self.layout = layout or Layout.infer(frame)
        self.validity = validity or {}
        self.include_dir = include_dir
        self.derive = derive and "space" in frame.columns
        self.rows = frame.drop_duplicates("instance_id").set_index("instance_id")
        timed = frame[frame["status"].astype(str).isin(("ok", "skipped"))] if "status" in frame.columns else frame
        sizes = list(self.layout.sizes)
        self.measured = {
            key: g[sizes].drop_duplicates().to_numpy(dtype=np.int64)[:64]
            for key, g in timed.groupby(["instance_id", "precision", "shape"])
        }
        self.cache: dict[tuple[str, str, str], KernelInfo] = {}

    def __getitem__(self, key: tuple[str, str, str]) -> KernelInfo:
        if key not in self.cache:
            self.cache[key] = self._make(*key)
        return self.cache[key]

    def __iter__(self):
        return iter(self.cache)

    def __len__(self) -> int:
        return len(self.cache)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, tuple) and len(key) == 3 and key[0] in self.rows.index

    def _make(self, iid: str, precision: str, shape: str) -> KernelInfo:
        from autotune.dispatch.validity import instance_validity, recorded_params
        from autotune.space.spec import RefusedSpace, load_space

        rows = self.rows
        row = rows.loc[iid] if iid in rows.index else None
        space_name = str(row["space"]) if row is not None and "space" in rows.columns else ""
        user = tuple(
            (k, int(v)) for pred in self.validity.get(iid, self.validity.get(space_name, [])) for k, v in pred.items()
        )
        name = str(row["instance"]) if row is not None and "instance" in rows.columns else iid
        try:
            space = load_space(space_name)
        except Exception as exc:  # noqa: BLE001 - a table without a name expression is still a table
            if (space_name or self.derive) and not isinstance(exc, RefusedSpace):  # (that one said why already)
                warnings.warn(
                    f"no space file for {iid} ({space_name or 'unknown space'}): {exc}; "
                    "the table uses it only at its tuned points",
                    stacklevel=2,
                )
            return KernelInfo(space=space_name, name=name, valid=user, tuned_only=self.derive)
        params = recorded_params(space, row) if row is not None else {}
        template = None
        try:
            template = space.template_name(params, precision, shape)
        except Exception as exc:  # noqa: BLE001 - a table without a name expression is still a table
            warnings.warn(f"no name expression for {iid} ({space_name}): {exc}", stacklevel=2)
        hints = self.measured.get((iid, precision, shape), ())
        defines: tuple[tuple[str, Any], ...] = ()
        if len(hints):
            try:  # defines are the same at every point of an instance unless they read the sizes
                point = space.kind.point(
                    precision, shape, dict(zip(self.layout.sizes, (int(x) for x in hints[0]), strict=True))
                )
                defines = tuple(space.defines(params, point))
            except Exception:  # noqa: BLE001 - a table without defines is still a table
                defines = ()
        derived: tuple[tuple[str, int], ...] | None = ()
        if self.derive:
            try:
                derived = instance_validity(space_name, params, precision, [tuple(int(x) for x in h) for h in hints])
            except Exception:  # noqa: BLE001 - e.g. an expression reads a parameter this instance lacks
                derived = None
            if derived is None:
                warnings.warn(
                    f"{iid} ({space_name}): no one-key predicates reproduce its valid/where expression; "
                    "the table uses it only at its tuned points",
                    stacklevel=2,
                )
        cpp = getattr(space.kind, "cpp_parameters", None)
        kernel = kernel_of(space)
        return KernelInfo(
            space=space_name,
            name=name,
            template=template,
            parameters=cpp(kernel.convention, precision) if cpp else None,
            source=source_name(kernel.source_path, self.include_dir),
            convention=kernel.convention,
            valid=tuple(dict.fromkeys(user + (derived or ()))),
            tuned_only=derived is None,
            defines=defines,
            tiles=tuple(zip(self.layout.table_sizes, tiles_of(params, self.layout.table_sizes), strict=True)),
        )


def source_name(source: Any, include_dir: Path | None) -> str | None:
    """A kernel source as a table names it: relative to `include_dir` (posix separators), or its file name when
    no include directory is given (compile with -I its directory; `include_hint`) or it lies outside it."""
    if not source:
        return None
    path = Path(str(source))
    if include_dir is not None:
        try:
            rel = os.path.relpath(path.resolve(), Path(include_dir).resolve())
        except ValueError:  # another drive
            return path.name
        return path.name if rel.startswith("..") else Path(rel).as_posix()
    return path.name


def rename_sources(data: dict, include_dir: Path | None) -> None:
    """Rename a loaded table's kernel sources (and its generic kernel's) the way `source_name` does: relative to
    `include_dir` when one is given, and never an absolute path of the machine that wrote the table (a recorded
    absolute path becomes its file name). Changes `data` in place."""
    records = [*data.get("kernels", []), *([data["generic"]] if isinstance(data.get("generic"), dict) else [])]
    for rec in records:
        src = rec.get("source")
        if src and (include_dir is not None or Path(str(src)).is_absolute()):
            rec["source"] = source_name(src, include_dir)
    if include_dir is not None:
        data.setdefault("provenance", {})["include_dir"] = Path(include_dir).as_posix()


def include_hint(sources: Any, include_dir: Path | None) -> list[str]:
    """The -I directories a compiler needs for the kernels' sources (relative to the current directory where
    possible: never the absolute path of the machine that made the table when it can be avoided)."""
    if include_dir is not None:
        return [str(include_dir)]
    out = []
    for source in sources:
        if not source:
            continue
        folder = Path(str(source)).resolve().parent
        try:
            rel = os.path.relpath(folder, Path.cwd())
        except ValueError:
            rel = str(folder)
        out.append(Path(rel).as_posix() if not rel.startswith("../../..") else folder.name)
    return list(dict.fromkeys(out))


def generic_kernel(kind: Any, params_text: str, include_dir: Path | None = None) -> GenericKernel | None:
    """The kind's generic last-resort kernel (`generic_space`) with its name expressions for every precision and
    shape it accepts; None when the kind has none."""
    if kind is None or not getattr(kind, "generic_space", None):
        if params_text.strip():
            name = getattr(kind, "name", "of these measurements")
            warnings.warn(f"--generic {params_text[:60]}: the kind {name} has no generic kernel; ignored", stacklevel=2)
        return None
    from autotune.space.spec import load_space

    try:
        space = load_space(kind.generic_space)
    except Exception as exc:  # noqa: BLE001 - the table still names the generic kernel's space
        return _unnamed_generic(kind, exc)
    # --generic is checked against the space (a mistake is the user's error, not a warning); else the kind's own
    given = generic_params(space, params_text) if params_text.strip() else None
    try:
        text = getattr(kind, "generic_params", "")
        params = given or {k.strip(): int(v) for k, v in (kv.split("=") for kv in text.split(",") if kv.strip())}
        kernel = kernel_of(space)
        problems = kernel.problems
        cpp = getattr(kind, "cpp_parameters", None)
        keys = [(p, s) for p in problems.precisions for s in problems.shapes]
        return GenericKernel(
            space=space.name,
            source=source_name(kernel.source_path, include_dir),
            convention=kernel.convention,
            templates=tuple((f"{p}:{s}", space.template_name(params, p, s)) for p, s in keys),
            parameters=tuple(
                (f"{p}:{s}", cpp(kernel.convention, p))
                for p, s in keys
                if cpp is not None and cpp(kernel.convention, p)
            ),
        )
    except Exception as exc:  # noqa: BLE001 - the table still names the generic kernel's space
        return _unnamed_generic(kind, exc)


def _unnamed_generic(kind: Any, exc: Exception) -> GenericKernel:
    """The generic kernel by its space only, with a warning saying why its names could not be written."""
    warnings.warn(f"generic kernel {kind.generic_space} without name expressions: {exc}", stacklevel=3)
    return GenericKernel(space=kind.generic_space)


def generic_params(space: Any, text: str) -> dict[str, int]:
    """--generic's NAME=VALUE,... as an instance of the generic kernel's `space`: each of its parameters once, each
    value one of the parameter's. Raises UserError."""
    from autotune.untrusted import assignments

    params = assignments(text, name="--generic", example="BLOCK_X=32,BLOCK_Y=4")

    def values(p: Any) -> str:
        return ", ".join(map(str, p.values[:8])) + (", ..." if len(p.values) > 8 else "")

    hint = f"give each parameter of {space.name} once, from its values: " + "; ".join(
        f"{p.name} {values(p)}" for p in space.parameters
    )
    problems = [f"{k} is not a parameter of {space.name}" for k in params if k not in space.param_names]
    problems += [f"no value for {k}" for k in space.param_names if k not in params]
    if problems:
        raise UserError(f"--generic {text[:60]}: {'; '.join(problems)}", hint=hint)
    for p in space.parameters:
        if params[p.name] not in p.values:
            raise UserError(f"--generic {text[:60]}: {p.name} = {params[p.name]} is not one of its values", hint=hint)
    return {p.name: params[p.name] for p in space.parameters}


@dataclass(frozen=True)
class Built:
    table: DispatchTable
    winners: Any  # analysis.winners.Winners
    info: Mapping  # (instance_id, precision, shape) -> KernelInfo, for any instance (leave-one-out)
    library_ms: np.ndarray  # the library's time per point row of winners.matrix (NaN: not measured)
    structures: pd.DataFrame | None = None  # held-out loss of each structure tried (None: the structure was given)
    weights: np.ndarray | None = None  # per point row of winners.matrix (None: every point counts once)
    held: LooResult | None = None  # the chosen structure's leave-one-out result (auto structure only)
    generic: GenericKernel | None = None  # the kind's generic kernel (None: it has none)

    def __iter__(self):  # `table, w = build(...)`, as before
        return iter((self.table, self.winners))

    def __getitem__(self, i: int) -> Any:
        return (self.table, self.winners)[i]


VALIDITY_HINT = 'write a JSON object {"INSTANCE_ID or SPACE": [{"m_multiple_of": 8}, {"max_k": 256}]}'


def read_validity(path: Path, sizes: tuple[str, ...], names: set[str]) -> dict[str, list[dict[str, int]]]:
    """The --validity file: a JSON object mapping an instance id or a space name to a list of predicates, each an
    object of `<size>_multiple_of`, `min_<size>` or `max_<size>` keys over `sizes` with whole-number values (a
    multiple of at least 1). Raises UserError naming the file (and the entry); warns once for the names that are
    neither an instance nor a space of the measurements (`names`), since their predicates apply nowhere."""
    from autotune.untrusted import number
    from autotune.yamlfile import read_text

    text = read_text(path, hint=VALIDITY_HINT)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"not valid JSON: {exc.msg}", file=path, line=exc.lineno, hint=VALIDITY_HINT) from None
    except RecursionError:
        raise UserError("JSON nested too deep", file=path, hint=VALIDITY_HINT) from None
    if not isinstance(data, dict):
        raise UserError(f"a validity file is a JSON object, not {type(data).__name__}", file=path, hint=VALIDITY_HINT)
    keys = [f"{s}_multiple_of" for s in sizes] + [f"{b}_{s}" for b in ("min", "max") for s in sizes]
    out: dict[str, list[dict[str, int]]] = {}
    for name, preds in data.items():
        if not isinstance(preds, list) or not all(isinstance(p, dict) for p in preds):
            raise UserError(f"{name!r}: a list of predicate objects expected", file=path, hint=VALIDITY_HINT)
        checked = []
        for pred in preds:
            for key, value in pred.items():
                if key not in keys:
                    raise UserError(
                        f"{name!r}: unknown validity predicate {key!r}",
                        file=path,
                        hint=f"use one of {', '.join(keys)}",
                    )
                lo = 1 if key.endswith("_multiple_of") else 0
                checked.append({key: int(number(value, name=f"{path}: {name!r}: {key}", integer=True, lo=lo))})
        out[name] = checked
    unknown = sorted(set(out) - names)
    if unknown:
        warnings.warn(
            f"{path}: {len(unknown)} name(s) neither an instance nor a space of the measurements, their predicates "
            f"apply nowhere: {', '.join(map(repr, unknown[:5]))}",
            stacklevel=2,
        )
    return out


def info_source(loaded: Any, validity_path: Path | None, include_dir: Path | None = None) -> Mapping:
    """Kernel records for any instance of the measurements (see KernelInfoSource)."""
    validity = {}
    if validity_path:
        frame = loaded.frame
        names = set(frame["instance_id"].astype(str)) | (
            set(frame["space"].astype(str)) if "space" in frame.columns else set()
        )
        validity = read_validity(validity_path, tuple(loaded.layout.sizes), names)
    if "space" in loaded.frame.columns:
        return KernelInfoSource(loaded.frame, validity, layout=loaded.layout, include_dir=include_dir)
    return {
        k: KernelInfo(
            space="", name=k[0], valid=tuple((a, int(b)) for pred in validity.get(k[0], []) for a, b in pred.items())
        )
        for k in loaded.frame[["instance_id", "precision", "shape"]].drop_duplicates().itertuples(index=False)
    }


@dataclass(frozen=True)
class Recipe:
    """How `build` makes a table from measurements.

    `validity_path`: a JSON file of validity predicates per instance (None: from the spaces). `generic_params`: the
    generic kernel's parameters (`A=1,B=2`). `fallback` None: the library, else the generic kernel, else none
    (table.default_fallback). `structure` None: the one with the smallest measured held-out loss among the
    structures of `modes` (None: all; dispatch.loo.choose_structure; Built.structures has every trial). `weights`: a
    function of the matrix's points frame giving each point's weight (a workload), or None. `include_dir`: what the
    kernels' sources are named relative to (None: their file names)."""

    criteria: Criteria
    method: str = "exact"
    validity_path: Path | None = None
    generic_params: str = ""
    fallback: str | None = None
    structure: Structure | None = DEFAULT
    weights: Callable[[pd.DataFrame], Any] | None = None
    include_dir: Path | None = None
    modes: tuple[str, ...] | None = None


def build(loaded: Any, recipe: Recipe) -> Built:
    """The table of `loaded` (workflows.results.Loaded: one kind's frame, layout, baseline times, provenance), made
    as `recipe` says."""
    r = recipe
    matrix = perf_matrix(loaded.frame, loaded.layout)
    w = winners(matrix, r.criteria)
    wts = None if r.weights is None else np.asarray(r.weights(matrix.points), dtype=float)
    sel = select(w, r.method, weights=wts)
    info = info_source(loaded, r.validity_path, r.include_dir)
    library_ms = library_times(matrix.points, loaded.baseline, matrix.layout)
    generic = generic_kernel(matrix.layout.kind_object, r.generic_params, r.include_dir)
    answers = Answers(info, library_ms, r.fallback, generic)
    structure, trials, held = r.structure, None, None
    if structure is None:
        tried = tuple(s for s in STRUCTURES if r.modes is None or s.mode in r.modes)
        structure, trials, held = choose_structure(
            matrix, r.criteria, r.method, answers=answers, weights=wts, structures=tried
        )
    library = kind_library(matrix.layout, library_ms)
    table = build_table(w, sel, loaded.provenance, answers, library=library, structure=structure)
    return Built(table, w, info, library_ms, trials, wts, held, generic)


def kernel_of(space: Any) -> Any:
    """The space's `kernel:` binding (a table names its kernels' sources from it). Raises UserError without one."""
    if space.kernel is None:
        raise UserError(
            f"the space {space.name!r} has no `kernel:` section: a table cannot name its kernels' sources",
            hint="give the space file its kernel (source, name, launch), or build the table from another space",
        )
    return space.kernel
