"""The dispatch table: one canonical JSON file from which the C++, Python and CSV consumers are made.

One table answers problems of one problem kind, over the kind's size names (`ProblemKind.size_names`); the
distances, regions and validity predicates range over `table_sizes` (`ProblemKind.table_sizes()`), the other
sizes (`tie_sizes`) only break ties.

JSON layout (format "autotune-dispatch", version 3; version 1 and 2 tables, which predate problem kinds and hold
the sizes m, n, k, batch at the top of each point, still load: `upgrade` turns them into version 3 in memory,
answering exactly as before):
- kind: the problem kind's name; size_names: its sizes in order; table_sizes: those the table answers over;
  precisions, shapes: the kind's precisions and variants ("" for a kind without variants), the input the
  lookup accepts;
- provenance: device (name the table was tuned on), device_info, software versions, sweep_ids, bk, tol,
  spread_ties, method, optimal, secondary, kernels, worst_loss, mean_loss (of the selected kernels), points,
  library_points (tuned points the library answers), answer_worst_loss / answer_mean_loss (of the
  table's answers at the tuned points, against the best measured instance), uncovered, include_dir (the
  directory the kernels' `source` paths are relative to, as given to `--include-dir`), created_utc;
- kernels: [{instance_id, precision, shape, space, name, template, source, convention, parameters, defines,
  valid, tuned_only}], one per instance compiled for one (precision, shape); `template`: the NVRTC name
  expression (or function name) of a template kernel; `parameters`: its C++ parameter list when the kind
  knows it (`ProblemKind.cpp_parameters(convention, precision)`, optional), for explicit instantiation; `defines`: {name: value} preprocessor defines of a kernel tuned by
  defines; `source`: its file relative to the include directory; `valid` is a list of one-key predicates
  ({"<size>_multiple_of": 8}, {"min_<size>": 2}, {"max_<size>": 256} for any size name; see runtime.py),
  derived from the space's `valid` (else `serves`) and `problems.where` (dispatch/validity.py); `tuned_only`:
  they could not be derived, the kernel answers only at its tuned points;
- library: {name}: the kind's baseline (`ProblemKind.baseline_name`) measured at the points (LIBRARY = -2 in
  `ranked` and `regions`); null when the kind has no baseline;
- fallback: "library", "naive" (the generic kernel) or "none" (NONE = -4: nothing the table knows may serve):
  the answer where nothing in the table is valid; never "library" without a library nor "naive" without a
  generic kernel;
- generic: {space, source, convention, templates: {"fp64:NN": name expression, ...}, parameters: {"fp64:NN":
  C++ parameter list}}: the kind's generic
  last-resort kernel (`ProblemKind.generic_space`); null when the kind has none;
- points: [{point_key, precision, shape, sizes: {name: value}, kernel, ranked, near, costs, ms, best_ms, loss,
  library_ms}]: every tuned point, its assigned kernel, and `ranked` = the table's kernels measured there and
  the library (-2, where it was measured), fastest first; `near`: the same list for problems that were not
  tuned, where the library goes before every kernel not faster than it by the factor 1 + library_margin
  (structure: {mode, library_margin, reach}, see Structure); `costs`: [[answer, cost], ...] every table
  kernel measured there and the library (-2), cost = median ms per byte moved (`ProblemKind.bytes_moved`)
  x 1e18, as an integer;
- structure: {mode, library_margin, reach} (Structure); model (mode "model" only): {align, features, kernels:
  [{tiles, coef} or null per kernel], library: {"precision:shape": coef}}: the selection model (model.py;
  integer coefficients with 16 fractional bits over runtime.model_features);
- regions: [{precision, shape, bounds: {name: [lo, hi]} over table_sizes, kernel}]: boxes where every measured
  point inside has `kernel` (or the library, -2) within TOL of the best of the measured instances and the
  library (tie sizes do not bound a region).
Lookup rules: dispatch/runtime.py.

Python API (what `autotune validate` and other readers use):
- `load_table(path) -> DispatchTable`; `DispatchTable(data)` from the JSON object (any supported version);
- `table.data` (version 3, whatever version was read), `table.version_read`, `table.kind` (name),
  `table.size_names`, `table.table_sizes`, `table.tie_sizes`, `table.precisions`, `table.shapes`,
  `table.provenance`, `table.kernels`, `table.points`, `table.regions`, `table.library` (name or None),
  `table.fallback` (the answer where nothing is valid: LIBRARY, GENERIC or NONE);
- `table.lookup(precision, shape, sizes: Mapping[str, int], device=None) -> int`: the answer index (>= 0 a
  kernel of `table.kernels`, GENERIC -1, LIBRARY -2, NONE -4); ValueError for invalid input (the C++ header
  answers INVALID -3); warns once when `device` differs from the tuned device;
- `table.lookup_index(precision, shape, *sizes, device=None) -> int`: the same, sizes in `size_names` order;
- `table.record(index, precision, shape) -> dict`: the kernel record of an answer ({"library": name, ...} for
  -2, {"generic": True, ...} for -1, {"none": True, ...} for -4); `table.answer(precision, shape, sizes)`: both;
- `table.save(path)`, `table.to_json()`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from autotune.analysis.winners import builtin_kind
from autotune.dispatch.runtime import GENERIC, LIBRARY, NONE, Lookup

FORMAT, VERSION = "autotune-dispatch", 3
RETIRED_FORMAT = "autotune-dispatch-kind"  # the per-kind tables before version 3 (refused with a hint)
VERSIONS = (1, 2, 3)  # versions this code reads
TABLE_SUFFIXES = (".json", ".json.xz", ".json.gz")  # a dispatch table's file names end so (load_table reads each)
LEGACY_SIZES = ("m", "n", "k", "batch")  # the point fields of version 1 and 2 tables
LEGACY_TABLE_SIZES = ("m", "n", "k")  # the region fields of version 1 and 2 tables


def upgrade(data: dict) -> dict:
    """A version 1 or 2 table as version 3 (a copy; version 3 tables are returned as they are). Those versions
    predate problem kinds: their points hold the sizes m, n, k, batch, their regions m, n, k, and the kind is the
    built-in kind with those sizes. Version 1 tables had no library: their fallback is the generic kernel."""
    version = int(data.get("version", 0))
    if version >= 3:
        return data
    kind = builtin_kind(LEGACY_SIZES)
    out = {k: v for k, v in data.items() if k not in ("points", "regions")}
    out.update(
        {
            "version": VERSION,
            "kind": kind.name if kind else "",
            "size_names": list(LEGACY_SIZES),
            "table_sizes": list(LEGACY_TABLE_SIZES),
            "precisions": list(kind.precisions if kind else ()),
            "shapes": list(kind.shapes if kind else ()),
            "upgraded_from": version,
        }
    )
    out["fallback"] = data.get("fallback", "naive" if version < 2 else "library")
    out["library"] = data.get("library") or {"name": kind.baseline_name if kind else None}
    out["generic"] = dict(data.get("generic") or {})
    params = getattr(kind, "cpp_parameters", None)
    if params is not None:  # the C++ parameter lists version 2 headers took from a table of calling conventions
        out["kernels"] = [{**k, "parameters": params(k.get("convention"), k["precision"])} for k in data["kernels"]]
        out["generic"]["parameters"] = {
            key: params(out["generic"].get("convention"), key.split(":")[0])
            for key in out["generic"].get("templates", {})
        }
    out["points"] = [
        {**{k: v for k, v in p.items() if k not in LEGACY_SIZES}, "sizes": {n: int(p[n]) for n in LEGACY_SIZES}}
        for p in data["points"]
    ]
    out["regions"] = [
        {
            "precision": r["precision"],
            "shape": r["shape"],
            "bounds": {n: list(r[n]) for n in LEGACY_TABLE_SIZES},
            "kernel": r["kernel"],
        }
        for r in data["regions"]
    ]
    return out


class BadSizes(ValueError):
    """A table point's size is not a problem size (a whole number of at least 1)."""


class DispatchTable:
    """The JSON object plus lookups (see the module docstring). `data` is exactly what `to_json` writes (version 3,
    whatever version was read)."""

    def __init__(self, data: dict) -> None:
        if data.get("format") != FORMAT:
            raise ValueError(f"not a dispatch table (format {data.get('format')!r}, expected {FORMAT!r})")
        if data.get("version") not in VERSIONS:
            raise ValueError(
                f"dispatch table version {data.get('version')} is not supported (expected {VERSION}); "
                "re-run `autotune emit --format json` with this version of autotune"
            )
        self.version_read = int(data["version"])
        self.data = upgrade(data)
        problem = _bad_sizes(self.data)  # before the lookup reads the points (their logs): a table is data
        if problem:
            raise BadSizes(problem)
        self._lookup = Lookup(self.data)

    kind = property(lambda self: str(self.data["kind"]))
    size_names = property(lambda self: tuple(self.data["size_names"]))
    table_sizes = property(lambda self: tuple(self.data["table_sizes"]))
    tie_sizes = property(lambda self: tuple(n for n in self.size_names if n not in self.table_sizes))
    precisions = property(lambda self: tuple(self.data["precisions"]))
    shapes = property(lambda self: tuple(self.data["shapes"]))
    kernels = property(lambda self: self.data["kernels"])
    points = property(lambda self: self.data["points"])
    regions = property(lambda self: self.data["regions"])
    fallback = property(lambda self: self._lookup.fallback)
    provenance = property(lambda self: self.data["provenance"])

    @property
    def library(self) -> str | None:
        """The library's name (the kind's baseline), None when the table has none."""
        return (self.data.get("library") or {}).get("name") or None

    def lookup(self, precision: str, shape: str, sizes: Mapping[str, int], device: str | None = None) -> int:
        """The answer index for a problem: a kernel (>= 0), GENERIC (-1), LIBRARY (-2) or NONE (-4) (runtime.py).
        Warns when `device` differs; ValueError for invalid input (runtime.check_problem)."""
        self._lookup.check_device(device)
        return self._lookup.index(precision, shape, sizes)

    def lookup_index(self, precision: str, shape: str, *sizes: int, device: str | None = None) -> int:
        """`lookup` with the sizes given in `size_names` order."""
        self._lookup.check_device(device)
        return self._lookup.index(precision, shape, sizes)

    def record(self, index: int, precision: str, shape: str) -> dict:
        """The kernel record (instance_id, template, ...) of an answer; `generic: True` for the generic kernel,
        `library: NAME` for the library, `none: True` for NONE."""
        return self._lookup.kernel(index, precision, shape)

    def answer(self, precision: str, shape: str, sizes: Mapping[str, int], device: str | None = None) -> dict:
        """The kernel record answering a problem (`record(lookup(...))`)."""
        return self.record(self.lookup(precision, shape, sizes, device), precision, shape)

    def to_json(self) -> str:
        return json.dumps(self.data, indent=1, sort_keys=False, allow_nan=False)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json() + "\n")
        return path


def is_table_file(path: str | Path) -> bool:
    """Whether `path` names a dispatch table by its name (dispatch.json, or compressed .json.xz / .json.gz)."""
    return str(path).endswith(TABLE_SUFFIXES)


def load_table(path: str | Path) -> DispatchTable:
    """The table in a dispatch.json (or an xz- or gzip-compressed dispatch.json.xz / .gz, as committed results keep
    large ones), checked: a JSON object of this format whose points and regions name only kernels it lists (or the
    library, the generic kernel, none). Raises UserError naming the file."""
    import gzip
    import lzma
    import zlib

    from autotune.errors import UserError

    hint = "give a dispatch.json written by `autotune report` or `autotune emit --format json`"
    try:
        raw = Path(path).read_bytes()
        if str(path).endswith(".xz"):
            raw = lzma.decompress(raw)
        elif str(path).endswith(".gz"):
            raw = gzip.decompress(raw)
        data = json.loads(raw.decode("utf-8-sig"))
    except lzma.LZMAError as exc:
        raise UserError(f"not an xz file: {exc}", file=path, hint=hint) from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise UserError(f"not a gzip file: {exc}", file=path, hint=hint) from None
    except UnicodeDecodeError:
        raise UserError("not a UTF-8 text file", file=path, hint=hint) from None
    except json.JSONDecodeError as exc:
        raise UserError(f"not valid JSON: {exc.msg}", file=path, line=exc.lineno, hint=hint) from None
    except RecursionError:  # arrays or objects nested thousands deep: no table is
        raise UserError("JSON nested too deep to be a dispatch table", file=path, hint=hint) from None
    if isinstance(data, dict) and data.get("format") == RETIRED_FORMAT:
        raise UserError(
            f"a table of the retired per-kind format ({RETIRED_FORMAT})",
            file=path,
            hint="write it again with `autotune report DATABASE`: every kind has the one table format now",
        )
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UserError(f"not a dispatch table (format {FORMAT!r} expected)", file=path, hint=hint)
    if data.get("version") not in VERSIONS:
        raise UserError(
            f"dispatch table version {data.get('version')!r}; this autotune reads versions "
            f"{', '.join(map(str, VERSIONS))}",
            file=path,
            hint="write it again with this autotune's `autotune report`, or upgrade autotune",
        )
    again = "write the table again with `autotune report` or `autotune emit`"
    problem = _dangling(data)
    if problem:
        raise UserError(problem, file=path, hint=again)
    try:
        return DispatchTable(data)
    except BadSizes as exc:  # version 3 (an older table's sizes as upgraded)
        raise UserError(str(exc), file=path, hint=again) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"not a readable dispatch table: {exc!r}", file=path, hint=hint) from None


def _bad_sizes(data: dict) -> str | None:
    """What in a table's points is not a problem size (each a whole number of at least 1), if anything: a table
    is data, and `validate` builds test points from it."""
    from autotune import untrusted
    from autotune.errors import UserError

    points = data.get("points") or []
    if not isinstance(points, list):
        return "the table's `points` is not a list"
    for p in points:
        sizes = p.get("sizes") if isinstance(p, dict) else None
        if not isinstance(sizes, dict):
            return f"a point has no `sizes` mapping: {str(p)[:80]}"
        for name, value in sizes.items():
            try:  # a number in JSON, not its text
                ok = not isinstance(value, str) and bool(untrusted.number(value, name=name, integer=True, lo=1))
            except UserError:
                ok = False
            if not ok:
                return (
                    f"point {p.get('point_key')}: size {name} = {repr(value)[:40]} is not a whole number of at least 1"
                )
    return None


def _dangling(data: dict) -> str | None:
    """What in a table names a kernel it does not list, if anything."""
    kernels = data.get("kernels")
    if not isinstance(kernels, list):
        return "the table lists no `kernels`"
    n = len(kernels)
    special = {GENERIC, LIBRARY, NONE}

    def bad(i: Any) -> bool:
        return isinstance(i, int) and not isinstance(i, bool) and not (0 <= i < n or i in special)

    for p in data.get("points") or []:
        answers = [
            p.get("kernel"),
            *(p.get("ranked") or []),
            *(p.get("near") or []),
            *(c[0] for c in (p.get("costs") or []) if isinstance(c, list) and c),
        ]
        if any(bad(a) for a in answers):
            return f"a point names a kernel the table does not list ({n} kernels): {p.get('point_key', p)}"
    for r in data.get("regions") or []:
        if bad(r.get("kernel")):
            return f"a region names a kernel the table does not list ({n} kernels)"
    return None
